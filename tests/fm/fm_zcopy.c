/* Direct placement of large messages (zero-copy), 3 ranks.
 *
 * Ranks 1 and 2 stream messages to rank 0 at the same time, and rank 0
 * streams to rank 1 (so two ranks wait for each other's buffers). Each
 * message starts with a 32-byte header naming how its handler receives the
 * rest:
 *   INTO_MEM    one fm_receive into vmmc_mem_alloc() memory (placed directly)
 *   INTO_MALLOC one fm_receive into malloc() memory (copied from packets)
 *   SPLIT       random scatter pieces alternating between two allocations
 *   PARTIAL     only a prefix is read; the handler returns (rest discarded)
 *   OVERASK     asks for more than the message holds (short count)
 * Every byte is checked, and guard zones around each receive buffer must
 * stay untouched: a placement never writes outside the buffer posted.
 * Senders alternate between a malloc() source and a vmmc_mem_alloc() one,
 * and send every third message as one piece, header included;
 * from the latter, large pieces are copied by both ranks (split copy), and
 * the receiver's share must land just as exactly.
 * Usage: fm_zcopy [messages per sender] [split] */
#include <stdio.h>

#include "fm_test.h"

#define H_DATA 7
#define MAXMSG ((size_t)6 << 20)
#define GUARD 4096
#define GUARD_BYTE 0xA5

enum { INTO_MEM, INTO_MALLOC, SPLIT, PARTIAL, OVERASK, NMODES };

typedef struct hdr {
    uint64_t seq, size, mode, prefix;
} hdr_t;

typedef struct rx {
    uint8_t *mem, *mem2; /* GUARD | MAXMSG | GUARD, vmmc_mem_alloc() */
    uint8_t *heap;
    uint64_t next_seq;
    uint64_t done; /* messages whose handler returned */
    uint64_t bytes;
    uint64_t per_mode[NMODES];
} rx_t;

static rx_t rx[3];
static int me;
static vmmc_ep_t *ep;

static void guards_ok(const uint8_t *region, int who, uint64_t seq)
{
    for (size_t i = 0; i < GUARD; i++)
        if (region[i] != GUARD_BYTE || region[GUARD + MAXMSG + i] != GUARD_BYTE)
            VT_FAIL("message %llu from rank %d wrote outside its buffer (guard byte %zu)",
                    (unsigned long long)seq, who, i);
}

static void check(const uint8_t *b, size_t n, int who, uint64_t seq, size_t from, const char *what)
{
    size_t bad = ft_check(b, n, who, seq, from);
    if (bad != (size_t)-1)
        VT_FAIL("message %llu from rank %d: byte %zu of %s is wrong", (unsigned long long)seq, who,
                from + bad, what);
}

static void handler(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    rx_t *r = &rx[sender];
    hdr_t h;
    VT_CHECK(fm_receive(&h, s, sizeof h) == (ssize_t)sizeof h);
    if (h.seq != r->next_seq)
        VT_FAIL("rank %d: message %llu arrived, %llu expected", sender,
                (unsigned long long)h.seq, (unsigned long long)r->next_seq);
    r->next_seq++;
    VT_CHECK(h.size <= MAXMSG && h.mode < NMODES);
    uint8_t *m1 = r->mem + GUARD, *m2 = r->mem2 + GUARD;
    ssize_t got;
    switch (h.mode) {
    case INTO_MEM:
        VT_CHECK((got = fm_receive(m1, s, h.size)) == (ssize_t)h.size);
        check(m1, h.size, sender, h.seq, 0, "the payload");
        break;
    case INTO_MALLOC:
        VT_CHECK((got = fm_receive(r->heap, s, h.size)) == (ssize_t)h.size);
        check(r->heap, h.size, sender, h.seq, 0, "the payload");
        break;
    case SPLIT: {
        unsigned long long st = h.seq * 7919 + (unsigned long long)sender + 1;
        size_t off = 0;
        while (off < h.size) {
            size_t piece = 1 + (size_t)(vt_rand(&st) % (h.size / 3 + 1));
            if (piece > h.size - off)
                piece = h.size - off;
            uint8_t *dst = ((off / 4096) & 1) ? m2 + off : m1 + off;
            VT_CHECK(fm_receive(dst, s, piece) == (ssize_t)piece);
            check(dst, piece, sender, h.seq, off, "a scattered piece");
            off += piece;
        }
        break;
    }
    case PARTIAL:
        VT_CHECK(h.prefix <= h.size);
        VT_CHECK(fm_receive(m1, s, h.prefix) == (ssize_t)h.prefix);
        check(m1, h.prefix, sender, h.seq, 0, "the prefix");
        break; /* the rest is discarded */
    case OVERASK:
        VT_CHECK((got = fm_receive(m1, s, MAXMSG)) == (ssize_t)h.size);
        check(m1, h.size, sender, h.seq, 0, "the payload");
        break;
    }
    guards_ok(r->mem, sender, h.seq);
    guards_ok(r->mem2, sender, h.seq);
    r->bytes += h.size;
    r->per_mode[h.mode]++;
    r->done++;
}

static size_t pick_size(unsigned long long *st)
{
    switch (vt_rand(st) % 8) {
    case 0:
        return (size_t)(vt_rand(st) % 10000);           /* mostly below the threshold */
    case 1:
        return (size_t)(vt_rand(st) % MAXMSG);          /* up to 6 MiB */
    case 2:
        return 8192 - 33 + (size_t)(vt_rand(st) % 3);   /* at the threshold (header included) */
    default:
        return 8192 + (size_t)(vt_rand(st) % (1u << 20));
    }
}

/* @src has room for a header in front of it: every third message goes as
 * one piece from there, header and payload together, so the handler reads
 * its header out of a piece the sender did not cut. */
static void send_one(fm_t *fm, int dest, uint64_t seq, unsigned long long *st, uint8_t *src)
{
    hdr_t h = {seq, pick_size(st), vt_rand(st) % NMODES, 0};
    h.prefix = h.size ? (size_t)(vt_rand(st) % (h.size + 1)) : 0;
    fm_stream_t *s;
    VT_OK(fm_begin_message(fm, dest, sizeof h + h.size, H_DATA, &s));
    if (vt_rand(st) % 3 == 0) {
        memcpy(src - sizeof h, &h, sizeof h);
        VT_OK(fm_send_piece(s, src - sizeof h, sizeof h + h.size));
        VT_OK(fm_end_message(s));
        return;
    }
    VT_OK(fm_send_piece(s, &h, sizeof h));
    size_t off = 0;
    while (off < h.size) {
        size_t piece = (vt_rand(st) & 1) ? h.size - off : 1 + (size_t)(vt_rand(st) % (h.size - off));
        VT_OK(fm_send_piece(s, src + off, piece));
        off += piece;
    }
    VT_OK(fm_end_message(s));
}

int main(int argc, char **argv)
{
    long per_sender = argc > 1 ? atol(argv[1]) : 150;
    /* "split": senders wait for every buffer (VMMC_FM_ZCOPY_WAIT long), so
     * split copies must happen. Otherwise a sender on a busy machine often
     * stops waiting first, and that is fine too. */
    int must_split = argc > 2 && !strcmp(argv[2], "split");
    fm_t *fm;
    ft_open(&ep, &fm, NULL);
    me = vmmc_rank(ep);
    if (vmmc_size(ep) != 3)
        VT_SKIP("needs 3 ranks");
    VT_CHECK(fm_register_handler(fm, H_DATA, handler, NULL) == H_DATA);
    for (int r = 0; r < 3; r++) {
        VT_OK(vmmc_mem_alloc(ep, MAXMSG + 2 * GUARD, (void **)&rx[r].mem));
        VT_OK(vmmc_mem_alloc(ep, MAXMSG + 2 * GUARD, (void **)&rx[r].mem2));
        memset(rx[r].mem, GUARD_BYTE, MAXMSG + 2 * GUARD);
        memset(rx[r].mem2, GUARD_BYTE, MAXMSG + 2 * GUARD);
        rx[r].heap = malloc(MAXMSG);
        VT_CHECK(rx[r].heap != NULL);
    }
    VT_OK(vmmc_barrier(ep));

    /* The data of message seq from rank me is ft_byte(me, seq, i): regenerate
     * a source per message (it differs per message). */
    uint8_t *bases[2] = {malloc(MAXMSG + 64), NULL};
    VT_CHECK(bases[0] != NULL);
    VT_OK(vmmc_mem_alloc(ep, MAXMSG + 64, (void **)&bases[1]));
    uint8_t *srcs[2] = {bases[0] + 64, bases[1] + 64}; /* (room for a header in front) */
    unsigned long long st = 12345 + (unsigned long long)me;
    long expect0 = 2 * per_sender, expect1 = per_sender;
    long sent = 0;
    int dest = me == 0 ? 1 : 0;
    while (sent < per_sender) {
        /* Re-create the bytes for this message (the size is drawn inside
         * send_one, so fill the largest possible prefix lazily). */
        unsigned long long probe = st;
        size_t n = pick_size(&probe);
        uint8_t *src = srcs[sent & 1];
        ft_fill(src, n, me, (uint64_t)sent);
        send_one(fm, dest, (uint64_t)sent, &st, src);
        sent++;
        VT_CHECK(fm_extract(fm, FM_EXTRACT_ALL) >= 0);
    }
    long want = me == 0 ? expect0 : me == 1 ? expect1 : 0;
    double end = vt_now() + 120;
    while ((long)(rx[0].done + rx[1].done + rx[2].done) < want) {
        VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, 1000) >= 0);
        if (vt_now() > end)
            VT_FAIL("only %llu of %ld messages arrived",
                    (unsigned long long)(rx[0].done + rx[1].done + rx[2].done), want);
    }
    VT_CHECK(fm_counter(fm, "protocol_error") == 0);
    if (want) {
        uint64_t zb = fm_counter(fm, "zcopy_bytes_recv");
        uint64_t total = rx[0].bytes + rx[1].bytes + rx[2].bytes;
        printf("rank %d: %ld messages, %llu bytes, %llu placed directly\n", me, want,
               (unsigned long long)total, (unsigned long long)zb);
        /* Placement needs the sender to map our memory: same host, FM
         * mapping allowed. Buffers in malloc() memory are always copied. */
        const char *map = getenv("VMMC_FM_MAP");
        if (!vt_remote() && !(map && (map[0] == 'n' || map[0] == '0')))
            VT_CHECK(zb > 0);
        else
            VT_CHECK(zb == 0);
        VT_CHECK(zb < total);
        /* Split copies happen on the same conditions, from communication
         * memory; the receiver's share is part of what was placed. */
        uint64_t sb = fm_counter(fm, "split_bytes_recv");
        printf("rank %d: %llu bytes copied by the receiver from its senders' memory, "
               "%llu pulled for nothing (the sender had moved on)\n", me,
               (unsigned long long)sb, (unsigned long long)fm_counter(fm, "split_bytes_void"));
        if (must_split)
            VT_CHECK(sb > 0);
        const char *split = getenv("VMMC_FM_SPLIT");
        if (split && split[0] == '0')
            VT_CHECK(sb == 0);
        VT_CHECK(sb <= zb);
    }
    free(bases[0]);
    VT_OK(vmmc_mem_free(ep, bases[1]));
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_finalize(fm));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
