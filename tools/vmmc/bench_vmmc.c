/* Suite "vmmc": the core library through its public API (vmmc/vmmc.h), two
 * ranks on distinct cores. Rank 0 measures and reports; rank 1 answers.
 *
 * Each rank exports three regions: "ma" from vmmc_mem_alloc() (a send into it
 * is a copy into a shared mapping), "ml" from malloc() (a send into it goes
 * through process_vm_writev on shm), and "nt", a small vmmc_mem_alloc()
 * region with a notification handler. The last page of "ma" holds control
 * words (flags and acks), one cache line each.
 *
 * Metrics (size in bytes):
 *   memalloc_lat, malloc_lat        us   one-way latency = ping-pong / 2; the
 *                                        receiver polls the last 8-byte word,
 *                                        which holds the sequence number
 *   memalloc_bw, malloc_bw          GB/s sender streams N sends, then a flag;
 *                                        the receiver acks the flag
 *   malloc_bw_vs_pvw                GB/s the malloc_bw figure, compared with
 *                                        process_vm_writev alone (full runs)
 *   memalloc_bidir_bw, malloc_bidir_bw  GB/s both ranks stream at once (total)
 *   memalloc_alt_lat                us   both ranks send to each other at once,
 *                                        time per exchange (alternating traffic)
 *   memalloc_n_half, malloc_n_half  B    N1/2: size at which size / one-way
 *                                        latency reaches half its peak (full runs)
 *   memalloc_send_overhead, malloc_send_overhead  ns  time per vmmc_send()
 *   memalloc_async_return           ns   time for vmmc_send_async() to return
 *   overlap                         x    1 MiB async send while computing for
 *                                        about as long: time of both together /
 *                                        the longer of the two alone (1 = full
 *                                        overlap, 2 = none)
 *   line_lat                        us   the floor of memalloc_lat: the same
 *                                        ping-pong (same ranks, pinning, loop,
 *                                        wait, clock and iteration counts) with
 *                                        each vmmc_send() replaced by a plain
 *                                        memcpy into a mapping of the peer's
 *                                        region (vmmc_proxy_map): one cache
 *                                        line each way at 8 B. Repetitions of
 *                                        the two alternate, so both see the
 *                                        same machine. memalloc_lat is
 *                                        reported against it as its floor
 *   copy_bw                         GB/s the ceiling of memalloc_bw, made the
 *                                        same way: the same stream, flag and
 *                                        ack, with memcpy into the mapping
 *   copy2_bw                        GB/s the ceiling of a copy that both
 *                                        cores share (FM's split copy): per
 *                                        message, rank 0 says go, rank 1
 *                                        copies the front half from rank 0's
 *                                        memory while rank 0 copies the back
 *                                        half into rank 1's, and rank 0 waits
 *                                        for rank 1's done before the next
 *                                        (the sender may reuse its buffer when
 *                                        the send returns); source and
 *                                        destination are "ma" memory
 *   notify_poll_lat, notify_block_lat, notify_epoll_lat, notify_service_lat
 *                                   us   8-byte send with VMMC_SEND_NOTIFY,
 *                                        the handler replies; ping-pong / 2 with
 *                                        both sides waiting in that mode (service:
 *                                        rank 1's service thread replies while
 *                                        rank 1's main thread sleeps) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() __asm__ volatile("" ::: "memory")
#endif

#include "bench.h"

#define MAX_REPS 1000
#define WAIT_LIMIT_NS 20e9 /* a peer silent this long means something broke */
#define MAX_SIZE ((size_t)16 << 20)

enum { SLOT_FLAG = 0, SLOT_ACK = 1, SLOT_GO = 2, SLOT_DONE = 3, SLOT_MAP = 4, SLOT_GO2 = 5,
       SLOT_DONE2 = 6, NSLOTS = 8 };
enum { MODE_POLL, MODE_BLOCK, MODE_EPOLL, MODE_SERVICE };

typedef struct region {
    char *mem;
    size_t len;
    char *map;        /* the peer's region mapped here (floors), or NULL */
    int from_alloc;
    vmmc_export_t *ex;
    vmmc_proxy_t *px; /* the peer's region of the same kind */
} region_t;

typedef struct vb {
    bench_ctx_t *c;
    vmmc_ep_t *ep;
    int me, peer;
    size_t data;      /* bytes of data area in ma and ml */
    region_t ma, ml, nt;
    char *src;        /* send source */
    uint64_t seq;     /* sequence numbers, identical on both ranks */
    uint64_t seq2;    /* copy2_bw's messages, identical on both ranks */
    _Atomic uint64_t notified;
    uint64_t reply_until; /* rank 1: the handler replies while notified <= this */
    int service_mode;
    sem_t done;
    int failed;
    int drive; /* waits call vmmc_progress(): data arrives through it (udp) */
    int raw;   /* measuring a floor: data moves by memcpy into r->map */
} vb_t;

/* ------------------------------------------------------------------------- */

static int fail(vb_t *v, const char *what, int rc)
{
    if (!v->failed)
        bench_note(v->c, "vmmc suite: %s failed: %s (%s)", what, vmmc_strerror(rc),
                   vmmc_last_error());
    v->failed = 1;
    return -1;
}

static volatile uint64_t *slot(vb_t *v, int k)
{
    return (volatile uint64_t *)(v->ma.mem + v->data + 64 * (size_t)k);
}

static size_t slot_off(vb_t *v, int k)
{
    return v->data + 64 * (size_t)k;
}

/* Spin until *p >= val (every word only grows: sequence numbers); -1 if the
 * peer stays silent too long. */
static int wait_word(vb_t *v, volatile uint64_t *p, uint64_t val)
{
    double t0 = 0;
    for (unsigned long spins = 0;; spins++) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) >= val)
            return 0;
        if (v->drive) {
            int rc = vmmc_progress(v->ep);
            if (rc < 0)
                return fail(v, "vmmc_progress", rc);
            /* Now and then, let the progress thread on this cpu run (timers,
             * queued control messages). Not on every empty pass: while
             * the rank polls, the udp progress thread leaves the socket to
             * it, and a system call per pass would only lengthen the time
             * before a datagram is seen. */
            if (rc == 0 && (spins & 63) == 63)
                sched_yield();
        } else {
            cpu_relax();
        }
        if ((spins & 0xffff) == 0xffff) {
            double now = bench_now_ns();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 > WAIT_LIMIT_NS) {
                bench_note(v->c, "vmmc suite: the peer did not answer within %.0f s",
                           WAIT_LIMIT_NS / 1e9);
                v->failed = 1;
                return -1;
            }
        }
    }
}

static int put_word(vb_t *v, int k, uint64_t val)
{
    int rc = vmmc_send(v->ma.px, slot_off(v, k), &val, sizeof val, 0);
    return rc ? fail(v, "vmmc_send (control word)", rc) : 0;
}

static void on_notify(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    vb_t *v = arg;
    uint64_t k = atomic_fetch_add(&v->notified, 1) + 1;
    if (v->me == 1 && k <= v->reply_until) {
        uint64_t val = k;
        int rc = vmmc_send(v->nt.px, 0, &val, sizeof val, VMMC_SEND_NOTIFY);
        if (rc)
            v->failed = 1;
        if (k == v->reply_until && v->service_mode)
            sem_post(&v->done);
    }
    (void)ep;
    (void)n;
}

static int setup_region(vb_t *v, region_t *r, const char *name, size_t len, int from_alloc,
                        int handler)
{
    r->len = len;
    r->from_alloc = from_alloc;
    int rc;
    if (from_alloc) {
        void *p = NULL;
        rc = vmmc_mem_alloc(v->ep, len, &p);
        if (rc)
            return fail(v, "vmmc_mem_alloc", rc);
        r->mem = p;
    } else {
        void *p = NULL;
        if (posix_memalign(&p, 4096, len)) {
            bench_note(v->c, "vmmc suite: out of memory");
            v->failed = 1;
            return -1;
        }
        memset(p, 0, len);
        r->mem = p;
    }
    int importers[1] = {v->peer};
    vmmc_export_params_t ep = {0};
    ep.field_mask = VMMC_EXPORT_PARAM_IMPORTERS | (handler ? VMMC_EXPORT_PARAM_HANDLER : 0) |
                    VMMC_EXPORT_PARAM_FLAGS;
    /* A whole allocation that grants reads is mapped by the peer (the
     * deliberate-update path, and copy2_bw reads through the mapping). */
    ep.flags = from_alloc ? VMMC_EXPORT_READ : 0;
    ep.name = name;
    ep.addr = r->mem;
    ep.length = len;
    ep.importers = importers;
    ep.num_importers = 1;
    if (handler) {
        ep.handler = on_notify;
        ep.handler_arg = v;
    }
    rc = vmmc_export(v->ep, &ep, &r->ex);
    if (rc)
        return fail(v, "vmmc_export", rc);
    rc = vmmc_import(v->ep, v->peer, name, 20000, &r->px);
    if (rc)
        return fail(v, "vmmc_import", rc);
    return 0;
}

static void teardown_region(vb_t *v, region_t *r)
{
    if (r->px)
        vmmc_unimport(r->px);
    if (r->ex)
        vmmc_unexport(r->ex);
    if (r->mem) {
        if (r->from_alloc)
            vmmc_mem_free(v->ep, r->mem);
        else
            free(r->mem);
    }
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------------- */
/* Sizes                                                                      */

static const size_t lat_sizes[] = {8, 64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20};
static const size_t bw_sizes[] = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
static const size_t ovh_sizes[] = {8, 64, 1024, 4096, 65536, 1 << 20};
static const size_t async_sizes[] = {8, 65536, 1 << 20};
static const size_t q_lat[] = {8, 64}, q_bw[] = {65536, 1 << 20, 4 << 20}, q_ovh[] = {8},
                    q_async[] = {1 << 20};

/* --quick measures latency at 8 B, and over udp at 64 B too: the size of
 * its reference (peers/sockperf_udp_lat) and of the transport's figure. */
static int quick_skip(vb_t *v, size_t n)
{
    return v->c->quick && n == 64 && !v->drive;
}

static int want(vb_t *v, size_t n)
{
    return n >= v->c->min_size && n <= v->c->max_size && n <= v->data;
}

#define EACH(v, FULL, QUICK, n)                                                              \
    for (size_t n##_i = 0, n;                                                                \
         n##_i < ((v)->c->quick ? sizeof QUICK / sizeof *QUICK : sizeof FULL / sizeof *FULL) && \
         ((n = (v)->c->quick ? QUICK[n##_i] : FULL[n##_i]), 1);                              \
         n##_i++)                                                                            \
        if (want(v, n))

static long iters_for(vb_t *v, size_t n, long base)
{
    double budget = v->c->quick ? 64e6 : 256e6; /* bytes per repetition */
    long it = (long)(budget / (double)n);
    if (it > base)
        it = base;
    return it < 8 ? 8 : it;
}

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
    return rc ? fail(v, "vmmc_send", rc) : 0;
}

/* One exchange of @n bytes: rank 0 (or both ranks, @both) sends first. */
static inline int exchange(vb_t *v, region_t *r, size_t n, int both, volatile uint64_t *mine)
{
    uint64_t s = ++v->seq;
    if (v->me == 1 && !both && wait_word(v, mine, s))
        return -1;
    memcpy(v->src + n - 8, &s, 8);
    if (put_data(v, r, n))
        return -1;
    if ((v->me == 0 || both) && wait_word(v, mine, s))
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

static int test_latency(vb_t *v)
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
            if (quick_skip(v, n))
                continue;
            long it = iters_for(v, n, v->c->quick ? 5000 : 20000);
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
            long it = iters_for(v, n, 20000);
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

static int stream(vb_t *v, region_t *r, size_t n, long count)
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
    long count = iters_for(v, n, 100000);
    for (int rep = warm ? -1 : 0; rep < reps; rep++) {
        uint64_t s = ++v->seq;
        double t0 = bench_now_ns();
        if (v->me == 0) {
            if (bidir && put_word(v, SLOT_GO, s))
                return -1;
            if (stream(v, r, n, count) || put_word(v, SLOT_FLAG, s))
                return -1;
            if (bidir ? wait_word(v, slot(v, SLOT_FLAG), s) : wait_word(v, slot(v, SLOT_ACK), s))
                return -1;
        } else {
            if (bidir) {
                if (wait_word(v, slot(v, SLOT_GO), s) || stream(v, r, n, count) ||
                    put_word(v, SLOT_FLAG, s) || wait_word(v, slot(v, SLOT_FLAG), s))
                    return -1;
            } else if (wait_word(v, slot(v, SLOT_FLAG), s) || put_word(v, SLOT_ACK, s)) {
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
    volatile uint64_t *go = slot(v, SLOT_GO2), *done = slot(v, SLOT_DONE2);
    uint64_t *peer_go = (uint64_t *)(void *)(v->ma.map + slot_off(v, SLOT_GO2));
    uint64_t *peer_done = (uint64_t *)(void *)(v->ma.map + slot_off(v, SLOT_DONE2));
    double t0 = bench_now_ns();
    for (long i = 0; i < count; i++) {
        uint64_t k = ++v->seq2;
        if (v->me == 0) {
            __atomic_store_n(peer_go, k, __ATOMIC_RELEASE);
            memcpy(v->ma.map + h, v->ma.mem + h, n - h);
            if (wait_word(v, done, k))
                return -1;
        } else {
            if (wait_word(v, go, k))
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
    long count = iters_for(v, n, 100000);
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

static int test_bandwidth(vb_t *v)
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

/* ------------------------------------------------------------------------- */
/* Send overhead, asynchronous sends, overlap (rank 0 sends, rank 1 idles)    */

static int test_overhead(vb_t *v)
{
    double s[MAX_REPS];
    if (v->me == 0) {
        region_t *rs[2] = {&v->ma, &v->ml};
        const char *names[2] = {"memalloc_send_overhead", "malloc_send_overhead"};
        for (int k = 0; k < 2; k++) {
            EACH(v, ovh_sizes, q_ovh, n)
            {
                long count = iters_for(v, n, v->c->quick ? 20000 : 100000);
                if (stream(v, rs[k], n, count / 10 + 1))
                    return -1;
                for (int rep = 0; rep < v->c->reps; rep++) {
                    double t0 = bench_now_ns();
                    if (stream(v, rs[k], n, count))
                        return -1;
                    s[rep] = (bench_now_ns() - t0) / (double)count;
                }
                const char *ref = k == 0 ? (n <= 4096 ? "limits/syscall" : "limits/memcpy_bw")
                                         : "limits/pvw_call";
                if (k == 0 && n > 4096)
                    ref = NULL;
                bench_report(v->c, names[k], n, "ns", bench_stats(s, v->c->reps), ref);
            }
        }
    }
    int rc = vmmc_barrier(v->ep);
    return rc ? fail(v, "vmmc_barrier", rc) : 0;
}

static int send_async_wait(vb_t *v, region_t *r, size_t n, double *ret_ns)
{
    vmmc_request_t req;
    double t0 = bench_now_ns();
    int rc = vmmc_send_async(r->px, 0, v->src, n, 0, &req);
    if (ret_ns)
        *ret_ns = bench_now_ns() - t0;
    if (rc == VMMC_INPROGRESS)
        rc = vmmc_request_wait(&req, 20000);
    return rc ? fail(v, "vmmc_send_async", rc) : 0;
}

/* Arithmetic that touches no memory, so it does not compete with the copy. */
static uint64_t compute(long iters)
{
    uint64_t x = 88172645463325252ull;
    for (long i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static volatile uint64_t compute_sink;

static int test_async(vb_t *v)
{
    double s[MAX_REPS];
    if (v->me == 0) {
        EACH(v, async_sizes, q_async, n)
        {
            int count = v->c->quick ? 20 : 100;
            for (int w = 0; w < 3; w++)
                if (send_async_wait(v, &v->ma, n, NULL))
                    return -1;
            for (int rep = 0; rep < v->c->reps; rep++) {
                double sum = 0, t;
                for (int i = 0; i < count; i++) {
                    if (send_async_wait(v, &v->ma, n, &t))
                        return -1;
                    sum += t;
                }
                s[rep] = sum / count;
            }
            bench_report(v->c, "memalloc_async_return", n, "ns", bench_stats(s, v->c->reps),
                         "vmmc/memalloc_send_overhead");
        }
        size_t n = (size_t)1 << 20;
        if (want(v, n)) {
            /* time of the send alone, and compute calibrated to last as long */
            double ts[MAX_REPS];
            for (int rep = 0; rep < v->c->reps; rep++) {
                double t0 = bench_now_ns();
                if (send_async_wait(v, &v->ma, n, NULL))
                    return -1;
                ts[rep] = bench_now_ns() - t0;
            }
            double t_send = bench_stats(ts, v->c->reps).median;
            long it = 1000;
            for (;;) {
                double t0 = bench_now_ns();
                compute_sink = compute(it);
                double t = bench_now_ns() - t0;
                if (t > t_send / 8 || it > (1l << 40)) {
                    it = (long)((double)it * t_send / (t > 0 ? t : 1));
                    break;
                }
                it *= 2;
            }
            /* per repetition: the send alone, the computation alone, both at once */
            double ta[MAX_REPS], tb[MAX_REPS], tboth[MAX_REPS];
            for (int rep = 0; rep < v->c->reps; rep++) {
                double t0 = bench_now_ns();
                if (send_async_wait(v, &v->ma, n, NULL))
                    return -1;
                ta[rep] = bench_now_ns() - t0;
                t0 = bench_now_ns();
                compute_sink = compute(it);
                tb[rep] = bench_now_ns() - t0;
                vmmc_request_t req;
                t0 = bench_now_ns();
                int rc = vmmc_send_async(v->ma.px, 0, v->src, n, 0, &req);
                compute_sink = compute(it);
                if (rc == VMMC_INPROGRESS)
                    rc = vmmc_request_wait(&req, 20000);
                tboth[rep] = bench_now_ns() - t0;
                if (rc)
                    return fail(v, "vmmc_send_async", rc);
            }
            /* both together / the longer of the two alone (medians) */
            double ma = bench_stats(ta, v->c->reps).median;
            double mb = bench_stats(tb, v->c->reps).median;
            double longer = ma > mb ? ma : mb;
            for (int rep = 0; rep < v->c->reps; rep++)
                s[rep] = tboth[rep] / longer;
            bench_report(v->c, "overlap", n, "x", bench_stats(s, v->c->reps), NULL);
        }
    }
    int rc = vmmc_barrier(v->ep);
    return rc ? fail(v, "vmmc_barrier", rc) : 0;
}

/* ------------------------------------------------------------------------- */
/* Notifications in each wait mode                                            */

static int wait_notified(vb_t *v, int mode, int epfd, uint64_t target)
{
    double t0 = bench_now_ns();
    unsigned long spins = 0;
    while (atomic_load_explicit(&v->notified, memory_order_acquire) < target) {
        int rc = 0;
        if (mode == MODE_POLL) {
            rc = vmmc_progress(v->ep);
            if (rc == 0 && v->drive && (++spins & 63) == 0)
                sched_yield(); /* now and then: see wait_word() */
        } else if (mode == MODE_BLOCK) {
            rc = vmmc_wait(v->ep, 1000);
        } else if (mode == MODE_EPOLL) {
            rc = vmmc_progress(v->ep);
            if (rc == 0 && atomic_load(&v->notified) < target) {
                struct epoll_event ev;
                int k = epoll_wait(epfd, &ev, 1, 1000);
                if (k < 0 && errno != EINTR) {
                    bench_note(v->c, "vmmc suite: epoll_wait: %s", strerror(errno));
                    v->failed = 1;
                    return -1;
                }
                while ((rc = vmmc_progress(v->ep)) > 0)
                    ;
            }
        }
        if (rc < 0)
            return fail(v, mode == MODE_BLOCK ? "vmmc_wait" : "vmmc_progress", rc);
        if (v->failed)
            return fail(v, "vmmc_send (reply from the handler)", VMMC_ERR_SYSTEM);
        if (bench_now_ns() - t0 > WAIT_LIMIT_NS) {
            bench_note(v->c, "vmmc suite: a notification did not arrive within %.0f s",
                       WAIT_LIMIT_NS / 1e9);
            v->failed = 1;
            return -1;
        }
    }
    return 0;
}

static int notify_mode(vb_t *v, int mode, double *out)
{
    long iters = v->c->quick ? 300 : (mode == MODE_POLL ? 10000 : 2000);
    long warm = iters / 10 + 5;
    long total = warm + iters * v->c->reps;
    int epfd = -1;
    if (mode == MODE_EPOLL) {
        int fd = vmmc_event_fd(v->ep);
        if (fd < 0)
            return fail(v, "vmmc_event_fd", fd);
        epfd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
            bench_note(v->c, "vmmc suite: epoll: %s", strerror(errno));
            if (epfd >= 0)
                close(epfd);
            v->failed = 1;
            return -1;
        }
    }
    atomic_store(&v->notified, 0);
    v->reply_until = (uint64_t)total;
    v->service_mode = mode == MODE_SERVICE;
    int rc = vmmc_barrier(v->ep); /* counters reset on both sides */
    if (rc) {
        if (epfd >= 0)
            close(epfd);
        return fail(v, "vmmc_barrier", rc);
    }
    int ret = 0;
    if (v->me == 1) {
        if (mode == MODE_SERVICE) {
            rc = vmmc_service_start(v->ep);
            if (rc) {
                ret = fail(v, "vmmc_service_start", rc);
            } else {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += (time_t)(WAIT_LIMIT_NS / 1e9) + 10;
                while ((rc = sem_timedwait(&v->done, &ts)) && errno == EINTR)
                    ;
                if (rc) {
                    bench_note(v->c, "vmmc suite: the service thread did not answer");
                    ret = -1;
                }
                vmmc_service_stop(v->ep);
            }
        } else {
            ret = wait_notified(v, mode, epfd, (uint64_t)total);
        }
    } else {
        int wmode = mode == MODE_SERVICE ? MODE_POLL : mode;
        uint64_t k = 0;
        for (long rep = -1; rep < v->c->reps && !ret; rep++) {
            long n = rep < 0 ? warm : iters;
            double t0 = bench_now_ns();
            for (long i = 0; i < n; i++) {
                uint64_t val = ++k;
                rc = vmmc_send(v->nt.px, 0, &val, sizeof val, VMMC_SEND_NOTIFY);
                if (rc) {
                    ret = fail(v, "vmmc_send (notify)", rc);
                    break;
                }
                if (wait_notified(v, wmode, epfd, k)) {
                    ret = -1;
                    break;
                }
            }
            if (rep >= 0 && !ret)
                out[rep] = (bench_now_ns() - t0) / (double)n / 2 / 1e3;
        }
    }
    if (epfd >= 0)
        close(epfd);
    rc = vmmc_barrier(v->ep);
    if (!ret && rc)
        ret = fail(v, "vmmc_barrier", rc);
    return ret;
}

static int test_notify(vb_t *v)
{
    static const char *const names[] = {"notify_poll_lat", "notify_block_lat",
                                        "notify_epoll_lat", "notify_service_lat"};
    static const char *const refs[] = {"vmmc/memalloc_lat", "limits/wake_futex_cross",
                                       "limits/wake_eventfd_cross", "limits/wake_futex_cross"};
    double s[MAX_REPS];
    if (!want(v, 8))
        return 0;
    for (int m = MODE_POLL; m <= MODE_SERVICE; m++) {
        if (notify_mode(v, m, s))
            return -1;
        bench_report(v->c, names[m], 8, "us", bench_stats(s, v->c->reps), refs[m]);
    }
    return 0;
}

/* ------------------------------------------------------------------------- */

static int vmmc_suite_run(bench_ctx_t *c)
{
    if (!c->ep || c->size < 2) {
        bench_note(c, "the vmmc suite needs a job of 2 ranks (vmmc run -n 2)");
        return -1;
    }
    if (c->reps > MAX_REPS)
        c->reps = MAX_REPS;
    vb_t *v = calloc(1, sizeof *v);
    if (!v)
        return -1;
    v->c = c;
    v->ep = c->ep;
    v->me = c->rank;
    v->peer = c->rank == 0 ? 1 : 0;
    /* On shm a send lands with no help from the receiver, so waits are pure
     * spins. Over udp each rank's progress thread shares its one cpu with the
     * spinning thread: waits drive progress themselves instead. */
    v->drive = c->transport && strcmp(c->transport, "shm") != 0;
    if (c->rank > 1) { /* extra ranks only take part in barriers */
        free(v);
        return 0;
    }
    sem_init(&v->done, 0, 0);
    size_t want_max = c->max_size < MAX_SIZE ? c->max_size : MAX_SIZE;
    if (c->quick && want_max > ((size_t)4 << 20))
        want_max = (size_t)4 << 20;
    v->data = (want_max + 4095) & ~(size_t)4095;
    if (v->data < 4096)
        v->data = 4096;
    int ret = -1;
    v->src = aligned_alloc(4096, v->data);
    if (!v->src)
        goto out;
    memset(v->src, 0x5a, v->data);
    if (setup_region(v, &v->ma, "bench.ma", v->data + 64 * NSLOTS, 1, 0) ||
        setup_region(v, &v->ml, "bench.ml", v->data, 0, 0) ||
        setup_region(v, &v->nt, "bench.nt", 4096, 1, 1))
        goto out;
    /* The floors' path: the peer's "ma" mapped here, stores straight into
     * it. Where the library cannot map it (udp, a policy), no floor. */
    void *map = NULL;
    int mrc = v->drive ? VMMC_ERR_UNSUPPORTED : vmmc_proxy_map(v->ma.px, &map);
    if (mrc == VMMC_OK)
        v->ma.map = map;
    else if (!v->drive && v->me == 0)
        bench_note(c, "vmmc suite: no same-method floor for latency and bandwidth "
                      "(vmmc_proxy_map: %s); memalloc_lat and memalloc_bw are compared with the "
                      "limits suite instead", vmmc_last_error());
    /* Floors need both mappings: each rank says whether it has one. */
    int rc = put_word(v, SLOT_MAP, v->ma.map ? 2 : 1);
    if (rc || wait_word(v, slot(v, SLOT_MAP), 1))
        goto out;
    if (*slot(v, SLOT_MAP) != 2)
        v->ma.map = NULL;
    rc = vmmc_barrier(v->ep);
    if (rc) {
        fail(v, "vmmc_barrier", rc);
        goto out;
    }
    if (test_latency(v) || test_bandwidth(v) || test_overhead(v) || test_async(v) ||
        test_notify(v))
        goto out;
    ret = 0;
    /* Finish on the data path: rank 1 says it is done and rank 0 waits for
     * that, so neither rank leaves while the other is still inside a call
     * that involves it (a barrier that sees its peer exit fails). */
    if (v->me == 1)
        ret = put_word(v, SLOT_DONE, 1);
    else
        ret = wait_word(v, slot(v, SLOT_DONE), 1);
out:
    teardown_region(v, &v->nt);
    teardown_region(v, &v->ml);
    teardown_region(v, &v->ma);
    free(v->src);
    sem_destroy(&v->done);
    free(v);
    return ret;
}

BENCH_SUITE(vmmc_suite, .name = "vmmc",
            .help = "the core: latency, bandwidth, send overheads, overlap, notifications",
            .nranks = 2, .run = vmmc_suite_run);
