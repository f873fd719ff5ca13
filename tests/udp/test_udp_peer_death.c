/* Peer death: a child process streams to us over the link; we kill -9 it.
 * Every later operation to it must fail with VMMC_ERR_PEER_DEAD (declared
 * within VMMC_UDP_PEER_TIMEOUT, set to 1s by the test), nothing hangs, and
 * the death is reported as unclean (no goodbye). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include <signal.h>
#include <sys/wait.h>

#include "udp_test.h"

static uint16_t port(vmmc_udp_link_t *l)
{
    struct sockaddr_storage ss;
    socklen_t len;
    VT_OK(vmmc_udp_link_local_addr(l, &ss, &len));
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void add(ut_ep_t *e, uint32_t peer, uint16_t p)
{
    struct sockaddr_in a;
    uint8_t tok[16];
    ut_loopback(&a, p);
    ut_token(tok, peer, 0);
    VT_OK(vmmc_udp_link_add_peer(e->l, peer, (struct sockaddr *)&a, sizeof a, tok));
}

int main(void)
{
    int up[2], down[2];
    VT_CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        /* Child: endpoint 1, streams to 0 until killed. */
        ut_ep_t e;
        ut_rx_init(&e.rx, 1, UINT64_MAX);
        VT_OK(ut_open(&e, 1, 2, 0, NULL));
        uint16_t mine = port(e.l), theirs;
        VT_CHECK(write(up[1], &mine, sizeof mine) == sizeof mine);
        VT_CHECK(read(down[0], &theirs, sizeof theirs) == sizeof theirs);
        add(&e, 0, theirs);
        ut_tx_stream(e.l, 0, 42, UINT64_MAX / 2, 9);
        _exit(3); /* not reached: the parent kills us */
    }
    ut_ep_t e;
    ut_rx_init(&e.rx, 42, UINT64_MAX);
    VT_OK(ut_open(&e, 0, 2, 0, NULL));
    uint16_t mine = port(e.l), theirs;
    VT_CHECK(read(up[0], &theirs, sizeof theirs) == sizeof theirs);
    VT_CHECK(write(down[1], &mine, sizeof mine) == sizeof mine);
    add(&e, 1, theirs);

    /* Let real traffic flow both ways first. */
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.region = UT_REGION;
    ut_token(rec.token, 1, UT_REGION);
    static uint8_t buf[100000];
    double end = vt_now() + 20;
    for (;;) {
        VT_OK(vmmc_udp_link_send(e.l, 1, &rec, buf, sizeof buf));
        pthread_mutex_lock(&e.rx.lock);
        uint64_t got = e.rx.expect;
        int err = e.rx.errors;
        pthread_mutex_unlock(&e.rx.lock);
        if (err)
            VT_FAIL("stream from the child: %s", e.rx.err);
        if (got >= 4 << 20)
            break;
        if (vt_now() > end)
            VT_FAIL("child stream too slow: %llu bytes", (unsigned long long)got);
    }
    VT_CHECK(kill(pid, SIGKILL) == 0);
    int ws;
    VT_CHECK(waitpid(pid, &ws, 0) == pid && WIFSIGNALED(ws));
    double t0 = vt_now();

    /* Keep sending: sends block on the full window, then fail. */
    int st;
    long n = 0;
    while ((st = vmmc_udp_link_send(e.l, 1, &rec, buf, sizeof buf)) == VMMC_OK)
        n++;
    double dt = vt_now() - t0;
    VT_STATUS(VMMC_ERR_PEER_DEAD, st);
    printf("peer declared dead %.2f s after kill -9 (%ld sends accepted meanwhile): %s\n", dt, n,
           vmmc_last_error());
    /* The dead callback runs just after senders are released. */
    for (double t1 = vt_now(); vt_now() - t1 < 5;) {
        pthread_mutex_lock(&e.rx.lock);
        int d = e.rx.peer_dead;
        pthread_mutex_unlock(&e.rx.lock);
        if (d)
            break;
        usleep(1000);
    }
    VT_CHECK(e.rx.peer_dead == 1); /* unclean */
    VT_CHECK(vmmc_udp_link_peer_alive(e.l, 1) == 0);
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_udp_link_send(e.l, 1, &rec, "x", 1));
    VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_udp_link_flush(e.l, 1, -1));
    vmmc_udp_counters_t c;
    vmmc_udp_link_counters(e.l, &c);
    VT_CHECK(c.peers_dead == 1);
    vmmc_udp_link_close(e.l, 100);
    printf("PASS\n");
    return 0;
}
