/* Preload scenarios that wait: non-blocking sockets with poll and with
 * select, epoll (level- and edge-triggered, one-shot) with a pipe and a
 * kernel socket in the same set, signals interrupting a blocking read,
 * a side that computes without calling in, threads. */
#include "pltest.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 20000   /* generous: no test waits this long unless broken */

/* Wait for @p events on @p fd with poll or select (with a pipe that never
 * fires in the set too); returns the events seen. */
static short wait_fd(int fd, short events, int use_select)
{
    static int idle[2] = {-1, -1};
    if (idle[0] < 0)
        CHECK(pipe(idle) == 0, "pipe");
    if (!use_select) {
        struct pollfd p[2] = {{idle[0], POLLIN, 0}, {fd, events, 0}};
        int r = poll(p, 2, WAIT_MS);
        CHECK(r > 0, "poll: %d", r);
        CHECK(!p[0].revents, "the idle pipe fired");
        return p[1].revents;
    }
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_SET(idle[0], &rd);
    if (events & POLLIN)
        FD_SET(fd, &rd);
    if (events & POLLOUT)
        FD_SET(fd, &wr);
    struct timeval tv = {WAIT_MS / 1000, 0};
    int nfds = (fd > idle[0] ? fd : idle[0]) + 1;
    int r = select(nfds, &rd, &wr, NULL, &tv);
    CHECK(r > 0, "select: %d", r);
    CHECK(!FD_ISSET(idle[0], &rd), "the idle pipe fired");
    CHECK(r == FD_ISSET(fd, &rd) + FD_ISSET(fd, &wr), "select's count");
    return (short)((FD_ISSET(fd, &rd) ? POLLIN : 0) | (FD_ISSET(fd, &wr) ? POLLOUT : 0));
}

/* Non-blocking echo server: what it reads waits in a buffer until written. */
static int nb_server(int fd, int use_select)
{
    static unsigned char buf[1 << 18];
    size_t head = 0, len = 0;
    int eof = 0, first = 1;
    set_nonblock(fd, 1);
    while (!eof || len) {
        short ev = (short)((!eof && len < sizeof buf ? POLLIN : 0) | (len ? POLLOUT : 0));
        short got = wait_fd(fd, ev, use_select);
        if (got & POLLIN) {
            size_t tail = (head + len) % sizeof buf;
            size_t room = sizeof buf - len, run = sizeof buf - tail;
            ssize_t r = read(fd, buf + tail, room < run ? room : run);
            if (r > 0) {
                len += (size_t)r;
                if (first)
                    expect_mode(fd);
                first = 0;
            } else if (r == 0) {
                eof = 1;
            } else {
                CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "read");
            }
        }
        if (len && (got & (POLLOUT | POLLIN))) {
            size_t run = sizeof buf - head;
            ssize_t w = write(fd, buf + head, len < run ? len : run);
            if (w > 0) {
                head = (head + (size_t)w) % sizeof buf;
                len -= (size_t)w;
            } else {
                CHECK(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "write");
            }
        }
    }
    CHECK(close(fd) == 0, "close");
    return 0;
}

/* Non-blocking client: connect in progress, then a stream both ways. */
static int nb_client(int port, int use_select)
{
    int family = family_of_env();
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(fd >= 0, "socket");
    close(fd);   /* and again through fcntl, the way older programs do it */
    fd = socket(family, SOCK_STREAM, 0);
    set_nonblock(fd, 1);
    struct sockaddr_storage ss;
    socklen_t len = loop_addr(family, port, &ss);
    int r = connect(fd, (struct sockaddr *)&ss, len);
    CHECK(r == 0 || errno == EINPROGRESS, "non-blocking connect");
    wait_fd(fd, POLLOUT, use_select);
    int err = -1;
    socklen_t el = sizeof err;
    CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0, "SO_ERROR %d",
          err);
    size_t total = 4u << 20, sent = 0, got = 0;
    static unsigned char out[65536], in[65536];
    while (got < total) {
        short ev = (short)(POLLIN | (sent < total ? POLLOUT : 0));
        short rev = wait_fd(fd, ev, use_select);
        if ((rev & POLLOUT) && sent < total) {
            size_t k = total - sent < sizeof out ? total - sent : sizeof out;
            k = k > 1 + sent % 60000 ? 1 + sent % 60000 : k;
            fill(out, k, 41, sent);
            ssize_t w = write(fd, out, k);
            if (w > 0)
                sent += (size_t)w;
            else
                CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "write");
        }
        if (rev & POLLIN) {
            ssize_t n = read(fd, in, sizeof in);
            CHECK(n != 0, "EOF at %zu", got);
            if (n > 0) {
                verify(in, (size_t)n, 41, got);
                got += (size_t)n;
            } else {
                CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "read");
            }
        }
    }
    expect_mode(fd);
    CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
    for (;;) {
        wait_fd(fd, POLLIN, use_select);
        ssize_t n = read(fd, in, 1);
        if (n == 0)
            break;
        CHECK(n < 0 && errno == EAGAIN, "EOF expected");
    }
    close(fd);
    return 0;
}

static int nb_serve(int lfd, int use_select)
{
    int fd = accept(lfd, NULL, NULL);
    CHECK(fd >= 0, "accept");
    int rc = nb_server(fd, use_select);
    close(lfd);
    return rc;
}

static int poll_server(int lfd) { return nb_serve(lfd, 0); }
static int poll_client(int port) { return nb_client(port, 0); }
static int select_server(int lfd) { return nb_serve(lfd, 1); }
static int select_client(int port) { return nb_client(port, 1); }

/* ------------------------------------------------------------------------ */
/* signals */

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

typedef struct {
    pthread_t target;
    volatile int stop;
    int fd;       /* >= 0: write 'g' there after the signals */
} kicker_t;

static void *kicker(void *arg)
{
    kicker_t *k = arg;
    for (int i = 0; !k->stop && (k->fd < 0 || i < 5); i++) {
        usleep(50000);
        pthread_kill(k->target, SIGALRM);
    }
    if (k->fd >= 0)
        write_all(k->fd, "g", 1);
    return NULL;
}

static int eintr_server(int fd)
{
    unsigned char c;
    read_all(fd, &c, 1);
    CHECK(c == 'a', "a");
    expect_mode(fd);
    read_all(fd, &c, 1);
    CHECK(c == 'g', "g");
    write_all(fd, "x", 1);
    CHECK(read(fd, &c, 1) == 0, "EOF");
    close(fd);
    return 0;
}

static int eintr_client(int fd)
{
    write_all(fd, "a", 1);
    /* without SA_RESTART: the blocking read fails with EINTR */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    kicker_t k = {pthread_self(), 0, -1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, kicker, &k) == 0, "pthread_create");
    unsigned char c;
    errno = 0;
    ssize_t r = read(fd, &c, 1);
    k.stop = 1;
    pthread_join(t, NULL);
    CHECK(r == -1 && errno == EINTR, "read without SA_RESTART returned %zd", r);
    CHECK(alarms > 0, "the handler ran");
    expect_mode(fd);
    /* with SA_RESTART: the read goes on through the signals */
    sa.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    int before = alarms;
    kicker_t k2 = {pthread_self(), 0, fd};
    CHECK(pthread_create(&t, NULL, kicker, &k2) == 0, "pthread_create");
    r = read(fd, &c, 1);
    CHECK(r == 1 && c == 'x', "read with SA_RESTART returned %zd", r);
    pthread_join(t, NULL);
    CHECK(alarms - before == 5, "5 signals, %d handled", (int)(alarms - before));
    close(fd);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* a side that computes a while without calling in */

static void compute_1s(void)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    volatile uint64_t x = 1;
    do {
        for (int i = 0; i < 100000; i++)
            x = x * 6364136223846793005ull + 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 1000000000L);
}

static int compute_server(int fd)
{
    unsigned char c;
    read_all(fd, &c, 1);
    expect_mode(fd);
    send_stream(fd, 16u << 20, 31);
    compute_1s();
    recv_stream(fd, 16u << 20, 32);
    close(fd);
    return 0;
}

static int compute_client(int fd)
{
    write_all(fd, "s", 1);
    compute_1s();
    recv_stream(fd, 16u << 20, 31);
    send_stream(fd, 16u << 20, 32);
    unsigned char c;
    CHECK(read(fd, &c, 1) == 0, "EOF");
    expect_mode(fd);
    close(fd);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* threads: four connections at once, a thread each on both sides */

#define NTHREADS 4

static void *serve_one(void *arg)
{
    int fd = (int)(intptr_t)arg;
    static __thread unsigned char b[1 << 16];
    int first = 1;
    for (;;) {
        ssize_t r = read(fd, b, sizeof b);
        CHECK(r >= 0, "read");
        if (r == 0)
            break;
        if (first)
            expect_mode(fd);
        first = 0;
        write_all(fd, b, (size_t)r);
    }
    close(fd);
    return NULL;
}

static int threads_server(int lfd)
{
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        int fd = accept(lfd, NULL, NULL);
        CHECK(fd >= 0, "accept");
        CHECK(pthread_create(&t[i], NULL, serve_one, (void *)(intptr_t)fd) == 0, "thread");
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    close(lfd);
    return 0;
}

static int g_port;
static void *client_one(void *arg)
{
    unsigned seed = (unsigned)(intptr_t)arg;
    int fd = connect_to(family_of_env(), g_port);
    unsigned char *b = malloc(1 << 16), *r = malloc(1 << 16);
    for (int i = 0; i < 500; i++) {
        size_t n = 1 + ((size_t)i * 997 * (seed + 1)) % (1 << 16);
        fill(b, n, seed + (unsigned)i, 0);
        write_all(fd, b, n);
        read_all(fd, r, n);
        verify(r, n, seed + (unsigned)i, 0);
    }
    expect_mode(fd);
    close(fd);
    free(b);
    free(r);
    return NULL;
}

static int threads_client(int port)
{
    g_port = port;
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, client_one, (void *)(intptr_t)(i * 1000)) == 0,
              "thread");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    return 0;
}

extern int epoll_lt_server(int), epoll_et_server(int), epoll_oneshot_server(int);
extern int epoll_client(int);

const scenario_t pl_scen_wait[] = {
    {"poll", poll_server, poll_client, 1, 1, 0},
    {"select", select_server, select_client, 1, 1, 0},
    {"epoll_lt", epoll_lt_server, epoll_client, 1, 1, 0},
    {"epoll_et", epoll_et_server, epoll_client, 1, 1, 0},
    {"epoll_oneshot", epoll_oneshot_server, epoll_client, 1, 1, 0},
    {"eintr", eintr_server, eintr_client, 0, 0, 0},
    {"compute", compute_server, compute_client, 0, 0, 0},
    {"threads", threads_server, threads_client, 1, 1, 0},
    {NULL, NULL, NULL, 0, 0, 0},
};
