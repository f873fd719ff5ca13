/* A rank for the launcher's error tests.
 *   quiet_rank noexport        join, export nothing, wait in the barrier
 *                              (fails once another rank died)
 *   quiet_rank import_timeout  rank 0 imports a name rank 1 never exports,
 *                              with timeout -1: it must fail with
 *                              VMMC_ERR_TIMEOUT after VMMC_IMPORT_TIMEOUT */
#include <string.h>
#include <time.h>

#include "vtest.h"

int main(int argc, char **argv)
{
    VT_CHECK(argc == 2);
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (!strcmp(argv[1], "noexport")) {
        int rc = vmmc_barrier(ep);
        vmmc_finalize(ep);
        return rc == VMMC_OK ? 0 : 1;
    }
    VT_CHECK(!strcmp(argv[1], "import_timeout") && vmmc_size(ep) == 2);
    if (vmmc_rank(ep) == 0) {
        struct timespec t0, t1;
        vmmc_proxy_t *px;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        VT_STATUS(VMMC_ERR_TIMEOUT, vmmc_import(ep, 1, "never-exported", -1, &px));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        VT_CHECK(strstr(vmmc_last_error(), "never-exported"));
        /* Not before the setting's time (no upper bound: the machine is shared). */
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        VT_CHECK(s >= 0.29);
        /* The non-blocking form has the same deadline. */
        VT_STATUS(VMMC_INPROGRESS, vmmc_import_start(ep, 1, "never-exported", -1, &px));
        int rc;
        while ((rc = vmmc_import_test(px)) == VMMC_INPROGRESS)
            vmmc_wait(ep, 10);
        VT_STATUS(VMMC_ERR_TIMEOUT, rc);
        vmmc_unimport(px);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    printf("quiet_rank %s: ok\n", argv[1]);
    return 0;
}
