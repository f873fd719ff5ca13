/* vmmc bench sock (bench_sock*.c): what its files share. */
#ifndef VMMC_TOOLS_BENCH_SOCK_H
#define VMMC_TOOLS_BENCH_SOCK_H

#include <poll.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "bench.h"

#define BENCH_SOCK_MAX_REPS 64
#define BENCH_SOCK_BOUND_S 120 /* a client or server still running then is stopped */

/* The socket calls of one implementation: the kernel's or vmmc_sock_*. */
typedef struct bench_sock_ops {
    const char *name; /* "tcp", "tcp_spin" or "vmmc": the rows' prefix */
    int (*socket)(int, int, int);
    int (*bind)(int, const struct sockaddr *, socklen_t);
    int (*listen)(int, int);
    int (*accept)(int, struct sockaddr *, socklen_t *, int);
    int (*connect)(int, const struct sockaddr *, socklen_t);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*recv)(int, void *, size_t, int);
    int (*setsockopt)(int, int, int, const void *, socklen_t);
    int (*close)(int);
    int (*poll)(struct pollfd *, nfds_t, int);
} bench_sock_ops_t;

extern const bench_sock_ops_t bench_sock_kernel, bench_sock_kernel_spin, bench_sock_vmmc;

/* A listening socket on 127.0.0.1 (its port in *port) / a connected one
 * with TCP_NODELAY; -1 on failure. */
int bench_sock_listen(const bench_sock_ops_t *o, int *port);
int bench_sock_connect(const bench_sock_ops_t *o, int port);
/* Fork a server pinned to cpu 1 that listens (port in *port) and runs
 * @fn(ops, listening fd, arg), exiting with its status; its pid or -1. */
pid_t bench_sock_server(const bench_sock_ops_t *o, int (*fn)(const bench_sock_ops_t *, int, int),
                        int arg, int *port);
/* Fork a client pinned to cpu 0 (in its own process group, bounded by
 * BENCH_SOCK_BOUND_S) running @fn, which writes its samples to the fd it is
 * given (with @arg); read up to @n of them into @v. Returns how many came; the client's
 * wait status in *status. */
int bench_sock_client(const bench_sock_ops_t *o, const bench_ctx_t *c,
                      int (*fn)(const bench_sock_ops_t *, const bench_ctx_t *, int, int), int arg,
                      double *v, int n, int *status);
/* Note why a client failed (nothing if it exited 0). */
void bench_sock_why(bench_ctx_t *c, const char *what, const char *impl, int status);
/* Report the median of @v[0..n) (values <= 0 are failed runs: then a note). */
void bench_sock_row(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                    double *v, int n, const char *ref);

void bench_sock_rr(bench_ctx_t *c);    /* bench_sock_rr.c: many connections */
void bench_sock_tools(bench_ctx_t *c); /* bench_sock_tools.c: programs through vmmc preload */

#endif
