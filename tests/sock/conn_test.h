/* Helpers of the conn tests: a TCP loopback connection upgraded by hand (the
 * HELLO/ACK records exchanged here as sock_hello.c does), and calls on the
 * conn with the socket's direction locks taken as sock_io.c takes them. */
#ifndef VMMC_TESTS_SOCK_CONN_TEST_H
#define VMMC_TESTS_SOCK_CONN_TEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/sock_conn_priv.h"
#include "vtest.h"

typedef struct ct {
    int fd;
    sock_t *s;
    sock_conn_t *c;
} ct_t;

/* A listening socket on 127.0.0.1, and its port. */
static inline int ct_listen(int *port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    VT_CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0);
    VT_CHECK(listen(l, 16) == 0);
    VT_CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
    *port = ntohs(a.sin_port);
    return l;
}

static inline int ct_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    VT_CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static inline int ct_accept(int l)
{
    int fd = accept(l, NULL, NULL);
    VT_CHECK(fd >= 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static inline sock_rec_t ct_rec(int type)
{
    sock_rec_t r;
    memset(&r, 0, sizeof r);
    r.magic = SOCK_REC_MAGIC;
    r.version = SOCK_WIRE_VERSION;
    r.type = (uint16_t)type;
    return r;
}

/* Upgrade the connected @p fd: the client sends HELLO with its ring and
 * goes on (its sock thread takes the ACK); the server reads the HELLO,
 * attaches, answers ACK. */
static inline void ct_up(ct_t *t, int fd, int server)
{
    t->fd = fd;
    t->s = sock_fd_new(fd, AF_INET);
    VT_CHECK(t->s != NULL);
    sock_ctx_t *ctx = sock_ctx_get();
    VT_CHECK(ctx != NULL);
    sock_ring_ref_t mine;
    if (!server) {
        VT_CHECK(sock_conn_open(ctx, t->s, -1, &t->c, &mine) == 0);
        t->s->conn = t->c;
        sock_set_mode(t->s, VMMC_SOCK_VMMC);
        sock_rec_t h = ct_rec(SOCK_REC_HELLO);
        h.ring = mine;
        VT_CHECK(sock_rec_write(fd, &h) == 0);
        return;
    }
    sock_rec_t h;
    VT_CHECK(sock_rec_read(fd, &h, 30000) == 0 && h.type == SOCK_REC_HELLO);
    int peer;
    VT_CHECK(sock_ctx_connect(ctx, h.ring.addr, h.ring.addr_len, &peer) == 0);
    VT_CHECK(sock_conn_open(ctx, t->s, peer, &t->c, &mine) == 0);
    VT_CHECK(sock_conn_attach(t->c, &h.ring, 30000) == 0);
    t->s->conn = t->c;
    sock_set_mode(t->s, VMMC_SOCK_VMMC);
    sock_rec_t a = ct_rec(SOCK_REC_ACK);
    a.ring = mine;
    VT_CHECK(sock_rec_write(fd, &a) == 0);
}

static inline ssize_t ct_sendv(ct_t *t, const struct iovec *iov, int n, int flags, int tmo)
{
    pthread_mutex_lock(&t->s->tx_lock);
    ssize_t r = t->s->conn ? sock_conn_send(t->s->conn, iov, n, flags, tmo) : -2;
    int e = errno;
    pthread_mutex_unlock(&t->s->tx_lock);
    errno = e;
    return r;
}

static inline ssize_t ct_recvv(ct_t *t, const struct iovec *iov, int n, int flags, int tmo)
{
    pthread_mutex_lock(&t->s->rx_lock);
    ssize_t r = t->s->conn ? sock_conn_recv(t->s->conn, iov, n, flags, tmo) : -2;
    int e = errno;
    pthread_mutex_unlock(&t->s->rx_lock);
    errno = e;
    return r;
}

static inline ssize_t ct_send(ct_t *t, const void *b, size_t len, int flags, int tmo)
{
    struct iovec v = {(void *)b, len};
    return ct_sendv(t, &v, 1, flags, tmo);
}

static inline ssize_t ct_recv(ct_t *t, void *b, size_t len, int flags, int tmo)
{
    struct iovec v = {b, len};
    return ct_recvv(t, &v, 1, flags, tmo);
}

/* Send all of @p len (blocking). */
static inline void ct_send_all(ct_t *t, const void *b, size_t len)
{
    while (len) {
        ssize_t n = ct_send(t, b, len, 0, -1);
        if (n <= 0)
            VT_FAIL("send: %zd (%s)", n, strerror(errno));
        b = (const uint8_t *)b + n;
        len -= (size_t)n;
    }
}

static inline void ct_recv_all(ct_t *t, void *b, size_t len)
{
    ssize_t n = ct_recv(t, b, len, MSG_WAITALL, -1);
    if (n != (ssize_t)len)
        VT_FAIL("recv of %zu: %zd (%s)", len, n, n < 0 ? strerror(errno) : "short");
}

static inline void ct_close(ct_t *t)
{
    sock_conn_t *c = t->s->conn;
    if (c)
        VT_CHECK(sock_conn_close(c) == 0);
    VT_CHECK(sock_fd_drop(t->fd, t->s) == 1);
    sock_put(t->s);
    close(t->fd);
}

static inline uint8_t ct_pat(uint64_t pos, unsigned seed)
{
    uint64_t x = (pos + seed) * 0x9E3779B97F4A7C15ull;
    return (uint8_t)(x >> 56) ^ (uint8_t)pos;
}

/* Wait for child @p pid (at most @p secs), fail unless it exited 0. */
static inline void ct_reap(pid_t pid, int secs)
{
    double end = vt_now() + secs;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (vt_now() > end) {
            kill(pid, SIGKILL);
            VT_FAIL("child %d did not end", (int)pid);
        }
        usleep(2000);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        VT_FAIL("child failed (status 0x%x)", st);
}

#endif
