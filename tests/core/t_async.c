/* Asynchronous sends: small ones complete inline, large ones are carried
 * out by the copy engine while the caller computes; order with later sends
 * to the same peer is kept ("data, then flag"); errors are reported through
 * the request. Rank 0 sends into rank 1's regions. */
#include <string.h>
#include <unistd.h>

#include "vtest.h"

#define BIG (4 << 20)

static vmmc_ep_t *ep;
static volatile uint64_t flag_seen;

static void on_flag(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    flag_seen = n->imm;
}

int main(void)
{
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    unsigned char *mem = NULL, *heap = NULL;
    vmmc_export_t *heap_ex = NULL;
    uint64_t flag = 0;
    if (me == 1) {
        VT_OK(vmmc_mem_alloc(ep, BIG, (void **)&mem));
        heap = calloc(1, BIG);
        vmmc_export_params_t p = {0};
        vmmc_export_t *e;
        p.name = "mem";
        p.addr = mem;
        p.length = BIG;
        VT_OK(vmmc_export(ep, &p, &e));
        p.name = "heap";
        p.addr = heap;
        VT_OK(vmmc_export(ep, &p, &heap_ex));
        p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
        p.handler = on_flag;
        p.name = "flag";
        p.addr = &flag;
        p.length = sizeof flag;
        VT_OK(vmmc_export(ep, &p, &e));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *pm, *ph, *pf;
        VT_OK(vmmc_import(ep, 1, "mem", 5000, &pm));
        VT_OK(vmmc_import(ep, 1, "heap", 5000, &ph));
        VT_OK(vmmc_import(ep, 1, "flag", 5000, &pf));
        unsigned char *src = malloc(BIG);
        vmmc_request_t rq, rq2;
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send_async(pm, 0, src, 8, 0, NULL));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send_async(pm, 1, src, BIG, 0, &rq));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_test(&rq)); /* a refused request was never started */
        /* Small: complete at once. */
        VT_OK(vmmc_send_async(pm, 0, "abc", 3, 0, &rq));
        VT_OK(vmmc_test(&rq));
        for (int round = 0; round < 6; round++) {
            vmmc_proxy_t *px = round % 2 ? ph : pm;
            for (size_t i = 0; i < BIG; i++)
                src[i] = (unsigned char)(i * 13 + round);
            int rc = vmmc_send_async(px, 0, src, BIG, 0, &rq);
            VT_CHECK(rc == VMMC_INPROGRESS || rc == VMMC_OK);
            /* A second large send queues behind the first. */
            rc = vmmc_send_async(px, BIG / 2, src + BIG / 2, BIG / 2, 0, &rq2);
            VT_CHECK(rc == VMMC_INPROGRESS || rc == VMMC_OK);
            /* Compute while the copy engine works. */
            volatile double x = 1;
            for (int k = 0; k < 100000; k++)
                x = x * 1.0000001;
            if (round % 3 == 0) {
                while ((rc = vmmc_test(&rq)) == VMMC_INPROGRESS)
                    ;
                VT_OK(rc);
            } else {
                VT_OK(vmmc_request_wait(&rq, 10000));
            }
            /* The flag goes out after both asynchronous sends landed. */
            uint64_t r = (uint64_t)round + 1;
            VT_OK(vmmc_send_imm(pf, 0, &r, 8, VMMC_SEND_NOTIFY, r));
            VT_OK(vmmc_request_wait(&rq2, 10000));
            VT_OK(vmmc_barrier(ep)); /* receiver verifies */
        }
        VT_OK(vmmc_barrier(ep)); /* receiver unexported "heap" */
        /* A send to a withdrawn export fails through its request. */
        int rc;
        double t0 = vt_now();
        do {
            rc = vmmc_send_async(ph, 0, src, BIG, 0, &rq);
            if (rc == VMMC_INPROGRESS)
                rc = vmmc_request_wait(&rq, 10000);
        } while (rc == VMMC_OK && vt_now() - t0 < 5);
        VT_STATUS(VMMC_ERR_STALE, rc);
        VT_OK(vmmc_unimport(ph));
        VT_OK(vmmc_unimport(pm));
        VT_OK(vmmc_unimport(pf));
        free(src);
    } else {
        for (int round = 0; round < 6; round++) {
            while (flag_seen != (uint64_t)round + 1)
                VT_CHECK(vmmc_wait(ep, 10000) >= 0);
            /* When the flag is seen, all data of the round is in place. */
            unsigned char *dst = round % 2 ? heap : mem;
            for (size_t i = 0; i < BIG; i++)
                if (dst[i] != (unsigned char)(i * 13 + round))
                    VT_FAIL("round %d byte %zu: %u", round, i, dst[i]);
            VT_OK(vmmc_barrier(ep));
        }
        VT_OK(vmmc_unexport(heap_ex));
        VT_OK(vmmc_barrier(ep));
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(heap);
    printf("t_async rank %d: ok\n", me);
    return 0;
}
