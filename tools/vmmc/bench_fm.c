/* Suite "fm": Fast Messages 2.x (vmmc/fm.h) between two ranks on distinct
 * cores. Rank 0 drives and reports; rank 1 serves the commands it sends over
 * FM itself. Every handler reads the whole message into a user buffer with
 * fm_receive(), as an upper layer would.
 *
 * Metrics (size in bytes):
 *   fm_lat          us      one-way latency = ping-pong / 2, both sides polling
 *                           fm_extract(); reference vmmc/memalloc_lat
 *   fm_stream_lat   us      the same with begin_message + one piece +
 *                           end_message instead of fm_send(); reference fm/fm_lat
 *   fm_gather_lat   us      the same with each message sent as a 24-byte header
 *                           piece (its own buffer) plus a payload piece (from the
 *                           data buffer, aligned as in the one-piece case) and
 *                           read back the same way; reference fm/fm_stream_lat
 *                           (1.00 = free gather)
 *   fm_block_lat    us      8 B ping-pong with both sides in fm_extract_wait()
 *                           (spin, then sleep); reference fm/fm_lat
 *   fm_n_half       B       N1/2 from the fm_lat curve; reference
 *                           vmmc/memalloc_n_half (full runs)
 *   fm_n_half_stream B      N1/2 from the fm_bw (streaming) curve, as the FM
 *                           papers define it (full runs)
 *   fm_n_half_stream_copy B the same from fm_bw_malloc (the copying path,
 *                           whose peak is lower; full runs)
 *   fm_msg_rate     Mmsg/s  rank 0 streams messages, rank 1 extracts them
 *   fm_send_overhead ns     time per fm_send() while streaming (rank 0's view)
 *   fm_bw           GB/s    streaming bandwidth, message size = size, the
 *                           handler receiving into vmmc_mem_alloc() memory
 *                           (large messages are placed there directly, and
 *                           from 32 KiB both ranks copy: see docs/fm.md);
 *                           bounded by its ceiling measured the same way
 *                           in this job, fm/copy_best_bw (without the
 *                           mappings: the vmmc suite's copy2_bw or copy_bw)
 *   copy2_bw        GB/s    the two-core copy FM's split path does (both
 *                           ranks copy half of each message, a go/done
 *                           handshake per message), repetitions alternating
 *                           with fm_bw's; reference vmmc/copy2_bw
 *   copy_best_bw    GB/s    per repetition the better of copy2_bw and one
 *                           core's copy (the same stream, flag and ack as
 *                           fm_bw, by memcpy into the receiver's mapped
 *                           buffer): FM's split adapts, so this is its
 *                           ceiling; reference vmmc/copy_bw
 *   fm_bw_vs_vmmc   GB/s    the fm_bw figure against vmmc/memalloc_bw
 *   fm_bw_malloc_src GB/s   the same with the sender's data in malloc()
 *                           memory: placed, but the sender copies all of it
 *                           (16 KiB and up); reference fm/fm_bw
 *   fm_bw_malloc    GB/s    the same into malloc() memory (copied out of the
 *                           ring); reference fm/fm_bw
 *
 * Send and receive buffers are vmmc_mem_alloc() memory unless named
 * otherwise. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "vmmc/fm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() __asm__ volatile("" ::: "memory")
#endif

#define MAX_REPS 1000
#define MAX_SIZE ((size_t)16 << 20)

enum { H_CTL = 1, H_DATA = 2, H_GDATA = 3, H_ACK = 4 };
enum { OP_PINGPONG = 1, OP_GPINGPONG, OP_SPINGPONG, OP_BLOCKPP, OP_STREAM, OP_STREAM_MALLOC,
       OP_COPY1, OP_COPY2, OP_QUIT };

typedef struct ctl {
    uint64_t op, n, count, seq;
} ctl_t;

typedef struct fb {
    bench_ctx_t *c;
    fm_t *fm;
    int me, peer;
    char *ubuf; /* receive buffer: communication memory */
    char *mbuf; /* receive buffer: malloc() memory */
    char *dst;  /* the one the data handlers use now */
    char *src;  /* send buffer: communication memory */
    char *hsrc; /* send buffer: malloc() memory */
    char *sp;   /* the one send_data uses now */
    volatile uint64_t got;     /* data messages handled */
    volatile uint64_t acks;
    ctl_t cmd;
    uint64_t cmd_base; /* data messages handled before the command arrived */
    volatile int have_cmd;
    int err;
    /* copy2_bw, FM's ceiling from VMMC_FM_SPLIT on (see copy2()): each
     * rank's go/done words, and the peer's memory mapped here. */
    char *ctl;                /* own page: word 0 go (rank 1), word 8 done (rank 0) */
    char *peer_ctl, *peer_buf; /* rank 0: rank 1's ctl and cbuf; rank 1: rank 0's ctl and cbuf */
    /* The ceilings' own buffer (rank 0 copies from it, rank 1 into it), the
     * size of ubuf/src but another allocation: an allocation is mapped by
     * one export at a time, and FM's placement keys ubuf and src. */
    char *cbuf;
    vmmc_export_t *ex[2];
    vmmc_proxy_t *px[2];
    uint64_t seq2;
} fb_t;

static fb_t g;

static void h_ctl(fm_stream_t *s, int sender, void *arg)
{
    if (fm_receive(&g.cmd, s, sizeof g.cmd) == (ssize_t)sizeof g.cmd) {
        g.cmd_base = g.got; /* data sent after the command may be handled in the same extract */
        g.dst = g.cmd.op == OP_STREAM_MALLOC ? g.mbuf : g.ubuf;
        g.have_cmd = 1;
    }
}

static void h_data(fm_stream_t *s, int sender, void *arg)
{
    if (fm_receive(g.dst, s, MAX_SIZE) < 0)
        g.err = 1;
    g.got++;
}

static void h_gdata(fm_stream_t *s, int sender, void *arg)
{
    char hdr[24];
    if (fm_receive(hdr, s, sizeof hdr) < 0 || fm_receive(g.dst, s, MAX_SIZE) < 0)
        g.err = 1;
    g.got++;
}

static void h_ack(fm_stream_t *s, int sender, void *arg) { g.acks++; }

/* gather: 0 = fm_send(), 1 = header piece + payload piece, 2 = one piece */
static int send_data(size_t n, int gather)
{
    if (!gather)
        return fm_send(g.fm, g.peer, H_DATA, g.sp, n);
    fm_stream_t *s;
    int rc = fm_begin_message(g.fm, g.peer, n, gather == 1 ? H_GDATA : H_DATA, &s);
    if (rc)
        return rc;
    if (gather == 2)
        rc = fm_send_piece(s, g.sp, n);
    else {
        /* An upper layer's header struct, then the user's buffer: the
         * payload is as aligned as in the one-piece case. */
        static char hdr[24];
        size_t h = n < sizeof hdr ? n : sizeof hdr;
        if ((rc = fm_send_piece(s, hdr, h)) == 0 && h < n)
            rc = fm_send_piece(s, g.sp, n - h);
    }
    int rc2 = fm_end_message(s);
    return rc ? rc : rc2;
}

/* Poll (or wait) until *ctr reaches @target. */
static int wait_for(volatile uint64_t *ctr, uint64_t target, int block)
{
    while (*ctr < target) {
        int rc = block ? fm_extract_wait(g.fm, FM_EXTRACT_ALL, 20000) : fm_extract(g.fm, FM_EXTRACT_ALL);
        if (rc < 0 || (block && rc == 0)) {
            bench_note(g.c, "fm: waiting failed: %s (%s)", vmmc_strerror(rc ? rc : VMMC_ERR_TIMEOUT),
                       vmmc_last_error());
            return -1;
        }
        if (g.err)
            return -1;
    }
    return 0;
}

static int copy2_run(size_t n, long count);
static int copy1_run(size_t n, long count);

/* Rank 1: serve commands until OP_QUIT. */
static int serve(void)
{
    for (;;) {
        while (!g.have_cmd)
            if (fm_extract_wait(g.fm, FM_EXTRACT_ALL, -1) < 0)
                return -1;
        g.have_cmd = 0;
        ctl_t c = g.cmd;
        int gather = c.op == OP_GPINGPONG ? 1 : c.op == OP_SPINGPONG ? 2 : 0;
        int block = c.op == OP_BLOCKPP;
        switch (c.op) {
        case OP_PINGPONG:
        case OP_GPINGPONG:
        case OP_SPINGPONG:
        case OP_BLOCKPP:
            for (uint64_t i = 0; i < c.count; i++) {
                if (wait_for(&g.got, g.cmd_base + i + 1, block) || send_data(c.n, gather))
                    return -1;
            }
            break;
        case OP_COPY1:
        case OP_COPY2:
            if (!g.peer_buf ||
                (c.op == OP_COPY1 ? copy1_run(c.n, (long)c.count) : copy2_run(c.n, (long)c.count)))
                return -1;
            break;
        case OP_STREAM:
        case OP_STREAM_MALLOC:
            if (wait_for(&g.got, g.cmd_base + c.count, 0) || fm_send_4(g.fm, g.peer, H_ACK, 0, 0, 0, 0))
                return -1;
            break;
        case OP_QUIT:
            return 0;
        default:
            return -1;
        }
    }
}

/* copy2_bw: @count messages of @n bytes, each copied by both ranks (rank 1
 * the front half out of rank 0's src, rank 0 the back half into rank 1's
 * ubuf) with a go/done handshake per message, as a sender that may reuse
 * its buffer on return must: the two-core copy FM's split path does. */
/* Spin until this rank's word reaches @k (20 s at most). */
static int copy_wait(volatile uint64_t *mine, uint64_t k)
{
    double t0 = 0;
    for (unsigned long spins = 0; __atomic_load_n(mine, __ATOMIC_ACQUIRE) < k; spins++) {
        cpu_relax();
        if ((spins & 0xffff) == 0xffff) {
            double t = bench_now_ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > 20e9) {
                bench_note(g.c, "fm: copy ceiling: the peer did not answer within 20 s");
                return -1;
            }
        }
    }
    return 0;
}

/* copy_bw in this job: rank 0 copies @count messages into rank 1's ubuf,
 * then says go and waits for done (the stream, flag and ack of fm_bw). */
static int copy1_run(size_t n, long count)
{
    volatile uint64_t *mine = (volatile uint64_t *)(void *)(g.ctl + (g.me ? 0 : 64));
    uint64_t *theirs = (uint64_t *)(void *)(g.peer_ctl + (g.me ? 64 : 0));
    uint64_t k = ++g.seq2;
    if (g.me == 0) {
        for (long i = 0; i < count; i++)
            memcpy(g.peer_buf, g.cbuf, n);
        __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
        return copy_wait(mine, k);
    }
    if (copy_wait(mine, k))
        return -1;
    __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
    return 0;
}

static int copy2_run(size_t n, long count)
{
    size_t h = (n / 2) & ~(size_t)63;
    volatile uint64_t *mine = (volatile uint64_t *)(void *)(g.ctl + (g.me ? 0 : 64));
    uint64_t *theirs = (uint64_t *)(void *)(g.peer_ctl + (g.me ? 64 : 0));
    for (long i = 0; i < count; i++) {
        uint64_t k = ++g.seq2;
        if (g.me == 0) {
            __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
            memcpy(g.peer_buf + h, g.cbuf + h, n - h);
        }
        if (copy_wait(mine, k))
            return -1;
        if (g.me == 1) {
            memcpy(g.cbuf, g.peer_buf, h);
            __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
        }
    }
    return 0;
}

/* Export this rank's side of copy2 and map the peer's: 0, or -1 (no
 * ceiling measured in this suite; a note says why). */
static int copy2_setup(vmmc_ep_t *ep)
{
    int rc;
    const char *what = "vmmc_mem_alloc";
    if ((rc = vmmc_mem_alloc(ep, 4096, (void **)&g.ctl)) != VMMC_OK)
        goto fail;
    memset(g.ctl, 0, 4096);
    if ((rc = vmmc_mem_alloc(ep, MAX_SIZE, (void **)&g.cbuf)) != VMMC_OK)
        goto fail;
    memset(g.cbuf, 0x5a, MAX_SIZE);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .flags = VMMC_EXPORT_READ};
    p.name = "fmbench.ctl";
    p.addr = g.ctl;
    p.length = 4096;
    what = "vmmc_export";
    if ((rc = vmmc_export(ep, &p, &g.ex[0])) != VMMC_OK)
        goto fail;
    p.name = g.me ? "fmbench.ubuf" : "fmbench.src";
    p.addr = g.cbuf;
    p.length = MAX_SIZE;
    if ((rc = vmmc_export(ep, &p, &g.ex[1])) != VMMC_OK)
        goto fail;
    what = "vmmc_import";
    if ((rc = vmmc_import(ep, g.peer, "fmbench.ctl", 20000, &g.px[0])) != VMMC_OK ||
        (rc = vmmc_import(ep, g.peer, g.me ? "fmbench.src" : "fmbench.ubuf", 20000, &g.px[1])) !=
            VMMC_OK)
        goto fail;
    what = "vmmc_proxy_map";
    void *a, *b;
    if ((rc = vmmc_proxy_map(g.px[0], &a)) != VMMC_OK || (rc = vmmc_proxy_map(g.px[1], &b)) != VMMC_OK)
        goto fail;
    g.peer_ctl = a;
    g.peer_buf = b;
    return 0;
fail:
    if (g.me == 0)
        bench_note(g.c, "fm: no two-core copy ceiling in this suite (%s: %s); fm_bw is checked "
                        "against vmmc/copy2_bw of the vmmc suite", what, vmmc_last_error());
    return -1;
}

static void copy2_teardown(vmmc_ep_t *ep)
{
    for (int i = 0; i < 2; i++) {
        if (g.px[i])
            vmmc_unimport(g.px[i]);
        if (g.ex[i])
            vmmc_unexport(g.ex[i]);
    }
    if (g.ctl)
        vmmc_mem_free(ep, g.ctl);
    if (g.cbuf)
        vmmc_mem_free(ep, g.cbuf);
}

static int command(uint64_t op, size_t n, long count)
{
    ctl_t c = {op, n, (uint64_t)count, 0};
    int rc = fm_send(g.fm, g.peer, H_CTL, &c, sizeof c);
    if (rc)
        bench_note(g.c, "fm: control message failed: %s", vmmc_last_error());
    return rc;
}

/* One-way latency in us over @it round trips, per repetition (rep -1 is
 * the warm-up; from..to a range of repetitions). */
static int pingpong_reps(uint64_t op, size_t n, long it, double *out, int from, int to)
{
    int gather = op == OP_GPINGPONG ? 1 : op == OP_SPINGPONG ? 2 : 0;
    int block = op == OP_BLOCKPP;
    for (int rep = from; rep < to; rep++) {
        if (command(op, n, it))
            return -1;
        double t0 = bench_now_ns();
        for (long i = 0; i < it; i++) {
            uint64_t want = g.got + 1;
            if (send_data(n, gather) || wait_for(&g.got, want, block))
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
    return pingpong_reps(op, n, it, out, -1, g.c->reps);
}

/* Two ping-pongs whose ratio is reported, measured in turns (a repetition
 * of one, then of the other), so that both see the same machine: the
 * ratio then moves much less between runs than either figure does. */
static int pingpong_pair(uint64_t op1, uint64_t op2, size_t n, long it, double *out1, double *out2)
{
    for (int rep = -1; rep < g.c->reps; rep++)
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
        if (command(op, n, count))
            return -1;
        uint64_t want = g.acks + 1;
        double t0 = bench_now_ns();
        for (long i = 0; i < count; i++)
            if (send_data(n, 0))
                return -1;
        double ts = bench_now_ns() - t0;
        if (wait_for(&g.acks, want, 0))
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
    return stream_reps(op, n, count, rate, bw, ovh, -1, g.c->reps);
}

/* One repetition of a copy ceiling (OP_COPY1 or OP_COPY2): GB/s. */
static int copy_rep(uint64_t op, size_t n, long count, double *out)
{
    if (command(op, n, count))
        return -1;
    double t0 = bench_now_ns();
    if (op == OP_COPY1 ? copy1_run(n, count) : copy2_run(n, count))
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
    for (int rep = -1; rep < g.c->reps; rep++) {
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
    double budget = g.c->quick ? 32e6 : 128e6;
    long it = (long)(budget / (double)(n ? n : 1));
    if (it > base)
        it = base;
    return it < 8 ? 8 : it;
}

static int want(size_t n) { return n >= g.c->min_size && n <= g.c->max_size; }

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
    for (int rep = 0; rep < g.c->reps; rep++) {
        double bw[32];
        for (int i = 0; i < ns && i < 32; i++)
            bw[i] = (double)sizes[i] / lat[i][rep];
        nh[rep] = bench_n_half(sizes, bw, ns < 32 ? ns : 32);
    }
    bench_report(g.c, metric, 0, "B", bench_stats(nh, g.c->reps), "vmmc/memalloc_n_half");
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

static int drive(void)
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
    const size_t *L = g.c->quick ? lat_quick : lat_full;
    size_t nl = g.c->quick ? sizeof lat_quick / sizeof *L : sizeof lat_full / sizeof *L;
    for (size_t i = 0; i < nl; i++) {
        size_t n = L[i];
        if (!want(n))
            continue;
        long it = iters_for(n, g.c->quick ? 5000 : 20000);
        if (pingpong(OP_PINGPONG, n, it, s))
            return -1;
        memcpy(lat[ns], s, sizeof(double) * (size_t)g.c->reps);
        sizes[ns++] = n;
        bench_report(g.c, "fm_lat", n, "us", bench_stats(s, g.c->reps), "vmmc/memalloc_lat");
        if (n >= 32) {
            if (pingpong_pair(OP_SPINGPONG, OP_GPINGPONG, n, it, s, s2))
                return -1;
            bench_report(g.c, "fm_stream_lat", n, "us", bench_stats(s, g.c->reps), "fm/fm_lat");
            memcpy(s, s2, sizeof(double) * (size_t)g.c->reps);
            bench_report(g.c, "fm_gather_lat", n, "us", bench_stats(s, g.c->reps),
                         "fm/fm_stream_lat");
        }
    }
    if (!g.c->quick && ns > 2)
        report_n_half(sizes, ns, lat);
    if (want(8)) {
        if (pingpong(OP_BLOCKPP, 8, g.c->quick ? 500 : 2000, s))
            return -1;
        bench_report(g.c, "fm_block_lat", 8, "us", bench_stats(s, g.c->reps), "fm/fm_lat");
    }
    for (size_t i = 0; i < sizeof rate_sizes / sizeof *rate_sizes; i++) {
        size_t n = rate_sizes[i];
        if (!want(n))
            continue;
        if (stream(OP_STREAM, n, g.c->quick ? 100000 : 1000000, s, s2, s3))
            return -1;
        bench_report(g.c, "fm_msg_rate", n, "Mmsg/s", bench_stats(s, g.c->reps), NULL);
        bench_report(g.c, "fm_send_overhead", n, "ns", bench_stats(s3, g.c->reps), NULL);
    }
    const size_t *B = g.c->quick ? bw_quick : bw_full;
    uint64_t split = split_threshold();
    size_t nb = g.c->quick ? sizeof bw_quick / sizeof *B : sizeof bw_full / sizeof *B;
    static double bwc[32][MAX_REPS], bwm[32][MAX_REPS];
    size_t bsz[32];
    int nbw = 0;
    for (size_t i = 0; i < nb; i++) {
        size_t n = B[i];
        if (!want(n))
            continue;
        double keep[MAX_REPS], c2[MAX_REPS], best[MAX_REPS];
        int own = g.peer_buf != NULL; /* the ceiling alternates with fm_bw */
        if (own ? stream_with_ceiling(n, iters_for(n, 100000), s, s2, s3, c2, best)
                : stream(OP_STREAM, n, iters_for(n, 100000), s, s2, s3))
            return -1;
        if (own) {
            bench_report(g.c, "copy2_bw", n, "GB/s", bench_stats(c2, g.c->reps), "vmmc/copy2_bw");
            bench_report(g.c, "copy_best_bw", n, "GB/s", bench_stats(best, g.c->reps),
                         "vmmc/copy_bw");
        }
        memcpy(keep, s2, sizeof(double) * (size_t)g.c->reps);
        bench_report_bounded(g.c, "fm_bw", n, "GB/s", bench_stats(keep, g.c->reps),
                             own ? "fm/copy_best_bw"
                                 : split && n >= split ? "vmmc/copy2_bw" : "vmmc/copy_bw");
        memcpy(keep, s2, sizeof(double) * (size_t)g.c->reps);
        bench_report(g.c, "fm_bw_vs_vmmc", n, "GB/s", bench_stats(keep, g.c->reps),
                     "vmmc/memalloc_bw");
        if (nbw < 32) {
            bsz[nbw] = n;
            for (int r = 0; r < g.c->reps; r++)
                bwc[nbw][r] = bwm[nbw][r] = (double)n / s2[r]; /* time per message (ns) */
        }
        if (n >= 16384) {
            g.sp = g.hsrc;
            int rc = stream(OP_STREAM, n, iters_for(n, 100000), s, s2, s3);
            g.sp = g.src;
            if (rc)
                return -1;
            bench_report(g.c, "fm_bw_malloc_src", n, "GB/s", bench_stats(s2, g.c->reps),
                         "fm/fm_bw");
        }
        if (n >= 4096) {
            if (stream(OP_STREAM_MALLOC, n, iters_for(n, 100000), s, s2, s3))
                return -1;
            bench_report(g.c, "fm_bw_malloc", n, "GB/s", bench_stats(s2, g.c->reps), "fm/fm_bw");
            for (int r = 0; nbw < 32 && r < g.c->reps; r++)
                bwm[nbw][r] = (double)n / s2[r];
        }
        if (nbw < 32)
            nbw++;
    }
    /* N1/2 as the FM papers measure it: the message size at which streaming
     * reaches half of its peak bandwidth (fm_n_half above is from the
     * ping-pong curve, which no library can bring below latency x peak). */
    if (nbw >= 2 && !g.c->quick) {
        report_n_half_named(bsz, nbw, bwc, "fm_n_half_stream");
        /* The same for the copying path alone (receive buffers in malloc()
         * memory): its peak is the ring copy, not placement. */
        report_n_half_named(bsz, nbw, bwm, "fm_n_half_stream_copy");
    }
    return 0;
}

static int run_fm(bench_ctx_t *c)
{
    memset((void *)&g, 0, sizeof g);
    g.c = c;
    g.me = c->rank;
    g.peer = 1 - c->rank;
    if (c->reps > MAX_REPS)
        c->reps = MAX_REPS;
    int rc = fm_init(c->ep, NULL, &g.fm);
    if (rc) {
        bench_note(c, "fm: fm_init failed: %s", vmmc_last_error());
        return -1;
    }
    if (vmmc_mem_alloc(c->ep, MAX_SIZE, (void **)&g.ubuf) != VMMC_OK)
        g.ubuf = NULL;
    if (vmmc_mem_alloc(c->ep, MAX_SIZE, (void **)&g.src) != VMMC_OK)
        g.src = NULL;
    g.mbuf = malloc(MAX_SIZE);
    g.hsrc = malloc(MAX_SIZE);
    g.dst = g.ubuf;
    g.sp = g.src;
    int ok = g.ubuf && g.mbuf && g.src && g.hsrc;
    if (ok) {
        memset(g.src, 0x5a, MAX_SIZE);
        memset(g.hsrc, 0x5a, MAX_SIZE);
        memset(g.mbuf, 0, MAX_SIZE);
        ok = fm_register_handler(g.fm, H_CTL, h_ctl, NULL) == H_CTL &&
             fm_register_handler(g.fm, H_DATA, h_data, NULL) == H_DATA &&
             fm_register_handler(g.fm, H_GDATA, h_gdata, NULL) == H_GDATA &&
             fm_register_handler(g.fm, H_ACK, h_ack, NULL) == H_ACK;
    }
    if (ok)
        copy2_setup(c->ep);
    if (ok && vmmc_barrier(c->ep) != VMMC_OK)
        ok = 0;
    if (ok) {
        if (g.me == 0) {
            ok = drive() == 0;
            if (command(OP_QUIT, 0, 0))
                ok = 0;
        } else {
            ok = serve() == 0;
        }
    }
    if (ok)
        vmmc_barrier(c->ep);
    if (ok)
        fm_finalize(g.fm);
    copy2_teardown(c->ep);
    if (g.ubuf)
        vmmc_mem_free(c->ep, g.ubuf);
    if (g.src)
        vmmc_mem_free(c->ep, g.src);
    free(g.mbuf);
    free(g.hsrc);
    return ok ? 0 : -1;
}

BENCH_SUITE(fm_suite, "fm", "Fast Messages: latency, gather, message rate, bandwidth, N1/2", 2,
            run_fm);
