/* Locating libvmmc-fi.so relative to the vmmc tool (see fi_where.h). */
#include "fi_where.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef VMMC_INSTALL_LIBDIR
#define VMMC_INSTALL_LIBDIR "lib"
#endif

/* The directory of this program, resolved (no symbolic links). */
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
    if ((size_t)snprintf(out, n, "%s", exe[0] ? exe : "/") >= n)
        return -1;
    return 0;
}

int vmmc_fi_dir(char *dir, size_t n)
{
    char self[PATH_MAX];
    if (self_dir(self, sizeof self)) {
        snprintf(dir, n, "(cannot read /proc/self/exe)");
        return -1;
    }
    /* build tree: build/vmmc and build/fi/; installed: bin/vmmc and
     * <libdir>/libfabric/ (libdir may be lib/x86_64-linux-gnu) */
    static const char *const rel[] = {"fi", "../" VMMC_INSTALL_LIBDIR "/libfabric"};
    size_t used = 0;
    dir[0] = 0;
    for (int i = 0; i < 2; i++) {
        char cand[PATH_MAX], lib[PATH_MAX], real[PATH_MAX];
        if ((size_t)snprintf(cand, sizeof cand, "%s/%s", self, rel[i]) >= sizeof cand ||
            (size_t)snprintf(lib, sizeof lib, "%s/%s", cand, VMMC_FI_LIB) >= sizeof lib)
            continue;
        if (access(lib, R_OK) == 0) {
            const char *d = realpath(cand, real) ? real : cand;
            if ((size_t)snprintf(dir, n, "%s", d) < n)
                return 0;
        }
        if (used < n) {
            int w = snprintf(dir + used, n - used, "%s%s", i ? ", " : "", cand);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return -1;
}
