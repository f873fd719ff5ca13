/* Buffer ownership: a sender may reuse its buffer the moment a blocking send
 * returns. Every rank but 0 streams messages of mixed sizes (8 B .. 1 MiB,
 * many of them large enough for placement and split copy) to rank 0, which
 * does nothing but receive (so it answers offers at once), all from
 * ONE source buffer, which it overwrites with the next message's bytes right
 * after each send returns. The source is vmmc_mem_alloc() memory (placement
 * and split copy apply) and malloc() memory in turns of 64 messages; the
 * header travels as its own piece or in front of the payload in one piece.
 * The receiver checks every byte of every message; a byte that belongs to a
 * later message means the receiver read the sender's buffer after the send
 * had returned.
 *
 * The receiver lets the pages of its communication-memory buffer go after
 * each message (MADV_DONTNEED, as memory pressure would): its next copy into
 * them then runs slower than the sender's, which is what makes a late read of
 * the sender's buffer show. With two ranks (no more processes than cores
 * here) it polls; with more it sleeps when idle.
 * Usage: fm_integrity [messages per sender] [largest message] */
#include <stdio.h>
#include <sys/mman.h>

#include "fm_test.h"

#define H_DATA 5
#define HDR 32u

typedef struct hdr {
    uint64_t seq, size, mode, pad;
} hdr_t;

static int me, np;
static size_t maxmsg = (size_t)1 << 20;
typedef struct rx {
    uint8_t *mem, *heap; /* receive buffers: vmmc_mem_alloc(), malloc() */
    uint64_t next, done, bad, bytes, later;
} rx_t;
static rx_t *rx;

/* Word j of message seq from rank r: cheap, so that refilling the buffer
 * costs about a memset and the receiver does not fall asleep meanwhile. */
static inline uint64_t seed(int r, uint64_t seq)
{
    uint64_t x = (uint64_t)(r + 1) * 0x9E3779B97F4A7C15ull ^ (seq + 1) * 0xC2B2AE3D27D4EB4Full;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

static inline uint64_t pat(int r, uint64_t seq, size_t j)
{
    return seed(r, seq) + (uint64_t)j * 0x165667B19E3779F9ull;
}

static void fill(uint8_t *b, size_t n, int r, uint64_t seq)
{
    size_t j = 0;
    uint64_t s0 = seed(r, seq);
    for (; j + 8 <= n; j += 8) {
        uint64_t w = s0 + (uint64_t)(j / 8) * 0x165667B19E3779F9ull;
        memcpy(b + j, &w, 8);
    }
    if (j < n) {
        uint64_t w = pat(r, seq, j / 8);
        memcpy(b + j, &w, n - j);
    }
}

/* Offset of the first wrong byte of message @seq in @b, or (size_t)-1. */
static size_t first_bad(const uint8_t *b, size_t n, int r, uint64_t seq)
{
    size_t j = 0;
    uint64_t s0 = seed(r, seq);
    for (; j + 8 <= n; j += 8) {
        uint64_t w = s0 + (uint64_t)(j / 8) * 0x165667B19E3779F9ull, g;
        memcpy(&g, b + j, 8);
        if (g != w)
            return j;
    }
    if (j < n) {
        uint64_t w = pat(r, seq, j / 8);
        if (memcmp(b + j, &w, n - j))
            return j;
    }
    return (size_t)-1;
}

static void handler(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    rx_t *r = &rx[sender];
    hdr_t h;
    VT_CHECK(fm_receive(&h, s, sizeof h) == (ssize_t)sizeof h);
    if (h.seq != r->next)
        VT_FAIL("rank %d: message %llu from rank %d arrived, %llu expected", me,
                (unsigned long long)h.seq, sender, (unsigned long long)r->next);
    VT_CHECK(h.size <= maxmsg);
    r->next++;
    /* Into communication memory (placed, maybe split) or into malloc(). */
    uint8_t *dst = (h.seq % 4 == 3) ? r->heap : r->mem;
    VT_CHECK(fm_receive(dst, s, h.size) == (ssize_t)h.size);
    size_t bad = first_bad(dst, h.size, sender, h.seq);
    if (bad != (size_t)-1) {
        /* Whose bytes are they? A later message's means the sender's buffer
         * was read after the send returned. */
        int later = 0;
        for (uint64_t k = 1; k <= 2 && !later; k++) {
            uint64_t w = pat(sender, h.seq + k, bad / 8), g = 0;
            memcpy(&g, dst + bad, h.size - bad < 8 ? h.size - bad : 8);
            later = !memcmp(&g, &w, h.size - bad < 8 ? h.size - bad : 8);
        }
        r->later += (uint64_t)later;
        if (r->bad < 5)
            fprintf(stderr, "rank %d: message %llu (%llu bytes, from %s memory, %s) from rank %d: "
                    "byte %zu is wrong%s\n", me, (unsigned long long)h.seq,
                    (unsigned long long)h.size, h.mode & 1 ? "malloc" : "vmmc_mem_alloc",
                    h.mode & 2 ? "one piece" : "header piece + payload piece", sender, bad,
                    later ? " (it holds a later message's bytes)" : "");
        r->bad++;
    }
    /* Poison what was checked, so the next message cannot pass on bytes
     * that were simply left there. */
    memset(dst, 0xEE, h.size);
    if (dst == r->mem)
        VT_CHECK(madvise(dst, maxmsg, MADV_DONTNEED) == 0);
    r->bytes += h.size;
    r->done++;
}

static size_t pick_size(unsigned long long *st)
{
    size_t n;
    switch (vt_rand(st) % 8) {
    case 0:
        n = 8 + (size_t)(vt_rand(st) % 8185); /* short, or one packet */
        break;
    case 1:
        n = 8192 + (size_t)(vt_rand(st) % (24u << 10)); /* placed, not split */
        break;
    case 2:
        n = maxmsg; /* the largest */
        break;
    default:
        n = (32u << 10) + (size_t)(vt_rand(st) % (maxmsg - (32u << 10) + 1)); /* split copy */
        break;
    }
    return n < maxmsg ? n : maxmsg;
}

int main(int argc, char **argv)
{
    long nmsg = argc > 1 ? atol(argv[1]) : 2000;
    if (argc > 2)
        maxmsg = (size_t)atol(argv[2]);
    VT_CHECK(nmsg > 0 && maxmsg >= (64u << 10));
    vt_require_transport();
    vmmc_ep_t *ep;
    fm_t *fm;
    ft_open(&ep, &fm, NULL);
    me = vmmc_rank(ep);
    np = vmmc_size(ep);
    if (np < 2)
        VT_SKIP("needs 2 ranks or more");
    VT_CHECK(fm_register_handler(fm, H_DATA, handler, NULL) == H_DATA);
    rx = calloc((size_t)np, sizeof *rx);
    VT_CHECK(rx != NULL);
    uint8_t *src_mem = NULL, *src_heap = NULL;
    if (me == 0) {
        /* Handlers of different senders run interleaved: a buffer each. */
        for (int r = 1; r < np; r++) {
            VT_OK(vmmc_mem_alloc(ep, maxmsg, (void **)&rx[r].mem));
            rx[r].heap = malloc(maxmsg);
            VT_CHECK(rx[r].heap != NULL);
        }
    } else {
        /* The two sources, each with room for the header in front. */
        src_heap = malloc(HDR + maxmsg);
        VT_CHECK(src_heap != NULL);
        VT_OK(vmmc_mem_alloc(ep, HDR + maxmsg, (void **)&src_mem));
    }
    VT_OK(vmmc_barrier(ep));

    if (me != 0) {
        unsigned long long st = 0x5eed0000ull + (unsigned long long)me;
        size_t size = pick_size(&st);
        fill(src_mem + HDR, size, me, 0);
        for (long i = 0; i < nmsg; i++) {
            int heap = (i / 64) & 1;
            uint8_t *base = heap ? src_heap : src_mem;
            if (i % 64 == 0 && i)
                fill(base + HDR, size, me, (uint64_t)i); /* switched buffers */
            hdr_t h = {(uint64_t)i, size, (uint64_t)heap, 0};
            int one_piece = vt_rand(&st) % 3 == 0;
            h.mode |= one_piece ? 2u : 0u;
            fm_stream_t *s;
            VT_OK(fm_begin_message(fm, 0, HDR + size, H_DATA, &s));
            if (one_piece) {
                memcpy(base, &h, HDR);
                VT_OK(fm_send_piece(s, base, HDR + size));
            } else {
                VT_OK(fm_send_piece(s, &h, HDR));
                VT_OK(fm_send_piece(s, base + HDR, size));
            }
            VT_OK(fm_end_message(s));
            /* The send returned: the buffer is ours. Refill it at once with
             * the next message (header slot included), as an application
             * would. */
            size_t next = pick_size(&st);
            memset(base, 0xCC, HDR);
            fill(base + HDR, next > size ? next : size, me, (uint64_t)i + 1);
            size = next;
        }
    } else {
        uint64_t want = (uint64_t)nmsg * (uint64_t)(np - 1), done = 0;
        double end = vt_now() + 120;
        while (done < want) {
            VT_CHECK((np == 2 ? fm_extract(fm, FM_EXTRACT_ALL)
                              : fm_extract_wait(fm, FM_EXTRACT_ALL, 1000)) >= 0);
            if (vt_now() > end)
                VT_FAIL("only %llu of %llu messages arrived", (unsigned long long)done,
                        (unsigned long long)want);
            done = 0;
            for (int r = 1; r < np; r++)
                done += rx[r].done;
        }
        uint64_t bad = 0, later = 0, bytes = 0;
        for (int r = 1; r < np; r++) {
            bad += rx[r].bad;
            later += rx[r].later;
            bytes += rx[r].bytes;
        }
        printf("%llu messages (%llu bytes) from %d senders checked; %llu bytes placed, %llu "
               "copied by the receiver from the senders' memory (%llu void)\n",
               (unsigned long long)want, (unsigned long long)bytes, np - 1,
               (unsigned long long)fm_counter(fm, "zcopy_bytes_recv"),
               (unsigned long long)fm_counter(fm, "split_bytes_recv"),
               (unsigned long long)fm_counter(fm, "split_bytes_void"));
        if (bad)
            VT_FAIL("%llu of %llu messages were corrupted (%llu held a later message's bytes)",
                    (unsigned long long)bad, (unsigned long long)want, (unsigned long long)later);
    }
    VT_CHECK(fm_counter(fm, "protocol_error") == 0);
    VT_OK(vmmc_barrier(ep));
    if (src_mem)
        VT_OK(vmmc_mem_free(ep, src_mem));
    for (int r = 1; r < np && me == 0; r++) {
        VT_OK(vmmc_mem_free(ep, rx[r].mem));
        free(rx[r].heap);
    }
    free(src_heap);
    free(rx);
    VT_OK(fm_finalize(fm));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
