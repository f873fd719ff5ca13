/* Suite "vmmc": latency and bandwidth, with their same-method floors and
 * ceilings (the metrics are described in bench_vmmc.c). */
#include "bench_vmmc.h"

/* Sizes (--quick: the q_ lists) */
static const size_t lat_sizes[] = {8, 64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20};
static const size_t bw_sizes[] = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
static const size_t q_lat[] = {8, 64}, q_bw[] = {65536, 1 << 20, 4 << 20};

/* ------------------------------------------------------------------------- */
/* Latency: ping-pong, receiver polls the last word                           */

/* Move @n bytes of v->src to offset 0 of the peer's region: through vmmc,
 * or (measuring a floor) by memcpy into the mapping, the same bytes in the
 * same order, so that the last word still lands last. */
static inline int put_data(vb_t *v, region_t *r, size_t n)
{
    if (v->raw) {
        if (n > 8)
            memcpy(r->map, v->src, n - 8);
        uint64_t last;
        memcpy(&last, v->src + n - 8, 8);
        __atomic_store_n((uint64_t *)(void *)(r->map + n - 8), last, __ATOMIC_RELEASE);
        return 0;
    }
    int rc = vmmc_send(r->px, 0, v->src, n, 0);
    return rc ? vb_fail(v, "vmmc_send", rc) : 0;
}

/* One exchange of @n bytes: rank 0 (or both ranks, @both) sends first. */
static inline int exchange(vb_t *v, region_t *r, size_t n, int both, volatile uint64_t *mine)
{
    uint64_t s = ++v->seq;
    if (v->me == 1 && !both && vb_wait_word(v, mine, s))
        return -1;
    memcpy(v->src + n - 8, &s, 8);
    if (put_data(v, r, n))
        return -1;
    if ((v->me == 0 || both) && vb_wait_word(v, mine, s))
        return -1;
    return 0;
}

/* Ping-pong (both = 0: one-way = round trip / 2) or simultaneous exchange
 * (both = 1: time per exchange), in us per repetition into @out (@reps of
 * them, after a warm-up of a tenth). */
static int pingpong_n(vb_t *v, region_t *r, size_t n, long iters, int both, double *out, int reps)
{
    volatile uint64_t *mine = (volatile uint64_t *)(r->mem + n - 8);
    long warm = iters / 10 + 10;
    for (long i = 0; i < warm; i++)
        if (exchange(v, r, n, both, mine))
            return -1;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = bench_now_ns();
        for (long i = 0; i < iters; i++)
            if (exchange(v, r, n, both, mine))
                return -1;
        double t = bench_now_ns() - t0;
        out[rep] = (both ? t : t / 2) / (double)iters / 1e3;
    }
    return 0;
}

static int pingpong(vb_t *v, region_t *r, size_t n, long iters, int both, double *out)
{
    return pingpong_n(v, r, n, iters, both, out, v->c->reps);
}

/* The figure and its floor (v->raw), repetitions alternating: @fig and
 * @floor get v->c->reps values each. Without a mapping, no floor (-1 in
 * floor[0] is not written: the caller checks r->map). */
static int pingpong_with_floor(vb_t *v, region_t *r, size_t n, long iters, double *fig,
                               double *floor)
{
    for (int rep = 0; rep < v->c->reps; rep++) {
        if (r->map) {
            v->raw = 1;
            int rc = pingpong_n(v, r, n, iters, 0, &floor[rep], 1);
            v->raw = 0;
            if (rc)
                return -1;
        }
        if (pingpong_n(v, r, n, iters, 0, &fig[rep], 1))
            return -1;
    }
    return 0;
}

static const char *lat_ref(vb_t *v, size_t n)
{
    if (v->drive) /* over udp, the floor is the kernel's UDP round trip */
        return n <= 64 ? "peers/sockperf_udp_lat" : NULL;
    if (n <= 64)
        return "limits/cacheline_oneway"; /* without a mapping: no same-method floor */
    if (n == 1024 || n == 65536 || n == (1 << 20) || n == (4 << 20))
        return "peers/openmpi_lat";
    return NULL;
}

/* N1/2: the message size at which the ping-pong bandwidth (size / one-way
 * latency) reaches half of its largest value over the sizes measured, per
 * repetition, interpolated on log scales. @lat[i][rep] in us for @sizes[i]. */
static void report_n_half(vb_t *v, const char *metric, const size_t *sizes, int ns,
                          double (*lat)[MAX_REPS])
{
    if (ns < 3)
        return;
    double nh[MAX_REPS];
    for (int rep = 0; rep < v->c->reps; rep++) {
        double bw[sizeof lat_sizes / sizeof *lat_sizes];
        for (int i = 0; i < ns; i++)
            bw[i] = (double)sizes[i] / lat[i][rep];
        nh[rep] = bench_n_half(sizes, bw, ns);
    }
    bench_report(v->c, metric, 0, "B", bench_stats(nh, v->c->reps), NULL);
}

int vb_test_latency(vb_t *v)
{
    double s[MAX_REPS];
    static double lat[sizeof lat_sizes / sizeof *lat_sizes][MAX_REPS];
    size_t sizes[sizeof lat_sizes / sizeof *lat_sizes];
    region_t *rs[2] = {&v->ma, &v->ml};
    const char *names[2] = {"memalloc_lat", "malloc_lat"};
    const char *nhalf[2] = {"memalloc_n_half", "malloc_n_half"};
    for (int k = 0; k < 2; k++) {
        int ns = 0;
        EACH(v, lat_sizes, q_lat, n)
        {
            if (vb_quick_skip(v, n))
                continue;
            long it = vb_iters_for(v, n, v->c->quick ? 5000 : 20000);
            /* The small sizes of library memory: with their floor, made the
             * same way, repetitions alternating. */
            int floored = k == 0 && n <= 64 && rs[k]->map && !v->drive;
            double fl[MAX_REPS];
            if (floored ? pingpong_with_floor(v, rs[k], n, it, s, fl)
                        : pingpong(v, rs[k], n, it, 0, s))
                return -1;
            memcpy(lat[ns], s, sizeof(double) * (size_t)v->c->reps);
            sizes[ns++] = n;
            if (floored) {
                bench_report(v->c, "line_lat", n, "us", bench_stats(fl, v->c->reps),
                             "limits/cacheline_oneway");
                bench_report_bounded(v->c, names[k], n, "us", bench_stats(s, v->c->reps),
                                     "vmmc/line_lat");
                continue;
            }
            bench_report(v->c, names[k], n, "us", bench_stats(s, v->c->reps), lat_ref(v, n));
        }
        if (!v->c->quick)
            report_n_half(v, nhalf[k], sizes, ns, lat);
    }
    if (!v->c->quick) {
        EACH(v, lat_sizes, q_lat, n)
        {
            long it = vb_iters_for(v, n, 20000);
            if (pingpong(v, &v->ma, n, it, 1, s))
                return -1;
            bench_report(v->c, "memalloc_alt_lat", n, "us", bench_stats(s, v->c->reps),
                         "vmmc/memalloc_lat");
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Bandwidth                                                                  */

int vb_stream(vb_t *v, region_t *r, size_t n, long count)
{
    for (long i = 0; i < count; i++)
        if (put_data(v, r, n))
            return -1;
    return 0;
}

/* One-way (bidir = 0) or both ways at once (bidir = 1): @reps values into
 * @out, after a warm-up repetition if @warm. */
static int bandwidth_n(vb_t *v, region_t *r, size_t n, int bidir, double *out, int reps, int warm)
{
    long count = vb_iters_for(v, n, 100000);
    for (int rep = warm ? -1 : 0; rep < reps; rep++) {
        uint64_t s = ++v->seq;
        double t0 = bench_now_ns();
        if (v->me == 0) {
            if (bidir && vb_put_word(v, SLOT_GO, s))
                return -1;
            if (vb_stream(v, r, n, count) || vb_put_word(v, SLOT_FLAG, s))
                return -1;
            if (bidir ? vb_wait_word(v, vb_slot(v, SLOT_FLAG), s) : vb_wait_word(v, vb_slot(v, SLOT_ACK), s))
                return -1;
        } else {
            if (bidir) {
                if (vb_wait_word(v, vb_slot(v, SLOT_GO), s) || vb_stream(v, r, n, count) ||
                    vb_put_word(v, SLOT_FLAG, s) || vb_wait_word(v, vb_slot(v, SLOT_FLAG), s))
                    return -1;
            } else if (vb_wait_word(v, vb_slot(v, SLOT_FLAG), s) || vb_put_word(v, SLOT_ACK, s)) {
                return -1;
            }
        }
        double t = bench_now_ns() - t0;
        if (rep >= 0)
            out[rep] = (double)n * (double)count * (bidir ? 2 : 1) / t;
    }
    return 0;
}

static int bandwidth(vb_t *v, region_t *r, size_t n, int bidir, double *out)
{
    return bandwidth_n(v, r, n, bidir, out, v->c->reps, 1);
}

/* copy2_bw: @count messages of @n bytes copied by both ranks, half each
 * (see the header); GB/s into *out on rank 0. */
static int copy2_n(vb_t *v, size_t n, long count, double *out)
{
    size_t h = (n / 2) & ~(size_t)63;
    volatile uint64_t *go = vb_slot(v, SLOT_GO2), *done = vb_slot(v, SLOT_DONE2);
    uint64_t *peer_go = (uint64_t *)(void *)(v->ma.map + vb_slot_off(v, SLOT_GO2));
    uint64_t *peer_done = (uint64_t *)(void *)(v->ma.map + vb_slot_off(v, SLOT_DONE2));
    double t0 = bench_now_ns();
    for (long i = 0; i < count; i++) {
        uint64_t k = ++v->seq2;
        if (v->me == 0) {
            __atomic_store_n(peer_go, k, __ATOMIC_RELEASE);
            memcpy(v->ma.map + h, v->ma.mem + h, n - h);
            if (vb_wait_word(v, done, k))
                return -1;
        } else {
            if (vb_wait_word(v, go, k))
                return -1;
            memcpy(v->ma.mem, v->ma.map, h);
            __atomic_store_n(peer_done, k, __ATOMIC_RELEASE);
        }
    }
    *out = (double)n * (double)count / (bench_now_ns() - t0);
    return 0;
}

/* One-way bandwidth and its ceilings (the same stream by memcpy into the
 * mapping, and the copy shared by both cores), repetitions alternating after
 * one warm-up of each. */
static int bandwidth_with_ceiling(vb_t *v, region_t *r, size_t n, double *fig, double *ceil,
                                  double *ceil2)
{
    long count = vb_iters_for(v, n, 100000);
    for (int rep = 0; rep < v->c->reps; rep++) {
        v->raw = 1;
        int rc = bandwidth_n(v, r, n, 0, &ceil[rep], 1, rep == 0);
        v->raw = 0;
        if (rc || bandwidth_n(v, r, n, 0, &fig[rep], 1, rep == 0))
            return -1;
        if ((rep == 0 && copy2_n(v, n, count / 10 + 1, &ceil2[rep])) ||
            copy2_n(v, n, count, &ceil2[rep]))
            return -1;
    }
    return 0;
}

int vb_test_bandwidth(vb_t *v)
{
    double s[MAX_REPS], copy[MAX_REPS];
    EACH(v, bw_sizes, q_bw, n)
    {
        if (v->ma.map && !v->drive) {
            double ceil[MAX_REPS], ceil2[MAX_REPS];
            if (bandwidth_with_ceiling(v, &v->ma, n, s, ceil, ceil2))
                return -1;
            bench_report(v->c, "copy_bw", n, "GB/s", bench_stats(ceil, v->c->reps),
                         "limits/memcpy_bw");
            bench_report(v->c, "copy2_bw", n, "GB/s", bench_stats(ceil2, v->c->reps),
                         "vmmc/copy_bw");
            bench_report_bounded(v->c, "memalloc_bw", n, "GB/s", bench_stats(s, v->c->reps),
                                 "vmmc/copy_bw");
        } else {
            if (bandwidth(v, &v->ma, n, 0, s))
                return -1;
            bench_report(v->c, "memalloc_bw", n, "GB/s", bench_stats(s, v->c->reps),
                         "limits/memcpy_bw");
        }
        if (bandwidth(v, &v->ml, n, 0, s))
            return -1;
        memcpy(copy, s, sizeof(double) * (size_t)v->c->reps);
        bench_report(v->c, "malloc_bw", n, "GB/s", bench_stats(s, v->c->reps),
                     "limits/memcpy_bw");
        if (!v->c->quick)
            bench_report(v->c, "malloc_bw_vs_pvw", n, "GB/s", bench_stats(copy, v->c->reps),
                         "limits/pvw_bw");
    }
    if (v->c->quick)
        return 0;
    EACH(v, bw_sizes, q_bw, n)
    {
        if (bandwidth(v, &v->ma, n, 1, s))
            return -1;
        bench_report(v->c, "memalloc_bidir_bw", n, "GB/s", bench_stats(s, v->c->reps),
                     "vmmc/memalloc_bw");
        if (bandwidth(v, &v->ml, n, 1, s))
            return -1;
        bench_report(v->c, "malloc_bidir_bw", n, "GB/s", bench_stats(s, v->c->reps),
                     "vmmc/malloc_bw");
    }
    return 0;
}

