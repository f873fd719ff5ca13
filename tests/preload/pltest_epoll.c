/* Preload scenarios with epoll: an echo server on two connections, its
 * listener, a pipe and a kernel socket (AF_UNIX) all in one set, fed by a
 * thread, in level-triggered, edge-triggered or one-shot mode. */
#include "pltest.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define NCONN 2
#define NTOK 100
#define STREAM (2u << 20)

enum { M_LT, M_ET, M_ONESHOT };

typedef struct conn {
    int fd;
    unsigned char buf[1 << 17];
    size_t head, len;
    int eof, first;
} conn_t;

static int pfd[2], sp[2];

static void *feeder(void *arg)
{
    (void)arg;
    for (int i = 0; i < NTOK; i++) {
        unsigned char t = (unsigned char)i;
        write_all(pfd[1], &t, 1);
        uint64_t m = 0x1000 + (uint64_t)i;
        write_all(sp[1], &m, sizeof m);
        usleep(1000);
    }
    return NULL;
}

static uint32_t want(conn_t *c, int mode)
{
    uint32_t ev = (!c->eof && c->len < sizeof c->buf ? EPOLLIN : 0) | (c->len ? EPOLLOUT : 0);
    if (mode == M_ONESHOT)
        ev |= EPOLLONESHOT;
    return ev;
}

/* Move what can move; returns 1 once the connection is done. */
static int serve(conn_t *c, int mode, int single)
{
    int moved = 1;
    while (moved) {
        moved = 0;
        while (!c->eof && c->len < sizeof c->buf) {
            size_t tail = (c->head + c->len) % sizeof c->buf;
            size_t room = sizeof c->buf - c->len, run = sizeof c->buf - tail;
            size_t k = room < run ? room : run;
            if (single)
                k = 1;
            ssize_t r = read(c->fd, c->buf + tail, k);
            if (r > 0) {
                if (c->first)
                    expect_mode(c->fd);
                c->first = 0;
                c->len += (size_t)r;
                moved = 1;
                if (single)
                    return 0;
            } else if (r == 0) {
                c->eof = 1;
            } else {
                CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "read");
                break;
            }
            if (mode != M_ET)
                break;   /* level-triggered: one read per event is enough */
        }
        while (c->len) {
            size_t run = sizeof c->buf - c->head;
            ssize_t w = write(c->fd, c->buf + c->head, c->len < run ? c->len : run);
            if (w > 0) {
                c->head = (c->head + (size_t)w) % sizeof c->buf;
                c->len -= (size_t)w;
                moved = 1;
            } else {
                CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "write");
                break;
            }
        }
        if (mode != M_ET)
            break;
    }
    return c->eof && !c->len;
}

static int epoll_server(int lfd, int mode)
{
    errno = 0;
    CHECK(epoll_create(0) == -1 && errno == EINVAL, "epoll_create(0) is EINVAL");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0, "epoll_create1");
    CHECK(pipe(pfd) == 0, "pipe");
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
    CHECK(!vmmc_owns(sp[0]) && !vmmc_owns(pfd[0]), "a pipe and AF_UNIX stay the kernel's");
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev) == 0, "add pipe");
    ev.data.u64 = 2;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, sp[0], &ev) == 0, "add unix");
    ev.data.u64 = 3;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == 0, "add listener");
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == -1 && errno == EEXIST, "EEXIST");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, feeder, NULL) == 0, "thread");
    static conn_t conns[NCONN];
    int accepted = 0, done = 0, toks = 0, msgs = 0, checked = 0;
    while (done < NCONN || toks < NTOK || msgs < NTOK) {
        struct epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, 20000);
        CHECK(n > 0, "epoll_wait: %d (done %d toks %d msgs %d)", n, done, toks, msgs);
        for (int i = 0; i < n; i++) {
            uint64_t d = evs[i].data.u64;
            if (d == 1) {
                unsigned char b[64];
                ssize_t r = read(pfd[0], b, sizeof b);
                CHECK(r > 0, "pipe read");
                for (ssize_t j = 0; j < r; j++, toks++)
                    CHECK(b[j] == (unsigned char)toks, "token %d", toks);
            } else if (d == 2) {
                uint64_t m;
                read_all(sp[0], &m, sizeof m);
                CHECK(m == 0x1000 + (uint64_t)msgs, "unix message %d", msgs);
                msgs++;
            } else if (d == 3) {
                CHECK(accepted < NCONN, "a third connection");
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                CHECK(fd >= 0, "accept4");
                conn_t *c = &conns[accepted++];
                c->fd = fd;
                c->first = 1;
                uint32_t e = EPOLLIN | EPOLLRDHUP;
                if (mode == M_ET)
                    e |= EPOLLOUT | EPOLLET;
                if (mode == M_ONESHOT)
                    e |= EPOLLONESHOT;
                struct epoll_event ce = {.events = e, .data.ptr = c};
                CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce) == 0, "add connection");
            } else {
                conn_t *c = evs[i].data.ptr;
                CHECK(c >= conns && c < conns + NCONN && c->fd > 0, "data of an event");
                int single = !checked && mode != M_ET && !c->eof && c->len == 0;
                int fin = serve(c, mode, single);
                int unread = 0;
                if (single && !c->eof && ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0) {
                    /* bytes left: level-triggered reports the socket again at once;
                     * one-shot does not until re-armed */
                    struct epoll_event e2[8];
                    int m = epoll_wait(ep, e2, 8, 0), seen = 0;
                    CHECK(m >= 0, "epoll_wait 0");
                    for (int j = 0; j < m; j++) {
                        conn_t *o = e2[j].data.ptr;
                        if (o == c) {
                            seen = 1;
                        } else if (mode == M_ONESHOT && o >= conns && o < conns + NCONN) {
                            /* the other connection fired here: re-arm it */
                            struct epoll_event oe = {.events = want(o, mode) | EPOLLRDHUP,
                                                     .data.ptr = o};
                            CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, o->fd, &oe) == 0, "re-arm");
                        }
                    }
                    /* other events taken here come again: the pipe, the unix
                     * socket and the listener are level-triggered */
                    CHECK(seen == (mode == M_LT), "%s with %d bytes unread: %s",
                          mode == M_LT ? "level-triggered" : "one-shot", unread,
                          seen ? "reported" : "not reported");
                    checked = 1;
                }
                if (fin) {
                    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) == 0, "del");
                    errno = 0;
                    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) == -1 && errno == ENOENT,
                          "del twice: ENOENT");
                    CHECK(close(c->fd) == 0, "close");
                    c->fd = -1;
                    done++;
                } else if (mode != M_ET) {
                    struct epoll_event ce = {.events = want(c, mode) | EPOLLRDHUP,
                                             .data.ptr = c};
                    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ce) == 0, "mod");
                }
            }
        }
    }
    pthread_join(t, NULL);
    close(ep);
    close(lfd);
    return 0;
}

int epoll_lt_server(int lfd);
int epoll_et_server(int lfd);
int epoll_oneshot_server(int lfd);
int epoll_client(int port);

int epoll_lt_server(int lfd) { return epoll_server(lfd, M_LT); }
int epoll_et_server(int lfd) { return epoll_server(lfd, M_ET); }
int epoll_oneshot_server(int lfd) { return epoll_server(lfd, M_ONESHOT); }

typedef struct {
    int fd;
    unsigned seed;
} side_t;

static void *writer(void *arg)
{
    side_t *s = arg;
    send_stream(s->fd, STREAM, s->seed);
    CHECK(shutdown(s->fd, SHUT_WR) == 0, "shutdown");
    return NULL;
}

static void *reader(void *arg)
{
    side_t *s = arg;
    recv_stream(s->fd, STREAM, s->seed);
    unsigned char c;
    CHECK(read(s->fd, &c, 1) == 0, "EOF");
    return NULL;
}

int epoll_client(int port)
{
    side_t s[NCONN];
    pthread_t w[NCONN], r[NCONN];
    for (int i = 0; i < NCONN; i++) {
        s[i].fd = connect_to(family_of_env(), port);
        s[i].seed = 50 + (unsigned)i;
    }
    for (int i = 0; i < NCONN; i++) {
        CHECK(pthread_create(&w[i], NULL, writer, &s[i]) == 0, "thread");
        CHECK(pthread_create(&r[i], NULL, reader, &s[i]) == 0, "thread");
    }
    for (int i = 0; i < NCONN; i++) {
        pthread_join(w[i], NULL);
        pthread_join(r[i], NULL);
        expect_mode(s[i].fd);
        close(s[i].fd);
    }
    return 0;
}
