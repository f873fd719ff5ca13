/* A polling application and the progress thread taking turns at the
 * socket. While E[1]'s application polls (vmmc_udp_link_poll) its polls
 * deliver; when it stops and says so (vmmc_udp_link_idle), or blocks in the
 * link waiting for remote completion, the progress thread receives; then the
 * application polls again. Every byte is checked (content, order, once)
 * whichever thread delivered it, and the polls must have delivered some.
 *
 * Run with VMMC_UDP_POLL_QUIET and VMMC_UDP_POLL_RECHECK at 10 minutes, so
 * that the progress thread's look-back never ends a turn: the hand-backs do.
 * (Without them the data would still come, only late: the progress thread
 * runs its timers at least once a second and then sees that nobody polls.
 * That delay is not asserted here; vmmc bench shows it.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "udp_test.h"

static ut_ep_t E[2];
static uint64_t tx_pos[2], tx_msg[2]; /* per sender: stream offset, message number */

/* Send @n messages of @size bytes of the stream @seed from E[from] to E[to],
 * continuing where the last part stopped. */
static int send_part(int from, int to, uint64_t seed, int n, size_t size)
{
    static uint8_t buf[3 * 65536];
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.region = UT_REGION;
    ut_token(rec.token, (uint32_t)to, UT_REGION);
    for (int i = 0; i < n; i++) {
        ut_fill(seed, tx_pos[from], buf, size);
        rec.offset = tx_pos[from];
        rec.imm = tx_msg[from]++;
        int st = vmmc_udp_link_send(E[from].l, (uint32_t)to, &rec, buf, size);
        if (st != VMMC_OK)
            return st;
        tx_pos[from] += size;
    }
    return VMMC_OK;
}

typedef struct part {
    int from, to, n;
    uint64_t seed;
    size_t size;
    int st;
} part_t;

static void *send_thread(void *arg)
{
    part_t *p = arg;
    p->st = send_part(p->from, p->to, p->seed, p->n, p->size);
    return NULL;
}

/* E[1]'s application polls until its stream is complete; returns the
 * fragments its polls delivered. */
static uint64_t poll_until_complete(void)
{
    uint64_t by_polls = 0;
    double end = vt_now() + 30;
    for (;;) {
        int k = vmmc_udp_link_poll(E[1].l);
        VT_CHECK(k >= 0);
        by_polls += (uint64_t)k;
        pthread_mutex_lock(&E[1].rx.lock);
        int done = E[1].rx.errors || E[1].rx.expect >= E[1].rx.total;
        pthread_mutex_unlock(&E[1].rx.lock);
        if (done)
            break;
        if (vt_now() > end)
            VT_FAIL("stream to the polling endpoint incomplete: %llu of %llu bytes",
                    (unsigned long long)E[1].rx.expect, (unsigned long long)E[1].rx.total);
    }
    VT_CHECK(!E[1].rx.errors);
    return by_polls;
}

/* Part sent from a thread while E[1] polls in this one. */
static void part_while_polling(int n, size_t size, uint64_t *by_polls)
{
    part_t p = {0, 1, n, 11, size, VMMC_OK};
    pthread_mutex_lock(&E[1].rx.lock);
    E[1].rx.total += (uint64_t)n * size;
    pthread_mutex_unlock(&E[1].rx.lock);
    pthread_t t;
    VT_CHECK(pthread_create(&t, NULL, send_thread, &p) == 0);
    *by_polls += poll_until_complete();
    pthread_join(t, NULL);
    VT_OK(p.st);
}

int main(void)
{
    ut_rx_init(&E[0].rx, 22, 0);
    ut_rx_init(&E[1].rx, 11, 0);
    VT_OK(ut_open(&E[0], 0, 2, 0, NULL));
    VT_OK(ut_open(&E[1], 1, 2, 0, NULL));
    VT_OK(ut_connect(&E[0], &E[1]));
    VT_OK(ut_connect(&E[1], &E[0]));
    size_t pm = vmmc_udp_link_payload_max(E[0].l);

    /* 1. E[1] polls while E[0] sends small and multi-datagram messages:
     *    its polls deliver (the progress thread leaves the socket to them). */
    uint64_t by_polls = 0;
    part_while_polling(2000, 64, &by_polls);
    part_while_polling(20, 2 * pm + 1, &by_polls);
    VT_CHECK(by_polls > 0);

    /* 2. E[1] stops polling and says so: the progress thread delivers. */
    vmmc_udp_link_idle(E[1].l);
    pthread_mutex_lock(&E[1].rx.lock);
    E[1].rx.total += 500 * 64 + 3 * (2 * pm + 1);
    pthread_mutex_unlock(&E[1].rx.lock);
    VT_OK(send_part(0, 1, 11, 500, 64));
    VT_OK(send_part(0, 1, 11, 3, 2 * pm + 1));
    VT_CHECK(ut_rx_wait(&E[1].rx, 30));

    /* 3. E[1] polls again, then sends to E[0] and waits until E[0] took it
     *    (remote completion): the acknowledgements come in through E[1]'s
     *    progress thread, which the wait hands the socket back to. */
    part_while_polling(1000, 64, &by_polls);
    pthread_mutex_lock(&E[0].rx.lock);
    E[0].rx.total = 100 * 64 + 2 * (2 * pm + 1);
    pthread_mutex_unlock(&E[0].rx.lock);
    VT_OK(send_part(1, 0, 22, 100, 64));
    VT_OK(send_part(1, 0, 22, 2, 2 * pm + 1));
    VT_OK(vmmc_udp_link_sync(E[1].l, 0, 30000, 0));
    VT_CHECK(ut_rx_wait(&E[0].rx, 30));

    /* 4. And polling works again after all that. */
    part_while_polling(500, 64, &by_polls);

    ut_print_counters("poller", E[1].l);
    printf("fragments delivered by the application's polls: %llu\n",
           (unsigned long long)by_polls);
    vmmc_udp_link_close(E[0].l, 1000);
    vmmc_udp_link_close(E[1].l, 1000);
    printf("PASS\n");
    return 0;
}
