/* The benchmark instrument's internal interface (tools/vmmc/bench*.c).
 *
 * A suite is a function that measures and reports rows. Suites with
 * nranks == 0 run inside the tool process (machine limits, peers); suites
 * with nranks == 2 run in a job of two ranks started through `vmmc run`,
 * pinned to distinct cores, and only rank 0's reports are kept.
 *
 * Every figure is a median over repetitions after warm-up, with min and max.
 * A row may name a reference ("suite/metric", e.g. "limits/cacheline_oneway")
 * and the framework prints value/reference measured in the same run (at the
 * same size if the reference has that size, else the reference's only or
 * nearest size). Suites use public headers only. */
#ifndef VMMC_TOOLS_BENCH_H
#define VMMC_TOOLS_BENCH_H

#include <stddef.h>

#include "vmmc/vmmc.h"

typedef struct bench_ctx {
    vmmc_ep_t *ep;         /* NULL for nranks == 0 suites */
    int rank, size;
    int quick;             /* --quick: small sizes and few repetitions */
    size_t min_size;       /* sizes to cover, inclusive */
    size_t max_size;
    int reps;              /* repetitions per figure (median/min/max over these) */
    const char *transport; /* "shm", "udp" or "fabric" */
} bench_ctx_t;

typedef struct bench_stat {
    double median, min, max;
} bench_stat_t;

/* Median, min and max of @n samples (sorts @samples in place). */
bench_stat_t bench_stats(double *samples, int n);

/* N1/2: the message size at which bandwidth bw[i] (at sizes[i], increasing
 * sizes, any unit) first reaches half of its peak, interpolated on a log
 * scale between the two sizes around it. */
double bench_n_half(const size_t *sizes, const double *bw, int n);

/* Report one figure. @unit is one of "ns", "us", "GB/s", "Mmsg/s", "B", "x".
 * @ref: "suite/metric" to compute a ratio against, or NULL. Rank 0 only;
 * other ranks' reports are dropped. */
void bench_report(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                  bench_stat_t st, const char *ref);

/* Report a figure that cannot beat @bound ("suite/metric", the same size):
 * its floor if @unit is a time (a latency cannot be below the same ping-pong
 * without the library), its ceiling if a rate (a bandwidth cannot exceed the
 * same copy without the library). The floor must be measured the same way:
 * same processes and pinning, same timing, same iteration counts. The ratio
 * column compares with @bound; a figure beyond it is flagged ("!", a note,
 * and the "flag" column), not quietly printed. */
void bench_report_bounded(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                          bench_stat_t st, const char *bound);

/* Say why something was not measured (missing peer, unsupported). */
void bench_note(bench_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

double bench_now_ns(void);       /* CLOCK_MONOTONIC in ns */

/* In a loop that spins on a word another core writes: let that core (or
 * this core's other hardware thread) have the memory bus meanwhile. */
static inline void bench_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __asm__ volatile("" ::: "memory");
#endif
}

int bench_pin_cpu(int cpu);      /* pin the calling thread; 0 or -1 */

typedef struct bench_suite {
    const char *name;
    const char *help;
    int nranks; /* 0 or 2 */
    int (*run)(bench_ctx_t *c);
} bench_suite_t;

/* Register a suite: collected through the linker section "vmmc_bench". */
#define BENCH_SUITE(var, ...)                                                   \
    static const bench_suite_t var = {__VA_ARGS__};                              \
    static const bench_suite_t *const var##_ptr                                  \
        __attribute__((used, section("vmmc_bench"))) = &var

#endif
