/* Requests answered by a peer that neither polls nor waits (VMMC_TRANSPORT=
 * udp, 2 ranks, run with VMMC_UDP_SERVE_SPIN=1s): rank 1 exports a word and
 * a readable buffer and then sleeps in nanosleep (it computes, as far as the
 * library knows) until rank 0 writes "done". Rank 0 sends a stream of remote
 * fetch-adds, each followed by vmmc_signal, as OpenSHMEM rings the target
 * after an atomic, then of remote reads. Checked:
 *  - every read returns the right bytes and every fetch-add the right old
 *    value (the reads and atomics are answered by rank 1's link thread);
 *  - the link thread answered the stream while it lingered after the first
 *    answer, reads and atomics alike (udp.linger_delivered counts at least
 *    three quarters of the requests: more than the reads alone; it is 0
 *    with VMMC_UDP_SERVE_SPIN=0, where each request waits for a wake);
 *  - a vmmc_signal right behind an atomic sends no datagram: rank 1
 *    executed the atomic and woke its endpoint itself (rank 0's udp.tx_data
 *    grows by one per atomic, not two). */
#include <string.h>
#include <time.h>

#include "vtest.h"

#define N 200

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    /* word 0: the counter; word 1: "done"; 64..: readable pattern */
    uint64_t *mem = calloc(1, 4096);
    VT_CHECK(mem);
    for (int i = 8; i < 512; i++)
        mem[i] = 0x1234567800000000ull + (uint64_t)i;
    if (me == 1) {
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
        p.flags = VMMC_EXPORT_READ;
        p.name = "serve";
        p.addr = mem;
        p.length = 4096;
        vmmc_export_t *ex;
        VT_OK(vmmc_export(ep, &p, &ex));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(ep, 1, "serve", 5000, &px));
        uint64_t tx0 = vt_counter(ep, "udp.tx_data");
        for (int i = 0; i < N; i++) {
            uint64_t old = ~0ull;
            VT_OK(vmmc_atomic(px, 0, VMMC_ATOMIC_ADD, 8, 3, 0, &old));
            VT_CHECK(old == 3ull * (uint64_t)i);
            VT_OK(vmmc_signal(ep, 1));
        }
        uint64_t tx = vt_counter(ep, "udp.tx_data") - tx0;
        printf("rank 0: %llu data datagrams for %d atomics and signals\n",
               (unsigned long long)tx, N);
        VT_CHECK(tx == N);
        /* then the reads: the atomics first, so that no linger after a
         * read can answer them */
        uint64_t got[4];
        for (int i = 0; i < N; i++) {
            size_t w = 8 + (size_t)(i % 500);
            VT_OK(vmmc_fetch(px, w * 8, got, 8));
            VT_CHECK(got[0] == mem[w]);
        }
        uint64_t one = 1;
        VT_OK(vmmc_send(px, 8, &one, 8, 0));
    } else {
        /* Sleep without polling until rank 0 is done (the link thread lands
         * its write); bounded. */
        struct timespec ts = {0, 1000000};
        for (int t = 0; __atomic_load_n(&mem[1], __ATOMIC_ACQUIRE) == 0; t++) {
            VT_CHECK(t < 60000);
            nanosleep(&ts, NULL);
        }
        VT_CHECK(mem[0] == 3ull * N);
        uint64_t lg = vt_counter(ep, "udp.linger_delivered");
        printf("rank 1: %llu of %d requests delivered while lingering\n",
               (unsigned long long)lg, 2 * N);
        VT_CHECK(lg >= 3 * N / 2);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(mem);
    return 0;
}
