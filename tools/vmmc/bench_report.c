/* vmmc bench: what suites call (bench.h) to measure and to report.
 *
 * Statistics and clocks for suites, and the writer of the result lines:
 * each row or note a suite reports goes out as one tab-separated line
 * starting with ROW_TAG, to the pipe of the suite's process (bench.c) or,
 * in a two-rank job, on rank 0's stdout; bench_rows.c reads them back. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "bench_int.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_n_half(const size_t *sizes, const double *bw, int n)
{
    double peak = 0;
    for (int i = 0; i < n; i++)
        if (bw[i] > peak)
            peak = bw[i];
    int i = 0;
    while (i < n - 1 && bw[i] < peak / 2)
        i++;
    if (i == 0)
        return (double)sizes[0];
    double t = (peak / 2 - bw[i - 1]) / (bw[i] - bw[i - 1]);
    return exp(log((double)sizes[i - 1]) + t * (log((double)sizes[i]) - log((double)sizes[i - 1])));
}

bench_stat_t bench_stats(double *samples, int n)
{
    bench_stat_t st = {0, 0, 0};
    if (n <= 0)
        return st;
    qsort(samples, (size_t)n, sizeof *samples, cmp_double);
    st.min = samples[0];
    st.max = samples[n - 1];
    st.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    return st;
}

double bench_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int bench_pin_cpu(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return sched_setaffinity(0, sizeof s, &s) ? -1 : 0;
}

/* Where the current (child) process writes its rows (NULL: nowhere). */
FILE *g_rows;

/* Text fields travel on one line between tabs: flatten tabs and newlines. */
static void put_field(FILE *f, const char *s)
{
    fputc('\t', f);
    for (; s && *s; s++)
        fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

void bench_report(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                  bench_stat_t st, const char *ref)
{
    if (!g_rows || c->rank != 0)
        return;
    fputs(ROW_TAG "\trow", g_rows);
    put_field(g_rows, c->transport ? c->transport : "-");
    put_field(g_rows, metric);
    fprintf(g_rows, "\t%zu", size);
    put_field(g_rows, unit);
    fprintf(g_rows, "\t%.17g\t%.17g\t%.17g", st.median, st.min, st.max);
    put_field(g_rows, ref ? ref : "");
    fputc('\n', g_rows);
    fflush(g_rows);
}

void bench_report_bounded(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                          bench_stat_t st, const char *bound)
{
    char ref[256];
    snprintf(ref, sizeof ref, BOUND_TAG "%s", bound);
    bench_report(c, metric, size, unit, st, ref);
}

void bench_note(bench_ctx_t *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->rank != 0) { /* other ranks' notes are diagnostics */
        fprintf(stderr, "vmmc bench: rank %d: %s\n", c->rank, buf);
        return;
    }
    if (!g_rows)
        return;
    fputs(ROW_TAG "\tnote", g_rows);
    put_field(g_rows, buf);
    fputc('\n', g_rows);
    fflush(g_rows);
}
