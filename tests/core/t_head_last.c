/* VMMC_SEND_HEAD_LAST: one send publishes a record. Rank 0 writes records
 * (word 0: length, word 1: sequence, then a pattern of the sequence) into
 * rank 1's export; rank 1 waits for the new sequence in word 1 and checks
 * every byte of the record at once, then acknowledges. Sizes from 16 B to
 * more than one udp datagram; library memory (mapped) and malloc memory
 * (copy path), and over udp. Bad arguments are refused before a byte moves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vtest.h"

#define REGION (256 * 1024)
#define ROUNDS 400

static vmmc_ep_t *ep;

static void fill(unsigned char *p, size_t len, uint64_t seq)
{
    uint64_t w[2] = {len, seq};
    memcpy(p, w, sizeof w);
    for (size_t i = 16; i < len; i++)
        p[i] = (unsigned char)(seq * 131 + i);
}

static int wait_word(volatile uint64_t *w, uint64_t want)
{
    double t0 = vt_now();
    for (unsigned long n = 0; __atomic_load_n(w, __ATOMIC_ACQUIRE) != want; n++) {
        /* Spin on the word alone (over udp the link's thread lands it, or
         * our progress now and then), so a record published early is seen
         * early. */
        if (n % 4096 == 4095) {
            if (vt_remote())
                vmmc_progress(ep);
            if (vt_now() - t0 > 30)
                return -1;
        }
    }
    return 0;
}

static void run(const char *name, unsigned char *region, vmmc_proxy_t *px, vmmc_proxy_t *ack_px,
                volatile uint64_t *ack, int me)
{
    static const size_t sizes[] = {16, 24, 64, 1000, 4096, 70000, 200000};
    unsigned char *src = malloc(REGION);
    VT_CHECK(src != NULL);
    uint64_t seq = 0;
    for (int r = 0; r < ROUNDS; r++) {
        size_t len = sizes[r % (sizeof sizes / sizeof *sizes)];
        seq++;
        if (me == 0) {
            fill(src, len, seq);
            VT_OK(vmmc_send(px, 0, src, len, VMMC_SEND_HEAD_LAST));
            memset(src, 0xee, len); /* the buffer is ours again */
            VT_CHECK(wait_word(ack, seq) == 0);
        } else {
            fill(src, len, seq); /* what to expect, before the record can land */
            VT_CHECK(wait_word((volatile uint64_t *)(region + 8), seq) == 0);
            if (memcmp(region, src, len) != 0)
                VT_FAIL("%s: record %llu of %zu bytes was incomplete when its sequence landed",
                        name, (unsigned long long)seq, len);
            VT_OK(vmmc_send(ack_px, 0, &seq, sizeof seq, 0));
        }
    }
    free(src);
}

int main(void)
{
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep), peer = 1 - me;
    unsigned char *lib;
    VT_OK(vmmc_mem_alloc(ep, REGION, (void **)&lib));
    memset(lib, 0, REGION);
    unsigned char *heap = aligned_alloc(64, REGION);
    VT_CHECK(heap != NULL);
    memset(heap, 0, REGION);
    static volatile uint64_t ack[2];
    vmmc_export_t *ex;
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .flags = VMMC_EXPORT_READ,
                              .name = "lib", .addr = lib, .length = REGION};
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "heap";
    p.addr = heap;
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "ack";
    p.addr = (void *)ack;
    p.length = sizeof ack;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_proxy_t *plib, *pheap, *pack;
    VT_OK(vmmc_import(ep, peer, "lib", 10000, &plib));
    VT_OK(vmmc_import(ep, peer, "heap", 10000, &pheap));
    VT_OK(vmmc_import(ep, peer, "ack", 10000, &pack));
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        /* What it needs, refused before a byte moves. */
        char b[64] = {0};
        vmmc_request_t rq;
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send(plib, 0, b, 15, VMMC_SEND_HEAD_LAST));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send(plib, 4, b, 32, VMMC_SEND_HEAD_LAST));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send_async(plib, 0, b, 32, VMMC_SEND_HEAD_LAST, &rq));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_send(plib, 0, b, 32, 1u << 7));
    }
    VT_OK(vmmc_barrier(ep));
    run("library memory", lib, plib, pack, &ack[0], me);
    VT_OK(vmmc_barrier(ep));
    ack[0] = 0;
    VT_OK(vmmc_barrier(ep));
    run("malloc memory", heap, pheap, pack, &ack[0], me);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(heap);
    return 0;
}
