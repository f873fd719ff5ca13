/* OpenSHMEM figures for `vmmc bench shmem`: a plain OpenSHMEM 1.4/1.5
 * program, compiled at bench time with vmmc's oshcc and with Open MPI's
 * (OSHMEM over UCX), and run with each one's oshrun on 2 PEs in the same
 * bench run, so that the figures can be put side by side.
 *
 *   shmem_bench [-q] [-b BATCHES] [-s MIN:MAX]
 *
 * Every figure is the median over BATCHES timed batches (after a warm-up
 * batch), with their min and max; PE 0 prints one line per figure:
 *   put    SIZE med min max  us per blocking shmem_putmem, PE 0 -> PE 1, as
 *                            OSU's osu_oshm_put (a loop of puts; the batch
 *                            ends with shmem_quiet, inside the time)
 *   get    SIZE med min max  us per blocking shmem_getmem from PE 1
 *   pp     8    med min max  us one way: ping-pong of shmem_long_p and
 *                            shmem_long_wait_until (half the round trip)
 *   rate   8    med min max  Mmsg/s: windows of 64 shmem_putmem_nbi of 8 B,
 *                            each window ended by shmem_quiet
 *   fadd   8    med min max  us per shmem_long_atomic_fetch_add on PE 1
 *   barrier 0   med min max  us per shmem_barrier_all
 * -q: fewer sizes and iterations. A batch holds OSU's count of operations
 * (10000 up to 8 KiB, 1000 above, 100 at 1 MiB), fewer where the warm-up
 * says a batch would take more than 20 ms (5 ms with -q), so that a slow
 * path (a TCP loopback) finishes in seconds too. What a put or get moved is
 * checked after each batch (the first and last byte), so a library that
 * loses data fails. */
#include <shmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WIN 64
#define MAXB 100
#define MAXSIZE ((size_t)1 << 20)

static int me, quick, batches = 5;
static size_t lo = 1, hi = MAXSIZE;

static const size_t rma_full[] = {8, 64, 512, 4096, 32768, 262144, 1 << 20};
static const size_t rma_quick[] = {8, 65536};

static void die(const char *what)
{
    fprintf(stderr, "shmem_bench: PE %d: %s\n", me, what);
    fflush(stderr);
    shmem_global_exit(1);
    exit(1);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print(const char *kind, size_t size, double *v, int n)
{
    if (me != 0)
        return;
    qsort(v, (size_t)n, sizeof *v, cmp);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("%s %zu %.6g %.6g %.6g\n", kind, size, med, v[0], v[n - 1]);
    fflush(stdout);
}

/* OSU's counts: up to 8 KiB 10000 operations, above 1000, 1 MiB 100. */
static int iters_for(size_t n)
{
    int it = n <= 8192 ? 10000 : n < MAXSIZE ? 1000 : 100;
    return quick ? it / 10 : it;
}

/* Operations per batch: @cap, or fewer if one takes @us_per_op so long that
 * the batch would last more than the budget. */
static int budgeted(int cap, double us_per_op)
{
    double budget = quick ? 5000 : 20000;
    if (us_per_op * cap <= budget)
        return cap;
    int n = (int)(budget / (us_per_op > 0 ? us_per_op : 1));
    return n < 1 ? 1 : n;
}

/* Warm-up operations before a figure: a hundredth of the batch, at least 1. */
static int warmup(int cap)
{
    return cap / 100 + 1;
}

/* PE 0's @v, on both PEs (for loops that both PEs run). */
static long *agree_word;
static long agree(long v)
{
    if (me == 0)
        shmem_long_p(agree_word, v, 1);
    shmem_barrier_all();
    long r = me == 0 ? v : *agree_word;
    shmem_barrier_all();
    return r;
}

static void check(const char *buf, size_t n, char want)
{
    if (n && (buf[0] != want || buf[n - 1] != want))
        die("a transferred buffer does not hold what was sent");
}

/* One batch of @iters blocking puts (get = 0) or gets of @n bytes by PE 0;
 * PE 1 waits in the barrier. Returns us per operation on PE 0. */
static double rma_once(char *local, char *remote, size_t n, int iters, int get, char tag)
{
    memset(local, get ? 0 : tag, n);
    if (get)
        memset(remote, tag, n);
    shmem_barrier_all();
    double t = 0;
    if (me == 0) {
        double t0 = now_us();
        for (int i = 0; i < iters; i++) {
            if (get)
                shmem_getmem(local, remote, n, 1);
            else
                shmem_putmem(remote, local, n, 1);
        }
        shmem_quiet();
        t = (now_us() - t0) / iters;
        if (get)
            check(local, n, tag);
    }
    shmem_barrier_all();
    if (me == 1 && !get)
        check(remote, n, tag);
    return t;
}

static void bench_rma(char *local, char *remote, int get)
{
    const size_t *sz = quick ? rma_quick : rma_full;
    size_t nsz = quick ? sizeof rma_quick / sizeof *rma_quick : sizeof rma_full / sizeof *rma_full;
    double v[MAXB];
    for (size_t k = 0; k < nsz; k++) {
        size_t n = sz[k];
        if (n < lo || n > hi)
            continue;
        int it = iters_for(n);
        it = budgeted(it, rma_once(local, remote, n, warmup(it), get, 'w'));
        for (int b = 0; b < batches; b++)
            v[b] = rma_once(local, remote, n, it, get, (char)('a' + (b + (int)k) % 26));
        print(get ? "get" : "put", n, v, batches);
    }
}

/* Ping-pong of one long: PE 0 writes i to PE 1's word, PE 1 waits for it
 * and writes i back. Returns the one-way time in us. */
static double pp_once(long *word, int iters, long *seq)
{
    shmem_barrier_all();
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
        long v = ++*seq;
        if (me == 0) {
            shmem_long_p(word, v, 1);
            shmem_long_wait_until(word, SHMEM_CMP_EQ, v);
        } else {
            shmem_long_wait_until(word, SHMEM_CMP_EQ, v);
            shmem_long_p(word, v, 0);
        }
    }
    double t = (now_us() - t0) / iters / 2;
    shmem_barrier_all();
    return t;
}

static double rate_once(char *local, char *remote, int windows, char tag)
{
    memset(local, tag, 8);
    shmem_barrier_all();
    double r = 0;
    if (me == 0) {
        double t0 = now_us();
        for (int w = 0; w < windows; w++) {
            for (int i = 0; i < WIN; i++)
                shmem_putmem_nbi(remote + (size_t)i * 8, local, 8, 1);
            shmem_quiet();
        }
        r = (double)windows * WIN / (now_us() - t0); /* messages per us = M msg/s */
    }
    shmem_barrier_all();
    if (me == 1)
        for (int i = 0; i < WIN; i++)
            check(remote + (size_t)i * 8, 8, tag);
    return r;
}

static double fadd_once(long *ctr, int iters, long *expect)
{
    shmem_barrier_all();
    double t = 0;
    if (me == 0) {
        double t0 = now_us();
        for (int i = 0; i < iters; i++) {
            long old = shmem_long_atomic_fetch_add(ctr, 1, 1);
            if (old != (*expect)++)
                die("fetch-add returned a value out of sequence");
        }
        t = (now_us() - t0) / iters;
    }
    shmem_barrier_all();
    return t;
}

static double barrier_once(int iters)
{
    shmem_barrier_all();
    double t0 = now_us();
    for (int i = 0; i < iters; i++)
        shmem_barrier_all();
    return (now_us() - t0) / iters;
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q")) {
            quick = 1;
        } else if (!strcmp(argv[i], "-b") && i + 1 < argc) {
            batches = atoi(argv[++i]);
            if (batches < 1 || batches > MAXB)
                die("-b: batches must be 1..100");
        } else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            if (sscanf(argv[++i], "%zu:%zu", &lo, &hi) != 2 || lo > hi)
                die("-s: expected MIN:MAX with MIN <= MAX");
        } else {
            die("usage: shmem_bench [-q] [-b BATCHES] [-s MIN:MAX]");
        }
    }
}

int main(int argc, char **argv)
{
    shmem_init();
    me = shmem_my_pe();
    if (shmem_n_pes() != 2)
        die("needs exactly 2 PEs");
    parse_args(argc, argv);
    char *local = shmem_malloc(MAXSIZE);
    char *remote = shmem_malloc(MAXSIZE);
    long *word = shmem_malloc(sizeof(long));
    long *ctr = shmem_malloc(sizeof(long));
    agree_word = shmem_malloc(sizeof(long));
    if (!local || !remote || !word || !ctr || !agree_word)
        die("shmem_malloc failed");
    *word = 0;
    *ctr = 0;
    shmem_barrier_all();

    bench_rma(local, remote, 0);
    bench_rma(local, remote, 1);

    double v[MAXB];
    int cap = quick ? 1000 : 10000;
    if (lo <= 8 && hi >= 8) {
        long seq = 0;
        int it = (int)agree(budgeted(cap, 2 * pp_once(word, warmup(cap), &seq)));
        for (int b = 0; b < batches; b++)
            v[b] = pp_once(word, it, &seq);
        print("pp", 8, v, batches);

        double r = rate_once(local, remote, warmup(cap / WIN), 'w');
        it = budgeted(cap / WIN + 1, r > 0 ? WIN / r : 1);
        for (int b = 0; b < batches; b++)
            v[b] = rate_once(local, remote, it, (char)('a' + b));
        print("rate", 8, v, batches);

        long expect = 0;
        it = budgeted(cap, fadd_once(ctr, warmup(cap), &expect));
        for (int b = 0; b < batches; b++)
            v[b] = fadd_once(ctr, it, &expect);
        print("fadd", 8, v, batches);
        long adds = agree(expect); /* PE 0 counted them */
        if (me == 1 && *ctr != adds)
            die("the fetch-add counter does not hold the number of adds");
    }
    int it = (int)agree(budgeted(cap, barrier_once(warmup(cap))));
    for (int b = 0; b < batches; b++)
        v[b] = barrier_once(it);
    print("barrier", 0, v, batches);

    shmem_free(agree_word);
    shmem_free(ctr);
    shmem_free(word);
    shmem_free(remote);
    shmem_free(local);
    shmem_finalize();
    return 0;
}
