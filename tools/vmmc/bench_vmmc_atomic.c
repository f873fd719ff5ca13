/* Suite "vmmc": remote atomics and reads, 8 bytes, rank 0 to rank 1's regions
 * (see bench_vmmc.c for the metrics). On this host a fetch-add into a mapped
 * export is one atomic instruction on the mapping; into an export that is not
 * mapped (malloc memory) it is a control message that the target's control
 * thread executes; over udp both are a request that the target's link thread
 * executes and answers. The target computes meanwhile (here: waits in the
 * barrier). */
#include "bench_vmmc.h"

/* Time @count calls of one operation; returns ns per call, or < 0. */
static double time_op(vb_t *v, region_t *r, int kind, long count)
{
    uint64_t old = 0, sink = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < count; i++) {
        int rc;
        if (kind == 0)
            rc = vmmc_atomic(r->px, 0, VMMC_ATOMIC_ADD, 8, 1, 0, &old);
        else if (kind == 1)
            rc = vmmc_atomic(r->px, 0, VMMC_ATOMIC_ADD, 8, 1, 0, NULL);
        else
            rc = vmmc_fetch(r->px, 0, &old, sizeof old);
        if (rc) {
            vb_fail(v, kind == 2 ? "vmmc_fetch" : "vmmc_atomic", rc);
            return -1;
        }
        sink += old;
    }
    __asm__ volatile("" ::"r"(sink));
    return (bench_now_ns() - t0) / (double)count;
}

int vb_test_atomic(vb_t *v)
{
    if (v->me == 0 && vb_want(v, 8)) {
        /* memalloc: mapped on shm (an instruction), a request over udp;
         * malloc: not mapped and not readable: the atomic adds without
         * fetching, executed by the target. */
        struct {
            region_t *r;
            int kind;
            const char *metric, *ref;
            long iters;
        } t[] = {
            {&v->ma, 2, "memalloc_fetch_lat", NULL, 20000},
            {&v->ma, 0, "memalloc_atomic_lat", "vmmc/memalloc_fetch_lat", 20000},
            {&v->ml, 1, "malloc_atomic_lat", "limits/wake_eventfd_cross", 2000},
        };
        double s[MAX_REPS];
        for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
            long count = v->c->quick ? t[k].iters / 4 : t[k].iters;
            if (v->drive || t[k].kind == 1)
                count /= 10; /* a round trip each: keep the run short */
            if (count < 50)
                count = 50;
            if (time_op(v, t[k].r, t[k].kind, count / 10 + 1) < 0) /* warm-up */
                return -1;
            for (int rep = 0; rep < v->c->reps; rep++)
                if ((s[rep] = time_op(v, t[k].r, t[k].kind, count) / 1000.0) < 0)
                    return -1;
            bench_report(v->c, t[k].metric, 8, "us", bench_stats(s, v->c->reps), t[k].ref);
        }
    }
    int rc = vmmc_barrier(v->ep);
    return rc ? vb_fail(v, "vmmc_barrier", rc) : 0;
}
