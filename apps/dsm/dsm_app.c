/* The DSM applications' common frame (dsm_app.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dsm_app.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vmmc/vmmc.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(const char *name, long def_n, long min_n, long max_n, long def_iters,
                  long max_iters)
{
    fprintf(stderr,
            "usage: %s [-n size] [-i iterations]\n"
            "  -n size        problem size, %ld..%ld (default %ld)\n"
            "  -i iterations  1..%ld (default %ld)\n"
            "Run it in a job: vmmc run -n 2 -- %s\n",
            name, min_n, max_n, def_n, max_iters, def_iters, name);
}

static long parse_num(const char *name, const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "%s: %s '%s': expected an integer from %ld to %ld\n", name, opt, s, min,
                max);
        exit(2);
    }
    return v;
}

void app_start(dsm_app_t *a, const char *name, int argc, char **argv, long def_n, long min_n,
               long max_n, long def_iters, long max_iters)
{
    memset(a, 0, sizeof *a);
    a->name = name;
    a->n = def_n;
    a->iters = def_iters;
    int c;
    while ((c = getopt(argc, argv, "n:i:h")) != -1) {
        switch (c) {
        case 'n':
            a->n = parse_num(name, "-n", optarg, min_n, max_n);
            break;
        case 'i':
            a->iters = parse_num(name, "-i", optarg, 1, max_iters);
            break;
        case 'h':
            usage(name, def_n, min_n, max_n, def_iters, max_iters);
            exit(0);
        default:
            usage(name, def_n, min_n, max_n, def_iters, max_iters);
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", name, argv[optind]);
        usage(name, def_n, min_n, max_n, def_iters, max_iters);
        exit(2);
    }
    int rc = vmmc_dsm_init(NULL);
    if (rc < 0) {
        fprintf(stderr, "%s: vmmc_dsm_init: %s (%s)\n", name, vmmc_strerror(rc), vmmc_dsm_last_error());
        exit(1);
    }
    a->rank = vmmc_dsm_rank();
    a->size = vmmc_dsm_size();
    a->verdict = app_shared(a, sizeof *a->verdict, -1);
}

void app_ok(const dsm_app_t *a, int rc, const char *what)
{
    if (rc >= 0)
        return;
    fprintf(stderr, "%s: rank %d: %s: %s (%s)\n", a->name, a->rank, what, vmmc_strerror(rc),
            vmmc_dsm_last_error());
    exit(1);
}

void *app_malloc(const dsm_app_t *a, size_t n, const char *what)
{
    void *p = vmmc_dsm_malloc(n);
    if (!p) {
        fprintf(stderr, "%s: rank %d: vmmc_dsm_malloc(%zu) for %s: %s\n", a->name, a->rank, n,
                what, vmmc_dsm_last_error());
        exit(1);
    }
    return p;
}

void *app_shared_by(dsm_app_t *a, size_t n, int owner)
{
    void *p = NULL;
    if (a->rank == owner)
        p = app_malloc(a, n, "shared data");
    app_ok(a, vmmc_dsm_bcast_ptr(&p, owner), "vmmc_dsm_bcast_ptr");
    return p;
}

void *app_shared(dsm_app_t *a, size_t n, int chunk)
{
    if (chunk < 0)
        return app_shared_by(a, n, 0);
    void *p = NULL;
    if (a->rank == 0) {
        p = vmmc_dsm_malloc_chunk(n, chunk);
        if (!p) {
            fprintf(stderr, "%s: rank 0: vmmc_dsm_malloc_chunk(%zu, %d): %s\n", a->name, n, chunk,
                    vmmc_dsm_last_error());
            exit(1);
        }
    }
    app_ok(a, vmmc_dsm_bcast_ptr(&p, 0), "vmmc_dsm_bcast_ptr");
    return p;
}

void *app_private(const dsm_app_t *a, size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "%s: rank %d: out of memory (%zu bytes)\n", a->name, a->rank, n);
        exit(1);
    }
    return p;
}

void app_barrier(const dsm_app_t *a)
{
    app_ok(a, vmmc_dsm_barrier(), "vmmc_dsm_barrier");
}

void app_lock(const dsm_app_t *a, int id)
{
    app_ok(a, vmmc_dsm_lock(id), "vmmc_dsm_lock");
}

void app_unlock(const dsm_app_t *a, int id)
{
    app_ok(a, vmmc_dsm_unlock(id), "vmmc_dsm_unlock");
}

void app_par_begin(dsm_app_t *a)
{
    app_barrier(a);
    a->t0 = now_s();
}

void app_par_end(dsm_app_t *a)
{
    app_barrier(a);
    a->t_par = now_s() - a->t0;
}

void app_seq_begin(dsm_app_t *a)
{
    a->t0 = now_s();
}

void app_seq_end(dsm_app_t *a)
{
    a->t_seq = now_s() - a->t0;
}

void app_verdict(dsm_app_t *a, int matches, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->detail, sizeof a->detail, fmt, ap);
    va_end(ap);
    *a->verdict = matches ? 1 : 2;
}

int app_finish(dsm_app_t *a)
{
    vmmc_dsm_stats_t st;
    if (a->rank == 0 && vmmc_dsm_stats(&st) == 0)
        printf("%s: %d ranks, n=%ld, %ld iterations, %s mode; rank 0: %llu read faults, "
               "%llu write faults, %llu requests served\n",
               a->name, a->size, a->n, a->iters, vmmc_dsm_mode(),
               (unsigned long long)st.read_faults, (unsigned long long)st.write_faults,
               (unsigned long long)st.requests_served);
    app_barrier(a); /* rank 0 has written the verdict */
    int v = *a->verdict;
    if (a->rank == 0) {
        if (v == 1)
            printf("%s: result matches sequential (%.6fs parallel, %.6fs sequential); %s\n",
                   a->name, a->t_par, a->t_seq, a->detail);
        else
            printf("%s: result DIFFERS from sequential: %s\n", a->name, a->detail);
        fflush(stdout);
    }
    app_barrier(a); /* every rank has read it before the memory goes */
    app_ok(a, vmmc_dsm_finalize(), "vmmc_dsm_finalize");
    if (v != 1 && v != 2) {
        fprintf(stderr, "%s: rank %d: no verdict from rank 0 (%d)\n", a->name, a->rank, v);
        return 1;
    }
    return v == 1 ? 0 : 1;
}

void app_block(const dsm_app_t *a, long n, long *lo, long *hi)
{
    long q = n / a->size, r = n % a->size;
    *lo = a->rank * q + (a->rank < r ? a->rank : r);
    *hi = *lo + q + (a->rank < r);
}
