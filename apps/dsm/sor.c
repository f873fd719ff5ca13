/* SOR: red-black successive over-relaxation on an n x n grid.
 *
 * Every grid row is its own shared allocation (its own minipage), and the
 * interior rows are split in contiguous blocks by rank: a rank writes its
 * rows and reads the boundary rows of its neighbours, so with minipages only
 * the rows next to a block boundary travel, whatever their size. Each sweep
 * updates the red cells ((i + j) even), then the black ones, a barrier after
 * each. A red cell depends on black cells only (and vice versa), so the
 * result does not depend on the order of the updates: rank 0's sequential
 * run of the same sweeps must give the same grid (compared with a relative
 * tolerance of 1e-12, stated in the output).
 *
 * usage: sor [-n size] [-i iterations]      (vmmc run -n 2 -- sor) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsm_app.h"

#define OMEGA 1.25
#define TOLERANCE 1e-12

/* The fixed boundary and the start values of the interior. */
static double initial(long n, long i, long j)
{
    if (i == 0)
        return 1.0;
    if (i == n - 1 || j == 0 || j == n - 1)
        return 0.0;
    return app_unit((uint64_t)(i * n + j));
}

static void sweep_rows(double **g, long n, long lo, long hi, int color)
{
    for (long i = lo; i < hi; i++) {
        const double *up = g[i - 1], *dn = g[i + 1];
        double *me = g[i];
        for (long j = 1 + ((i + color + 1) & 1); j < n - 1; j += 2)
            me[j] = OMEGA * 0.25 * (up[j] + dn[j] + me[j - 1] + me[j + 1]) + (1 - OMEGA) * me[j];
    }
}

int main(int argc, char **argv)
{
    dsm_app_t a;
    app_start(&a, "sor", argc, argv, 256, 3, 4096, 20, 100000);
    long n = a.n;
    double **shared_rows = app_shared(&a, (size_t)n * sizeof(double *), -1);
    if (a.rank == 0)
        for (long i = 0; i < n; i++)
            shared_rows[i] = app_malloc(&a, (size_t)n * sizeof(double), "a grid row");
    app_barrier(&a);
    /* a private copy of the row table: it does not change */
    double **g = app_private(&a, (size_t)n * sizeof(double *));
    for (long i = 0; i < n; i++)
        g[i] = shared_rows[i];
    long lo, hi;
    app_block(&a, n - 2, &lo, &hi);
    lo += 1, hi += 1;
    /* each rank fills its own rows (rank 0 also the fixed top and bottom) */
    for (long i = lo; i < hi; i++)
        for (long j = 0; j < n; j++)
            g[i][j] = initial(n, i, j);
    if (a.rank == 0)
        for (long j = 0; j < n; j++) {
            g[0][j] = initial(n, 0, j);
            g[n - 1][j] = initial(n, n - 1, j);
        }

    app_par_begin(&a);
    for (long it = 0; it < a.iters; it++)
        for (int color = 0; color < 2; color++) {
            sweep_rows(g, n, lo, hi, color);
            app_barrier(&a);
        }
    app_par_end(&a);

    if (a.rank == 0) {
        double **s = app_private(&a, (size_t)n * sizeof(double *));
        for (long i = 0; i < n; i++) {
            s[i] = app_private(&a, (size_t)n * sizeof(double));
            for (long j = 0; j < n; j++)
                s[i][j] = initial(n, i, j);
        }
        app_seq_begin(&a);
        for (long it = 0; it < a.iters; it++)
            for (int color = 0; color < 2; color++)
                sweep_rows(s, n, 1, n - 1, color);
        app_seq_end(&a);
        double worst = 0, sum = 0;
        long wi = 0, wj = 0;
        for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++) {
                double d = fabs(g[i][j] - s[i][j]) / (1.0 + fabs(s[i][j]));
                sum += g[i][j];
                if (!(d <= worst)) { /* also catches NaN */
                    worst = isnan(d) ? INFINITY : d;
                    wi = i, wj = j;
                }
            }
        app_verdict(&a, worst <= TOLERANCE,
                    "grid sum %.9g, max relative difference %.3g at (%ld,%ld) (tolerance %g)",
                    sum, worst, wi, wj, TOLERANCE);
        for (long i = 0; i < n; i++)
            free(s[i]);
        free(s);
    }
    free(g);
    return app_finish(&a);
}
