/* vmmc bench sock: a request/response server under many connections.
 *
 * The server is one thread: the kernel's runs an epoll loop (level
 * triggered), vmmc's a vmmc_sock_poll loop over its connections (the
 * readiness call of vmmc/sock.h: the kernel alone does not see bytes that
 * came through vmmc). It reads 64-byte requests and answers each with 64
 * bytes. The client process opens 16 or 64 connections, keeps one request
 * outstanding on each, and counts replies over timed windows (poll for the
 * kernel, vmmc_sock_poll for vmmc): rows tcp_rr_c<N> and vmmc_rr_c<N>, in
 * millions of replies per second, the vmmc ones with their ratio to the
 * kernel's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_sock.h"

#define REQ 64
#define MAX_CONN 64

typedef struct rr_conn {
    int fd;
    size_t have; /* bytes of the current request or reply read */
} rr_conn_t;

/* Read what @c has; answer every complete request. -1 at EOF or error. */
static int rr_serve(const bench_sock_ops_t *o, rr_conn_t *c)
{
    char buf[REQ];
    for (;;) {
        ssize_t k = o->recv(c->fd, buf, REQ - c->have, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k <= 0)
            return -1;
        c->have += (size_t)k;
        if (c->have == REQ) {
            c->have = 0;
            for (size_t off = 0; off < REQ;) {
                ssize_t w = o->send(c->fd, buf + off, REQ - off, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    return -1;
                off += (size_t)w;
            }
        }
    }
}

static int rr_server(const bench_sock_ops_t *o, int lfd, int nconn)
{
    rr_conn_t cs[MAX_CONN];
    struct pollfd pf[MAX_CONN];
    int ep = o == &bench_sock_kernel ? epoll_create1(0) : -1;
    for (int i = 0; i < nconn; i++) {
        cs[i].fd = o->accept(lfd, NULL, NULL, 0);
        cs[i].have = 0;
        if (cs[i].fd < 0)
            return -1;
        int one = 1;
        o->setsockopt(cs[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pf[i] = (struct pollfd){cs[i].fd, POLLIN, 0};
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev))
            return -1;
    }
    int open = nconn;
    while (open > 0) {
        struct epoll_event evs[MAX_CONN];
        int n;
        if (ep >= 0)
            n = epoll_wait(ep, evs, MAX_CONN, -1);
        else
            n = o->poll(pf, (nfds_t)nconn, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        for (int j = 0; j < (ep >= 0 ? n : nconn); j++) {
            int i = ep >= 0 ? (int)evs[j].data.u32 : j;
            if (ep < 0 && (pf[i].fd < 0 || !pf[i].revents))
                continue;
            if (rr_serve(o, &cs[i]) < 0) {
                if (ep >= 0)
                    epoll_ctl(ep, EPOLL_CTL_DEL, cs[i].fd, NULL);
                o->close(cs[i].fd);
                pf[i].fd = -1;
                open--;
            }
        }
    }
    if (ep >= 0)
        close(ep);
    o->close(lfd);
    return 0;
}

/* Replies completed in @secs, driving @n connections closed-loop. */
static long rr_drive(const bench_sock_ops_t *o, rr_conn_t *cs, struct pollfd *pf, int n,
                     double secs)
{
    char buf[REQ];
    long done = 0;
    double end = bench_now_ns() + secs * 1e9;
    while (bench_now_ns() < end) {
        int k = o->poll(pf, (nfds_t)n, 10000);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            fprintf(stderr, "bench sock: %s: no reply on any of %d connections in 10 s (%s)\n",
                    o->name, n, k ? strerror(errno) : "poll timed out");
            return -1; /* 10 s without a reply on any connection */
        }
        for (int i = 0; i < n; i++) {
            if (!pf[i].revents)
                continue;
            if (pf[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                fprintf(stderr, "bench sock: %s: connection %d: revents 0x%x\n", o->name, i,
                        pf[i].revents);
                return -1;
            }
            ssize_t r = o->recv(cs[i].fd, buf, REQ - cs[i].have, MSG_DONTWAIT);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                continue;
            if (r <= 0) {
                fprintf(stderr, "bench sock: %s: connection %d: recv: %s\n", o->name, i,
                        r ? strerror(errno) : "end of stream");
                return -1;
            }
            cs[i].have += (size_t)r;
            if (cs[i].have == REQ) {
                cs[i].have = 0;
                done++;
                if (o->send(cs[i].fd, buf, REQ, MSG_NOSIGNAL) != REQ) {
                    fprintf(stderr, "bench sock: %s: connection %d: send: %s\n", o->name, i,
                            strerror(errno));
                    return -1;
                }
            }
        }
    }
    return done;
}

static int rr_client(const bench_sock_ops_t *o, const bench_ctx_t *c, int nconn, int out)
{
    int port;
    pid_t srv = bench_sock_server(o, rr_server, nconn, &port);
    if (srv < 0)
        return -1;
    rr_conn_t cs[MAX_CONN];
    struct pollfd pf[MAX_CONN];
    char req[REQ];
    memset(req, 'q', sizeof req);
    int ok = 1;
    for (int i = 0; i < nconn; i++) {
        cs[i].fd = ok ? bench_sock_connect(o, port) : -1;
        cs[i].have = 0;
        pf[i] = (struct pollfd){cs[i].fd, POLLIN, 0};
        ok = ok && cs[i].fd >= 0 && o->send(cs[i].fd, req, REQ, MSG_NOSIGNAL) == REQ;
    }
    if (ok)
        ok = rr_drive(o, cs, pf, nconn, 0.05) > 0; /* warm-up */
    double secs = c->quick ? 0.1 : 0.3;
    for (int r = 0; r < c->reps; r++) {
        double t0 = bench_now_ns();
        long done = ok ? rr_drive(o, cs, pf, nconn, secs) : -1;
        double v = done > 0 ? (double)done / ((bench_now_ns() - t0) / 1e9) / 1e6 : -1;
        ok = ok && done > 0;
        if (write(out, &v, sizeof v) != sizeof v)
            return -1;
    }
    for (int i = 0; i < nconn; i++)
        if (cs[i].fd >= 0)
            o->close(cs[i].fd);
    int st = 0;
    waitpid(srv, &st, 0);
    return ok && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

void bench_sock_rr(bench_ctx_t *c)
{
    static const int conns[] = {16, 64};
    const bench_sock_ops_t *impl[2] = {&bench_sock_kernel, &bench_sock_vmmc};
    double v[2][BENCH_SOCK_MAX_REPS];
    for (size_t k = 0; k < sizeof conns / sizeof *conns; k++) {
        for (int i = 0; i < 2; i++) {
            int st = 0;
            for (int r = 0; r < c->reps; r++)
                v[i][r] = -1;
            bench_sock_client(impl[i], c, rr_client, conns[k], v[i], c->reps, &st);
            bench_sock_why(c, "request/response", impl[i]->name, st);
        }
        char metric[32], ref[40];
        snprintf(ref, sizeof ref, "sock/tcp_rr_c%d", conns[k]);
        for (int i = 0; i < 2; i++) {
            snprintf(metric, sizeof metric, "%s_rr_c%d", impl[i]->name, conns[k]);
            bench_sock_row(c, metric, REQ, "Mmsg/s", v[i], c->reps, i ? ref : NULL);
        }
    }
}
