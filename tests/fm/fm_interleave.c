/* Interleaving of senders with suspended handlers (4 ranks, rank 0 receives).
 *
 * Phase A: ranks 1 and 2 each open a 4 MiB message, send its first MiB and
 * hold the rest until told to go on. Rank 0's two handlers are then both
 * suspended mid-message; rank 3's small messages must be handled meanwhile.
 * Phase B: with 100 small messages from rank 3 and 256 KiB of a 64 MiB
 * message from rank 1 queued, extract one packet at a time: the small
 * messages must all be handled within a few packets of each other, not after
 * the long message. Every byte is checked. */
#include "fm_test.h"

enum { H_BIG = 1, H_SMALL = 2, H_GO = 3 };

static int me;
static size_t big_len[4], big_pos[4];
static int big_active[4], big_done[4];
static uint64_t big_seq[4];
static int small_seen, small_during_both, go;
static size_t big_pos_at_small[200];
static uint64_t small_next;

static void h_big(fm_stream_t *s, int sender, void *arg)
{
    uint64_t hdr[2];
    VT_CHECK(fm_receive(hdr, s, sizeof hdr) == (ssize_t)sizeof hdr);
    big_len[sender] = hdr[0];
    big_seq[sender] = hdr[1];
    big_pos[sender] = 0;
    big_active[sender] = 1;
    static uint8_t chunk[4][1000];
    while (big_pos[sender] < big_len[sender]) {
        size_t n = big_len[sender] - big_pos[sender];
        if (n > sizeof chunk[0])
            n = sizeof chunk[0];
        VT_CHECK(fm_receive(chunk[sender], s, n) == (ssize_t)n);
        size_t bad = ft_check(chunk[sender], n, sender, big_seq[sender], big_pos[sender]);
        if (bad != (size_t)-1)
            VT_FAIL("big message from %d: byte %zu wrong", sender, big_pos[sender] + bad);
        big_pos[sender] += n;
    }
    big_active[sender] = 0;
    big_done[sender]++;
}

static void h_small(fm_stream_t *s, int sender, void *arg)
{
    uint64_t v[2];
    VT_CHECK(fm_receive(v, s, sizeof v) == (ssize_t)sizeof v);
    VT_CHECK(v[0] == small_next && v[1] == ~small_next);
    small_next++;
    if (big_active[1] && big_active[2] && big_pos[1] > 0 && big_pos[1] < big_len[1] &&
        big_pos[2] > 0 && big_pos[2] < big_len[2])
        small_during_both++;
    if (small_seen < 200)
        big_pos_at_small[small_seen] = big_active[1] ? big_pos[1] : 0;
    small_seen++;
}

static void h_go(fm_stream_t *s, int sender, void *arg) { go++; }

static void wait_go(fm_t *fm, int n)
{
    while (go < n)
        VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
}

static void send_big_part(fm_stream_t *s, uint64_t seq, size_t from, size_t to)
{
    static uint8_t buf[65536];
    while (from < to) {
        size_t n = to - from < sizeof buf ? to - from : sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = ft_byte(me, seq, from + i);
        VT_OK(fm_send_piece(s, buf, n));
        from += n;
    }
}

int main(void)
{
    vmmc_ep_t *ep;
    fm_t *fm;
    /* Packet and ring sizes fixed here: the checks below count packets. */
    fm_params_t pa = {.field_mask = FM_PARAM_PACKET_SIZE | FM_PARAM_RING_SIZE,
                      .packet_size = 8192,
                      .ring_size = 512 * 1024};
    ft_open(&ep, &fm, &pa);
    me = fm_nodeid(fm);
    if (fm_numnodes(fm) != 4)
        VT_SKIP("needs 4 ranks");
    VT_CHECK(fm_register_handler(fm, H_BIG, h_big, NULL) == H_BIG);
    VT_CHECK(fm_register_handler(fm, H_SMALL, h_small, NULL) == H_SMALL);
    VT_CHECK(fm_register_handler(fm, H_GO, h_go, NULL) == H_GO);
    VT_OK(vmmc_barrier(ep));

    /* ---- phase A ---- */
    const size_t A_LEN = 4u << 20, A_FIRST = 1u << 20;
    const int A_SMALL = 50;
    if (me == 1 || me == 2) {
        fm_stream_t *s;
        uint64_t hdr[2] = {A_LEN, 100 + (uint64_t)me};
        VT_OK(fm_begin_message(fm, 0, sizeof hdr + A_LEN, H_BIG, &s));
        VT_OK(fm_send_piece(s, hdr, sizeof hdr));
        send_big_part(s, hdr[1], 0, A_FIRST);
        wait_go(fm, 1); /* extracting with our message to rank 0 still open */
        send_big_part(s, hdr[1], A_FIRST, A_LEN);
        VT_OK(fm_end_message(s));
    } else if (me == 3) {
        wait_go(fm, 1);
        for (uint64_t i = 0; i < (uint64_t)A_SMALL; i++) {
            uint64_t v[2] = {i, ~i};
            VT_OK(fm_send(fm, 0, H_SMALL, v, sizeof v));
        }
    } else {
        /* Both handlers started and suspended, waiting for the rest (the
         * senders' last, partly filled packet stays with them until they go
         * on: packets are 8 KiB here). */
        while (!(big_active[1] && big_active[2] && big_pos[1] + 8192 >= A_FIRST &&
                 big_pos[2] + 8192 >= A_FIRST))
            VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
        VT_CHECK(fm_counter(fm, "handler_suspend") >= 2);
        VT_OK(fm_send_4(fm, 3, H_GO, 0, 0, 0, 0));
        while (small_seen < A_SMALL)
            VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
        if (small_during_both != A_SMALL)
            VT_FAIL("only %d of %d small messages were handled while both long messages were "
                    "suspended", small_during_both, A_SMALL);
        VT_OK(fm_send_4(fm, 1, H_GO, 0, 0, 0, 0));
        VT_OK(fm_send_4(fm, 2, H_GO, 0, 0, 0, 0));
        while (big_done[1] < 1 || big_done[2] < 1)
            VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
    }
    VT_OK(vmmc_barrier(ep));

    /* ---- phase B ---- */
    const size_t B_LEN = 64u << 20, B_FIRST = 256u << 10;
    const int B_SMALL = 100;
    fm_stream_t *bs = NULL;
    if (me == 1) {
        uint64_t hdr[2] = {B_LEN, 7};
        VT_OK(fm_begin_message(fm, 0, sizeof hdr + B_LEN, H_BIG, &bs));
        VT_OK(fm_send_piece(bs, hdr, sizeof hdr));
        send_big_part(bs, hdr[1], 0, B_FIRST);
    } else if (me == 3) {
        for (uint64_t i = 0; i < (uint64_t)B_SMALL; i++) {
            uint64_t v[2] = {A_SMALL + i, ~(A_SMALL + i)};
            VT_OK(fm_send(fm, 0, H_SMALL, v, sizeof v));
        }
    }
    VT_OK(vmmc_barrier(ep)); /* everything above is in rank 0's rings */
    if (me == 0) {
        small_seen = 0;
        int steps = 0;
        while (small_seen < B_SMALL) {
            int n = fm_extract(fm, 1); /* one packet */
            VT_CHECK(n == 1);
            steps++;
        }
        /* Round robin: at most one packet of the long message per small one
         * (plus the rounds where rank 0's other rings were empty). */
        VT_CHECK(steps <= 2 * B_SMALL + 2);
        VT_CHECK(big_active[1] && big_pos[1] < B_FIRST);
        VT_CHECK(big_pos_at_small[B_SMALL - 1] <= (size_t)(B_SMALL + 2) * 8192);
        printf("rank 0: %d small messages handled in %d packets, long message at %zu bytes\n",
               B_SMALL, steps, big_pos[1]);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        send_big_part(bs, 7, B_FIRST, B_LEN);
        VT_OK(fm_end_message(bs));
    }
    if (me == 0)
        while (big_done[1] < 2)
            VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
    ft_close(ep, fm);
    return 0;
}
