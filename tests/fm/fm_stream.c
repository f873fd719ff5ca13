/* Byte streams end to end: every rank sends to every rank (itself too)
 * messages of 0 B to 16 MiB, cut into random pieces on the sending side and
 * read back in independent random pieces by the handler, with checksums.
 * Some handlers stop reading early (the rest must be discarded and the next
 * message intact), some read past the end (short count), some messages end
 * before their declared bound. Run with several ring/packet settings and
 * with and without mapped rings (see CMakeLists.txt). */
#include "fm_test.h"

#define HDR_BYTES 24
#define MAXMSG (16u << 20)

typedef struct {
    uint64_t seq;     /* next expected */
    uint64_t done;    /* messages handled */
    uint8_t *buf;
    unsigned long long rng;
} from_t;

static from_t *from;
static int me, np;
static uint64_t nmsg;

static size_t pick_size(unsigned long long *r, uint64_t i)
{
    static const size_t edge[] = {0, 1, 7, 8, 63, 64, 65, 255, 256, 4095, 4096, 4097, 8191, 8192,
                                  8193, 16384, 65536, 100000};
    if (i == 3 || i == nmsg / 2)
        return MAXMSG;
    unsigned k = (unsigned)(vt_rand(r) % 10);
    if (k < 5)
        return edge[vt_rand(r) % (sizeof edge / sizeof edge[0])];
    if (k < 8)
        return (size_t)(vt_rand(r) % 2048);
    return (size_t)(vt_rand(r) % (1u << 20));
}

static void h_msg(fm_stream_t *s, int sender, void *arg)
{
    from_t *f = &from[sender];
    uint8_t hdr[HDR_BYTES];
    /* The header in two random pieces. */
    size_t a = (size_t)(vt_rand(&f->rng) % (HDR_BYTES + 1));
    VT_CHECK(fm_receive(hdr, s, a) == (ssize_t)a);
    VT_CHECK(fm_receive(hdr + a, s, HDR_BYTES - a) == (ssize_t)(HDR_BYTES - a));
    uint64_t seq, len, sum;
    memcpy(&seq, hdr, 8);
    memcpy(&len, hdr + 8, 8);
    memcpy(&sum, hdr + 16, 8);
    if (seq != f->seq)
        VT_FAIL("rank %d: message %llu from %d arrived, expected %llu", me,
                (unsigned long long)seq, sender, (unsigned long long)f->seq);
    VT_CHECK(len <= MAXMSG);
    /* Mode: 0-5 read exactly; 6-7 read a prefix only; 8-9 ask for more. */
    unsigned mode = (unsigned)(vt_rand(&f->rng) % 10);
    size_t want = len;
    if (mode >= 6 && mode < 8)
        want = len ? (size_t)(vt_rand(&f->rng) % len) : 0;
    size_t off = 0;
    while (off < want) {
        size_t piece = 1 + (size_t)(vt_rand(&f->rng) % (vt_rand(&f->rng) % 3 ? 300 : 70000));
        if (piece > want - off)
            piece = want - off;
        ssize_t n = fm_receive(f->buf + off, s, piece);
        if (n != (ssize_t)piece)
            VT_FAIL("rank %d: fm_receive of %zu at %zu/%llu of message %llu from %d gave %zd", me,
                    piece, off, (unsigned long long)len, (unsigned long long)seq, sender, n);
        off += piece;
    }
    if (mode >= 8) {
        uint8_t extra[64];
        VT_CHECK(fm_receive(extra, s, sizeof extra) == 0);
    }
    size_t bad = ft_check(f->buf, want, sender, seq, 0);
    if (bad != (size_t)-1)
        VT_FAIL("rank %d: message %llu from %d: byte %zu of %llu wrong", me, (unsigned long long)seq,
                sender, bad, (unsigned long long)len);
    if (want == len)
        VT_CHECK(ft_fnv(FT_FNV0, f->buf, len) == sum);
    f->seq++;
    f->done++;
}

static uint64_t total_done(void)
{
    uint64_t t = 0;
    for (int r = 0; r < np; r++)
        t += from[r].done;
    return t;
}

int main(int argc, char **argv)
{
    vmmc_ep_t *ep;
    fm_t *fm;
    ft_open(&ep, &fm, NULL);
    me = fm_nodeid(fm);
    np = fm_numnodes(fm);
    nmsg = argc > 1 ? strtoull(argv[1], NULL, 0) : 300;
    /* "mem": receive into communication memory, so large messages are
     * placed straight into the buffers (fm zero-copy). */
    int mem = argc > 2 && !strcmp(argv[2], "mem");
    from = calloc((size_t)np, sizeof *from);
    for (int r = 0; r < np; r++) {
        if (mem)
            VT_OK(vmmc_mem_alloc(ep, MAXMSG, (void **)&from[r].buf));
        else
            from[r].buf = malloc(MAXMSG);
        from[r].rng = 0x1234567ull + (unsigned long long)r * 77 + (unsigned long long)me * 1000003;
        VT_CHECK(from[r].buf);
    }
    VT_CHECK(fm_register_handler(fm, 7, h_msg, NULL) == 7);
    VT_OK(vmmc_barrier(ep));

    /* With "mem" the sources are communication memory too: large pieces
     * are then copied by both ranks (split copy). */
    uint8_t *src = NULL;
    if (mem)
        VT_OK(vmmc_mem_alloc(ep, MAXMSG, (void **)&src));
    else
        src = malloc(MAXMSG);
    VT_CHECK(src);
    unsigned long long rng = 0xabcdefull + (unsigned long long)me;
    for (uint64_t i = 0; i < nmsg; i++) {
        for (int d = 0; d < np; d++) {
            unsigned long long sr = rng ^ ((unsigned long long)d << 40) ^ i;
            size_t len = pick_size(&sr, i);
            ft_fill(src, len, me, i);
            uint64_t sum = ft_fnv(FT_FNV0, src, len);
            uint8_t hdr[HDR_BYTES];
            uint64_t l64 = len;
            memcpy(hdr, &i, 8);
            memcpy(hdr + 8, &l64, 8);
            memcpy(hdr + 16, &sum, 8);
            size_t slack = vt_rand(&sr) % 3 == 0 ? (size_t)(vt_rand(&sr) % 5000) : 0;
            fm_stream_t *s;
            VT_OK(fm_begin_message(fm, d, HDR_BYTES + len + slack, 7, &s));
            size_t a = (size_t)(vt_rand(&sr) % (HDR_BYTES + 1));
            VT_OK(fm_send_piece(s, hdr, a));
            VT_OK(fm_send_piece(s, hdr + a, HDR_BYTES - a));
            size_t off = 0;
            while (off < len) {
                size_t piece = 1 + (size_t)(vt_rand(&sr) % (vt_rand(&sr) % 2 ? 100 : 200000));
                if (piece > len - off)
                    piece = len - off;
                VT_OK(fm_send_piece(s, src + off, piece));
                off += piece;
            }
            VT_OK(fm_end_message(s));
        }
        /* Keep the receive side moving too, paced. */
        VT_CHECK(fm_extract(fm, 64 * 1024) >= 0);
    }
    while (total_done() < nmsg * (uint64_t)np) {
        int r = fm_extract_wait(fm, FM_EXTRACT_ALL, 10000);
        if (r < 0)
            VT_FAIL("fm_extract_wait: %d (%s)", r, vmmc_strerror(r));
        if (r == 0)
            VT_FAIL("rank %d: nothing arrived for 10 s with %llu of %llu messages handled", me,
                    (unsigned long long)total_done(), (unsigned long long)(nmsg * (uint64_t)np));
    }
    VT_CHECK(fm_counter(fm, "msg_recv") == nmsg * (uint64_t)np);
    VT_CHECK(fm_counter(fm, "unknown_handler") == 0);
    if (np > 1 && !getenv("VMMC_FM_MAP") && !vt_remote()) /* rings map on one host only */
        VT_CHECK(fm_counter(fm, "peers_mapped") == (uint64_t)(np - 1));
    printf("rank %d: %llu messages from %d ranks ok (suspended %llu times, credit waits %llu, "
           "%llu bytes placed directly, %llu of them copied by this rank from the sender's memory)\n",
           me, (unsigned long long)total_done(), np,
           (unsigned long long)fm_counter(fm, "handler_suspend"),
           (unsigned long long)fm_counter(fm, "credit_wait"),
           (unsigned long long)fm_counter(fm, "zcopy_bytes_recv"),
           (unsigned long long)fm_counter(fm, "split_bytes_recv"));
    ft_close(ep, fm);
    if (!mem)
        free(src);
    for (int r = 0; r < np && !mem; r++)
        free(from[r].buf); /* communication memory went with the endpoint */
    free(from);
    return 0;
}
