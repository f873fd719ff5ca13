/* MM: dense matrix multiply, rows by rank, iterated as a power method.
 *
 * A, B and C are n x n matrices of doubles; every row of each is its own
 * shared allocation (minipage). Rank r owns a contiguous block of rows: it
 * fills those rows of A and B, and each iteration computes its rows of
 * C = A x B (reading all of B), barrier, then replaces its rows of B with
 * its rows of C scaled by 2/n (so the values stay bounded), barrier. Every
 * rank needs every row of B once per iteration, after its owner wrote it:
 * the owner pushes its rows to every rank (vmmc_dsm_push) as soon as they
 * are written, so the multiply reads them without faulting (as the
 * MILLIPAGE applications used push).
 * Rank 0 repeats the same computation in private memory, in the same loop
 * order, and compares C with a relative tolerance of 1e-12 (stated in the
 * output).
 *
 * usage: mm [-n size] [-i iterations]       (vmmc run -n 2 -- mm) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsm_app.h"

#define TOLERANCE 1e-12

static void multiply_rows(double **c, double **a, double **b, long n, long lo, long hi)
{
    for (long i = lo; i < hi; i++) {
        double *ci = c[i];
        memset(ci, 0, (size_t)n * sizeof(double));
        for (long k = 0; k < n; k++) {
            double aik = a[i][k];
            const double *bk = b[k];
            for (long j = 0; j < n; j++)
                ci[j] += aik * bk[j];
        }
    }
}

/* Readable copies of rows [lo, hi) of @m to every rank. */
static void push_rows(const dsm_app_t *a, double **m, long lo, long hi)
{
    for (long i = lo; i < hi; i++)
        app_ok(a, vmmc_dsm_push(m[i]), "vmmc_dsm_push");
}

static void scale_rows(double **b, double **c, long n, long lo, long hi)
{
    double s = 2.0 / (double)n;
    for (long i = lo; i < hi; i++)
        for (long j = 0; j < n; j++)
            b[i][j] = c[i][j] * s;
}

/* n row pointers to shared rows allocated by rank 0, copied to private
 * memory (the table does not change). */
static double **shared_matrix(dsm_app_t *a, long n)
{
    double **t = app_shared(a, (size_t)n * sizeof(double *), -1);
    if (a->rank == 0)
        for (long i = 0; i < n; i++)
            t[i] = app_malloc(a, (size_t)n * sizeof(double), "a matrix row");
    app_barrier(a);
    double **m = app_private(a, (size_t)n * sizeof(double *));
    memcpy(m, t, (size_t)n * sizeof(double *));
    return m;
}

static double **private_matrix(dsm_app_t *a, long n)
{
    double **m = app_private(a, (size_t)n * sizeof(double *));
    for (long i = 0; i < n; i++)
        m[i] = app_private(a, (size_t)n * sizeof(double));
    return m;
}

static void fill_rows(double **m, long n, long lo, long hi, uint64_t seed)
{
    for (long i = lo; i < hi; i++)
        for (long j = 0; j < n; j++)
            m[i][j] = app_unit(seed + (uint64_t)(i * n + j));
}

int main(int argc, char **argv)
{
    dsm_app_t a;
    app_start(&a, "mm", argc, argv, 256, 1, 1024, 4, 10000);
    long n = a.n;
    double **ma = shared_matrix(&a, n), **mb = shared_matrix(&a, n), **mc = shared_matrix(&a, n);
    long lo, hi;
    app_block(&a, n, &lo, &hi);
    fill_rows(ma, n, lo, hi, 1);
    fill_rows(mb, n, lo, hi, 1u << 30);
    push_rows(&a, mb, lo, hi);

    app_par_begin(&a);
    for (long it = 0; it < a.iters; it++) {
        multiply_rows(mc, ma, mb, n, lo, hi);
        app_barrier(&a);
        if (it + 1 < a.iters) {
            scale_rows(mb, mc, n, lo, hi);
            push_rows(&a, mb, lo, hi);
            app_barrier(&a);
        }
    }
    app_par_end(&a);

    if (a.rank == 0) {
        double **sa = private_matrix(&a, n), **sb = private_matrix(&a, n),
               **sc = private_matrix(&a, n);
        fill_rows(sa, n, 0, n, 1);
        fill_rows(sb, n, 0, n, 1u << 30);
        app_seq_begin(&a);
        for (long it = 0; it < a.iters; it++) {
            multiply_rows(sc, sa, sb, n, 0, n);
            if (it + 1 < a.iters)
                scale_rows(sb, sc, n, 0, n);
        }
        app_seq_end(&a);
        double worst = 0, trace = 0;
        long wi = 0, wj = 0;
        for (long i = 0; i < n; i++) {
            trace += mc[i][i];
            for (long j = 0; j < n; j++) {
                double d = fabs(mc[i][j] - sc[i][j]) / (1.0 + fabs(sc[i][j]));
                if (!(d <= worst)) {
                    worst = isnan(d) ? INFINITY : d;
                    wi = i, wj = j;
                }
            }
        }
        app_verdict(&a, worst <= TOLERANCE,
                    "trace %.9g, max relative difference %.3g at (%ld,%ld) (tolerance %g)", trace,
                    worst, wi, wj, TOLERANCE);
        for (long i = 0; i < n; i++)
            free(sa[i]), free(sb[i]), free(sc[i]);
        free(sa), free(sb), free(sc);
    }
    free(ma), free(mb), free(mc);
    return app_finish(&a);
}
