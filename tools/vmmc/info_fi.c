/* The "libfabric provider" section of `vmmc info`: where libvmmc-fi.so is
 * (fi_where.c), and whether libfabric sees it. libfabric is not linked:
 * libfabric.so.1 is opened with dlopen() after FI_PROVIDER_PATH is set to
 * the provider's directory, and fi_getinfo() is asked for provider "vmmc".
 * Loading the provider registers its VMMC_OFI_* settings with the library,
 * so the probe runs before the settings are read and listed. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmds.h"
#include "fi_where.h"

#ifdef VMMC_TOOL_FI
#include <rdma/fabric.h>
#endif

static struct {
    int found;                 /* libvmmc-fi.so is there */
    char dir[2 * PATH_MAX + 8];
    char lib[160];             /* libfabric: version, or why it is not usable */
    char seen[1024];           /* what fi_getinfo says of provider vmmc */
    int ok;                    /* libfabric lists the provider */
} fi;

#ifdef VMMC_TOOL_FI
typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                          struct fi_info **);
typedef void (*freeinfo_fn)(struct fi_info *);
typedef struct fi_info *(*dupinfo_fn)(const struct fi_info *);
typedef uint32_t (*version_fn)(void);
typedef const char *(*strerror_fn)(int);
typedef char *(*tostr_fn)(const void *, enum fi_type);

static void probe_libfabric(void)
{
    /* Ours first, then whatever FI_PROVIDER_PATH already named. */
    const char *old = getenv("FI_PROVIDER_PATH");
    char path[sizeof fi.dir + PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", fi.dir, old && *old ? ":" : "", old ? old : "");
    setenv("FI_PROVIDER_PATH", path, 1);
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(fi.lib, sizeof fi.lib, "not loadable (apt-get install -y libfabric1): %.100s",
                 dlerror());
        return;
    }
    getinfo_fn getinfo = (getinfo_fn)dlsym(h, "fi_getinfo");
    freeinfo_fn freeinfo = (freeinfo_fn)dlsym(h, "fi_freeinfo");
    dupinfo_fn dupinfo = (dupinfo_fn)dlsym(h, "fi_dupinfo");
    version_fn version = (version_fn)dlsym(h, "fi_version");
    strerror_fn fstrerror = (strerror_fn)dlsym(h, "fi_strerror");
    tostr_fn tostr = (tostr_fn)dlsym(h, "fi_tostr");
    if (!getinfo || !freeinfo || !dupinfo || !version || !fstrerror || !tostr) {
        snprintf(fi.lib, sizeof fi.lib, "libfabric.so.1 lacks fi_getinfo and friends");
        return;
    }
    uint32_t v = version();
    snprintf(fi.lib, sizeof fi.lib, "libfabric.so.1, API %u.%u", FI_MAJOR(v), FI_MINOR(v));
    struct fi_info *hints = dupinfo(NULL), *info = NULL;
    if (!hints || !(hints->fabric_attr->prov_name = strdup("vmmc"))) {
        snprintf(fi.seen, sizeof fi.seen, "out of memory");
        if (hints)
            freeinfo(hints);
        return;
    }
    int rc = getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &info);
    freeinfo(hints);
    if (rc) {
        snprintf(fi.seen, sizeof fi.seen,
                 "no: fi_getinfo(provider vmmc): %s (FI_LOG_LEVEL=warn tells why)", fstrerror(-rc));
        return;
    }
    int n = 0;
    for (struct fi_info *i = info; i; i = i->next)
        n++;
    /* fi_tostr() answers in one buffer of its own: copy each answer */
    char ep[64], caps[512];
    const char *t = tostr(&info->ep_attr->type, FI_TYPE_EP_TYPE);
    snprintf(ep, sizeof ep, "%s", t ? t : "?");
    t = tostr(&info->caps, FI_TYPE_CAPS);
    snprintf(caps, sizeof caps, "%s", t ? t : "?");
    snprintf(fi.seen, sizeof fi.seen,
             "yes: %s %u.%u, fabric %s, domain %s, %d fi_info, first %s, caps %s",
             info->fabric_attr->prov_name, FI_MAJOR(info->fabric_attr->prov_version),
             FI_MINOR(info->fabric_attr->prov_version), info->fabric_attr->name,
             info->domain_attr->name, n, ep, caps);
    /* fi_tostr's output has trailing separators and newlines: tidy */
    for (char *p = fi.seen; *p; p++)
        if (*p == '\n')
            *p = ' ';
    fi.ok = 1;
    freeinfo(info);
    /* libfabric stays loaded: the provider's settings live as long as it */
}
#endif

void vmmc_info_fi_probe(void)
{
    fi.found = vmmc_fi_dir(fi.dir, sizeof fi.dir) == 0;
#ifdef VMMC_TOOL_FI
    if (fi.found)
        probe_libfabric();
#endif
}

void vmmc_info_fi_print(void)
{
    printf("\nlibfabric provider \"vmmc\" (MPI: `vmmc mpirun`, docs/mpi.md):\n");
#ifndef VMMC_TOOL_FI
    printf("  not built: libfabric's headers were not installed at build time "
           "(apt-get install -y libfabric-dev)\n");
    return;
#else
    if (!fi.found) {
        printf("  library    not built or installed (looked in %s)\n", fi.dir);
        return;
    }
    printf("  library    %s/%s\n", fi.dir, VMMC_FI_LIB);
    printf("  use with   FI_PROVIDER_PATH=%s\n", fi.dir);
    printf("  libfabric  %s\n", fi.lib);
    if (fi.seen[0])
        printf("  listed     %s\n", fi.seen);
#endif
}

int vmmc_info_fi_ok(void) { return fi.ok; }
