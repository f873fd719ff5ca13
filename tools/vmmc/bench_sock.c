/* vmmc bench sock: stream sockets over vmmc beside the kernel's TCP on
 * loopback, measured in the same run by the same code.
 *
 * Each figure is measured twice by one driver that calls the socket calls
 * through a table: the kernel's (libc socket, send, recv, epoll) and vmmc's
 * (vmmc_sock_*, the native API of vmmc/sock.h, whose connections upgrade to
 * vmmc after the TCP handshake). A client process pinned to cpu 0 and a
 * server process pinned to cpu 1 on 127.0.0.1, TCP_NODELAY on both ends.
 * Rows (the vmmc ones with their ratio to the kernel's of the same run):
 *
 *   tcp_lat / vmmc_lat      us     ping-pong, half the round trip, at 1 B,
 *                                  64 B, 1 KiB and 16 KiB (blocking calls)
 *   tcp_bw / vmmc_bw        GB/s   one-way stream of 64 KiB and of 1 MiB
 *                                  writes, until the reader acknowledges
 *   vmmc_zcopy_bw           GB/s   the same streams with posted receives on
 *                                  (VMMC_SOCK_ZCOPY=256K in its processes):
 *                                  1 MiB reads placed directly, one copy
 *   tcp_spin_lat, _bw              the kernel's TCP with receivers that spin
 *                                  (recv MSG_DONTWAIT until data) as vmmc's
 *                                  spin before they sleep: what is left when
 *                                  the kernel's wake-up is taken out
 *   tcp_rr_c16, _c64 /      Mmsg/s a request/response server (one thread,
 *   vmmc_rr_c16, _c64              epoll for the kernel, vmmc_sock_poll for
 *                                  vmmc) and one client process driving 16
 *                                  or 64 connections, each with one 64-byte
 *                                  request outstanding: replies per second
 *
 * bench_sock_tools.c adds unmodified programs run through `vmmc preload`
 * beside the same programs on the kernel (sockperf, redis-benchmark), when
 * the preload library and the programs are installed.
 *
 * Every sample is one timed run; figures are medians over the repetitions.
 * A run that does not finish within its bound is stopped (alarm) and its
 * figure is replaced by a note. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_sock.h"
#include "vmmc/sock.h"

/* ------------------------------------------------------------------------- */
/* The two implementations of the socket calls                               */

/* glibc's prototypes take transparent unions under _GNU_SOURCE: wrap. */
static int k_socket(int d, int t, int p) { return socket(d, t, p); }
static int k_bind(int fd, const struct sockaddr *a, socklen_t l) { return bind(fd, a, l); }
static int k_listen(int fd, int n) { return listen(fd, n); }
static int k_accept(int fd, struct sockaddr *a, socklen_t *l, int f)
{
    return accept4(fd, a, l, f);
}
static int k_connect(int fd, const struct sockaddr *a, socklen_t l) { return connect(fd, a, l); }
static ssize_t k_send(int fd, const void *b, size_t n, int f) { return send(fd, b, n, f); }
static ssize_t k_recv(int fd, void *b, size_t n, int f) { return recv(fd, b, n, f); }
static int k_setsockopt(int fd, int l, int n, const void *v, socklen_t len)
{
    return setsockopt(fd, l, n, v, len);
}
/* Busy-polling receive: the kernel's TCP with the receiver spinning as
 * vmmc's does (VMMC_SOCK_SPIN) instead of sleeping in the kernel. */
static ssize_t k_recv_spin(int fd, void *b, size_t n, int f)
{
    for (;;) {
        ssize_t r = recv(fd, b, n, f | MSG_DONTWAIT);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || (f & MSG_DONTWAIT))
            return r;
        bench_cpu_relax();
    }
}
static int k_close(int fd) { return close(fd); }
static int k_poll(struct pollfd *f, nfds_t n, int t) { return poll(f, n, t); }

const bench_sock_ops_t bench_sock_kernel = {
    .name = "tcp", .socket = k_socket, .bind = k_bind, .listen = k_listen,
    .accept = k_accept, .connect = k_connect, .send = k_send, .recv = k_recv,
    .setsockopt = k_setsockopt, .close = k_close, .poll = k_poll,
};

const bench_sock_ops_t bench_sock_kernel_spin = {
    .name = "tcp_spin", .socket = k_socket, .bind = k_bind, .listen = k_listen,
    .accept = k_accept, .connect = k_connect, .send = k_send, .recv = k_recv_spin,
    .setsockopt = k_setsockopt, .close = k_close, .poll = k_poll,
};

const bench_sock_ops_t bench_sock_vmmc = {
    .name = "vmmc", .socket = vmmc_sock_socket, .bind = vmmc_sock_bind,
    .listen = vmmc_sock_listen, .accept = vmmc_sock_accept, .connect = vmmc_sock_connect,
    .send = vmmc_sock_send, .recv = vmmc_sock_recv, .setsockopt = vmmc_sock_setsockopt,
    .close = vmmc_sock_close, .poll = vmmc_sock_poll,
};

/* vmmc with posted receives on: bench_sock_client sets VMMC_SOCK_ZCOPY
 * in its processes (they read the settings once, at their first call). */
static const bench_sock_ops_t bench_sock_vmmc_zcopy = {
    .name = "vmmc_zcopy", .socket = vmmc_sock_socket, .bind = vmmc_sock_bind,
    .listen = vmmc_sock_listen, .accept = vmmc_sock_accept, .connect = vmmc_sock_connect,
    .send = vmmc_sock_send, .recv = vmmc_sock_recv, .setsockopt = vmmc_sock_setsockopt,
    .close = vmmc_sock_close, .poll = vmmc_sock_poll,
};

/* ------------------------------------------------------------------------- */
/* Helpers                                                                    */

static int send_all(const bench_sock_ops_t *o, int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = o->send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int recv_all(const bench_sock_ops_t *o, int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t k = o->recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void nodelay(const bench_sock_ops_t *o, int fd)
{
    int one = 1;
    o->setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A listening socket on 127.0.0.1, port chosen by the kernel (*port). */
int bench_sock_listen(const bench_sock_ops_t *o, int *port)
{
    int fd = o->socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (o->bind(fd, (struct sockaddr *)&a, sizeof a) || o->listen(fd, 256) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        o->close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int bench_sock_connect(const bench_sock_ops_t *o, int port)
{
    int fd = o->socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (o->connect(fd, (struct sockaddr *)&a, sizeof a)) {
        o->close(fd);
        return -1;
    }
    nodelay(o, fd);
    return fd;
}

pid_t bench_sock_server(const bench_sock_ops_t *o, int (*fn)(const bench_sock_ops_t *, int, int),
                          int arg, int *port)
{
    int p[2];
    if (pipe(p))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        bench_pin_cpu(1);
        alarm(BENCH_SOCK_BOUND_S);
        int lport = -1, lfd = bench_sock_listen(o, &lport);
        if (write(p[1], &lport, sizeof lport) != sizeof lport || lfd < 0)
            _exit(2);
        close(p[1]);
        _exit(fn(o, lfd, arg) ? 1 : 0);
    }
    close(p[1]);
    int got = -1;
    if (read(p[0], &got, sizeof got) != sizeof got || got <= 0) {
        close(p[0]);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    close(p[0]);
    *port = got;
    return pid;
}

/* ------------------------------------------------------------------------- */
/* Ping-pong and stream: one connection, commands from the client            */

enum { CMD_PP = 1, CMD_BW = 2, CMD_END = 3 };
typedef struct cmd {
    uint32_t op;
    uint32_t size;  /* message (PP) or write (BW) size */
    uint64_t count; /* round trips (PP) or bytes (BW) */
} cmd_t;

#define BIG (1u << 20)

static int serve_one(const bench_sock_ops_t *o, int lfd, int unused)
{
    (void)unused;
    int fd = o->accept(lfd, NULL, NULL, 0);
    if (fd < 0)
        return -1;
    nodelay(o, fd);
    char *buf = malloc(BIG);
    int rc = buf ? 0 : -1;
    cmd_t c;
    while (!rc && !recv_all(o, fd, &c, sizeof c) && c.op != CMD_END) {
        if (c.op == CMD_PP && c.size <= BIG) {
            for (uint64_t i = 0; i < c.count && !rc; i++)
                rc = recv_all(o, fd, buf, c.size) || send_all(o, fd, buf, c.size) ? -1 : 0;
        } else if (c.op == CMD_BW) {
            for (uint64_t left = c.count; left && !rc;) {
                ssize_t k = o->recv(fd, buf, left < BIG ? left : BIG, 0);
                if (k < 0 && errno == EINTR)
                    continue;
                if (k <= 0)
                    rc = -1;
                else
                    left -= (uint64_t)k;
            }
            rc = rc || send_all(o, fd, "a", 1) ? -1 : 0;
        } else {
            rc = -1;
        }
    }
    free(buf);
    o->close(fd);
    o->close(lfd);
    return rc;
}

/* @n round trips of @size bytes; seconds taken, or < 0 on failure. */
static double pingpong(const bench_sock_ops_t *o, int fd, char *buf, size_t size, uint64_t n)
{
    cmd_t c = {CMD_PP, (uint32_t)size, n};
    if (send_all(o, fd, &c, sizeof c))
        return -1;
    double t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        if (send_all(o, fd, buf, size) || recv_all(o, fd, buf, size))
            return -1;
    return (bench_now_ns() - t0) / 1e9;
}

static double stream(const bench_sock_ops_t *o, int fd, char *buf, size_t wsize, uint64_t total)
{
    cmd_t c = {CMD_BW, (uint32_t)wsize, total};
    if (send_all(o, fd, &c, sizeof c))
        return -1;
    double t0 = bench_now_ns();
    for (uint64_t left = total; left;) {
        size_t k = left < wsize ? (size_t)left : wsize;
        if (send_all(o, fd, buf, k))
            return -1;
        left -= k;
    }
    char ack;
    if (recv_all(o, fd, &ack, 1))
        return -1;
    return (bench_now_ns() - t0) / 1e9;
}

static const size_t lat_sizes[] = {1, 64, 1024, 16384};
static const size_t bw_sizes[] = {65536, BIG};
#define NLAT (sizeof lat_sizes / sizeof *lat_sizes)
#define NBW (sizeof bw_sizes / sizeof *bw_sizes)

/* The client of one implementation: every latency and bandwidth sample,
 * written to @out as doubles in row order (NLAT x reps, then NBW x reps);
 * a failed sample is written as -1. */
static int client_pp_bw(const bench_sock_ops_t *o, const bench_ctx_t *c, int bw_only, int out)
{
    int port;
    pid_t srv = bench_sock_server(o, serve_one, 0, &port);
    if (srv < 0)
        return -1;
    int fd = bench_sock_connect(o, port);
    char *buf = calloc(1, BIG);
    int ok = fd >= 0 && buf;
    for (size_t s = 0; s < NLAT; s++) {
        /* calibrate: about 20 ms (quick) or 60 ms per sample */
        double warm = ok ? pingpong(o, fd, buf, lat_sizes[s], 200) : -1;
        uint64_t n = 200;
        if (warm > 0)
            n = (uint64_t)((c->quick ? 0.02 : 0.06) / (warm / 200));
        n = n < 200 ? 200 : n > 200000 ? 200000 : n;
        for (int r = 0; r < c->reps; r++) {
            double t = !ok ? -1 : bw_only ? 1 : pingpong(o, fd, buf, lat_sizes[s], n);
            double v = t > 0 ? t / (double)n / 2 * 1e6 : -1;
            ok = ok && t > 0;
            if (write(out, &v, sizeof v) != sizeof v)
                return -1;
        }
    }
    uint64_t total = c->quick ? (16u << 20) : (128u << 20);
    for (size_t s = 0; s < NBW; s++) {
        if (ok)
            ok = stream(o, fd, buf, bw_sizes[s], total / 4) > 0; /* warm-up */
        for (int r = 0; r < c->reps; r++) {
            double t = ok ? stream(o, fd, buf, bw_sizes[s], total) : -1;
            double v = t > 0 ? (double)total / t / 1e9 : -1;
            ok = ok && t > 0;
            if (write(out, &v, sizeof v) != sizeof v)
                return -1;
        }
    }
    if (ok) {
        cmd_t end = {CMD_END, 0, 0};
        send_all(o, fd, &end, sizeof end);
    }
    free(buf);
    if (fd >= 0)
        o->close(fd);
    int st = 0;
    waitpid(srv, &st, 0);
    return ok && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

int bench_sock_client(const bench_sock_ops_t *o, const bench_ctx_t *c,
                      int (*fn)(const bench_sock_ops_t *, const bench_ctx_t *, int, int), int arg,
                      double *v, int n, int *status)
{
    int p[2];
    if (pipe(p))
        return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return 0;
    }
    if (pid == 0) {
        close(p[0]);
        setpgid(0, 0); /* its server with it, on a timeout */
        if (o == &bench_sock_vmmc_zcopy)
            setenv("VMMC_SOCK_ZCOPY", "256K", 1);
        bench_pin_cpu(0);
        alarm(BENCH_SOCK_BOUND_S);
        _exit(fn(o, c, arg, p[1]) ? 1 : 0);
    }
    close(p[1]);
    int got = 0;
    while (got < n) {
        ssize_t k = read(p[0], &v[got], sizeof *v);
        if (k < 0 && errno == EINTR)
            continue;
        if (k != sizeof *v)
            break;
        got++;
    }
    close(p[0]);
    *status = 0;
    waitpid(pid, status, 0);
    kill(-pid, SIGKILL); /* a server left behind */
    return got;
}

void bench_sock_row(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                    double *v, int n, const char *ref)
{
    double ok[BENCH_SOCK_MAX_REPS];
    int m = 0;
    for (int i = 0; i < n && m < BENCH_SOCK_MAX_REPS; i++)
        if (v[i] > 0)
            ok[m++] = v[i];
    if (m < n || !m) {
        bench_note(c, "sock: %s at %zu B not measured: %d of %d runs failed", metric, size,
                   n - m, n);
        return;
    }
    bench_report(c, metric, size, unit, bench_stats(ok, m), ref);
}

void bench_sock_why(bench_ctx_t *c, const char *what, const char *impl, int st)
{
    if (WIFSIGNALED(st))
        bench_note(c, "sock: the %s %s client was killed by signal %d%s", impl, what,
                   WTERMSIG(st), WTERMSIG(st) == SIGALRM ? " (did not finish in time)" : "");
    else if (WIFEXITED(st) && WEXITSTATUS(st))
        bench_note(c, "sock: the %s %s run failed (exit %d)", impl, what, WEXITSTATUS(st));
}

static void run_pp_bw(bench_ctx_t *c)
{
    enum { NIMPL = 4, RING = 3 };
    const bench_sock_ops_t *impl[NIMPL] = {&bench_sock_kernel, &bench_sock_kernel_spin,
                                           &bench_sock_vmmc, &bench_sock_vmmc_zcopy};
    int per = (int)(NLAT + NBW) * c->reps;
    double *v = calloc((size_t)per * NIMPL, sizeof *v);
    if (!v)
        return;
    for (int i = 0; i < NIMPL; i++) {
        int st = 0;
        for (int k = 0; k < per; k++)
            v[i * per + k] = -1;
        bench_sock_client(impl[i], c, client_pp_bw, i == RING, v + i * per, per, &st);
        bench_sock_why(c, "ping-pong/stream", impl[i]->name, st);
    }
    char metric[32];
    for (int i = 0; i < RING; i++)
        for (size_t s = 0; s < NLAT; s++) {
            snprintf(metric, sizeof metric, "%s_lat", impl[i]->name);
            bench_sock_row(c, metric, lat_sizes[s], "us", v + i * per + s * (size_t)c->reps,
                           c->reps, i ? "sock/tcp_lat" : NULL);
        }
    for (int i = 0; i < NIMPL; i++)
        for (size_t s = 0; s < NBW; s++) {
            snprintf(metric, sizeof metric, "%s_bw", impl[i]->name);
            bench_sock_row(c, metric, bw_sizes[s], "GB/s",
                           v + i * per + (NLAT + s) * (size_t)c->reps, c->reps,
                           i ? "sock/tcp_bw" : NULL);
        }
    free(v);
}

/* ------------------------------------------------------------------------- */

static int sock_run(bench_ctx_t *c)
{
    signal(SIGPIPE, SIG_IGN);
    if (c->reps > BENCH_SOCK_MAX_REPS)
        c->reps = BENCH_SOCK_MAX_REPS;
    run_pp_bw(c);
    bench_sock_rr(c);
    bench_sock_tools(c);
    return 0;
}

BENCH_SUITE(sock_suite, .name = "sock",
            .help = "stream sockets: vmmc_sock_* beside kernel TCP (latency, bandwidth, "
                    "many connections), and programs through vmmc preload",
            .nranks = 0, .run = sock_run);
