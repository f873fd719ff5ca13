/* WATER: an N-body kernel shaped like SPLASH WATER's inter-molecular
 * phase: pairwise forces with Newton's third law, accumulated under locks,
 * then a position update, a barrier after each phase.
 *
 * n bodies on a jittered lattice in a unit cube, softened gravity
 * (f = d / (r^2 + EPS2)^1.5), leapfrog steps of DT. Rank r owns a contiguous
 * block of bodies: their positions are one shared allocation and their
 * force accumulators another (so writing forces does not invalidate the
 * positions others read), each block's forces guarded by DSM lock r; the
 * potential energy is a shared sum under lock ENERGY_LOCK. A step:
 *   1. rank r takes pairs (i, j > i) for i = r, r + P, ... (cyclic, for
 *      balance), sums the forces on both bodies privately, then adds them
 *      into each block under that block's lock, starting with its own;
 *      the energy under its lock;                                  barrier
 *   2. each rank moves its bodies (velocities are private to the owner)
 *      and clears its force block;                                 barrier
 * Rank 0 runs the same steps sequentially in private memory. The forces are
 * summed in another order, so positions and energy are compared with a
 * relative tolerance of 1e-9 (stated in the output).
 *
 * usage: water [-n bodies] [-i steps]       (vmmc run -n 2 -- water) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsm_app.h"

#define EPS2 0.01
#define DT 0.0005
#define TOLERANCE 1e-9
#define ENERGY_LOCK (VMMC_DSM_LOCKS - 1)

static void initial_position(long n, long i, double x[3])
{
    long side = 1;
    while (side * side * side < n)
        side++;
    long c[3] = {i % side, i / side % side, i / (side * side)};
    for (int k = 0; k < 3; k++)
        x[k] = ((double)c[k] + 0.5 + 0.3 * (app_unit((uint64_t)(3 * i + k)) - 0.5)) / (double)side;
}

/* Forces on i and j from their pair; returns the pair's potential energy. */
static double pair(const double *xi, const double *xj, double *fi, double *fj)
{
    double d[3] = {xj[0] - xi[0], xj[1] - xi[1], xj[2] - xi[2]};
    double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + EPS2;
    double inv = 1.0 / sqrt(r2), inv3 = inv * inv * inv;
    for (int k = 0; k < 3; k++) {
        fi[k] += d[k] * inv3;
        fj[k] -= d[k] * inv3;
    }
    return -inv;
}

static void move(double *x, double *v, const double *f)
{
    for (int k = 0; k < 3; k++) {
        v[k] += f[k] * DT;
        x[k] += v[k] * DT;
    }
}

int main(int argc, char **argv)
{
    dsm_app_t a;
    app_start(&a, "water", argc, argv, 512, 2, 1L << 16, 5, 100000);
    if (a.size >= VMMC_DSM_LOCKS) {
        fprintf(stderr, "water: needs fewer than %d ranks (one lock per rank and one more)\n",
                VMMC_DSM_LOCKS);
        return 2;
    }
    long n = a.n, P = a.size;
    /* block q's positions and forces; each rank allocates its own */
    double **posb = app_shared(&a, (size_t)P * sizeof(double *), -1);
    double **forb = app_shared(&a, (size_t)P * sizeof(double *), -1);
    double *energy = app_shared(&a, sizeof(double), -1);
    long lo, hi;
    app_block(&a, n, &lo, &hi);
    long cnt = hi - lo;
    double *mypos = app_malloc(&a, (size_t)(cnt ? cnt : 1) * 3 * sizeof(double), "positions");
    double *myfor = app_malloc(&a, (size_t)(cnt ? cnt : 1) * 3 * sizeof(double), "forces");
    for (long i = lo; i < hi; i++)
        initial_position(n, i, &mypos[3 * (i - lo)]);
    app_lock(&a, ENERGY_LOCK); /* posb[] and forb[] are written by every rank */
    posb[a.rank] = mypos;
    forb[a.rank] = myfor;
    app_unlock(&a, ENERGY_LOCK);
    app_barrier(&a);
    /* private: where each body's position is, each block's range */
    double **x = app_private(&a, (size_t)n * sizeof(double *));
    long *blo = app_private(&a, (size_t)(P + 1) * sizeof(long));
    for (long q = 0, i = 0; q < P; q++) {
        long qlo = q * (n / P) + (q < n % P ? q : n % P);
        long qhi = qlo + n / P + (q < n % P);
        blo[q] = qlo;
        for (i = qlo; i < qhi; i++)
            x[i] = &posb[q][3 * (i - qlo)];
    }
    blo[P] = n;
    double *f = app_private(&a, (size_t)n * 3 * sizeof(double));
    double *vel = app_private(&a, (size_t)(cnt ? cnt : 1) * 3 * sizeof(double));

    app_par_begin(&a);
    for (long step = 0; step < a.iters; step++) {
        memset(f, 0, (size_t)n * 3 * sizeof(double));
        double e = 0;
        for (long i = a.rank; i < n; i += P)
            for (long j = i + 1; j < n; j++)
                e += pair(x[i], x[j], &f[3 * i], &f[3 * j]);
        for (long k = 0; k < P; k++) {
            long q = (a.rank + k) % P;
            app_lock(&a, (int)q);
            double *fq = forb[q];
            for (long t = 0; t < 3 * (blo[q + 1] - blo[q]); t++)
                fq[t] += f[3 * blo[q] + t];
            app_unlock(&a, (int)q);
        }
        app_lock(&a, ENERGY_LOCK);
        *energy += e;
        app_unlock(&a, ENERGY_LOCK);
        app_barrier(&a);
        for (long i = 0; i < cnt; i++)
            move(&mypos[3 * i], &vel[3 * i], &myfor[3 * i]);
        memset(myfor, 0, (size_t)cnt * 3 * sizeof(double));
        app_barrier(&a);
    }
    app_par_end(&a);

    if (a.rank == 0) {
        double *sx = app_private(&a, (size_t)n * 3 * sizeof(double));
        double *sv = app_private(&a, (size_t)n * 3 * sizeof(double));
        double *sf = app_private(&a, (size_t)n * 3 * sizeof(double));
        double se = 0;
        for (long i = 0; i < n; i++)
            initial_position(n, i, &sx[3 * i]);
        app_seq_begin(&a);
        for (long step = 0; step < a.iters; step++) {
            memset(sf, 0, (size_t)n * 3 * sizeof(double));
            for (long i = 0; i < n; i++)
                for (long j = i + 1; j < n; j++)
                    se += pair(&sx[3 * i], &sx[3 * j], &sf[3 * i], &sf[3 * j]);
            for (long i = 0; i < n; i++)
                move(&sx[3 * i], &sv[3 * i], &sf[3 * i]);
        }
        app_seq_end(&a);
        double worst = 0;
        long wi = 0;
        for (long i = 0; i < n; i++)
            for (int k = 0; k < 3; k++) {
                double d = fabs(x[i][k] - sx[3 * i + k]) / (1.0 + fabs(sx[3 * i + k]));
                if (!(d <= worst)) {
                    worst = isnan(d) ? INFINITY : d;
                    wi = i;
                }
            }
        double de = fabs(*energy - se) / (1.0 + fabs(se));
        int ok = worst <= TOLERANCE && de <= TOLERANCE;
        app_verdict(&a, ok,
                    "energy %.12g (sequential %.12g), max relative difference of positions %.3g "
                    "(body %ld), of energy %.3g (tolerance %g)",
                    *energy, se, worst, wi, de, TOLERANCE);
        free(sx), free(sv), free(sf);
    }
    free(x), free(blo), free(f), free(vel);
    return app_finish(&a);
}
