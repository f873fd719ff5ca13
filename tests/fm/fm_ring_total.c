/* VMMC_FM_RING_TOTAL shares a receive-memory budget among the senders (run
 * with 4 ranks and VMMC_FM_RING_TOTAL=100K: 3 senders, rings of 32 KiB
 * instead of VMMC_FM_RING's 512 KiB). Observable without peeking: a
 * non-blocking message must fit the receiver's ring, so 40000 bytes are
 * refused with VMMC_ERR_INVALID and 10000 go through; a ring size given
 * explicitly in fm_params_t is not shared out. */
#include <stdio.h>

#include "fm_test.h"

static int got;
static void h(fm_stream_t *s, int sender, void *arg)
{
    (void)s;
    (void)sender;
    (void)arg;
    got++;
}

static void round_trip(vmmc_ep_t *ep, fm_t *fm, size_t big, int big_status)
{
    int me = vmmc_rank(ep), n = vmmc_size(ep), dest = (me + 1) % n;
    static char buf[40000];
    fm_stream_t *s;
    VT_STATUS(big_status, fm_begin_message(fm, dest, big, 1, &s));
    if (big_status == VMMC_OK)
        VT_OK(fm_end_message(s));
    int st;
    while ((st = fm_begin_message(fm, dest, 10000, 1, &s)) == VMMC_ERR_AGAIN)
        VT_CHECK(fm_extract(fm, FM_EXTRACT_ALL) >= 0);
    VT_OK(st);
    VT_OK(fm_send_piece(s, buf, 10000));
    VT_OK(fm_end_message(s));
    int want = big_status == VMMC_OK ? 2 : 1;
    while (got < want)
        VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, 1000) >= 0);
    got = 0;
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 4)
        VT_SKIP("needs 4 ranks");
    fm_t *fm;
    fm_params_t pa = {.field_mask = FM_PARAM_FLAGS, .flags = FM_NONBLOCK};
    VT_OK(fm_init(ep, &pa, &fm));
    VT_CHECK(fm_register_handler(fm, 1, h, NULL) == 1);
    VT_OK(vmmc_barrier(ep));
    round_trip(ep, fm, 40000, VMMC_ERR_INVALID); /* 32 KiB rings */
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_finalize(fm));

    pa.field_mask |= FM_PARAM_RING_SIZE;
    pa.ring_size = 512 * 1024;
    VT_OK(fm_init(ep, &pa, &fm));
    VT_CHECK(fm_register_handler(fm, 1, h, NULL) == 1);
    VT_OK(vmmc_barrier(ep));
    round_trip(ep, fm, 40000, VMMC_OK); /* asked for explicitly */
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_finalize(fm));
    printf("rank %d: rings shared out from the total, explicit ring kept\n", vmmc_rank(ep));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
