/* `vmmc info`: version, facts about this build and machine, and every VMMC_*
 * setting with the value in effect. Public API only. */
#include <stdio.h>
#include <string.h>

#include "cmds.h"
#include "vmmc/vmmc.h"

static void info_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc info [-c]\n"
            "\n"
            "Print the library version and facts about this build and machine\n"
            "(transports, PMIx support, limits).\n"
            "\n"
            "options:\n"
            "  -c, --config   also list every VMMC_* setting: value in effect, default, help\n"
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

int vmmc_cmd_info(int argc, char **argv)
{
    int config = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) {
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
    /* Reading the settings first makes the library report unknown or bad
     * VMMC_* variables before anything else is printed. */
    int bad = vmmc_config_check() != VMMC_OK;
    if (bad)
        fprintf(stderr, "vmmc info: %s\n", vmmc_last_error());
    fflush(stderr);
    printf("vmmc %s\n\n", vmmc_version());
    printf("build and machine:\n");
    print_facts();
    if (config) {
        printf("\nsettings (VMMC_* environment variables; * = changed from the default):\n");
        print_config();
    } else {
        printf("\n(`vmmc info -c` lists every VMMC_* setting; with VMMC_STATS=stderr, or =FILE\n"
               " with %%r for the rank, each rank writes its counters at vmmc_finalize:\n"
               " notifications, wake-ups, refused control messages and records, and the\n"
               " udp link's datagrams, retransmissions and refusals by reason)\n");
    }
    return bad ? 1 : 0;
}
