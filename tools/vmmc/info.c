/* `vmmc info`: version, facts about this build and machine, every VMMC_*
 * setting with the value in effect, and the counters running processes
 * publish. Public API only. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "vmmc/vmmc.h"

#ifndef VMMC_INSTALL_LIBDIR
#define VMMC_INSTALL_LIBDIR "lib"
#endif

/* The layers built outside libvmmc register their settings (VMMC_DSM_*,
 * VMMC_SHMEM_*, VMMC_RPC_*) when they are loaded: load those built beside
 * this tool (the build tree) or installed with it, so that their settings
 * are listed and checked too. Their constructors only register settings;
 * a layer that is not there is left out. (The preload library is not
 * loaded: it takes over the sockets of the process that loads it.) */
static void load_layers(void)
{
    static const char *const libs[] = {"libvmmc-dsm.so", "libvmmc-shmem.so", "libvmmc-rpc.so"};
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = 0;
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
        const char *fmt[] = {"%s/%s", "%s/../" VMMC_INSTALL_LIBDIR "/%s"};
        for (int f = 0; f < 2; f++) {
            char path[PATH_MAX + 64];
            if (snprintf(path, sizeof path, fmt[f], exe, libs[i]) >= (int)sizeof path ||
                access(path, R_OK))
                continue;
            if (dlopen(path, RTLD_NOW | RTLD_LOCAL))
                break;
        }
    }
}

static void info_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc info [-c]\n"
            "       vmmc info --counters [PID]\n"
            "\n"
            "Print the library version and facts about this build and machine\n"
            "(transports, PMIx support, limits), and where the libfabric provider\n"
            "libvmmc-fi.so is and whether libfabric lists it (its VMMC_OFI_* settings\n"
            "are known once it is loaded), and the providers libfabric offers to the\n"
            "fabric transport with the one it would open.\n"
            "\n"
            "options:\n"
            "  -c, --config   also list every VMMC_* setting: value in effect, default, help\n"
            "                 (the DSM's, OpenSHMEM's and vRPC's too when their libraries\n"
            "                 are beside this tool or installed with it)\n"
            "  --counters [PID]  the counters of every endpoint of a running vmmc process\n"
            "                 (all of this user's when no PID): the core's, then each\n"
            "                 transport's (udp.*: datagrams, bytes, retransmissions,\n"
            "                 refusals by reason), refreshed every VMMC_COUNTERS_PERIOD\n"
            "  -h, --help     this text\n"
            "\n"
            "Unknown VMMC_* variables in the environment are reported as warnings; a\n"
            "value that is refused (bad syntax, a time without a unit, out of range) is\n"
            "reported as an error and makes the exit status 1.\n"
            "Sizes take K/M/G suffixes (64K = 65536 bytes); times need a unit: ns, us,\n"
            "ms, s (only 0 may go without). Each setting's help ends with its syntax\n"
            "and valid range in brackets.\n");
}

static void print_facts(void)
{
    const char *k, *v;
    int w = 0;
    for (int i = 0; vmmc_info_get(i, &k, &v) == VMMC_OK; i++)
        if ((int)strlen(k) > w)
            w = (int)strlen(k);
    for (int i = 0; vmmc_info_get(i, &k, &v) == VMMC_OK; i++)
        printf("  %-*s  %s\n", w, k, v ? v : "");
}

static void print_config(void)
{
    const char *name, *value, *deflt, *help;
    int w = 0;
    for (int i = 0; vmmc_config_get(i, &name, &value, &deflt, &help) == VMMC_OK; i++)
        if ((int)strlen(name) > w)
            w = (int)strlen(name);
    for (int i = 0; vmmc_config_get(i, &name, &value, &deflt, &help) == VMMC_OK; i++) {
        int changed = strcmp(value ? value : "", deflt ? deflt : "") != 0;
        printf("  %-*s = %-10s  (default %s)%s\n", w, name, value && *value ? value : "(unset)",
               deflt && *deflt ? deflt : "unset", changed ? " *" : "");
        printf("  %-*s   %s\n", w, "", help ? help : "");
    }
}

static void print_set(const vmmc_counter_set_t *set, void *arg)
{
    (void)arg;
    int w = 0;
    for (int i = 0; i < set->count; i++)
        if ((int)strlen(set->names[i]) > w)
            w = (int)strlen(set->names[i]);
    printf("pid %d endpoint %d (rank %d of %d), refreshed %.1f s ago:\n", set->pid, set->index,
           set->rank, set->size, set->age_s);
    for (int i = 0; i < set->count; i++)
        printf("  %-*s  %llu\n", w, set->names[i], (unsigned long long)set->values[i]);
}

static int print_counters(int pid)
{
    int n = vmmc_counters_published(pid, print_set, NULL);
    if (n < 0) {
        fprintf(stderr, "vmmc info: %s\n", vmmc_last_error());
        return 1;
    }
    if (n == 0 && pid) {
        fprintf(stderr, "vmmc info: process %d publishes no counters (not a running vmmc process "
                "of this user, or VMMC_COUNTERS_PERIOD=0)\n", pid);
        return 1;
    }
    if (n == 0)
        printf("no running vmmc process of this user publishes counters\n");
    return 0;
}

int vmmc_cmd_info(int argc, char **argv)
{
    int config = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--counters")) {
            long pid = 0;
            if (i + 1 < argc) {
                char *end;
                errno = 0;
                pid = strtol(argv[i + 1], &end, 10);
                if (errno || end == argv[i + 1] || *end || pid <= 0 || pid > 0x3fffffff ||
                    i + 2 < argc) {
                    fprintf(stderr, "vmmc info: --counters takes one process id, not '%s'\n",
                            argv[i + 1]);
                    info_usage(stderr);
                    return 2;
                }
            }
            return print_counters((int)pid);
        } else if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) {
            config = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            info_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "vmmc info: unknown argument '%s'\n", argv[i]);
            info_usage(stderr);
            return 2;
        }
    }
    /* The provider registers its VMMC_OFI_* settings when libfabric loads it:
     * before the settings are checked, so that they are known. */
    vmmc_info_fi_probe();
    load_layers();
    /* Reading the settings first makes the library report unknown or bad
     * VMMC_* variables before anything else is printed. */
    int bad = vmmc_config_check() != VMMC_OK;
    if (bad)
        fprintf(stderr, "vmmc info: %s\n", vmmc_last_error());
    fflush(stderr);
    printf("vmmc %s\n\n", vmmc_version());
    printf("build and machine:\n");
    print_facts();
    vmmc_info_fi_print();
    vmmc_info_fabric_print();
    vmmc_info_preload_print();
    if (config) {
        printf("\nsettings (VMMC_* environment variables; * = changed from the default):\n");
        print_config();
    } else {
        printf("\n(`vmmc info -c` lists every VMMC_* setting; `vmmc info --counters [PID]` the\n"
               " counters of running processes: notifications, wake-ups, refused control\n"
               " messages and records, and the udp link's datagrams, retransmissions and\n"
               " refusals by reason; with VMMC_STATS=stderr, or =FILE with %%r for the rank,\n"
               " each rank also writes them at vmmc_finalize)\n");
    }
    return bad ? 1 : 0;
}
