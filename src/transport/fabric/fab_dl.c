/* libfabric, loaded when the fabric transport opens (dlopen), not when
 * libvmmc loads: loading it runs its providers' libraries' constructors,
 * which change what the process sees (signal handling: interrupted system
 * calls in programs that never use the fabric). */
#include "transport/fabric/fab_int.h"

#include <dlfcn.h>

struct vmmc_fab_dl vmmc_fab_dl;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char why[256];

static void load(void)
{
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "%s", dlerror());
        return;
    }
    struct vmmc_fab_dl d;
    *(void **)&d.getinfo = dlsym(h, "fi_getinfo");
    *(void **)&d.freeinfo = dlsym(h, "fi_freeinfo");
    *(void **)&d.dupinfo = dlsym(h, "fi_dupinfo");
    *(void **)&d.fabric = dlsym(h, "fi_fabric");
    *(void **)&d.strerror = dlsym(h, "fi_strerror");
    *(void **)&d.version = dlsym(h, "fi_version");
    if (!d.getinfo || !d.freeinfo || !d.dupinfo || !d.fabric || !d.strerror || !d.version) {
        snprintf(why, sizeof why, "libfabric.so.1 lacks fi_getinfo, fi_dupinfo, fi_fabric, "
                 "fi_strerror or fi_version");
        return;
    }
    d.ok = 1;
    vmmc_fab_dl = d;
}

int vmmc_fab__dl_load(void)
{
    pthread_once(&once, load);
    if (!vmmc_fab_dl.ok)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric: cannot load libfabric: %s", why);
    return VMMC_OK;
}
