/* Fence: when vmmc_fence(ep, peer) returns, every send, asynchronous send,
 * gather send and atomic issued to that peer before it has landed in the
 * peer's memory, so a third rank told so afterwards sees all of it; the same
 * when the telling send carries VMMC_SEND_FENCE.
 *
 * Rank 0 writes a round's pattern into rank 1 (an atomic add, 128 KiB
 * asynchronous, chunks synchronous, a gather send), fences (to rank 1, or
 * to every peer), then tells rank 2, which reads rank 1's memory with
 * vmmc_fetch and checks every byte. Without the fence the udp transport may
 * still carry the data when rank 2 looks (with injected loss it fails in the
 * first rounds). */
#include "conf.h"

#define BIG ((size_t)256 << 10)
#define ROUNDS 40
#define CHUNKS 16
#define TAIL 4096 /* gather send region after BIG, then an 8-byte counter */

int main(void)
{
    vmmc_ep_t *ep = conf_init(3);
    int me = vmmc_rank(ep);
    conf_region_t data, flag;
    if (me == 1) {
        conf_region_alloc(ep, &data, CONF_HEAP, BIG + TAIL + 8);
        conf_export(ep, &data, "f.data", VMMC_EXPORT_READ, NULL, NULL);
    }
    if (me == 2) {
        conf_region_alloc(ep, &flag, CONF_MEM, 64);
        conf_export(ep, &flag, "f.flag", VMMC_EXPORT_READ, NULL, NULL);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_fence(ep, -1)); /* nothing outstanding: returns at once */
    VT_STATUS(VMMC_ERR_INVALID, vmmc_fence(ep, 99));
    vmmc_proxy_t *dpx = me != 1 ? conf_import(ep, 1, "f.data") : NULL;
    vmmc_proxy_t *fpx = me == 0 ? conf_import(ep, 2, "f.flag") : NULL;
    VT_OK(vmmc_barrier(ep));
    unsigned char *src = malloc(BIG + TAIL), *back = malloc(BIG + TAIL + 8);
    VT_CHECK(src && back);
    for (uint64_t round = 1; round <= ROUNDS; round++) {
        if (me == 0) {
            conf_fill(src, BIG + TAIL, round, 0);
            /* The atomic first: over udp it waits for its reply, which
             * would act as a fence for what came before it. */
            VT_OK(vmmc_atomic(dpx, BIG + TAIL, VMMC_ATOMIC_ADD, 8, 1, 0, NULL));
            vmmc_request_t rq;
            int rc = vmmc_send_async(dpx, 0, src, BIG / 2, 0, &rq);
            VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
            for (size_t c = 0; c < CHUNKS; c++) {
                size_t n = BIG / 2 / CHUNKS;
                VT_OK(vmmc_send(dpx, BIG / 2 + c * n, src + BIG / 2 + c * n, n, 0));
            }
            vmmc_iov_t iov[4] = {{src + BIG, 1},
                                 {src + BIG + 1, 0},
                                 {src + BIG + 1, 2047},
                                 {src + BIG + 2048, TAIL - 2048}};
            VT_OK(vmmc_sendv(dpx, BIG, iov, 4, 0, 0));
            /* Every third round the flag's own send fences (VMMC_SEND_FENCE:
             * all peers, before it starts). */
            int by_flag = round % 3 == 0;
            if (!by_flag)
                VT_OK(vmmc_fence(ep, round % 2 ? 1 : -1));
            if (rc == VMMC_INPROGRESS)
                VT_OK(vmmc_request_wait(&rq, (int)(conf_timeout() * 1000)));
            VT_OK(vmmc_send(fpx, 0, &round, sizeof round, by_flag ? VMMC_SEND_FENCE : 0));
        } else if (me == 2) {
            CONF_POLL(ep, conf_load(flag.p) == round, "rank 0's word after its fence");
            VT_OK(vmmc_fetch(dpx, 0, back, BIG + TAIL + 8));
            conf_check(back, BIG + TAIL, round, 0, "round %llu, read after the fence",
                       (unsigned long long)round);
            uint64_t ctr;
            memcpy(&ctr, back + BIG + TAIL, 8);
            if (ctr != round)
                VT_FAIL("[%s] round %llu: the atomic before the fence not applied (%llu)",
                        conf_transport(), (unsigned long long)round, (unsigned long long)ctr);
        }
        VT_OK(vmmc_barrier(ep));
    }
    if (me == 1)
        conf_guard_check(&data);
    conf_ok(me, "%d rounds: everything before a fence was in place after it", ROUNDS);
    VT_OK(vmmc_finalize(ep));
    if (me == 1)
        conf_region_release(&data);
    free(src);
    free(back);
    return 0;
}
