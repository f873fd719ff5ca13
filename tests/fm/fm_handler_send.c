/* Sends from inside handlers never block: rank 0 answers each of rank 1's
 * requests from the request's handler; when rank 1's ring is full the
 * handler's send fails at once with VMMC_ERR_AGAIN and the reply is queued
 * and sent later by the main program, keeping the order. A handler's send
 * too large to ever be reserved is refused (VMMC_ERR_INVALID). */
#include "fm_test.h"

#define NREQ 500
#define RLEN 2048
#define RING (64 * 1024)

static fm_t *g_fm;
static uint64_t queue[NREQ], q_head, q_tail, again_in_handler, replies, too_big_rc = 1;
static uint64_t next_reply;

static int reply(uint64_t id)
{
    static uint8_t buf[RLEN + 8];
    memcpy(buf, &id, 8);
    ft_fill(buf + 8, RLEN, 0, id);
    return fm_send(g_fm, 1, 2, buf, sizeof buf);
}

static void h_request(fm_stream_t *s, int sender, void *arg)
{
    uint64_t id;
    VT_CHECK(fm_receive(&id, s, 8) == 8);
    if (too_big_rc == 1) {
        fm_stream_t *big;
        too_big_rc = (uint64_t)(int64_t)fm_begin_message(g_fm, 1, 2 * RING, 2, &big);
    }
    if (q_head == q_tail) {
        int rc = reply(id);
        if (rc == VMMC_OK)
            return;
        VT_STATUS(VMMC_ERR_AGAIN, rc);
        again_in_handler++;
    }
    queue[q_tail++] = id;
}

static void h_reply(fm_stream_t *s, int sender, void *arg)
{
    uint8_t buf[RLEN + 8];
    VT_CHECK(fm_receive(buf, s, sizeof buf) == (ssize_t)sizeof buf);
    uint64_t id;
    memcpy(&id, buf, 8);
    VT_CHECK(id == next_reply);
    VT_CHECK(ft_check(buf + 8, RLEN, 0, id, 0) == (size_t)-1);
    next_reply++;
    replies++;
}

int main(void)
{
    vmmc_ep_t *ep;
    fm_t *fm;
    fm_params_t pa = {.field_mask = FM_PARAM_RING_SIZE, .ring_size = RING};
    ft_open(&ep, &fm, &pa);
    g_fm = fm;
    if (fm_numnodes(fm) != 2)
        VT_SKIP("needs 2 ranks");
    VT_CHECK(fm_register_handler(fm, 1, h_request, NULL) == 1);
    VT_CHECK(fm_register_handler(fm, 2, h_reply, NULL) == 2);
    VT_OK(vmmc_barrier(ep));
    if (fm_nodeid(fm) == 1) {
        for (uint64_t i = 0; i < NREQ; i++)
            VT_OK(fm_send(fm, 0, 1, &i, sizeof i)); /* 500 x 64 B fit rank 0's ring */
        VT_OK(vmmc_barrier(ep));
        VT_OK(vmmc_barrier(ep)); /* rank 0 handled every request meanwhile */
        while (replies < NREQ)
            VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, -1) >= 0);
    } else {
        VT_OK(vmmc_barrier(ep));
        while (fm_counter(fm, "msg_recv") < NREQ)
            VT_CHECK(fm_extract(fm, FM_EXTRACT_ALL) >= 0);
        /* Rank 1 reads nothing until the next barrier: its ring filled up. */
        VT_CHECK(again_in_handler > 0);
        VT_STATUS(VMMC_ERR_INVALID, (int)(int64_t)too_big_rc);
        VT_OK(vmmc_barrier(ep));
        while (q_head < q_tail)
            VT_OK(reply(queue[q_head++])); /* the main program may block */
        printf("rank 0: %llu replies sent from handlers, %llu deferred\n",
               (unsigned long long)(NREQ - q_tail), (unsigned long long)q_tail);
    }
    ft_close(ep, fm);
    return 0;
}
