/* An upgraded connection between two processes (src/sock/sock_conn*.c):
 *   1. client -> server, megabytes in writev calls of 1-4 pieces and random
 *      sizes; the server reads with random sizes, readv, MSG_PEEK (checked
 *      against the read that follows) and MSG_WAITALL; every byte checked;
 *   2. server -> client, partly by sendfile from a file;
 *   3. tiny messages back and forth (ping-pong), timed beside the same over
 *      plain TCP loopback in the same run (printed, not asserted);
 *   4. non-blocking: an empty ring is EAGAIN, a full one takes exactly the
 *      ring's size, a bounded wait passes with EAGAIN;
 *   5. MSG_TRUNC discards;
 *   6. shutdown(SHUT_WR): the peer reads the bytes then 0, the other way
 *      still works, a send after it is EPIPE; a close with unread bytes is a
 *      reset for the peer (ECONNRESET), as TCP's.
 * A plain TCP connection between the two carries the test's own steps.
 * Runs on shm (mapped rings) and udp (VMMC_TRANSPORT=udp). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "conn_test.h"

#define BIG (6u << 20)

static int ctl;

static void step(void)
{
    char b = 's';
    VT_CHECK(write(ctl, &b, 1) == 1);
    VT_CHECK(read(ctl, &b, 1) == 1);
}

static void check(const uint8_t *b, size_t n, uint64_t pos, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != ct_pat(pos + i, seed))
            VT_FAIL("byte %llu is %u, expected %u", (unsigned long long)(pos + i), b[i],
                    ct_pat(pos + i, seed));
}

static void stream_out(ct_t *t, unsigned seed, uint64_t total)
{
    static uint8_t src[4][70000];
    unsigned long long r = seed + 1;
    uint64_t pos = 0;
    while (pos < total) {
        struct iovec iov[4];
        int n = 1 + (int)(vt_rand(&r) % 4);
        uint64_t p = pos;
        for (int i = 0; i < n; i++) {
            size_t l = vt_rand(&r) % 8 ? 1 + vt_rand(&r) % 300 : vt_rand(&r) % 70000;
            if (l > total - p)
                l = (size_t)(total - p);
            for (size_t j = 0; j < l; j++)
                src[i][j] = ct_pat(p + j, seed);
            iov[i].iov_base = src[i];
            iov[i].iov_len = l;
            p += l;
        }
        ssize_t k = ct_sendv(t, iov, n, 0, -1);
        if (k != (ssize_t)(p - pos))
            VT_FAIL("writev of %llu: %zd (%s)", (unsigned long long)(p - pos), k, strerror(errno));
        pos = p;
    }
}

static void stream_in(ct_t *t, unsigned seed, uint64_t total)
{
    static uint8_t b[3][100000], pk[100000];
    unsigned long long r = seed + 2;
    uint64_t pos = 0;
    while (pos < total) {
        int mode = (int)(vt_rand(&r) % 4);
        size_t want = vt_rand(&r) % 4 ? 1 + vt_rand(&r) % 500 : 1 + vt_rand(&r) % 100000;
        if (mode == 0) { /* peek, then read the same */
            ssize_t k = ct_recv(t, pk, want, MSG_PEEK, -1);
            VT_CHECK(k > 0 && (size_t)k <= want);
            check(pk, (size_t)k, pos, seed);
            ssize_t k2 = ct_recv(t, b[0], (size_t)k, 0, -1);
            VT_CHECK(k2 == k);
            check(b[0], (size_t)k, pos, seed);
            pos += (uint64_t)k;
        } else if (mode == 1) { /* waitall */
            if (want > total - pos)
                want = (size_t)(total - pos);
            ct_recv_all(t, b[0], want);
            check(b[0], want, pos, seed);
            pos += want;
        } else { /* readv into three pieces */
            struct iovec iov[3];
            for (int i = 0; i < 3; i++) {
                iov[i].iov_base = b[i];
                iov[i].iov_len = 1 + vt_rand(&r) % (mode == 2 ? 100 : 40000);
            }
            ssize_t k = ct_recvv(t, iov, 3, 0, -1);
            VT_CHECK(k > 0);
            size_t left = (size_t)k;
            for (int i = 0; i < 3 && left; i++) {
                size_t l = left < iov[i].iov_len ? left : iov[i].iov_len;
                check(b[i], l, pos, seed);
                pos += l;
                left -= l;
            }
        }
    }
}

/* the server's sendfile: a file holding the stream from FILE_AT on */
enum { FILE_AT = 1u << 20, FILE_LEN = 2u << 20 };

static void stream_out_file(ct_t *t, unsigned seed)
{
    char path[] = "/tmp/t_sock_conn.XXXXXX";
    int f = mkstemp(path);
    VT_CHECK(f >= 0);
    unlink(path);
    uint8_t *fb = malloc(FILE_LEN);
    VT_CHECK(fb);
    for (size_t i = 0; i < FILE_LEN; i++)
        fb[i] = ct_pat(FILE_AT + i, seed);
    VT_CHECK(write(f, fb, FILE_LEN) == FILE_LEN);
    free(fb);
    /* [0, FILE_AT) by send, then sendfile, then the rest by send */
    uint8_t *b = malloc(FILE_AT);
    for (size_t i = 0; i < FILE_AT; i++)
        b[i] = ct_pat(i, seed);
    ct_send_all(t, b, FILE_AT);
    off_t off = 0;
    while (off < FILE_LEN) {
        pthread_mutex_lock(&t->s->tx_lock);
        ssize_t n = sock_conn_sendfile(t->c, f, &off, FILE_LEN - (size_t)off, -1);
        pthread_mutex_unlock(&t->s->tx_lock);
        if (n <= 0)
            VT_FAIL("sendfile: %zd (%s)", n, strerror(errno));
    }
    VT_CHECK(off == FILE_LEN);
    size_t rest = BIG - FILE_AT - FILE_LEN;
    b = realloc(b, rest);
    for (size_t i = 0; i < rest; i++)
        b[i] = ct_pat(FILE_AT + FILE_LEN + i, seed);
    ct_send_all(t, b, rest);
    free(b);
    close(f);
}

enum { ROUNDS = 2000, MSG = 64 };

static double pingpong(ct_t *t, int fd, int first)
{
    uint8_t m[MSG] = {0};
    double t0 = vt_now();
    for (int i = 0; i < ROUNDS; i++) {
        if (first) {
            m[0] = (uint8_t)i;
            if (t)
                ct_send_all(t, m, MSG), ct_recv_all(t, m, MSG);
            else
                VT_CHECK(write(fd, m, MSG) == MSG && recv(fd, m, MSG, MSG_WAITALL) == MSG);
            VT_CHECK(m[0] == (uint8_t)(i + 1));
        } else {
            if (t)
                ct_recv_all(t, m, MSG);
            else
                VT_CHECK(recv(fd, m, MSG, MSG_WAITALL) == MSG);
            VT_CHECK(m[0] == (uint8_t)i);
            m[0]++;
            if (t)
                ct_send_all(t, m, MSG);
            else
                VT_CHECK(write(fd, m, MSG) == MSG);
        }
    }
    return (vt_now() - t0) / ROUNDS * 1e6 / 2;
}

static void client(int port)
{
    ctl = ct_connect(port);
    ct_t t;
    ct_up(&t, ct_connect(port), 0);
    /* 1 */
    stream_out(&t, 1, BIG);
    /* 2 */
    stream_in(&t, 2, BIG);
    step();
    /* 3 */
    pingpong(&t, -1, 1);
    pingpong(NULL, ctl, 1);
    step();
    /* 4: fill the server's ring without blocking */
    uint8_t b[4096];
    memset(b, 7, sizeof b);
    size_t filled = 0;
    for (;;) {
        ssize_t n = ct_send(&t, b, sizeof b, 0, 0);
        if (n < 0) {
            VT_CHECK(errno == EAGAIN);
            break;
        }
        filled += (size_t)n;
    }
    VT_CHECK(filled == sock_cfg()->ring);
    VT_CHECK((sock_conn_ready(t.c, POLLOUT) & POLLOUT) == 0);
    step(); /* the server drains it */
    step();
    VT_CHECK(sock_conn_ready(t.c, POLLOUT) & POLLOUT);
    /* 5 */
    for (size_t i = 0; i < 1000; i++)
        b[i] = ct_pat(i, 5);
    ct_send_all(&t, b, 1000);
    step();
    step();
    /* 6 */
    for (size_t i = 0; i < 777; i++)
        b[i] = ct_pat(i, 6);
    ct_send_all(&t, b, 777);
    VT_CHECK(sock_conn_shutdown(t.c, SHUT_WR) == 0);
    VT_CHECK(ct_send(&t, b, 1, MSG_NOSIGNAL, -1) == -1 && errno == EPIPE);
    ct_recv_all(&t, b, 555);
    check(b, 555, 0, 66);
    step(); /* the server sent 100 more that stay unread */
    /* Over udp the server's send returns once its data is on the wire:
     * they are unread only once they are here (a close before would be a
     * plain FIN, and they would land in a ring already gone). */
    double until = vt_now() + 30;
    while (sock_conn_unread(t.c) < 100 && vt_now() < until)
        usleep(1000);
    VT_CHECK(sock_conn_unread(t.c) == 100);
    ct_close(&t);
    step();
    exit(0);
}

static void server(int l)
{
    ctl = ct_accept(l);
    ct_t t;
    ct_up(&t, ct_accept(l), 1);
    /* 1 */
    stream_in(&t, 1, BIG);
    /* 2 */
    stream_out_file(&t, 2);
    step();
    /* 3 */
    double us_v = pingpong(&t, -1, 0);
    double us_k = pingpong(NULL, ctl, 0);
    vmmc_sock_info_t info;
    sock_conn_info(t.c, &info);
    printf("ping-pong of %d bytes, one way: %.2f us on vmmc (%s), %.2f us on TCP loopback "
           "(TCP/vmmc = %.2f)\n",
           MSG, us_v, info.transport, us_k, us_k / us_v);
    VT_CHECK(strcmp(info.transport, vt_remote() ? "udp" : "shm") == 0);
    VT_CHECK(info.bytes_received >= BIG && info.bytes_sent >= BIG);
    step();
    /* 4 */
    uint8_t b[8192];
    step();
    size_t got = 0;
    while (got < sock_cfg()->ring) {
        ssize_t n = ct_recv(&t, b, sizeof b, 0, -1);
        VT_CHECK(n > 0);
        for (ssize_t i = 0; i < n; i++)
            VT_CHECK(b[i] == 7);
        got += (size_t)n;
    }
    VT_CHECK(got == sock_cfg()->ring);
    VT_CHECK(ct_recv(&t, b, 1, 0, 0) == -1 && errno == EAGAIN);
    VT_CHECK(ct_recv(&t, b, 1, 0, 30) == -1 && errno == EAGAIN);
    VT_CHECK(sock_conn_unread(t.c) == 0);
    step();
    /* 5 */
    step();
    if (!vt_remote()) /* udp: bytes may still travel */
        if (sock_conn_unread(t.c) != 1000) VT_FAIL("unread %zu", sock_conn_unread(t.c));
    VT_CHECK(ct_recv(&t, b, 500, MSG_TRUNC, -1) == 500);
    ct_recv_all(&t, b, 500);
    check(b, 500, 500, 5);
    step();
    /* 6 */
    ct_recv_all(&t, b, 777);
    check(b, 777, 0, 6);
    VT_CHECK(ct_recv(&t, b, 10, 0, -1) == 0);
    VT_CHECK(ct_recv(&t, b, 10, 0, 0) == 0);
    VT_CHECK(sock_conn_ready(t.c, POLLIN) & POLLRDHUP);
    for (size_t i = 0; i < 555; i++)
        b[i] = ct_pat(i, 66);
    ct_send_all(&t, b, 555);
    ct_send_all(&t, b, 100);
    step();
    step(); /* the client closed with 100 bytes unread: a reset */
    VT_CHECK(ct_recv(&t, b, 10, 0, -1) == -1 && errno == ECONNRESET);
    VT_CHECK(ct_send(&t, b, 10, MSG_NOSIGNAL, -1) == -1);
    VT_CHECK(sock_conn_ready(t.c, POLLIN) & POLLERR);
    ct_close(&t);
}

int main(void)
{
    vt_require_transport();
    signal(SIGPIPE, SIG_IGN);
    int port, l = ct_listen(&port);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(200);
        close(l);
        client(port);
    }
    alarm(200);
    server(l);
    ct_reap(pid, 60);
    printf("ok\n");
    return 0;
}
