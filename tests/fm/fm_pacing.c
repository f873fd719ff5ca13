/* fm_extract(max_bytes) processes about max_bytes, rounded up to one packet,
 * and no more: checked with FM's own byte counter around every call, for
 * bounds from 0 (one packet) to 64 KiB, while messages of 0 B to 200 KiB
 * (handlers suspended across calls) arrive intact. Then the same for the
 * receiver's share of split copies: extracting 8 KiB at a time, it copies
 * at most 8 KiB of a message out of its sender's memory per call. */
#include "fm_test.h"

#define NMSG 1500
static uint64_t next_seq, handled;
static uint8_t rbuf[256 * 1024];

static void h_msg(fm_stream_t *s, int sender, void *arg)
{
    uint64_t hdr[2];
    VT_CHECK(fm_receive(hdr, s, sizeof hdr) == (ssize_t)sizeof hdr);
    VT_CHECK(hdr[0] == next_seq);
    VT_CHECK(hdr[1] <= sizeof rbuf);
    size_t off = 0;
    while (off < hdr[1]) {
        size_t n = hdr[1] - off < 3000 ? hdr[1] - off : 3000;
        VT_CHECK(fm_receive(rbuf + off, s, n) == (ssize_t)n);
        off += n;
    }
    VT_CHECK(ft_check(rbuf, hdr[1], sender, hdr[0], 0) == (size_t)-1);
    next_seq++;
    handled++;
}

#define NBIG 20
#define BIG (256 * 1024)
static uint8_t *big_dst;
static uint64_t big_handled;

static void h_big(fm_stream_t *s, int sender, void *arg)
{
    uint64_t seq;
    VT_CHECK(fm_receive(&seq, s, sizeof seq) == (ssize_t)sizeof seq);
    VT_CHECK(seq == big_handled);
    VT_CHECK(fm_receive(big_dst, s, BIG) == BIG);
    VT_CHECK(ft_check(big_dst, BIG, sender, seq, 0) == (size_t)-1);
    big_handled++;
}

int main(void)
{
    vmmc_ep_t *ep;
    fm_t *fm;
    fm_params_t pa = {.field_mask = FM_PARAM_PACKET_SIZE, .packet_size = 4096};
    ft_open(&ep, &fm, &pa);
    if (fm_numnodes(fm) != 2)
        VT_SKIP("needs 2 ranks");
    VT_CHECK(fm_register_handler(fm, 1, h_msg, NULL) == 1);
    VT_CHECK(fm_register_handler(fm, 2, h_big, NULL) == 2);
    uint8_t *big_src = NULL;
    VT_OK(vmmc_mem_alloc(ep, BIG, (void **)(fm_nodeid(fm) ? &big_src : &big_dst)));
    VT_OK(vmmc_barrier(ep));
    unsigned long long rng = 99;
    if (fm_nodeid(fm) == 1) {
        static uint8_t src[256 * 1024];
        for (uint64_t i = 0; i < NMSG; i++) {
            size_t len = vt_rand(&rng) % 10 == 0 ? (size_t)(vt_rand(&rng) % (200 * 1024))
                                                  : (size_t)(vt_rand(&rng) % 3000);
            uint64_t hdr[2] = {i, len};
            ft_fill(src, len, 1, i);
            fm_stream_t *s;
            VT_OK(fm_begin_message(fm, 0, sizeof hdr + len, 1, &s));
            VT_OK(fm_send_piece(s, hdr, sizeof hdr));
            VT_OK(fm_send_piece(s, src, len));
            VT_OK(fm_end_message(s));
        }
    } else {
        static const size_t bounds[] = {0, 1, 100, 4095, 4096, 5000, 20000, 65536};
        const size_t pkt = 4096;
        uint64_t calls = 0, over = 0;
        while (handled < NMSG) {
            size_t b = bounds[vt_rand(&rng) % (sizeof bounds / sizeof bounds[0])];
            uint64_t before = fm_counter(fm, "bytes_recv");
            uint64_t pk_before = fm_counter(fm, "pkt_recv");
            /* Alternate the polling and the blocking form: both are paced. */
            int n = calls % 2 ? fm_extract(fm, b) : fm_extract_wait(fm, b, -1);
            VT_CHECK(n >= 0);
            uint64_t got = fm_counter(fm, "bytes_recv") - before;
            VT_CHECK((uint64_t)n == fm_counter(fm, "pkt_recv") - pk_before);
            size_t limit = (b ? b : 1) + pkt - 1; /* rounded up to one packet */
            if (got > limit)
                VT_FAIL("fm_extract(%zu) processed %llu bytes in %d packets (limit %zu)", b,
                        (unsigned long long)got, n, limit);
            if (b == 0)
                VT_CHECK(n <= 1);
            over += got > b;
            calls++;
        }
        printf("rank 0: %d messages in %llu paced extracts (%llu rounded up past the bound)\n",
               NMSG, (unsigned long long)calls, (unsigned long long)over);
    }
    VT_OK(vmmc_barrier(ep));
    if (fm_nodeid(fm) == 1) {
        for (uint64_t i = 0; i < NBIG; i++) {
            ft_fill(big_src, BIG, 1, i);
            fm_stream_t *s;
            VT_OK(fm_begin_message(fm, 0, sizeof i + BIG, 2, &s));
            VT_OK(fm_send_piece(s, &i, sizeof i));
            VT_OK(fm_send_piece(s, big_src, BIG));
            VT_OK(fm_end_message(s));
        }
    } else {
        uint64_t before = fm_counter(fm, "split_bytes_recv");
        while (big_handled < NBIG)
            VT_CHECK(fm_extract(fm, 8192) >= 0);
        uint64_t pulled = fm_counter(fm, "split_bytes_recv") - before;
        printf("rank 0: %d messages of %d KiB placed, %llu bytes of them copied by this rank "
               "(at most 8 KiB each)\n", NBIG, BIG / 1024, (unsigned long long)pulled);
        VT_CHECK(pulled <= (uint64_t)NBIG * 8192);
        /* Same host, sender waiting for each buffer (VMMC_FM_ZCOPY_WAIT): splits happen. */
        if (!vt_remote() && !getenv("VMMC_FM_MAP"))
            VT_CHECK(pulled > 0);
    }
    ft_close(ep, fm);
    return 0;
}
