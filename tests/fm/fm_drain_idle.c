/* The rest of a message whose handler returned early is discarded even by a
 * receiver that no longer extracts. Rank 0's handler reads 8 bytes of a
 * 4 MiB message (ring: 64 KiB) and returns; rank 0 then tells rank 1 to go
 * on and waits in vmmc_barrier(), never extracting again. Rank 1, a blocking
 * sender, must still get the credits for the remaining 4 MiB (FM's progress
 * hook discards the packets while the barrier waits) and reach the barrier.
 * Then the same with a message for a handler id rank 0 never registered. */
#include "fm_test.h"

enum { H_MSG = 1, H_GO = 2, H_UNKNOWN = 9 };
#define LEN (4u << 20)
#define FIRST (16u << 10)
#define RING (64 * 1024)

static int handled, go;
static uint64_t first_word;

static void h_msg(fm_stream_t *s, int sender, void *arg)
{
    VT_CHECK(fm_receive(&first_word, s, sizeof first_word) == (ssize_t)sizeof first_word);
    handled++; /* return early: the rest is discarded */
}

static void h_go(fm_stream_t *s, int sender, void *arg) { go++; }

static void send_rest(fm_stream_t *s, size_t from, size_t to)
{
    static uint8_t buf[65536];
    while (from < to) {
        size_t n = to - from < sizeof buf ? to - from : sizeof buf;
        ft_fill(buf, n, 1, from);
        VT_OK(fm_send_piece(s, buf, n));
        from += n;
    }
}

int main(void)
{
    vmmc_ep_t *ep;
    fm_t *fm;
    fm_params_t pa = {.field_mask = FM_PARAM_RING_SIZE | FM_PARAM_PACKET_SIZE,
                      .ring_size = RING,
                      .packet_size = 4096};
    ft_open(&ep, &fm, &pa);
    if (fm_numnodes(fm) != 2)
        VT_SKIP("needs 2 ranks");
    int me = fm_nodeid(fm);
    VT_CHECK(fm_register_handler(fm, H_MSG, h_msg, NULL) == H_MSG);
    VT_CHECK(fm_register_handler(fm, H_GO, h_go, NULL) == H_GO);
    VT_OK(vmmc_barrier(ep));
    for (int round = 0; round < 2; round++) {
        int id = round == 0 ? H_MSG : H_UNKNOWN;
        if (me == 1) {
            /* Open the message, send its start, wait for rank 0's go while
             * the message is open, then send the rest: far more than the
             * ring, so rank 0 must discard while it sits in the barrier. */
            fm_stream_t *s;
            uint64_t w = 0x1122334455667788ull + (uint64_t)round;
            VT_OK(fm_begin_message(fm, 0, sizeof w + LEN, id, &s));
            VT_OK(fm_send_piece(s, &w, sizeof w));
            send_rest(s, 0, FIRST);
            while (go <= round)
                VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
            send_rest(s, FIRST, LEN);
            VT_OK(fm_end_message(s));
            VT_CHECK(fm_counter(fm, "credit_wait") > 0);
        } else {
            if (round == 0) {
                while (handled < 1)
                    VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
                VT_CHECK(first_word == 0x1122334455667788ull);
            } else {
                while (fm_counter(fm, "unknown_handler") < 1)
                    VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
            }
            VT_OK(fm_send_4(fm, 1, H_GO, 0, 0, 0, 0));
        }
        VT_OK(vmmc_barrier(ep)); /* rank 0 no longer extracts */
        if (me == 0) {
            /* The hook discards the last packets too, whenever they come:
             * all of the message but the 8 bytes read in round 0. */
            uint64_t want = (uint64_t)(round + 1) * (sizeof(uint64_t) + LEN) - sizeof(uint64_t);
            while (fm_counter(fm, "bytes_discarded") < want)
                VT_CHECK(vmmc_wait(ep, 100) >= 0);
            VT_CHECK(fm_counter(fm, "bytes_discarded") == want);
            VT_CHECK(fm_counter(fm, "bytes_recv") == want + sizeof(uint64_t));
            VT_CHECK(fm_counter(fm, "msg_recv") == (uint64_t)round + 1);
        }
        VT_OK(vmmc_barrier(ep));
    }
    VT_CHECK(handled == (me == 0 ? 1 : 0));
    printf("rank %d: the rest of two early-ended messages was discarded during barriers\n", me);
    ft_close(ep, fm);
    return 0;
}
