/* IS: integer sort (bucket counting, as in the NAS IS kernel).
 *
 * n keys in [0, B) (B = n / 16, at least 16, at most 65536). Each rank
 * generates its contiguous block of keys in an allocation of its own, and
 * writes its share of the sorted output into another allocation of its
 * own: bulk data never moves between ranks during the sort. What is shared
 * is the bucket counts, split in SECTIONS allocations, section s guarded
 * by DSM lock s. Each iteration:
 *   1. the owners of key it and key n-1-it change them (as NAS IS does, so
 *      iterations differ); the owner of section s zeroes it;     barrier
 *   2. each rank counts its keys privately, then adds its counts into every
 *      section under that section's lock (starting at its own share, so the
 *      ranks do not queue on the same lock);                       barrier
 *   3. each rank takes the key values of its block of [0, B), sums the
 *      counts below them (reading every section) and writes those keys, in
 *      order, into its output allocation (reallocated, and its address
 *      published, when it grows);                                  barrier
 * Rank 0 then sorts the same keys sequentially (the same counting sort, in
 * private memory) and compares keys, counts and the concatenated outputs
 * exactly.
 *
 * usage: is [-n keys] [-i iterations]       (vmmc run -n 2 -- is) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsm_app.h"

#define SECTIONS 16
#define TABLE_LOCK SECTIONS /* the table of output blocks */

/* What each rank publishes: its keys and its sorted output. */
typedef struct block {
    int *keys;
    int *out;
    long out_cap, out_len;
} block_t;

static long buckets_for(long n)
{
    long b = n / 16;
    return b < 16 ? 16 : b > 65536 ? 65536 : b;
}

static int initial_key(long i, long b)
{
    return (int)(app_hash((uint64_t)i * 2654435761u + 7) % (uint64_t)b);
}

/* Iteration @it changes key @it and key n-1-it (indexes mod n). */
static void changed_key(long n, long b, long it, int which, long *idx, int *val)
{
    if (!which) {
        *idx = it % n;
        *val = (int)(it % b);
    } else {
        *idx = n - 1 - it % n;
        *val = (int)(b - 1 - it % b);
    }
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
    app_start(&a, "is", argc, argv, 1L << 20, 16, 1L << 22, 10, 1000);
    long n = a.n, b = buckets_for(n), per = (b + SECTIONS - 1) / SECTIONS;
    block_t *blocks = app_shared(&a, (size_t)a.size * sizeof(block_t), -1);
    int **sect = app_shared(&a, SECTIONS * sizeof(int *), -1);
    if (a.rank == 0)
        for (int s = 0; s < SECTIONS; s++)
            sect[s] = app_malloc(&a, (size_t)(section_len(b, per, s) + 1) * sizeof(int), "counts");
    long klo, khi, vlo, vhi;
    app_block(&a, n, &klo, &khi);
    app_block(&a, b, &vlo, &vhi);
    block_t me = {.keys = app_malloc(&a, (size_t)(khi - klo + 1) * sizeof(int), "keys")};
    me.out_cap = (khi - klo) + (khi - klo) / 4 + 16;
    me.out = app_malloc(&a, (size_t)me.out_cap * sizeof(int), "output");
    for (long i = klo; i < khi; i++)
        me.keys[i - klo] = initial_key(i, b);
    app_lock(&a, TABLE_LOCK);
    blocks[a.rank] = me;
    app_unlock(&a, TABLE_LOCK);
    app_barrier(&a);
    int *sec[SECTIONS];
    for (int s = 0; s < SECTIONS; s++)
        sec[s] = sect[s];
    long *mine = app_private(&a, (size_t)b * sizeof(long));

    app_par_begin(&a);
    for (long it = 0; it < a.iters; it++) {
        for (int w = 0; w < 2; w++) {
            long idx;
            int val;
            changed_key(n, b, it, w, &idx, &val);
            if (idx >= klo && idx < khi)
                me.keys[idx - klo] = val;
        }
        for (int s = a.rank; s < SECTIONS; s += a.size)
            memset(sec[s], 0, (size_t)section_len(b, per, s) * sizeof(int));
        app_barrier(&a);
        memset(mine, 0, (size_t)b * sizeof(long));
        for (long i = 0; i < khi - klo; i++)
            mine[me.keys[i]]++;
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
        long count = 0;
        for (long v = vlo; v < vhi; v++)
            count += sec[v / per][v % per];
        if (count > me.out_cap) {
            vmmc_dsm_free(me.out);
            me.out_cap = count + count / 4;
            me.out = app_malloc(&a, (size_t)me.out_cap * sizeof(int), "output");
        }
        long pos = 0;
        for (long v = vlo; v < vhi; v++)
            for (int c = sec[v / per][v % per]; c > 0; c--)
                me.out[pos++] = (int)v;
        me.out_len = pos;
        if (blocks[a.rank].out != me.out || blocks[a.rank].out_len != pos) {
            app_lock(&a, TABLE_LOCK);
            blocks[a.rank] = me;
            app_unlock(&a, TABLE_LOCK);
        }
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
            for (int w = 0; w < 2; w++) {
                long idx;
                int val;
                changed_key(n, b, it, w, &idx, &val);
                sk[idx] = val;
            }
            memset(cnt, 0, (size_t)b * sizeof(long));
            for (long i = 0; i < n; i++)
                cnt[sk[i]]++;
            long pos = 0;
            for (long v = 0; v < b; v++)
                for (long c = cnt[v]; c > 0; c--)
                    so[pos++] = (int)v;
        }
        app_seq_end(&a);
        char why[200] = "";
        long at = 0;
        for (int r = 0; r < a.size && !why[0]; r++) {
            block_t bl = blocks[r];
            long rlo = r * (n / a.size) + (r < n % a.size ? r : n % a.size);
            long rhi = rlo + n / a.size + (r < n % a.size);
            for (long i = rlo; i < rhi && !why[0]; i++)
                if (bl.keys[i - rlo] != sk[i])
                    snprintf(why, sizeof why, "key %ld is %d, sequential %d", i, bl.keys[i - rlo],
                             sk[i]);
            for (long i = 0; i < bl.out_len && !why[0]; i++, at++)
                if (at >= n || bl.out[i] != so[at])
                    snprintf(why, sizeof why, "output position %ld is %d, sequential %d", at,
                             bl.out[i], at < n ? so[at] : -1);
        }
        if (!why[0] && at != n)
            snprintf(why, sizeof why, "%ld keys in the output, %ld expected", at, n);
        for (long v = 0; v < b && !why[0]; v++)
            if (sec[v / per][v % per] != cnt[v])
                snprintf(why, sizeof why, "bucket %ld counts %d, sequential %ld", v,
                         sec[v / per][v % per], cnt[v]);
        if (why[0])
            app_verdict(&a, 0, "%s", why);
        else
            app_verdict(&a, 1, "%ld keys in %ld buckets, identical (exact comparison)", n, b);
        free(sk);
        free(so);
        free(cnt);
    }
    free(mine);
    return app_finish(&a);
}
