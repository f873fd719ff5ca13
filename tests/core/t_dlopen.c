/* The shared library works when a program that does not link it loads it
 * with dlopen() (as a plug-in of another library would be): its
 * thread-locals of the static TLS model must fit in the block glibc keeps
 * for such libraries. Opens a job of one, runs progress, a wait and the
 * service thread (a thread created after the load), and finalizes. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "vmmc/vmmc.h"

#define FAIL(...) do { fprintf(stderr, "FAIL t_dlopen: " __VA_ARGS__); fputc('\n', stderr); \
                       exit(1); } while (0)

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        FAIL("dlsym %s: %s", name, dlerror());
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        FAIL("usage: t_dlopen path/to/libvmmc.so");
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        FAIL("dlopen %s: %s", argv[1], dlerror());
    int (*init)(const vmmc_ep_params_t *, vmmc_ep_t **) = sym(lib, "vmmc_init");
    int (*progress)(vmmc_ep_t *) = sym(lib, "vmmc_progress");
    int (*wait)(vmmc_ep_t *, int) = sym(lib, "vmmc_wait");
    int (*start)(vmmc_ep_t *) = sym(lib, "vmmc_service_start");
    int (*stop)(vmmc_ep_t *) = sym(lib, "vmmc_service_stop");
    int (*fin)(vmmc_ep_t *) = sym(lib, "vmmc_finalize");
    vmmc_ep_t *ep;
    int rc;
    if ((rc = init(NULL, &ep)) != VMMC_OK)
        FAIL("vmmc_init: %d", rc);
    if ((rc = progress(ep)) < 0)
        FAIL("vmmc_progress: %d", rc);
    if ((rc = wait(ep, 0)) < 0)
        FAIL("vmmc_wait: %d", rc);
    if ((rc = start(ep)) != VMMC_OK)
        FAIL("vmmc_service_start: %d", rc);
    if ((rc = stop(ep)) != VMMC_OK)
        FAIL("vmmc_service_stop: %d", rc);
    if ((rc = fin(ep)) != VMMC_OK)
        FAIL("vmmc_finalize: %d", rc);
    printf("t_dlopen: ok\n");
    return 0;
}
