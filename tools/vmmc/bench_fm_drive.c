/* Suite "fm": rank 0's measurements (ping-pongs, streams, the ceilings
 * alternating with fm_bw) and its reports. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_fm.h"

/* One-way latency in us over @it round trips, per repetition (rep -1 is
 * the warm-up; from..to a range of repetitions). */
static int pingpong_reps(uint64_t op, size_t n, long it, double *out, int from, int to)
{
    int gather = op == OP_GPINGPONG ? 1 : op == OP_SPINGPONG ? 2 : 0;
    int block = op == OP_BLOCKPP;
    for (int rep = from; rep < to; rep++) {
        if (fb_command(op, n, it))
            return -1;
        double t0 = bench_now_ns();
        for (long i = 0; i < it; i++) {
            uint64_t want = fb.got + 1;
            if (fb_send_data(n, gather) || fb_wait_for(&fb.got, want, block))
                return -1;
        }
        double t = bench_now_ns() - t0;
        if (rep >= 0)
            out[rep] = t / (double)it / 2 / 1e3;
    }
    return 0;
}

static int pingpong(uint64_t op, size_t n, long it, double *out)
{
    return pingpong_reps(op, n, it, out, -1, fb.c->reps);
}

/* Two ping-pongs whose ratio is reported, measured in turns (a repetition
 * of one, then of the other), so that both see the same machine: the
 * ratio then moves much less between runs than either figure does. */
static int pingpong_pair(uint64_t op1, uint64_t op2, size_t n, long it, double *out1, double *out2)
{
    for (int rep = -1; rep < fb.c->reps; rep++)
        if (pingpong_reps(op1, n, it, out1, rep, rep + 1) ||
            pingpong_reps(op2, n, it, out2, rep, rep + 1))
            return -1;
    return 0;
}

/* Streaming: @count messages of @n bytes then an ack. rate[] in Mmsg/s,
 * bw[] in GB/s, ovh[] in ns per fm_send. */
static int stream_reps(uint64_t op, size_t n, long count, double *rate, double *bw, double *ovh,
                       int from, int to)
{
    for (int rep = from; rep < to; rep++) {
        if (fb_command(op, n, count))
            return -1;
        uint64_t want = fb.acks + 1;
        double t0 = bench_now_ns();
        for (long i = 0; i < count; i++)
            if (fb_send_data(n, 0))
                return -1;
        double ts = bench_now_ns() - t0;
        if (fb_wait_for(&fb.acks, want, 0))
            return -1;
        double t = bench_now_ns() - t0;
        if (rep >= 0) {
            rate[rep] = (double)count / t * 1e3;
            bw[rep] = (double)n * (double)count / t;
            ovh[rep] = ts / (double)count;
        }
    }
    return 0;
}

static int stream(uint64_t op, size_t n, long count, double *rate, double *bw, double *ovh)
{
    return stream_reps(op, n, count, rate, bw, ovh, -1, fb.c->reps);
}

/* One repetition of a copy ceiling (OP_COPY1 or OP_COPY2): GB/s. */
static int copy_rep(uint64_t op, size_t n, long count, double *out)
{
    if (fb_command(op, n, count))
        return -1;
    double t0 = bench_now_ns();
    if (op == OP_COPY1 ? fb_copy1_run(n, count) : fb_copy2_run(n, count))
        return -1;
    *out = (double)n * (double)count / (bench_now_ns() - t0);
    return 0;
}

/* fm_bw and its ceilings in this job, repetitions alternating (rep -1: a
 * warm-up of each): one core's copy (c1) and the copy both cores share
 * (c2). FM's split adapts (the sender copies all when the receiver does not
 * take its share), so its ceiling is the better of the two, repetition by
 * repetition (best). */
static int stream_with_ceiling(size_t n, long count, double *rate, double *bw, double *ovh,
                               double *c2, double *best)
{
    for (int rep = -1; rep < fb.c->reps; rep++) {
        double one, two;
        if (stream_reps(OP_STREAM, n, count, rate, bw, ovh, rep, rep + 1) ||
            copy_rep(OP_COPY1, n, count, &one) || copy_rep(OP_COPY2, n, count, &two))
            return -1;
        if (rep >= 0) {
            c2[rep] = two;
            best[rep] = one > two ? one : two;
        }
    }
    return 0;
}

static long iters_for(size_t n, long base)
{
    double budget = fb.c->quick ? 32e6 : 128e6;
    long it = (long)(budget / (double)(n ? n : 1));
    if (it > base)
        it = base;
    return it < 8 ? 8 : it;
}

static int want(size_t n) { return n >= fb.c->min_size && n <= fb.c->max_size; }

static void report_n_half_named(const size_t *sizes, int ns, double lat[][MAX_REPS],
                                const char *metric);

static void report_n_half(const size_t *sizes, int ns, double lat[][MAX_REPS])
{
    report_n_half_named(sizes, ns, lat, "fm_n_half");
}

/* N1/2 from per-message times lat[size][rep] (bandwidth = size / time). */
static void report_n_half_named(const size_t *sizes, int ns, double lat[][MAX_REPS],
                                const char *metric)
{
    double nh[MAX_REPS];
    for (int rep = 0; rep < fb.c->reps; rep++) {
        double bw[32];
        for (int i = 0; i < ns && i < 32; i++)
            bw[i] = (double)sizes[i] / lat[i][rep];
        nh[rep] = bench_n_half(sizes, bw, ns < 32 ? ns : 32);
    }
    bench_report(fb.c, metric, 0, "B", bench_stats(nh, fb.c->reps), "vmmc/memalloc_n_half");
}

/* VMMC_FM_SPLIT in effect (0: never split): from it on, both ranks copy. */
static uint64_t split_threshold(void)
{
    const char *name, *value;
    uint64_t v = 32768;
    for (int i = 0; vmmc_config_get(i, &name, &value, NULL, NULL) == VMMC_OK; i++) {
        if (strcmp(name, "VMMC_FM_SPLIT"))
            continue;
        char *end;
        double d = strtod(value, &end);
        double mult = *end == 'K' ? 0x1p10 : *end == 'M' ? 0x1p20 : *end == 'G' ? 0x1p30 : 1;
        v = (uint64_t)(d * mult);
    }
    return v;
}

int fb_drive(void)
{
    static const size_t lat_full[] = {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                      8192, 16384, 32768, 65536, 262144, 1 << 20};
    static const size_t lat_quick[] = {8, 64, 1024, 8192, 65536};
    static const size_t rate_sizes[] = {8, 16, 32, 64};
    static const size_t bw_full[] = {64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20,
                                     16 << 20};
    static const size_t bw_quick[] = {64, 4096, 65536, 1 << 20};
    static double s[MAX_REPS], s2[MAX_REPS], s3[MAX_REPS];
    static double lat[32][MAX_REPS];
    size_t sizes[32];
    int ns = 0;
    const size_t *L = fb.c->quick ? lat_quick : lat_full;
    size_t nl = fb.c->quick ? sizeof lat_quick / sizeof *L : sizeof lat_full / sizeof *L;
    for (size_t i = 0; i < nl; i++) {
        size_t n = L[i];
        if (!want(n))
            continue;
        long it = iters_for(n, fb.c->quick ? 5000 : 20000);
        if (pingpong(OP_PINGPONG, n, it, s))
            return -1;
        memcpy(lat[ns], s, sizeof(double) * (size_t)fb.c->reps);
        sizes[ns++] = n;
        bench_report(fb.c, "fm_lat", n, "us", bench_stats(s, fb.c->reps), "vmmc/memalloc_lat");
        if (n >= 32) {
            if (pingpong_pair(OP_SPINGPONG, OP_GPINGPONG, n, it, s, s2))
                return -1;
            bench_report(fb.c, "fm_stream_lat", n, "us", bench_stats(s, fb.c->reps), "fm/fm_lat");
            memcpy(s, s2, sizeof(double) * (size_t)fb.c->reps);
            bench_report(fb.c, "fm_gather_lat", n, "us", bench_stats(s, fb.c->reps),
                         "fm/fm_stream_lat");
        }
    }
    if (!fb.c->quick && ns > 2)
        report_n_half(sizes, ns, lat);
    if (want(8)) {
        if (pingpong(OP_BLOCKPP, 8, fb.c->quick ? 500 : 2000, s))
            return -1;
        bench_report(fb.c, "fm_block_lat", 8, "us", bench_stats(s, fb.c->reps), "fm/fm_lat");
    }
    for (size_t i = 0; i < sizeof rate_sizes / sizeof *rate_sizes; i++) {
        size_t n = rate_sizes[i];
        if (!want(n))
            continue;
        if (stream(OP_STREAM, n, fb.c->quick ? 100000 : 1000000, s, s2, s3))
            return -1;
        bench_report(fb.c, "fm_msg_rate", n, "Mmsg/s", bench_stats(s, fb.c->reps), NULL);
        bench_report(fb.c, "fm_send_overhead", n, "ns", bench_stats(s3, fb.c->reps), NULL);
    }
    const size_t *B = fb.c->quick ? bw_quick : bw_full;
    uint64_t split = split_threshold();
    size_t nb = fb.c->quick ? sizeof bw_quick / sizeof *B : sizeof bw_full / sizeof *B;
    static double bwc[32][MAX_REPS], bwm[32][MAX_REPS];
    size_t bsz[32];
    int nbw = 0;
    for (size_t i = 0; i < nb; i++) {
        size_t n = B[i];
        if (!want(n))
            continue;
        double keep[MAX_REPS], c2[MAX_REPS], best[MAX_REPS];
        int own = fb.peer_buf != NULL; /* the ceiling alternates with fm_bw */
        if (own ? stream_with_ceiling(n, iters_for(n, 100000), s, s2, s3, c2, best)
                : stream(OP_STREAM, n, iters_for(n, 100000), s, s2, s3))
            return -1;
        if (own) {
            bench_report(fb.c, "copy2_bw", n, "GB/s", bench_stats(c2, fb.c->reps), "vmmc/copy2_bw");
            bench_report(fb.c, "copy_best_bw", n, "GB/s", bench_stats(best, fb.c->reps),
                         "vmmc/copy_bw");
        }
        memcpy(keep, s2, sizeof(double) * (size_t)fb.c->reps);
        bench_report_bounded(fb.c, "fm_bw", n, "GB/s", bench_stats(keep, fb.c->reps),
                             own ? "fm/copy_best_bw"
                                 : split && n >= split ? "vmmc/copy2_bw" : "vmmc/copy_bw");
        memcpy(keep, s2, sizeof(double) * (size_t)fb.c->reps);
        bench_report(fb.c, "fm_bw_vs_vmmc", n, "GB/s", bench_stats(keep, fb.c->reps),
                     "vmmc/memalloc_bw");
        if (nbw < 32) {
            bsz[nbw] = n;
            for (int r = 0; r < fb.c->reps; r++)
                bwc[nbw][r] = bwm[nbw][r] = (double)n / s2[r]; /* time per message (ns) */
        }
        if (n >= 16384) {
            fb.sp = fb.hsrc;
            int rc = stream(OP_STREAM, n, iters_for(n, 100000), s, s2, s3);
            fb.sp = fb.src;
            if (rc)
                return -1;
            bench_report(fb.c, "fm_bw_malloc_src", n, "GB/s", bench_stats(s2, fb.c->reps),
                         "fm/fm_bw");
        }
        if (n >= 4096) {
            if (stream(OP_STREAM_MALLOC, n, iters_for(n, 100000), s, s2, s3))
                return -1;
            bench_report(fb.c, "fm_bw_malloc", n, "GB/s", bench_stats(s2, fb.c->reps), "fm/fm_bw");
            for (int r = 0; nbw < 32 && r < fb.c->reps; r++)
                bwm[nbw][r] = (double)n / s2[r];
        }
        if (nbw < 32)
            nbw++;
    }
    /* N1/2 as the FM papers measure it: the message size at which streaming
     * reaches half of its peak bandwidth (fm_n_half above is from the
     * ping-pong curve, which no library can bring below latency x peak). */
    if (nbw >= 2 && !fb.c->quick) {
        report_n_half_named(bsz, nbw, bwc, "fm_n_half_stream");
        /* The same for the copying path alone (receive buffers in malloc()
         * memory): its peak is the ring copy, not placement. */
        report_n_half_named(bsz, nbw, bwm, "fm_n_half_stream_copy");
    }
    return 0;
}

