/* UDP link basics on loopback: fragmentation boundaries, zero-length
 * messages, replies sent from the receive callback (also larger than the
 * window, so the progress thread must progress while it sends), bad peer
 * indexes, flush, and a clean close seen by the other side. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "udp_test.h"

enum { K_STREAM = 1, K_REQ = 2 };

/* ep1 answers a K_REQ of 8 bytes (size) with that many stream bytes, sent
 * from inside its callback. */
static ut_ep_t E[2];
static uint64_t reply_seed = 555;

static int deliver_server(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec, const void *data,
                          size_t len)
{
    ut_ep_t *e = arg;
    if (rec->kind != K_REQ)
        return ut_deliver(arg, peer, rec, data, len);
    uint64_t size;
    VT_CHECK(len == sizeof size);
    memcpy(&size, data, sizeof size);
    int st = ut_tx_stream(e->l, peer, reply_seed, size, 99);
    if (st != VMMC_OK)
        VT_FAIL("reply from the callback failed: %d", st);
    return 0;
}

static int open_ep(int i, vmmc_udp_deliver_fn fn)
{
    struct sockaddr_in a;
    ut_loopback(&a, 0);
    vmmc_udp_link_params_t p;
    memset(&p, 0, sizeof p);
    E[i].self = (uint32_t)i;
    p.self = (uint32_t)i;
    p.max_peers = 3; /* index 2 is never registered */
    p.bind_addr = (struct sockaddr *)&a;
    p.bind_len = sizeof a;
    ut_token(p.token, (uint32_t)i, 0);
    p.deliver = fn;
    p.accept = ut_accept;
    p.dead = ut_dead;
    p.arg = &E[i];
    return vmmc_udp_link_open(&p, &E[i].l);
}

int main(void)
{
    ut_rx_init(&E[0].rx, reply_seed, 0);
    ut_rx_init(&E[1].rx, 1, 0);
    VT_OK(open_ep(0, ut_deliver));
    VT_OK(open_ep(1, deliver_server));
    VT_OK(ut_connect(&E[0], &E[1]));
    VT_OK(ut_connect(&E[1], &E[0]));
    VT_OK(ut_connect(&E[0], &E[1])); /* idempotent */

    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    VT_STATUS(VMMC_ERR_NOT_FOUND, vmmc_udp_link_send(E[0].l, 2, &rec, "x", 1));
    VT_STATUS(VMMC_ERR_NOT_FOUND, vmmc_udp_link_send(E[0].l, 3, &rec, "x", 1));
    VT_STATUS(VMMC_ERR_NOT_FOUND, vmmc_udp_link_send(E[0].l, 1000000, &rec, "x", 1));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_udp_link_send(E[0].l, 1, &rec, NULL, 1));
    VT_CHECK(vmmc_udp_link_peer_alive(E[0].l, 1) == 1);
    VT_CHECK(vmmc_udp_link_peer_alive(E[0].l, 2) == VMMC_ERR_NOT_FOUND);
    VT_CHECK(vmmc_udp_link_peer_alive(E[0].l, 7) == VMMC_ERR_NOT_FOUND);

    /* Stream 0 -> 1 with sizes around the fragment boundary and zero. */
    size_t pm = vmmc_udp_link_payload_max(E[0].l);
    size_t sizes[] = {0, 1, pm - 1, pm, pm + 1, 2 * pm, 2 * pm + 1, 0, 64, 3 * pm - 1, 5};
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += sizes[i];
    E[1].rx.total = total;
    E[1].rx.seed = 77;
    uint8_t *buf = malloc(4 * pm);
    rec.kind = K_STREAM;
    rec.region = UT_REGION;
    ut_token(rec.token, 1, UT_REGION);
    uint64_t pos = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        ut_fill(77, pos, buf, sizes[i]);
        rec.offset = pos;
        rec.imm = i;
        VT_OK(vmmc_udp_link_send(E[0].l, 1, &rec, buf, sizes[i]));
        pos += sizes[i];
    }
    VT_OK(vmmc_udp_link_flush(E[0].l, 1, 10000));
    if (!ut_rx_wait(&E[1].rx, 20))
        VT_FAIL("stream: %s", E[1].rx.err);
    VT_CHECK(E[1].rx.msgs == sizeof sizes / sizeof sizes[0]);
    vmmc_udp_counters_t c;
    vmmc_udp_link_counters(E[0].l, &c);
    /* 0,1,pm-1,pm: 1 each; pm+1, 2pm: 2; 2pm+1, 3pm-1: 3; 0, 64, 5: 1 */
    VT_CHECK(c.tx_data == 4 + 2 + 2 + 3 + 3 + 3);

    /* A request answered from the callback with 3x the window's bytes. */
    uint64_t want = 3 * 64 * (uint64_t)pm + 12345;
    E[0].rx.total = want;
    memset(&rec, 0, sizeof rec);
    rec.kind = K_REQ;
    VT_OK(vmmc_udp_link_send(E[0].l, 1, &rec, &want, sizeof want));
    if (!ut_rx_wait(&E[0].rx, 30))
        VT_FAIL("reply: %s (%llu of %llu)", E[0].rx.err, (unsigned long long)E[0].rx.expect,
                (unsigned long long)want);
    ut_print_counters("ep0", E[0].l);
    ut_print_counters("ep1", E[1].l);
    vmmc_udp_link_counters(E[1].l, &c);
    VT_CHECK(c.window_waits > 0); /* it really had to wait inside the callback */

    /* A receiver that often says "busy": delivery pauses and resumes, and
     * the stream still arrives whole, in order, once. */
    ut_rx_init(&E[1].rx, 4242, 16 << 20);
    E[1].busy_pct = 30;
    E[1].busy_rng = 7;
    VT_OK(ut_tx_stream(E[0].l, 1, 4242, 16 << 20, 3));
    VT_OK(vmmc_udp_link_flush(E[0].l, 1, 20000));
    if (!ut_rx_wait(&E[1].rx, 30))
        VT_FAIL("busy receiver: %s (%llu bytes)", E[1].rx.err, (unsigned long long)E[1].rx.expect);
    vmmc_udp_link_counters(E[1].l, &c);
    VT_CHECK(E[1].busy_count > 0 && c.deliver_busy == E[1].busy_count);
    E[1].busy_pct = 0;

    /* Clean close: the other side learns at once (well before the timeout). */
    double t0 = vt_now();
    vmmc_udp_link_close(E[1].l, 1000);
    pthread_mutex_lock(&E[0].rx.lock);
    while (!E[0].rx.peer_dead && vt_now() - t0 < 10) {
        pthread_mutex_unlock(&E[0].rx.lock);
        usleep(1000);
        pthread_mutex_lock(&E[0].rx.lock);
    }
    pthread_mutex_unlock(&E[0].rx.lock);
    VT_CHECK(E[0].rx.peer_dead == 2);
    /* The owner is told just before the link's own state changes. */
    while (vmmc_udp_link_peer_alive(E[0].l, 1) == 1 && vt_now() - t0 < 10)
        usleep(1000);
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_udp_link_send(E[0].l, 1, &rec, "x", 1));
    VT_CHECK(vmmc_udp_link_peer_alive(E[0].l, 1) == 0);
    vmmc_udp_link_close(E[0].l, 1000);
    free(buf);
    printf("PASS\n");
    return 0;
}
