/* Back-pressure: rank 0 stops extracting for 2 s while rank 1 (blocking
 * sends) and rank 2 (FM_NONBLOCK) keep sending. Rank 1 must stall in credit
 * waits, rank 2 must get VMMC_ERR_AGAIN, neither may get more than one ring
 * ahead of the receiver, and afterwards every message arrives, in order and
 * intact. */
#include <unistd.h>

#include "fm_test.h"

#define NMSG 3000
#define LEN 1000
#define RING (64 * 1024)
static uint64_t next_seq[3], handled;

static void h_msg(fm_stream_t *s, int sender, void *arg)
{
    uint8_t buf[LEN + 8];
    VT_CHECK(fm_receive(buf, s, sizeof buf) == (ssize_t)sizeof buf);
    uint64_t seq;
    memcpy(&seq, buf, 8);
    if (seq != next_seq[sender])
        VT_FAIL("from %d: message %llu, expected %llu", sender, (unsigned long long)seq,
                (unsigned long long)next_seq[sender]);
    VT_CHECK(ft_check(buf + 8, LEN, sender, seq, 0) == (size_t)-1);
    next_seq[sender]++;
    handled++;
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 3)
        VT_SKIP("needs 3 ranks");
    int me = vmmc_rank(ep);
    fm_params_t pa = {.field_mask = FM_PARAM_RING_SIZE | FM_PARAM_PACKET_SIZE | FM_PARAM_FLAGS,
                      .ring_size = RING,
                      .packet_size = 4096,
                      .flags = me == 2 ? FM_NONBLOCK : 0};
    fm_t *fm;
    VT_OK(fm_init(ep, &pa, &fm));
    VT_CHECK(fm_register_handler(fm, 1, h_msg, NULL) == 1);
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        sleep(2); /* a receiver that does not extract */
        VT_CHECK(fm_counter(fm, "msg_recv") == 0);
        while (handled < 2 * NMSG)
            VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
        VT_CHECK(fm_counter(fm, "unknown_handler") == 0);
        printf("rank 0: %d messages from each sender, in order\n", NMSG);
    } else {
        uint8_t buf[LEN + 8];
        uint64_t sent_at_first_again = 0, again = 0;
        for (uint64_t i = 0; i < NMSG; i++) {
            memcpy(buf, &i, 8);
            ft_fill(buf + 8, LEN, me, i);
            int rc;
            while ((rc = fm_send(fm, 0, 1, buf, sizeof buf)) == VMMC_ERR_AGAIN) {
                VT_CHECK(me == 2);
                if (!again++)
                    sent_at_first_again = fm_counter(fm, "bytes_sent");
                usleep(100);
            }
            VT_OK(rc);
        }
        if (me == 1) {
            VT_CHECK(fm_counter(fm, "credit_wait") > 0);
        } else {
            VT_CHECK(again > 0 && fm_counter(fm, "send_again") >= again);
            /* Never more than one ring ahead of a receiver that is not reading. */
            VT_CHECK(sent_at_first_again <= RING);
        }
        printf("rank %d: credit waits %llu, AGAIN %llu, %llu bytes sent before the first AGAIN\n",
               me, (unsigned long long)fm_counter(fm, "credit_wait"), (unsigned long long)again,
               (unsigned long long)sent_at_first_again);
    }
    ft_close(ep, fm);
    return 0;
}
