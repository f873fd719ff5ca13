/* Preload scenarios on one connection: echo (blocking), readv/writev/
 * sendmsg/recvmsg, dup/dup2/fcntl, shutdown and half-close, sendfile. */
#include "pltest.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

/* The echo server: every byte back, until EOF. Checks the upgrade after
 * the first bytes. */
static int echo_server(int fd)
{
    static unsigned char b[1 << 16];
    int first = 1;
    for (;;) {
        ssize_t r = read(fd, b, sizeof b);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r >= 0, "read");
        if (r == 0)
            break;
        if (first)
            expect_mode(fd);
        first = 0;
        write_all(fd, b, (size_t)r);
    }
    CHECK(close(fd) == 0, "close");
    return 0;
}

typedef struct {
    int fd;
    size_t n;
    unsigned seed;
} sender_t;

static void *sender(void *arg)
{
    sender_t *s = arg;
    send_stream(s->fd, s->n, s->seed);
    return NULL;
}

/* Ping-pong of small messages, then a large stream both ways at once. */
static int echo_client(int fd)
{
    unsigned char b[256], r[256];
    for (int i = 0; i < 2000; i++) {
        size_t n = 1 + (size_t)(i * 37) % sizeof b;
        fill(b, n, (unsigned)i, 0);
        write_all(fd, b, n);
        read_all(fd, r, n);
        verify(r, n, (unsigned)i, 0);
        if (i == 0)
            expect_mode(fd);
    }
    sender_t s = {fd, 6u << 20, 77};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, sender, &s) == 0, "pthread_create");
    recv_stream(fd, s.n, s.seed);
    pthread_join(t, NULL);
    expect_mode(fd);
    CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
    CHECK(read(fd, b, 1) == 0, "EOF after the server closed");
    CHECK(close(fd) == 0, "close");
    return 0;
}

/* readv/writev/sendmsg/recvmsg with scattered buffers. */
static int iov_server(int fd)
{
    unsigned char a[7], b[1000], c[50000], d[3];
    for (int round = 0; round < 50; round++) {
        size_t want = sizeof a + sizeof b + sizeof c + sizeof d, got = 0;
        while (got < want) {
            /* recvmsg into the part still missing */
            struct iovec iov[4];
            int n = 0;
            size_t skip = got;
            unsigned char *bufs[4] = {a, b, c, d};
            size_t lens[4] = {sizeof a, sizeof b, sizeof c, sizeof d};
            for (int i = 0; i < 4; i++) {
                if (skip >= lens[i]) {
                    skip -= lens[i];
                    continue;
                }
                iov[n].iov_base = bufs[i] + skip;
                iov[n].iov_len = lens[i] - skip;
                skip = 0;
                n++;
            }
            struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            ssize_t r = recvmsg(fd, &m, 0);
            CHECK(r > 0, "recvmsg round %d", round);
            got += (size_t)r;
        }
        verify(a, sizeof a, (unsigned)round, 0);
        verify(b, sizeof b, (unsigned)round, sizeof a);
        verify(c, sizeof c, (unsigned)round, sizeof a + sizeof b);
        verify(d, sizeof d, (unsigned)round, sizeof a + sizeof b + sizeof c);
        if (round == 0)
            expect_mode(fd);
        struct iovec out[4] = {{d, sizeof d}, {c, sizeof c}, {b, sizeof b}, {a, sizeof a}};
        struct msghdr m = {.msg_iov = out, .msg_iovlen = 4};
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
        CHECK(w == (ssize_t)want, "sendmsg wrote %zd of %zu", w, want);
    }
    CHECK(close(fd) == 0, "close");
    return 0;
}

static int iov_client(int fd)
{
    size_t la = 7, lb = 1000, lc = 50000, ld = 3, all = la + lb + lc + ld;
    unsigned char *buf = malloc(all), *back = malloc(all);
    for (int round = 0; round < 50; round++) {
        fill(buf, all, (unsigned)round, 0);
        struct iovec iov[4] = {{buf, la}, {buf + la, lb}, {buf + la + lb, lc},
                               {buf + la + lb + lc, ld}};
        ssize_t w = writev(fd, iov, 4);
        CHECK(w == (ssize_t)all, "writev wrote %zd of %zu", w, all);
        /* the reply comes in the order d, c, b, a: readv it in odd pieces */
        size_t got = 0;
        while (got < all) {
            size_t left = all - got, p1 = left > 10 ? 10 : left;
            struct iovec in[2] = {{back + got, p1}, {back + got + p1, left - p1}};
            ssize_t r = readv(fd, in, 2);
            CHECK(r > 0, "readv");
            got += (size_t)r;
        }
        verify(back, ld, (unsigned)round, la + lb + lc);
        verify(back + ld, lc, (unsigned)round, la + lb);
        verify(back + ld + lc, lb, (unsigned)round, la);
        verify(back + ld + lc + lb, la, (unsigned)round, 0);
    }
    expect_mode(fd);
    CHECK(close(fd) == 0, "close");
    free(buf);
    free(back);
    return 0;
}

/* dup, dup2, dup3, F_DUPFD_CLOEXEC and O_NONBLOCK shared by the copies. */
static int dup_client(int fd)
{
    unsigned char b[100], r[100];
    fill(b, sizeof b, 5, 0);
    write_all(fd, b, sizeof b);
    read_all(fd, r, sizeof r);
    verify(r, sizeof r, 5, 0);
    expect_mode(fd);
    int d1 = dup(fd);
    CHECK(d1 >= 0, "dup");
    int d2 = dup2(fd, 200);
    CHECK(d2 == 200, "dup2 -> %d", d2);
    int d3 = dup3(fd, 201, O_CLOEXEC);
    CHECK(d3 == 201, "dup3");
    CHECK(fcntl(d3, F_GETFD) == FD_CLOEXEC, "dup3 O_CLOEXEC");
    int d4 = fcntl(fd, F_DUPFD_CLOEXEC, 300);
    CHECK(d4 >= 300, "F_DUPFD_CLOEXEC");
    if (getenv("PL_EXPECT") && !strcmp(getenv("PL_EXPECT"), "vmmc"))
        CHECK(vmmc_owns(d1) && vmmc_owns(d2) && vmmc_owns(d3) && vmmc_owns(d4),
              "the copies are vmmc sockets");
    /* O_NONBLOCK set through one copy holds for all (one open file) */
    set_nonblock(d2, 1);
    CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK, "O_NONBLOCK seen through the original");
    errno = 0;
    CHECK(read(d1, r, 1) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK),
          "non-blocking read with nothing there");
    set_nonblock(fd, 0);
    CHECK(!(fcntl(d4, F_GETFL) & O_NONBLOCK), "blocking again through another copy");
    /* write on one copy, read on another, close the original */
    fill(b, sizeof b, 6, 0);
    write_all(d1, b, 50);
    CHECK(close(fd) == 0, "close original");
    write_all(d2, b + 50, 50);
    read_all(d3, r, sizeof r);
    verify(r, sizeof r, 6, 0);
    /* dup2 over a vmmc socket replaces it */
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    CHECK(dup2(p[0], d4) == d4, "dup2 over a socket");
    CHECK(!vmmc_owns(d4), "a pipe now");
    CHECK(write(p[1], "z", 1) == 1 && read(d4, r, 1) == 1 && r[0] == 'z', "pipe through d4");
    close(p[0]);
    close(p[1]);
    close(d4);
    CHECK(close(d1) == 0 && close(d2) == 0, "close");
    CHECK(shutdown(d3, SHUT_WR) == 0, "shutdown");
    CHECK(read(d3, r, 1) == 0, "EOF");
    CHECK(close(d3) == 0, "close last");
    return 0;
}

/* Half-close: the client's FIN, then the server still sends. */
static int shut_server(int fd)
{
    recv_stream(fd, 1 << 20, 11);
    expect_mode(fd);
    unsigned char c;
    CHECK(read(fd, &c, 1) == 0, "EOF after the client's shutdown");
    CHECK(read(fd, &c, 1) == 0, "EOF again");
    send_stream(fd, 1 << 20, 12);
    CHECK(close(fd) == 0, "close");
    return 0;
}

static int shut_client(int fd)
{
    send_stream(fd, 1 << 20, 11);
    CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
    errno = 0;
    CHECK(send(fd, "x", 1, MSG_NOSIGNAL) == -1 && errno == EPIPE, "send after SHUT_WR: EPIPE");
    recv_stream(fd, 1 << 20, 12);
    expect_mode(fd);
    unsigned char c;
    CHECK(read(fd, &c, 1) == 0, "EOF");
    CHECK(close(fd) == 0, "close");
    return 0;
}

/* sendfile from a file, with an offset pointer and from the file position. */
static int sendfile_server(int fd)
{
    char path[] = "/tmp/pltest-sendfile-XXXXXX";
    int f = mkstemp(path);
    CHECK(f >= 0, "mkstemp");
    unlink(path);
    size_t n = (2u << 20) + 123;
    unsigned char *b = malloc(n);
    fill(b, n, 21, 0);
    write_all(f, b, n);
    free(b);
    unsigned char go;
    read_all(fd, &go, 1);
    expect_mode(fd);
    off_t off = 0;
    while ((size_t)off < n / 2) {   /* first half: offset pointer */
        ssize_t w = sendfile(fd, f, &off, n / 2 - (size_t)off);
        CHECK(w > 0, "sendfile with offset");
    }
    CHECK(lseek(f, off, SEEK_SET) == off, "lseek");
    size_t done = (size_t)off;
    while (done < n) {   /* second half: the file position */
        ssize_t w = sendfile(fd, f, NULL, n - done);
        CHECK(w > 0, "sendfile from the position");
        done += (size_t)w;
    }
    CHECK(lseek(f, 0, SEEK_CUR) == (off_t)n, "file position advanced");
    close(f);
    CHECK(close(fd) == 0, "close");
    return 0;
}

static int sendfile_client(int fd)
{
    write_all(fd, "g", 1);
    recv_stream(fd, (2u << 20) + 123, 21);
    expect_mode(fd);
    unsigned char c;
    CHECK(read(fd, &c, 1) == 0, "EOF");
    close(fd);
    return 0;
}

const scenario_t pl_scen_basic[] = {
    {"echo", echo_server, echo_client, 0, 0, 0},
    {"lclose", echo_server, echo_client, 0, 0, 1},
    {"iov", iov_server, iov_client, 0, 0, 0},
    {"dup", echo_server, dup_client, 0, 0, 0},
    {"shutdown", shut_server, shut_client, 0, 0, 0},
    {"sendfile", sendfile_server, sendfile_client, 0, 0, 0},
    {NULL, NULL, NULL, 0, 0, 0},
};
