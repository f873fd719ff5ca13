/* `vmmc preload`: run an unmodified program with libvmmc-preload.so, whose
 * TCP connections upgrade to vmmc when the other end runs vmmc too. The
 * library is found next to this program (the build tree) or in
 * <prefix>/<libdir> (installed), prepended to LD_PRELOAD, and the command
 * exec'ed in place of this process. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmds.h"

#ifndef VMMC_INSTALL_LIBDIR
#define VMMC_INSTALL_LIBDIR "lib"
#endif

#define PRELOAD_LIB "libvmmc-preload.so"

static void preload_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc preload [-v|--debug] [--] CMD [ARGS...]\n"
            "       vmmc preload --print\n"
            "\n"
            "Run CMD with " PRELOAD_LIB ", which moves its TCP connections (IPv4 and\n"
            "IPv6) onto vmmc when the other end runs under vmmc too: shared memory on\n"
            "one host, vmmc's udp transport between hosts. Every other connection and\n"
            "every other socket stays on the kernel, unchanged. The library goes first\n"
            "in LD_PRELOAD; programs CMD starts inherit it.\n"
            "\n"
            "options:\n"
            "  -v, --debug   one line on stderr per connection that upgrades or goes\n"
            "                back to TCP (VMMC_SOCK_DEBUG=y)\n"
            "  --print       print the library's path and exit (for LD_PRELOAD= by hand,\n"
            "                in a service's environment say)\n"
            "  -h, --help    this text\n"
            "\n"
            "Set-uid and set-gid programs ignore LD_PRELOAD: they run on the kernel.\n"
            "Settings: VMMC_SOCK_* (`vmmc info -c`).\n");
}

/* The directory of this program, resolved. */
static int self_dir(char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l <= 0)
        return -1;
    exe[l] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return (size_t)snprintf(out, n, "%s", exe[0] ? exe : "/") >= n ? -1 : 0;
}

/* The library's absolute path in @p out, or -1 with the places looked at in
 * @p tried. */
static int find_lib(char *out, size_t n, char *tried, size_t tn)
{
    char self[PATH_MAX];
    tried[0] = 0;
    if (self_dir(self, sizeof self)) {
        snprintf(tried, tn, "(cannot read /proc/self/exe)");
        return -1;
    }
    static const char *const rel[] = {".", "../" VMMC_INSTALL_LIBDIR};
    size_t used = 0;
    for (int i = 0; i < 2; i++) {
        char cand[PATH_MAX + 64], real[PATH_MAX];
        if ((size_t)snprintf(cand, sizeof cand, "%s/%s/%s", self, rel[i], PRELOAD_LIB) >=
            sizeof cand)
            continue;
        if (access(cand, R_OK) == 0 && realpath(cand, real)) {
            if ((size_t)snprintf(out, n, "%s", real) < n)
                return 0;
        }
        if (used < tn) {
            int w = snprintf(tried + used, tn - used, "%s%s", i ? ", " : "", cand);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return -1;
}

/* Does LD_PRELOAD's list @p list (separated by ':' or ' ') name @p lib? */
static int listed(const char *list, const char *lib)
{
    size_t l = strlen(lib);
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, ": ");
        if (w == l && !strncmp(p, lib, l))
            return 1;
        p += w;
        p += strspn(p, ": ");
    }
    return 0;
}

/* Is the program @p cmd would run set-uid or set-gid? (PATH as execvp) */
static int is_setid(const char *cmd)
{
    struct stat st;
    if (strchr(cmd, '/'))
        return stat(cmd, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID));
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t w = strcspn(p, ":");
        char f[PATH_MAX];
        if ((size_t)snprintf(f, sizeof f, "%.*s/%s", (int)w, w ? p : ".", cmd) < sizeof f &&
            stat(f, &st) == 0 && S_ISREG(st.st_mode) && access(f, X_OK) == 0)
            return (st.st_mode & (S_ISUID | S_ISGID)) != 0;
        p += w;
        if (*p == ':')
            p++;
    }
    return 0;
}

void vmmc_info_preload_print(void)
{
    char lib[PATH_MAX], tried[2 * PATH_MAX + 200];
    if (find_lib(lib, sizeof lib, tried, sizeof tried))
        printf("\nsockets preload: " PRELOAD_LIB " not found (looked at: %s)\n", tried);
    else
        printf("\nsockets preload: %s (`vmmc preload -- CMD`)\n", lib);
}

int vmmc_cmd_preload(int argc, char **argv)
{
    int debug = 0, print = 0, i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-v") || !strcmp(a, "--debug"))
            debug = 1;
        else if (!strcmp(a, "--print"))
            print = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            preload_usage(stdout);
            return 0;
        } else if (a[0] == '-') {
            fprintf(stderr, "vmmc preload: unknown option '%s'\n", a);
            preload_usage(stderr);
            return 2;
        } else
            break;
    }
    char lib[PATH_MAX], tried[2 * PATH_MAX + 200];
    if (find_lib(lib, sizeof lib, tried, sizeof tried)) {
        fprintf(stderr,
                "vmmc preload: " PRELOAD_LIB " not found (looked at: %s); build it "
                "(make build) or install vmmc (make install)\n",
                tried);
        return 1;
    }
    if (print) {
        printf("%s\n", lib);
        return 0;
    }
    if (i >= argc) {
        fprintf(stderr, "vmmc preload: no command to run\n");
        preload_usage(stderr);
        return 2;
    }
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old) {
        setenv("LD_PRELOAD", lib, 1);
    } else if (!listed(old, lib)) {
        size_t n = strlen(lib) + strlen(old) + 2;
        char *v = malloc(n);
        if (!v) {
            fprintf(stderr, "vmmc preload: out of memory\n");
            return 1;
        }
        snprintf(v, n, "%s:%s", lib, old);
        setenv("LD_PRELOAD", v, 1);
        free(v);
    }
    if (debug)
        setenv("VMMC_SOCK_DEBUG", "y", 1);
    if (is_setid(argv[i]))
        fprintf(stderr,
                "vmmc preload: warning: %s is set-uid or set-gid: the loader ignores "
                "LD_PRELOAD for it, so it runs on the kernel's TCP\n",
                argv[i]);
    execvp(argv[i], argv + i);
    int e = errno;
    fprintf(stderr, "vmmc preload: cannot run '%s': %s\n", argv[i], strerror(e));
    return e == ENOENT ? 127 : 126;
}
