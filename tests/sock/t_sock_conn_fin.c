/* The ends of an upgraded connection, both ends in this process (one
 * context, as a program that talks to itself):
 *   fin_before_ack    the client shuts its writing down before the server
 *                     answered its HELLO (with and without bytes waiting):
 *                     the server reads those bytes, then EOF;
 *   rdhup             after the peer's FIN, bytes still unread: ready()
 *                     says POLLIN|POLLRDHUP, as the kernel does;
 *   write_after_close the peer closed: the first write goes through (TCP's
 *                     peer answers it with a reset), the next one is EPIPE;
 *                     a read then gives 0;
 *   ack_while_writing the ACK comes while a writer holds tx_lock after it
 *                     put bytes in the local buffer (the attach cannot
 *                     flush): the writer's check after it released the lock
 *                     (sock_conn_tx_after, as sock_io.c calls it) flushes.
 * Every wait is bounded (20 s); a lost FIN fails as EAGAIN. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn_test.h"

enum { TMO = 20000 };

static void pair(ct_t *cl, ct_t *sv, int l, int port)
{
    ct_up(cl, ct_connect(port), 0);
    ct_up(sv, ct_accept(l), 1);
}

/* the server's ACK handled by the client (by its sock thread) */
static void wait_attached(ct_t *t)
{
    double end = vt_now() + TMO / 1000.0;
    while (!(atomic_load(&t->c->st) & C_ATTACHED)) {
        if (vt_now() > end)
            VT_FAIL("the client never attached");
        usleep(1000);
    }
}

static void fin_before_ack(int l, int port, size_t nbytes)
{
    ct_t cl, sv;
    ct_up(&cl, ct_connect(port), 0);
    char b[64];
    if (nbytes)
        VT_CHECK(ct_send(&cl, "hello", nbytes, MSG_NOSIGNAL, 0) == (ssize_t)nbytes);
    /* nothing answered the HELLO yet: the FIN waits for the ACK, and the
     * call does not (the server answers only after it) */
    double t0 = vt_now();
    VT_CHECK(sock_conn_shutdown(cl.c, SHUT_WR) == 0);
    VT_CHECK(vt_now() - t0 < TMO / 1000.0);
    VT_CHECK(ct_send(&cl, "x", 1, MSG_NOSIGNAL, 0) == -1 && errno == EPIPE);
    ct_up(&sv, ct_accept(l), 1);
    if (nbytes) {
        ssize_t n = ct_recv(&sv, b, sizeof b, MSG_WAITALL, TMO);
        if (n != (ssize_t)nbytes)
            VT_FAIL("recv: %zd (%s), %zu expected", n, n < 0 ? strerror(errno) : "", nbytes);
        VT_CHECK(!memcmp(b, "hello", nbytes));
    }
    ssize_t n = ct_recv(&sv, b, sizeof b, 0, TMO);
    if (n != 0)
        VT_FAIL("recv after the FIN: %zd (%s), 0 expected", n, n < 0 ? strerror(errno) : "");
    /* the other way still works */
    wait_attached(&cl);
    VT_CHECK(ct_send(&sv, "back", 4, MSG_NOSIGNAL, TMO) == 4);
    VT_CHECK(ct_recv(&cl, b, 4, MSG_WAITALL, TMO) == 4 && !memcmp(b, "back", 4));
    ct_close(&cl);
    ct_close(&sv);
}

static void rdhup(int l, int port)
{
    ct_t cl, sv;
    pair(&cl, &sv, l, port);
    wait_attached(&cl);
    VT_CHECK(ct_send(&cl, "z", 1, MSG_NOSIGNAL, TMO) == 1);
    VT_CHECK(sock_conn_shutdown(cl.c, SHUT_WR) == 0);
    double end = vt_now() + TMO / 1000.0;
    short rev;
    while (!((rev = sock_conn_ready(sv.c, POLLIN | POLLRDHUP)) & POLLRDHUP)) {
        if (vt_now() > end)
            VT_FAIL("ready: 0x%x, POLLRDHUP never came", rev);
        usleep(1000);
    }
    VT_CHECK(rev & POLLIN);
    char b[4];
    VT_CHECK(ct_recv(&sv, b, sizeof b, 0, TMO) == 1 && b[0] == 'z');
    VT_CHECK(sock_conn_ready(sv.c, POLLIN | POLLRDHUP) & (POLLIN | POLLRDHUP));
    VT_CHECK(ct_recv(&sv, b, sizeof b, 0, TMO) == 0);
    ct_close(&cl);
    ct_close(&sv);
}

static void write_after_close(int l, int port)
{
    ct_t cl, sv;
    pair(&cl, &sv, l, port);
    wait_attached(&cl);
    ct_close(&cl);
    char b[4];
    VT_CHECK(ct_recv(&sv, b, sizeof b, 0, TMO) == 0);
    /* the TCP side's end (the sock thread sees it) */
    double end = vt_now() + TMO / 1000.0;
    while (!(atomic_load(&sv.c->st) & C_DEAD)) {
        if (vt_now() > end)
            VT_FAIL("the end of the peer's TCP side never came");
        usleep(1000);
    }
    ssize_t n = ct_send(&sv, "xy", 2, MSG_NOSIGNAL, TMO);
    if (n != 2)
        VT_FAIL("first send after the peer's close: %zd (%s), 2 expected", n,
                n < 0 ? strerror(errno) : "");
    VT_CHECK(ct_send(&sv, "x", 1, MSG_NOSIGNAL, TMO) == -1 && errno == EPIPE);
    VT_CHECK(ct_send(&sv, "x", 1, MSG_NOSIGNAL, TMO) == -1 && errno == EPIPE);
    n = ct_recv(&sv, b, sizeof b, 0, TMO);
    VT_CHECK(n == 0 || (n == -1 && errno == ECONNRESET));
    ct_close(&sv);
}

static void ack_while_writing(int l, int port)
{
    ct_t cl, sv;
    ct_up(&cl, ct_connect(port), 0);
    pthread_mutex_lock(&cl.s->tx_lock);
    VT_CHECK(sock_conn_send(cl.c, &(struct iovec){"abcdef", 6}, 1, MSG_NOSIGNAL, 0) == 6);
    ct_up(&sv, ct_accept(l), 1);
    wait_attached(&cl); /* its attach found tx_lock taken */
    int owed = sock_conn_tx_owed(cl.c);
    pthread_mutex_unlock(&cl.s->tx_lock);
    VT_CHECK(owed);
    sock_conn_tx_after(cl.s);
    char b[8];
    ssize_t n = ct_recv(&sv, b, 6, MSG_WAITALL, TMO);
    if (n != 6)
        VT_FAIL("recv: %zd (%s), 6 expected", n, n < 0 ? strerror(errno) : "");
    VT_CHECK(!memcmp(b, "abcdef", 6));
    ct_close(&cl);
    ct_close(&sv);
}

int main(void)
{
    vt_require_transport();
    signal(SIGPIPE, SIG_IGN);
    alarm(200);
    int port, l = ct_listen(&port);
    printf("fin_before_ack (no bytes)\n");
    fin_before_ack(l, port, 0);
    printf("fin_before_ack (5 bytes)\n");
    fin_before_ack(l, port, 5);
    printf("rdhup\n");
    rdhup(l, port);
    printf("write_after_close\n");
    write_after_close(l, port);
    printf("ack_while_writing\n");
    ack_while_writing(l, port);
    close(l);
    printf("ok\n");
    return 0;
}
