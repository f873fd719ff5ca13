/* Asynchronous remote reads: small ones and reads from a mapping complete
 * at once, large ones in the copy engine; a read issued after an
 * asynchronous send to the same peer sees the sent bytes; refusals start no
 * request. Rank 0 reads from rank 1.
 *
 * usage (vmmc run -n 2): t_fetch_async */
#include <string.h>

#include "vtest.h"

#define BIG (4u << 20)

int main(void)
{
    vt_require_transport();
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    char *heap = NULL, *wo = NULL;
    if (me == 1) {
        char *mem;
        heap = malloc(BIG), wo = calloc(1, 64);
        VT_OK(vmmc_mem_alloc(ep, BIG, (void **)&mem));
        for (size_t i = 0; i < BIG; i++)
            mem[i] = heap[i] = (char)(i * 5 + 1);
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .flags = VMMC_EXPORT_READ,
                                  .length = BIG};
        vmmc_export_t *e;
        p.name = "mem", p.addr = mem;
        VT_OK(vmmc_export(ep, &p, &e));
        p.name = "heap", p.addr = heap;
        VT_OK(vmmc_export(ep, &p, &e));
        p.flags = 0, p.name = "wo", p.addr = wo, p.length = 64;
        VT_OK(vmmc_export(ep, &p, &e));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *px[2], *pw;
        VT_OK(vmmc_import(ep, 1, "mem", 5000, &px[0]));
        VT_OK(vmmc_import(ep, 1, "heap", 5000, &px[1]));
        VT_OK(vmmc_import(ep, 1, "wo", 5000, &pw));
        char *dst = malloc(BIG), *src = malloc(BIG);
        vmmc_request_t rq, rq2;
        VT_STATUS(VMMC_ERR_INVALID, vmmc_fetch_async(px[0], 0, dst, 8, NULL));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_fetch_async(px[1], 1, dst, BIG, &rq));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_test(&rq)); /* never started */
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_fetch_async(pw, 0, dst, 8, &rq));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_request_wait(&rq, 100));
        VT_OK(vmmc_fetch_async(px[1], BIG, NULL, 0, &rq));
        VT_OK(vmmc_test(&rq));
        for (int k = 0; k < 2; k++) {
            memset(dst, 0, BIG);
            VT_OK(vmmc_fetch_async(px[k], 10, dst, 16, &rq)); /* small: at once */
            VT_OK(vmmc_test(&rq));
            for (size_t i = 0; i < 16; i++)
                VT_CHECK(dst[i] == (char)((i + 10) * 5 + 1));
            int rc = vmmc_fetch_async(px[k], 0, dst, BIG, &rq);
            VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
            VT_CHECK(k == 1 || vt_remote() || rc == VMMC_OK); /* a mapping is read at once */
            VT_OK(vmmc_request_wait(&rq, 30000));
            for (size_t i = 0; i < BIG; i++)
                if (dst[i] != (char)(i * 5 + 1))
                    VT_FAIL("%s: byte %zu read wrong", k ? "heap" : "mem", i);
            /* A read behind an asynchronous send sees what was sent. */
            for (size_t i = 0; i < BIG; i++)
                src[i] = (char)(i * 3 + k + 7);
            rc = vmmc_send_async(px[k], 0, src, BIG, 0, &rq2);
            VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
            rc = vmmc_fetch_async(px[k], 0, dst, BIG, &rq);
            VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
            VT_OK(vmmc_request_wait(&rq, 30000));
            VT_OK(vmmc_request_wait(&rq2, 30000));
            VT_CHECK(memcmp(dst, src, BIG) == 0);
            /* Put the pattern back for the next region's checks. */
            for (size_t i = 0; i < BIG; i++)
                src[i] = (char)(i * 5 + 1);
            VT_OK(vmmc_send(px[k], 0, src, BIG, 0));
        }
        free(dst);
        free(src);
        printf("t_fetch_async: ok (%s)\n", vt_remote() ? "udp" : "shm");
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(heap);
    free(wo);
    return 0;
}
