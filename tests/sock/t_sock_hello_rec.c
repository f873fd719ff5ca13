/* Records on the TCP stream (src/sock/sock_rec.c): every type round trips,
 * a record split into single bytes is read whole, every malformed record is
 * refused with EPROTO (and 20000 random mutations of good ones never crash
 * and never pass unchecked), half a record times out or ends in ECONNRESET,
 * a signal during the wait does not fail the read, a write to a closed peer
 * is EPIPE without SIGPIPE, and a peer that never reads makes the write time
 * out instead of hanging. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/sock_up.h"
#include "vtest.h"

static void pair(int sv[2])
{
    VT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
}

static sock_rec_t good(int type)
{
    sock_rec_t r;
    memset(&r, 0, sizeof r);
    r.magic = SOCK_REC_MAGIC;
    r.version = SOCK_WIRE_VERSION;
    r.type = (uint16_t)type;
    r.token = 0x1122334455667788ull;
    r.a = 7;
    r.b = 9;
    r.ring.addr_len = 40;
    memset(r.ring.addr, 'a', 40);
    strcpy(r.ring.name, "sock-ring-0123");
    r.ring.size = 65536;
    return r;
}

static void test_round_trip(void)
{
    int sv[2];
    pair(sv);
    int types[] = {SOCK_REC_HELLO, SOCK_REC_ACK, SOCK_REC_REVERT, SOCK_REC_REVERT_ACK};
    for (int i = 0; i < 4; i++) {
        sock_rec_t w = good(types[i]), r;
        w.magic = 0; /* the writer fills magic and version in */
        w.version = 0;
        VT_CHECK(sock_rec_write(sv[0], &w) == 0);
        VT_CHECK(sock_rec_read(sv[1], &r, 1000) == 0);
        VT_CHECK(r.type == types[i] && r.token == w.token && r.a == 7 && r.b == 9);
        VT_CHECK(r.ring.addr_len == 40 && !strcmp(r.ring.name, "sock-ring-0123"));
    }
    /* ACK with an error needs no ring. */
    sock_rec_t w = good(SOCK_REC_ACK), r;
    memset(&w.ring, 0, sizeof w.ring);
    w.status = VMMC_ERR_PERMISSION;
    VT_CHECK(sock_rec_write(sv[0], &w) == 0);
    VT_CHECK(sock_rec_read(sv[1], &r, 1000) == 0 && r.status == VMMC_ERR_PERMISSION);
    close(sv[0]);
    close(sv[1]);
}

typedef struct slow {
    int fd;
    sock_rec_t r;
    pthread_t target;
} slow_t;

static void on_usr1(int s)
{
    (void)s;
}

/* Writes the record one byte at a time, interrupting the reader with
 * signals between bytes. */
static void *slow_writer(void *p)
{
    slow_t *s = p;
    const char *b = (const char *)&s->r;
    for (size_t i = 0; i < sizeof s->r; i++) {
        if (i % 64 == 0) {
            pthread_kill(s->target, SIGUSR1);
            usleep(500);
        }
        VT_CHECK(write(s->fd, b + i, 1) == 1);
    }
    return NULL;
}

static void test_split_and_signals(void)
{
    struct sigaction sa = {.sa_handler = on_usr1}; /* no SA_RESTART: poll sees EINTR */
    sigaction(SIGUSR1, &sa, NULL);
    int sv[2];
    pair(sv);
    slow_t s = {.fd = sv[0], .r = good(SOCK_REC_HELLO), .target = pthread_self()};
    pthread_t t;
    VT_CHECK(pthread_create(&t, NULL, slow_writer, &s) == 0);
    sock_rec_t r;
    VT_CHECK(sock_rec_read(sv[1], &r, 30000) == 0);
    VT_CHECK(r.token == s.r.token && r.ring.size == 65536);
    pthread_join(t, NULL);
    close(sv[0]);
    close(sv[1]);
    signal(SIGUSR1, SIG_DFL);
}

static void expect_refused(sock_rec_t *w, const char *what)
{
    int sv[2];
    pair(sv);
    VT_CHECK(write(sv[0], w, sizeof *w) == sizeof *w);
    sock_rec_t r;
    errno = 0;
    int rc = sock_rec_read(sv[1], &r, 1000);
    if (rc != -1 || errno != EPROTO)
        VT_FAIL("%s: read gave %d errno %d, expected EPROTO", what, rc, errno);
    VT_CHECK(strstr(vmmc_last_error(), "sock:") != NULL);
    close(sv[0]);
    close(sv[1]);
}

static void test_malformed(void)
{
    sock_rec_t w;
    w = good(SOCK_REC_HELLO); w.magic ^= 1; expect_refused(&w, "magic");
    w = good(SOCK_REC_HELLO); w.version = 2; expect_refused(&w, "version");
    w = good(0); expect_refused(&w, "type 0");
    w = good(5); expect_refused(&w, "type 5");
    w = good(0xffff); expect_refused(&w, "type 0xffff");
    w = good(SOCK_REC_HELLO); w.status = -1; expect_refused(&w, "hello status");
    w = good(SOCK_REC_HELLO); w.ring.addr_len = 0; expect_refused(&w, "addr_len 0");
    w = good(SOCK_REC_HELLO); w.ring.addr_len = VMMC_ADDR_MAX + 1; expect_refused(&w, "addr_len");
    w = good(SOCK_REC_HELLO); w.ring.addr_len = 0xffff; expect_refused(&w, "addr_len max");
    w = good(SOCK_REC_HELLO); memset(w.ring.name, 'n', sizeof w.ring.name);
    expect_refused(&w, "name unterminated");
    w = good(SOCK_REC_HELLO); w.ring.name[0] = 0; expect_refused(&w, "name empty");
    w = good(SOCK_REC_HELLO); w.ring.size = 0; expect_refused(&w, "size 0");
    w = good(SOCK_REC_HELLO); w.ring.size = (1ull << 30) + 1; expect_refused(&w, "size big");
    w = good(SOCK_REC_HELLO); w.ring.size = ~0ull; expect_refused(&w, "size huge");
    w = good(SOCK_REC_ACK); w.status = 1; expect_refused(&w, "ack status > 0");
    w = good(SOCK_REC_ACK); w.ring.addr_len = 600; expect_refused(&w, "ack addr_len");
    w = good(SOCK_REC_REVERT); w.status = -3; expect_refused(&w, "revert status");
    w = good(SOCK_REC_REVERT_ACK); w.status = 4; expect_refused(&w, "revert_ack status");

    /* Mutations: whatever passes is within bounds. */
    unsigned long long seed = 7;
    int passed = 0;
    for (int i = 0; i < 20000; i++) {
        sock_rec_t m = good(1 + (int)(vt_rand(&seed) % 4));
        unsigned char *b = (unsigned char *)&m;
        int flips = 1 + (int)(vt_rand(&seed) % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = vt_rand(&seed) % 48; /* header and the ring's start */
            if (vt_rand(&seed) & 1)
                at = vt_rand(&seed) % sizeof m;
            b[at] = (unsigned char)vt_rand(&seed);
        }
        errno = 0;
        if (sock_rec_check(&m) == 0) {
            passed++;
            VT_CHECK(m.magic == SOCK_REC_MAGIC && m.version == SOCK_WIRE_VERSION);
            VT_CHECK(m.type >= SOCK_REC_HELLO && m.type <= SOCK_REC_REVERT_ACK);
            if (m.type == SOCK_REC_HELLO || (m.type == SOCK_REC_ACK && m.status == 0)) {
                VT_CHECK(m.ring.addr_len >= 1 && m.ring.addr_len <= VMMC_ADDR_MAX);
                VT_CHECK(memchr(m.ring.name, 0, sizeof m.ring.name) != NULL);
                VT_CHECK(m.ring.size > 0 && m.ring.size <= (1ull << 30));
            }
        } else {
            VT_CHECK(errno == EPROTO);
        }
    }
    VT_CHECK(passed > 0 && passed < 20000);
}

static void test_short(void)
{
    sock_rec_t w = good(SOCK_REC_HELLO), r;
    int sv[2];

    /* Nothing comes: timeout, bounded. */
    pair(sv);
    double t0 = vt_now();
    errno = 0;
    VT_CHECK(sock_rec_read(sv[1], &r, 50) == -1 && errno == ETIMEDOUT);
    VT_CHECK(vt_now() - t0 < 30);
    errno = 0;
    VT_CHECK(sock_rec_read(sv[1], &r, 0) == -1 && errno == ETIMEDOUT);
    /* Half a record: timeout too. */
    VT_CHECK(write(sv[0], &w, 100) == 100);
    errno = 0;
    VT_CHECK(sock_rec_read(sv[1], &r, 50) == -1 && errno == ETIMEDOUT);
    /* Then the peer closes: reset. */
    close(sv[0]);
    errno = 0;
    VT_CHECK(sock_rec_read(sv[1], &r, 1000) == -1 && errno == ECONNRESET);
    close(sv[1]);

    /* EOF before any byte, even with no timeout. */
    pair(sv);
    close(sv[0]);
    errno = 0;
    VT_CHECK(sock_rec_read(sv[1], &r, -1) == -1 && errno == ECONNRESET);
    /* Writing to a closed peer: EPIPE, and no SIGPIPE kills us. */
    errno = 0;
    VT_CHECK(sock_rec_write(sv[1], &w) == -1 && errno == EPIPE);
    close(sv[1]);

    /* Not a socket. */
    int p[2];
    VT_CHECK(pipe(p) == 0);
    errno = 0;
    VT_CHECK(sock_rec_read(p[0], &r, 10) == -1 && errno == ENOTSOCK);
    close(p[0]);
    close(p[1]);
}

/* A peer that never reads: the write gives up (VMMC_SOCK_HELLO_TIMEOUT and
 * VMMC_SOCK_REVERT_TIMEOUT are short in this test's environment). */
static void test_write_stuck(void)
{
    int sv[2];
    pair(sv);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sock_rec_t w = good(SOCK_REC_REVERT);
    int rc = 0, n = 0;
    double t0 = vt_now();
    while (rc == 0 && n < 100000) {
        rc = sock_rec_write(sv[0], &w);
        n++;
    }
    VT_CHECK(rc == -1 && errno == ETIMEDOUT);
    VT_CHECK(vt_now() - t0 < 60);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    alarm(120);
    test_round_trip();
    test_split_and_signals();
    test_malformed();
    test_short();
    test_write_stuck();
    printf("t_sock_hello_rec: ok\n");
    return 0;
}
