/* The peer's end and hostile peers, one fresh connection per case:
 *   dead_after: the client writes, then kills itself (SIGKILL): the server
 *     reads every byte, then 0 (as TCP gives); a send goes through (as TCP's
 *     first one after the peer's end), the next one fails (EPIPE);
 *   dead_reader: the server sleeps in recv when the client is killed: it
 *     wakes with 0, no hang;
 *   dead_writer: the server is blocked in send on a full ring when the
 *     client is killed: EPIPE;
 *   hostile words: the client writes garbage into the server's ring header
 *     (a tail past the ring, a tail that shrinks, a credit beyond what was
 *     sent, a FIN that disagrees with the tail) or garbage on the TCP
 *     stream: the server's call fails with ECONNRESET, never a crash or a
 *     copy out of bounds.
 * Runs on shm and udp. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "conn_test.h"

enum { DEAD_AFTER, DEAD_READER, DEAD_WRITER, H_TAIL_PAST, H_TAIL_BACK, H_CREDIT, H_FIN, H_TCP,
       NCASE };
static const char *names[] = {"dead_after", "dead_reader", "dead_writer", "tail_past",
                              "tail_back", "credit", "fin", "tcp_garbage"};

static void wait_attached(ct_t *t)
{
    double end = vt_now() + 30;
    while (!(atomic_load(&t->c->st) & C_ATTACHED)) {
        VT_CHECK(vt_now() < end);
        usleep(1000);
    }
}

static void client(int port, int ctl_port, int cs)
{
    int ctl = ct_connect(ctl_port);
    ct_t t;
    ct_up(&t, ct_connect(port), 0);
    wait_attached(&t);
    uint8_t b[1000];
    memset(b, 9, sizeof b);
    sock_tx_ring_t *tx = &t.c->tx;
    char go;
    switch (cs) {
    case DEAD_AFTER:
        ct_send_all(&t, b, sizeof b);
        raise(SIGKILL);
        break;
    case DEAD_READER:
    case DEAD_WRITER:
        VT_CHECK(read(ctl, &go, 1) == 1); /* the server is about to block */
        usleep(100000);
        raise(SIGKILL);
        break;
    case H_TAIL_PAST:
        VT_OK(sock_tx_word(tx, SOCK_HDR_TAIL, tx->size + 1));
        break;
    case H_TAIL_BACK:
        ct_send_all(&t, b, 100);
        VT_CHECK(read(ctl, &go, 1) == 1); /* the server read 50 */
        VT_OK(sock_tx_word(tx, SOCK_HDR_TAIL, 10));
        break;
    case H_CREDIT:
        VT_OK(sock_tx_word(tx, SOCK_HDR_CREDIT, 1ull << 40));
        break;
    case H_FIN:
        ct_send_all(&t, b, 100);
        VT_OK(sock_tx_word(tx, SOCK_HDR_FIN_AT, 5000));
        VT_OK(sock_tx_word(tx, SOCK_HDR_FLAGS, SOCK_RING_FIN));
        break;
    case H_TCP:
        memset(b, 0x5a, sizeof b);
        VT_CHECK(write(t.fd, b, sizeof b) == (ssize_t)sizeof b);
        break;
    }
    (void)sock_tx_fence(tx);
    (void)vmmc_signal(t.c->ep, t.c->peer);
    VT_CHECK(write(ctl, "d", 1) == 1);
    VT_CHECK(read(ctl, &go, 1) == 1); /* the server is done */
    _exit(0);
}

static void server_case(int l, int lctl, int cs)
{
    int ctl = ct_accept(lctl);
    ct_t t;
    ct_up(&t, ct_accept(l), 1);
    uint8_t b[1 << 16];
    char go;
    switch (cs) {
    case DEAD_AFTER:
        ct_recv_all(&t, b, 1000);
        VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == 0);
        VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == 0);
        /* as TCP: the first write after the peer's end goes through (its
         * kernel would answer with a reset), the next one fails */
        while (!(atomic_load(&t.c->st) & C_DEAD))
            usleep(1000); /* the sock thread sees the end of the TCP side */
        VT_CHECK(ct_send(&t, b, 10, MSG_NOSIGNAL, -1) == 10);
        VT_CHECK(ct_send(&t, b, 10, MSG_NOSIGNAL, -1) == -1 && errno == EPIPE);
        VT_CHECK(sock_conn_ready(t.c, POLLIN) & POLLIN);
        break;
    case DEAD_READER:
        VT_CHECK(write(ctl, "g", 1) == 1);
        VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == 0);
        break;
    case DEAD_WRITER: {
        VT_CHECK(write(ctl, "g", 1) == 1);
        ssize_t n;
        size_t total = 0;
        while ((n = ct_send(&t, b, sizeof b, MSG_NOSIGNAL, -1)) > 0)
            total += (size_t)n;
        VT_CHECK(n == -1 && (errno == EPIPE || errno == ECONNRESET));
        VT_CHECK(total >= sock_cfg()->ring);
        break;
    }
    case H_TAIL_PAST:
        VT_CHECK(read(ctl, &go, 1) == 1);
        VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == -1 && errno == ECONNRESET);
        VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == -1 && errno == ECONNRESET);
        VT_CHECK(strstr(vmmc_last_error(), "tail") != NULL);
        break;
    case H_TAIL_BACK:
        ct_recv_all(&t, b, 50);
        VT_CHECK(write(ctl, "g", 1) == 1);
        VT_CHECK(read(ctl, &go, 1) == 1);
        VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == -1 && errno == ECONNRESET);
        break;
    case H_CREDIT:
        VT_CHECK(read(ctl, &go, 1) == 1);
        VT_CHECK(ct_send(&t, b, 10, MSG_NOSIGNAL, -1) == -1 && errno == ECONNRESET);
        VT_CHECK(strstr(vmmc_last_error(), "credit") != NULL);
        break;
    case H_FIN:
        VT_CHECK(read(ctl, &go, 1) == 1);
        /* the 100 bytes may be read first; then the bad FIN resets */
        for (;;) {
            ssize_t n = ct_recv(&t, b, sizeof b, 0, -1);
            if (n < 0) {
                VT_CHECK(errno == ECONNRESET);
                break;
            }
            VT_CHECK(n > 0);
        }
        break;
    case H_TCP:
        VT_CHECK(read(ctl, &go, 1) == 1);
        VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == -1 && errno == ECONNRESET);
        break;
    }
    VT_CHECK(write(ctl, "e", 1) == 1 || cs <= DEAD_WRITER);
    ct_close(&t);
    close(ctl);
}

int main(void)
{
    vt_require_transport();
    signal(SIGPIPE, SIG_IGN);
    int port, cport, l = ct_listen(&port), lc = ct_listen(&cport);
    for (int cs = 0; cs < NCASE; cs++) {
        pid_t pid = fork();
        VT_CHECK(pid >= 0);
        if (pid == 0) {
            alarm(60);
            close(l);
            close(lc);
            client(port, cport, cs);
        }
        alarm(60);
        server_case(l, lc, cs);
        int st;
        VT_CHECK(waitpid(pid, &st, 0) == pid);
        VT_CHECK(cs <= DEAD_WRITER ? WIFSIGNALED(st) : (WIFEXITED(st) && !WEXITSTATUS(st)));
        printf("%s: ok\n", names[cs]);
        fflush(stdout);
    }
    return 0;
}
