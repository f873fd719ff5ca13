/* IS: integer sort (bucket counting, as in the NAS IS kernel).
 *
 * n keys in [0, B) (B = n / 16, at least 16, at most 65536) live in one
 * shared array; each rank generates and owns a contiguous block of them.
 * The bucket counts are split in SECTIONS shared allocations, section s
 * guarded by DSM lock s. Each iteration:
 *   1. rank 0 changes two keys (as NAS IS does, so iterations differ);
 *      the owner of section s zeroes it;                        barrier
 *   2. each rank counts its keys privately, then adds its counts into every
 *      section under that section's lock (starting at its own, so the ranks
 *      do not queue on the same lock);                            barrier
 *   3. each rank takes the key values of its block of [0, B), sums the
 *      counts below them (reading every section) and writes those keys, in
 *      order, at their place in the shared output array;          barrier
 * Rank 0 then sorts the same keys sequentially (the same counting sort, in
 * private memory) and compares counts and output exactly.
 *
 * usage: is [-n keys] [-i iterations]       (vmmc run -n 2 -- is) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsm_app.h"

#define SECTIONS 16

static long buckets_for(long n)
{
    long b = n / 16;
    return b < 16 ? 16 : b > 65536 ? 65536 : b;
}

static int initial_key(long i, long b)
{
    return (int)(app_hash((uint64_t)i * 2654435761u + 7) % (uint64_t)b);
}

/* The two keys iteration @it changes, and their new values. */
static void change_keys(int *keys, long n, long b, long it)
{
    keys[it % n] = (int)(it % b);
    keys[(n - 1 - it % n + n) % n] = (int)((b - 1 - it % b + b) % b);
}

/* Section s holds bucket values [s * per, min((s + 1) * per, b)). */
static long section_len(long b, long per, int s)
{
    long lo = s * per, hi = lo + per > b ? b : lo + per;
    return hi > lo ? hi - lo : 0;
}

int main(int argc, char **argv)
{
    dsm_app_t a;
    app_start(&a, "is", argc, argv, 1L << 20, 16, 1L << 24, 10, 1000);
    long n = a.n, b = buckets_for(n), per = (b + SECTIONS - 1) / SECTIONS;
    int *keys = app_shared(&a, (size_t)n * sizeof(int), -1);
    int *out = app_shared(&a, (size_t)n * sizeof(int), -1);
    int **sect = app_shared(&a, SECTIONS * sizeof(int *), -1);
    if (a.rank == 0)
        for (int s = 0; s < SECTIONS; s++)
            if (!(sect[s] = vmmc_dsm_malloc((size_t)(section_len(b, per, s) + 1) * sizeof(int)))) {
                fprintf(stderr, "is: rank 0: vmmc_dsm_malloc of section %d failed\n", s);
                return 1;
            }
    app_barrier(&a);
    int *sec[SECTIONS];
    for (int s = 0; s < SECTIONS; s++)
        sec[s] = sect[s];
    long klo, khi, vlo, vhi;
    app_block(&a, n, &klo, &khi);
    app_block(&a, b, &vlo, &vhi);
    for (long i = klo; i < khi; i++)
        keys[i] = initial_key(i, b);
    long *mine = app_private(&a, (size_t)b * sizeof(long));

    app_par_begin(&a);
    for (long it = 0; it < a.iters; it++) {
        if (a.rank == 0)
            change_keys(keys, n, b, it);
        for (int s = a.rank; s < SECTIONS; s += a.size)
            memset(sec[s], 0, (size_t)section_len(b, per, s) * sizeof(int));
        app_barrier(&a);
        memset(mine, 0, (size_t)b * sizeof(long));
        for (long i = klo; i < khi; i++)
            mine[keys[i]]++;
        for (int k = 0; k < SECTIONS; k++) {
            int s = (k + a.rank * SECTIONS / a.size) % SECTIONS;
            long len = section_len(b, per, s);
            if (!len)
                continue;
            app_lock(&a, s);
            for (long v = 0; v < len; v++)
                sec[s][v] += (int)mine[s * per + v];
            app_unlock(&a, s);
        }
        app_barrier(&a);
        long pos = 0;
        for (long v = 0; v < vlo; v++)
            pos += sec[v / per][v % per];
        for (long v = vlo; v < vhi; v++)
            for (int c = sec[v / per][v % per]; c > 0; c--)
                out[pos++] = (int)v;
        app_barrier(&a);
    }
    app_par_end(&a);

    if (a.rank == 0) {
        int *sk = app_private(&a, (size_t)n * sizeof(int));
        int *so = app_private(&a, (size_t)n * sizeof(int));
        long *cnt = app_private(&a, (size_t)b * sizeof(long));
        for (long i = 0; i < n; i++)
            sk[i] = initial_key(i, b);
        app_seq_begin(&a);
        for (long it = 0; it < a.iters; it++) {
            change_keys(sk, n, b, it);
            memset(cnt, 0, (size_t)b * sizeof(long));
            for (long i = 0; i < n; i++)
                cnt[sk[i]]++;
            long pos = 0;
            for (long v = 0; v < b; v++)
                for (long c = cnt[v]; c > 0; c--)
                    so[pos++] = (int)v;
        }
        app_seq_end(&a);
        long bad = -1, badcnt = -1;
        for (long i = 0; i < n && bad < 0; i++)
            if (out[i] != so[i] || keys[i] != sk[i])
                bad = i;
        for (long v = 0; v < b && badcnt < 0; v++)
            if (sec[v / per][v % per] != cnt[v])
                badcnt = v;
        int ok = bad < 0 && badcnt < 0;
        if (ok)
            app_verdict(&a, 1, "%ld keys in %ld buckets, identical (exact comparison)", n, b);
        else if (bad >= 0)
            app_verdict(&a, 0, "position %ld: key %d, output %d; sequential key %d, output %d", bad,
                        keys[bad], out[bad], sk[bad], so[bad]);
        else
            app_verdict(&a, 0, "bucket %ld counts %d, sequential %ld", badcnt,
                        sec[badcnt / per][badcnt % per], cnt[badcnt]);
        free(sk);
        free(so);
        free(cnt);
    }
    free(mine);
    return app_finish(&a);
}
