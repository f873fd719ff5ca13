/* Suite "limits": the machine's floor, which the other suites refer to.
 *
 * Metrics (size in bytes, 0 = not sized):
 *   cacheline_oneway      ns    one cache line ping-pong between cpu 0 and 1
 *                               through a MAP_SHARED memfd, pause spin, RTT/2
 *   memcpy_bw             GB/s  glibc memcpy, buffers reused (hot where they fit)
 *   memcpy_cold_bw        GB/s  memcpy walking a 256 MiB arena (not in cache)
 *   pvw_call              ns    process_vm_writev per call into a child on cpu 1
 *   pvw_bw                GB/s  the same as bandwidth
 *   syscall               ns    syscall(SYS_getppid)
 *   wake_eventfd_cross    us    block + wake one-way, eventfd, cpu 0 <-> cpu 1
 *   wake_eventfd_same     us    the same with both processes on cpu 0
 *   wake_futex_cross      us    FUTEX_WAIT/FUTEX_WAKE on a shared word, cpu 0 <-> 1
 *   wake_futex_same       us    the same on cpu 0
 * Every figure: median over c->reps repetitions after a warm-up. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#include "bench.h"

#define MAX_REPS 1000

static int cpu_a = 0, cpu_b = 1; /* the two cores used */

/* Ticks of the fine clock per ns: the TSC where there is one. */
static double ticks_per_ns = 1.0;

static inline uint64_t ticks(void)
{
#if HAVE_TSC
    return __rdtsc();
#else
    return (uint64_t)bench_now_ns();
#endif
}

static void calibrate(int quick)
{
#if HAVE_TSC
    double t0 = bench_now_ns();
    uint64_t c0 = __rdtsc();
    double span = quick ? 2e7 : 1e8;
    while (bench_now_ns() - t0 < span)
        ;
    double t1 = bench_now_ns();
    uint64_t c1 = __rdtsc();
    ticks_per_ns = (double)(c1 - c0) / (t1 - t0);
#else
    (void)quick;
#endif
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_u64(uint64_t *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    return (double)v[n / 2];
}

static void *shared_page(size_t len)
{
    int fd = memfd_create("vmmc-bench", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, (off_t)len)) {
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

/* fork() for a helper process that must not outlive the suite (it spins). */
static pid_t fork_helper(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
    }
    return pid;
}

static void reap(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
}

/* ------------------------------------------------------------------------- */

static int cacheline(bench_ctx_t *c)
{
    long iters = c->quick ? 20000 : 200000;
    const long warm = 2000;
    volatile uint64_t *m = shared_page(4096);
    if (!m) {
        bench_note(c, "cacheline_oneway: cannot map shared memory: %s", strerror(errno));
        return -1;
    }
    volatile uint64_t *ping = m, *pong = m + 16; /* 128 B apart */
    *ping = 0;
    *pong = 0;
    const uint64_t stop = UINT64_MAX;
    pid_t pid = fork_helper();
    if (pid < 0) {
        bench_note(c, "cacheline_oneway: fork: %s", strerror(errno));
        munmap((void *)m, 4096);
        return -1;
    }
    if (pid == 0) {
        bench_pin_cpu(cpu_b);
        for (uint64_t i = 1;; i++) {
            uint64_t v;
            while ((v = __atomic_load_n(ping, __ATOMIC_ACQUIRE)) != i && v != stop)
                bench_cpu_relax();
            if (v == stop)
                _exit(0);
            __atomic_store_n(pong, i, __ATOMIC_RELEASE);
        }
    }
    uint64_t *rt = malloc((size_t)iters * sizeof *rt);
    double samples[MAX_REPS];
    uint64_t seq = 0;
    for (long k = 0; k < warm; k++) {
        seq++;
        __atomic_store_n(ping, seq, __ATOMIC_RELEASE);
        while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != seq)
            bench_cpu_relax();
    }
    for (int r = 0; r < c->reps && rt; r++) {
        for (long k = 0; k < iters; k++) {
            seq++;
            uint64_t t0 = ticks();
            __atomic_store_n(ping, seq, __ATOMIC_RELEASE);
            while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != seq)
                bench_cpu_relax();
            rt[k] = ticks() - t0;
        }
        samples[r] = median_u64(rt, iters) / ticks_per_ns / 2;
    }
    __atomic_store_n(ping, stop, __ATOMIC_RELEASE);
    reap(pid);
    munmap((void *)m, 4096);
    if (!rt)
        return -1;
    free(rt);
    bench_report(c, "cacheline_oneway", 8, "ns", bench_stats(samples, c->reps), NULL);
    return 0;
}

/* ------------------------------------------------------------------------- */

static const size_t ladder[] = {1,         8,         64,        256,       1024,
                                4096,      16384,     65536,     262144,    1 << 20,
                                4u << 20,  16u << 20};
static const size_t quick_ladder[] = {8, 65536, 1 << 20, 4u << 20};

static int size_wanted(const bench_ctx_t *c, size_t s)
{
    return s >= c->min_size && s <= c->max_size;
}

#define FOR_SIZES(c, s)                                                                    \
    for (size_t s##_i = 0, s;                                                              \
         s##_i < ((c)->quick ? sizeof quick_ladder / sizeof *quick_ladder                  \
                             : sizeof ladder / sizeof *ladder) &&                          \
         ((s = (c)->quick ? quick_ladder[s##_i] : ladder[s##_i]), 1);                      \
         s##_i++)                                                                          \
        if (size_wanted(c, s))

static void sink(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* Iterations so one repetition takes about @target_ns. */
static long calibrate_iters(void (*fn)(void *, long), void *arg, double target_ns)
{
    long it = 1;
    for (;;) {
        double t0 = bench_now_ns();
        fn(arg, it);
        double t = bench_now_ns() - t0;
        if (t > target_ns / 4 || it > (1l << 40))
            return t > 0 ? (long)(it * (target_ns / t)) + 1 : it;
        it *= 2;
    }
}

typedef struct copy_arg {
    char *dst, *src;
    size_t n;
    size_t arena; /* 0: hot; else walk through arena bytes */
    size_t off;
} copy_arg_t;

static void copy_loop(void *a, long it)
{
    copy_arg_t *x = a;
    for (long i = 0; i < it; i++) {
        if (x->arena) {
            memcpy(x->dst + x->off, x->src + x->off, x->n);
            x->off += (x->n + 4095) & ~(size_t)4095;
            if (x->off + x->n > x->arena)
                x->off = 0;
        } else {
            memcpy(x->dst, x->src, x->n);
        }
        sink(x->dst);
    }
}

static int memcpy_bw(bench_ctx_t *c)
{
    const size_t maxsz = (size_t)16 << 20, arena = (size_t)256 << 20;
    char *src = NULL, *dst = NULL, *csrc = NULL, *cdst = NULL;
    if (posix_memalign((void **)&src, 4096, maxsz) || posix_memalign((void **)&dst, 4096, maxsz)) {
        bench_note(c, "memcpy_bw: out of memory");
        free(src);
        return -1;
    }
    memset(src, 1, maxsz);
    memset(dst, 2, maxsz);
    double target = c->quick ? 4e6 : 2e7;
    double samples[MAX_REPS];
    FOR_SIZES(c, n)
    {
        copy_arg_t a = {dst, src, n, 0, 0};
        long it = calibrate_iters(copy_loop, &a, target);
        copy_loop(&a, it / 4 + 1); /* warm-up */
        for (int r = 0; r < c->reps; r++) {
            double t0 = bench_now_ns();
            copy_loop(&a, it);
            samples[r] = (double)n * (double)it / (bench_now_ns() - t0);
        }
        bench_report(c, "memcpy_bw", n, "GB/s", bench_stats(samples, c->reps), NULL);
    }
    free(src);
    free(dst);
    if (c->quick)
        return 0;
    /* cold: source and destination walk through arenas far larger than the caches */
    csrc = mmap(NULL, arena, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                -1, 0);
    cdst = mmap(NULL, arena, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                -1, 0);
    if (csrc == MAP_FAILED || cdst == MAP_FAILED) {
        bench_note(c, "memcpy_cold_bw: cannot map 2 x 256 MiB: %s", strerror(errno));
        if (csrc != MAP_FAILED)
            munmap(csrc, arena);
        if (cdst != MAP_FAILED)
            munmap(cdst, arena);
        return 0;
    }
    memset(csrc, 1, arena);
    memset(cdst, 2, arena);
    FOR_SIZES(c, n)
    {
        if (n < 4096)
            continue;
        copy_arg_t a = {cdst, csrc, n, arena, 0};
        long it = calibrate_iters(copy_loop, &a, target);
        long per_arena = (long)(arena / ((n + 4095) & ~(size_t)4095));
        if (it < per_arena)
            it = per_arena; /* at least one pass so nothing stays cached */
        for (int r = 0; r < c->reps; r++) {
            double t0 = bench_now_ns();
            copy_loop(&a, it);
            samples[r] = (double)n * (double)it / (bench_now_ns() - t0);
        }
        bench_report(c, "memcpy_cold_bw", n, "GB/s", bench_stats(samples, c->reps), NULL);
    }
    munmap(csrc, arena);
    munmap(cdst, arena);
    return 0;
}

/* ------------------------------------------------------------------------- */

static int pvw(bench_ctx_t *c)
{
    size_t maxsz = c->quick ? (size_t)4 << 20 : (size_t)16 << 20;
    if (maxsz > c->max_size)
        maxsz = c->max_size;
    _Atomic uint64_t *ctl = shared_page(4096); /* [0] = child's buffer address, [1] = state */
    if (!ctl) {
        bench_note(c, "pvw: cannot map shared memory: %s", strerror(errno));
        return -1;
    }
    int p[2];
    if (pipe(p)) {
        munmap((void *)ctl, 4096);
        return -1;
    }
    pid_t pid = fork_helper();
    if (pid < 0) {
        bench_note(c, "pvw: fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        munmap((void *)ctl, 4096);
        return -1;
    }
    if (pid == 0) {
        bench_pin_cpu(cpu_b);
        close(p[1]);
        char *buf = malloc(maxsz);
        if (buf)
            memset(buf, 0, maxsz); /* the child's own pages */
        atomic_store(&ctl[0], (uint64_t)(uintptr_t)buf);
        atomic_store(&ctl[1], 1);
        char ch;
        while (read(p[0], &ch, 1) < 0 && errno == EINTR) /* block, idle, until told to go */
            ;
        _exit(0);
    }
    close(p[0]);
    while (atomic_load(&ctl[1]) != 1)
        usleep(100);
    char *remote = (char *)(uintptr_t)atomic_load(&ctl[0]);
    char *src = malloc(maxsz);
    int rc = 0;
    if (!remote || !src) {
        bench_note(c, "pvw: out of memory");
        rc = -1;
        goto out;
    }
    memset(src, 7, maxsz);
    double target = c->quick ? 4e6 : 2e7;
    double call[MAX_REPS], bw[MAX_REPS];
    FOR_SIZES(c, n)
    {
        if (n > maxsz)
            continue;
        struct iovec l = {src, n}, r = {remote, n};
        ssize_t k = process_vm_writev(pid, &l, 1, &r, 1, 0);
        if (k != (ssize_t)n) {
            bench_note(c, "process_vm_writev does not work here (%s): pvw_* not measured",
                       k < 0 ? strerror(errno) : "short write");
            goto out;
        }
        long it = 1;
        for (;;) {
            double t0 = bench_now_ns();
            for (long i = 0; i < it; i++)
                process_vm_writev(pid, &l, 1, &r, 1, 0);
            double t = bench_now_ns() - t0;
            if (t > target / 4)
                break;
            it *= 2;
        }
        for (int rep = 0; rep < c->reps; rep++) {
            double t0 = bench_now_ns();
            for (long i = 0; i < it; i++)
                process_vm_writev(pid, &l, 1, &r, 1, 0);
            double t = bench_now_ns() - t0;
            call[rep] = t / (double)it;
            bw[rep] = (double)n * (double)it / t;
        }
        bench_report(c, "pvw_call", n, "ns", bench_stats(call, c->reps),
                     n <= 4096 ? "limits/syscall" : NULL);
        bench_report(c, "pvw_bw", n, "GB/s", bench_stats(bw, c->reps), "limits/memcpy_bw");
    }
out:
    close(p[1]); /* the child's read returns 0: it exits */
    reap(pid);
    free(src);
    munmap((void *)ctl, 4096);
    return rc;
}

/* ------------------------------------------------------------------------- */

static int syscall_cost(bench_ctx_t *c)
{
    long it = c->quick ? 100000 : 1000000;
    double samples[MAX_REPS];
    for (long i = 0; i < it / 10; i++)
        syscall(SYS_getppid);
    for (int r = 0; r < c->reps; r++) {
        double t0 = bench_now_ns();
        for (long i = 0; i < it; i++)
            syscall(SYS_getppid);
        samples[r] = (bench_now_ns() - t0) / (double)it;
    }
    bench_report(c, "syscall", 0, "ns", bench_stats(samples, c->reps), NULL);
    return 0;
}

/* ------------------------------------------------------------------------- */

static long futex_op(_Atomic uint32_t *a, int op, uint32_t v)
{
    return syscall(SYS_futex, a, op, v, NULL, NULL, 0);
}

/* Block/wake ping-pong: each side blocks (read() on an eventfd, or
 * FUTEX_WAIT), the other wakes it. One-way = RTT / 2. */
static int wake(bench_ctx_t *c, int use_futex, int cross)
{
    long iters = cross ? (c->quick ? 100 : 500) : (c->quick ? 1000 : 5000);
    long warm = iters / 5 + 10;
    long total = warm + (long)c->reps * iters;
    const char *metric = use_futex ? (cross ? "wake_futex_cross" : "wake_futex_same")
                                   : (cross ? "wake_eventfd_cross" : "wake_eventfd_same");
    int e1 = eventfd(0, EFD_CLOEXEC), e2 = eventfd(0, EFD_CLOEXEC);
    _Atomic uint32_t *w = shared_page(4096);
    if (e1 < 0 || e2 < 0 || !w) {
        bench_note(c, "%s: cannot create eventfd/shared page: %s", metric, strerror(errno));
        return -1;
    }
    _Atomic uint32_t *a = w, *b = w + 16;
    atomic_store(a, 0);
    atomic_store(b, 0);
    pid_t pid = fork_helper();
    if (pid < 0) {
        bench_note(c, "%s: fork: %s", metric, strerror(errno));
        close(e1);
        close(e2);
        munmap((void *)w, 4096);
        return -1;
    }
    if (pid == 0) {
        bench_pin_cpu(cross ? cpu_b : cpu_a);
        uint64_t v;
        for (long i = 0; i < total; i++) {
            if (!use_futex) {
                if (read(e1, &v, 8) != 8 || write(e2, &v, 8) != 8)
                    _exit(1);
            } else {
                while (atomic_load(a) == 0)
                    futex_op(a, FUTEX_WAIT, 0);
                atomic_store(a, 0);
                atomic_store(b, 1);
                futex_op(b, FUTEX_WAKE, 1);
            }
        }
        _exit(0);
    }
    uint64_t *rt = malloc((size_t)iters * sizeof *rt);
    double samples[MAX_REPS];
    int ok = rt != NULL;
    for (long i = 0, r = -1, k = 0; i < total; i++) {
        uint64_t v = 1;
        uint64_t t0 = ticks();
        if (!use_futex) {
            if (write(e1, &v, 8) != 8 || read(e2, &v, 8) != 8) {
                ok = 0;
                break;
            }
        } else {
            atomic_store(a, 1);
            futex_op(a, FUTEX_WAKE, 1);
            while (atomic_load(b) == 0)
                futex_op(b, FUTEX_WAIT, 0);
            atomic_store(b, 0);
        }
        uint64_t dt = ticks() - t0;
        if (i < warm || !rt)
            continue;
        if (r < 0 || k == iters) {
            if (r >= 0)
                samples[r] = median_u64(rt, iters) / ticks_per_ns / 2 / 1e3;
            r++;
            k = 0;
        }
        rt[k++] = dt;
        if (i == total - 1)
            samples[r] = median_u64(rt, iters) / ticks_per_ns / 2 / 1e3;
    }
    if (!ok)
        kill(pid, SIGKILL);
    reap(pid);
    free(rt);
    close(e1);
    close(e2);
    munmap((void *)w, 4096);
    if (!ok) {
        bench_note(c, "%s: measurement failed", metric);
        return -1;
    }
    bench_report(c, metric, 0, "us", bench_stats(samples, c->reps), "limits/cacheline_oneway");
    return 0;
}

/* ------------------------------------------------------------------------- */

static int limits_run(bench_ctx_t *c)
{
    c->transport = "-";
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 2) {
        cpu_b = 0;
        bench_note(c, "only one cpu online: two-process figures share cpu 0");
    }
    if (c->reps > MAX_REPS)
        c->reps = MAX_REPS;
    if (bench_pin_cpu(cpu_a))
        bench_note(c, "cannot pin to cpu %d: %s", cpu_a, strerror(errno));
    calibrate(c->quick);
    int bad = 0;
    bad |= cacheline(c) != 0;
    bad |= memcpy_bw(c) != 0;
    bad |= pvw(c) != 0;
    bad |= syscall_cost(c) != 0;
    bad |= wake(c, 0, 1) != 0;
    bad |= wake(c, 1, 1) != 0;
    bad |= wake(c, 0, 0) != 0;
    bad |= wake(c, 1, 0) != 0;
    return bad ? -1 : 0;
}

BENCH_SUITE(limits_suite, .name = "limits",
            .help = "this machine's floor: cache-line ping-pong, memcpy, process_vm_writev, "
                    "syscall, wake-up",
            .nranks = 0, .run = limits_run);
