/* Running external programs for the "peers" suite: each in its own process
 * group with a time limit, killed on expiry; ports, output parsing. */
#ifndef VMMC_BENCH_PROC_H
#define VMMC_BENCH_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include "bench.h"

/* Is @prog an executable in $PATH? Its full path into @full (if not NULL). */
int proc_in_path(const char *prog, char *full, size_t n);
pid_t proc_spawn(char *const argv[], char *const env[], int cpu, int outfd);
void proc_stop_group(pid_t pid);
int proc_run_capture(char *const argv[], char *const env[], int cpu, double timeout_s, char **out);
int proc_free_port(int type);
int proc_wait_port(pid_t server, int port, int udp, double timeout_s);
const char *proc_why(int rc);
const char *proc_find_line(const char *s, const char *prefix);
/* Ignore SIGPIPE; on SIGTERM/SIGINT kill the running program's group, then
 * leave with the signal. */
void proc_catch_stop(void);

/* bench_child.c: run a benchmark program (@argv, @env, at most @timeout_s),
 * hand each of its rows "<kind> <size> <median> <min> <max>" to @row, which
 * reports it and returns 1 (or 0: not a row of ours). A run that failed or
 * gave no row is noted as "<name> not measured". The number of rows. */
typedef int (*bench_row_fn)(bench_ctx_t *c, void *arg, const char *kind, size_t size,
                            bench_stat_t st);
int bench_child_rows(bench_ctx_t *c, char *const argv[], char *const env[], double timeout_s,
                     const char *name, bench_row_fn row, void *arg);

/* bench_peers.c: one sockperf UDP ping-pong of 64 B on loopback (@busy:
 * both sides busy-poll with --nonblocked); the median one-way latency in
 * us into *@val. 0, or -1 with a note. */
int bench_sockperf_udp(bench_ctx_t *c, int busy, double *val);

#endif
