/* The DSM's micro-benchmarks (vmmc-dsm-bench), run by `vmmc bench dsm` in
 * a job of 2 ranks, once in minipage mode and once in page mode
 * (VMMC_DSM_PAGE=1). Rank 0 reports. The faults are taken by rank 1 on
 * what rank 0 owns: rank 0 runs the barrier between two samples, so rank
 * 1's arrival at it would land in a fault measured at rank 0 and wake its
 * service thread there (read_fault_mgr shows that case); the others are
 * measured at rank 0 on what rank 1 owns.
 *
 *   read_fault <size>    a read of a minipage rank 0 just wrote (so rank 1
 *                        has no copy): the fault, the request to the
 *                        manager/owner, the contents, the reopening;
 *   write_fault <size>   a write to such a minipage (the contents and the
 *                        ownership move);
 *   read_fault_asleep 128  a read fault as read_fault, but rank 1 waits
 *                        ASLEEP_US (not counted) after the barrier first,
 *                        past vmmc's spin (VMMC_SPIN, 50 us): both
 *                        service threads sleep when the fault comes, as
 *                        after a stretch of computation;
 *   read_fault_mgr 128   a read fault as read_fault, taken by rank 0 (the
 *                        barrier's manager) on what rank 1 just wrote,
 *                        while rank 1's arrival at the next barrier comes
 *                        in;
 *   lock 0               acquire + release of a lock rank 1 held last;
 *   lock_local 0         acquire + release of a lock rank 0 held last;
 *   barrier 0            one barrier of the two ranks;
 *   delay_idle 0         request delay of rank 1's read faults (request
 *                        sent to minipage open, vmmc_dsm_stats), mean per
 *                        batch, while the owner waits in a barrier;
 *   read_fault_busy 4096 rank 0's read fault while rank 1's application
 *                        thread computes (it never calls the library);
 *                        4 KiB objects, so that every read faults in page
 *                        mode too;
 *   delay_busy 0         the request delay of those faults (per batch);
 *   serve_idle 0,        the serving side's request delay at the owner
 *   serve_busy 0         (rank 0, rank 1): from a request's arrival to its
 *                        answer sent (vmmc_dsm_stats serve_*), mean per
 *                        batch, in the delay_idle and the read_fault_busy
 *                        batches;
 *   serve_wait_idle 0,   the part of it before the owner's handler started
 *   serve_wait_busy 0    (waiting for its service thread to run);
 *   false_sharing 128    per write, both ranks writing their own 128 B
 *                        object at once, the two objects allocated one
 *                        after the other (in page mode they share a page,
 *                        which moves at every write of the other rank; in
 *                        minipage mode each is its own minipage); each
 *                        write is followed by FS_GAP_US of computation, so
 *                        that the ranks' writes interleave; a batch is
 *                        FS_WRITES writes by each rank between barriers,
 *                        and both counters are checked at the end;
 *   compute_alone 0      a private computation (no shared access) before
 *                        the process joins the DSM;
 *   compute_dsm 0        the same computation after it joined (the service
 *                        thread running, no fault).
 * Sizes are 128 B and 4 KiB. Each line: "<kind> <size> <median> <min>
 * <max>" in microseconds, over -r batches of -k samples (time per sample);
 * a line "mode <minipage|page>" first, then "transport <t>" (VMMC_TRANSPORT as
 * the ranks got it; shm when unset). Every read value is checked: a
 * wrong one ends the run non-zero.
 *
 * usage: vmmc run -n 2 --cpu-bind -- vmmc-dsm-bench [-r batches] [-k per-batch] */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vmmc/dsm.h>

#define LOCK_ID 3
#define BUSY_LIMIT_S 30.0 /* the busy owner gives up after this long */
#define BUSY_SIZE 4096     /* a page each: every read faults in both modes */
#define ASLEEP_US 200.0    /* read_fault_asleep: past VMMC_SPIN's default */
#define FS_WRITES 200      /* writes per rank per false-sharing batch */
#define FS_GAP_US 2.0      /* computation after each of them */

static int rank, reps = 20, per = 10;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "vmmc-dsm-bench: rank %d: %s: %s (%s)\n", rank, what, vmmc_strerror(rc),
                vmmc_dsm_last_error());
        exit(1);
    }
}

static void barrier(void)
{
    check(vmmc_dsm_barrier(), "vmmc_dsm_barrier");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *kind, size_t size, double *s, int n)
{
    if (rank != 0 || n <= 0)
        return;
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    printf("%s %zu %.3f %.3f %.3f\n", kind, size, s[n / 2], s[0], s[n - 1]);
    fflush(stdout);
}

/* Allocated by @owner, the address in every rank. */
static void *alloc_by(size_t n, int owner)
{
    void *p = NULL;
    if (rank == owner && !(p = vmmc_dsm_malloc(n))) {
        fprintf(stderr, "vmmc-dsm-bench: rank %d: vmmc_dsm_malloc(%zu): %s\n", rank, n,
                vmmc_dsm_last_error());
        exit(1);
    }
    check(vmmc_dsm_bcast_ptr(&p, owner), "vmmc_dsm_bcast_ptr");
    return p;
}

/* @n objects of @size bytes, allocated (so owned) by rank 1; their
 * addresses travel through shared memory once and are kept in private
 * memory (in page mode the table may share a page with the objects: reading
 * it during a measurement would fetch the object's page early). */
static volatile long **objects(int n, size_t size)
{
    volatile long **t = alloc_by((size_t)n * sizeof *t, 1);
    if (rank == 1)
        for (int i = 0; i < n; i++)
            if (!(t[i] = vmmc_dsm_malloc(size))) {
                fprintf(stderr, "vmmc-dsm-bench: rank 1: vmmc_dsm_malloc(%zu): %s\n", size,
                        vmmc_dsm_last_error());
                exit(1);
            }
    barrier();
    volatile long **o = malloc((size_t)n * sizeof *o);
    if (!o)
        exit(1);
    for (int i = 0; i < n; i++)
        o[i] = t[i];
    barrier();
    return o;
}

static double delay_mean_us(const vmmc_dsm_stats_t *a, const vmmc_dsm_stats_t *b)
{
    uint64_t n = b->delay_count - a->delay_count;
    return n ? (double)(b->delay_ns_sum - a->delay_ns_sum) / (double)n / 1e3 : 0;
}

static double serve_mean_us(const vmmc_dsm_stats_t *a, const vmmc_dsm_stats_t *b, int wait)
{
    uint64_t n = b->serve_count - a->serve_count;
    uint64_t ns = wait ? b->serve_wait_ns_sum - a->serve_wait_ns_sum
                       : b->serve_ns_sum - a->serve_ns_sum;
    return n ? (double)ns / (double)n / 1e3 : 0;
}

/* Rank 1's per-batch figures @v[0..reps) to rank 0 (collective), through a
 * minipage rank 1 allocates. */
/* @n figures of rank @from, brought to rank 0 (which reports). */
static void to_rank0(double *v, int n, int from)
{
    if (from == 0)
        return;
    volatile double *t = alloc_by((size_t)n * sizeof *t, 1);
    if (rank == 1)
        for (int r = 0; r < n; r++)
            t[r] = v[r];
    barrier();
    if (rank == 0)
        for (int r = 0; r < n; r++)
            v[r] = t[r];
    barrier();
}

static void from_rank1(double *v)
{
    to_rank0(v, reps, 1);
}

/* Read (or write) faults of rank @rd on minipages the other rank has
 * just written; fills lat[] with the samples, delay[] with the mean
 * request delay of each batch (the faulting rank's), and, if given,
 * serve[]/swait[] with the owner's mean serving delay and wait for its
 * service thread per batch; all brought to rank 0. */
static void faults(int rd, int write, size_t size, double pause_us, double *lat, double *delay,
                   double *serve, double *swait)
{
    volatile long **o = objects(per, size);
    int n = 0, wr = 1 - rd;
    for (int r = 0; r < reps; r++) {
        vmmc_dsm_stats_t s0, s1;
        check(vmmc_dsm_stats(&s0), "vmmc_dsm_stats");
        for (int k = 0; k < per; k++) {
            long stamp = (long)r * per + k + 1;
            if (rank == wr)
                o[k][0] = stamp;
            barrier();
            if (rank == rd) {
                volatile long *p = o[k];
                double t = now_us();
                while (now_us() - t < pause_us) /* (read_fault_asleep) */
                    ;
                t = now_us();
                if (write) {
                    p[1] = stamp;
                } else if (p[0] != stamp) {
                    fprintf(stderr, "vmmc-dsm-bench: read %ld, expected %ld\n", p[0], stamp);
                    exit(1);
                }
                lat[n++] = now_us() - t;
                if (write && p[0] != stamp) {
                    fprintf(stderr, "vmmc-dsm-bench: after the write, read %ld, expected %ld\n",
                            p[0], stamp);
                    exit(1);
                }
            }
            barrier();
        }
        check(vmmc_dsm_stats(&s1), "vmmc_dsm_stats");
        if (delay)
            delay[r] = delay_mean_us(&s0, &s1);
        if (serve) {
            serve[r] = serve_mean_us(&s0, &s1, 0);
            swait[r] = serve_mean_us(&s0, &s1, 1);
        }
    }
    barrier();
    to_rank0(lat, reps * per, rd);
    if (delay)
        to_rank0(delay, reps, rd);
    if (serve) {
        to_rank0(serve, reps, wr);
        to_rank0(swait, reps, wr);
    }
    free(o);
}

static void locks(double *lat, double *local)
{
    int n = 0;
    for (int r = 0; r < reps * per; r++) {
        if (rank == 1) {
            check(vmmc_dsm_lock(LOCK_ID), "vmmc_dsm_lock");
            check(vmmc_dsm_unlock(LOCK_ID), "vmmc_dsm_unlock");
        }
        barrier();
        if (rank == 0) {
            double t = now_us();
            check(vmmc_dsm_lock(LOCK_ID), "vmmc_dsm_lock");
            check(vmmc_dsm_unlock(LOCK_ID), "vmmc_dsm_unlock");
            lat[n++] = now_us() - t;
        }
        barrier();
    }
    if (rank == 0)
        for (int r = 0; r < reps * per; r++) {
            double t = now_us();
            check(vmmc_dsm_lock(LOCK_ID), "vmmc_dsm_lock");
            check(vmmc_dsm_unlock(LOCK_ID), "vmmc_dsm_unlock");
            local[r] = now_us() - t;
        }
    barrier();
}

static void barriers(double *lat)
{
    for (int r = 0; r < reps * per; r++) {
        double t = now_us();
        barrier();
        lat[r] = now_us() - t;
    }
}

/* Rank 1 computes (no library call, no shared access but a flag it holds a
 * read copy of) while rank 0 read-faults its minipages. */
static void busy_owner(double *lat, double *delay, double *serve, double *swait)
{
    volatile long **o = objects(per, BUSY_SIZE);
    volatile int *done = alloc_by(sizeof(int), 0);
    int n = 0;
    for (int r = 0; r < reps; r++) {
        long stamp = 1000000L + r;
        if (rank == 1)
            for (int k = 0; k < per; k++)
                o[k][0] = stamp; /* rank 0's copies go */
        if (rank == 0)
            *done = 0;
        vmmc_dsm_stats_t b0, b1;
        check(vmmc_dsm_stats(&b0), "vmmc_dsm_stats");
        barrier();
        if (rank == 1) {
            volatile double x = 1.0;
            double start = now_us();
            while (!*done) {
                for (int i = 0; i < 20000; i++)
                    x = x * 1.0000001 + 1e-9;
                if (now_us() - start > BUSY_LIMIT_S * 1e6) {
                    fprintf(stderr, "vmmc-dsm-bench: rank 1: rank 0 did not finish in %.0f s\n",
                            BUSY_LIMIT_S);
                    exit(1);
                }
            }
        } else {
            vmmc_dsm_stats_t s0, s1;
            usleep(2000); /* rank 1 is computing by now */
            check(vmmc_dsm_stats(&s0), "vmmc_dsm_stats");
            for (int k = 0; k < per; k++) {
                volatile long *p = o[k];
                double t = now_us();
                long v = p[0];
                lat[n++] = now_us() - t;
                if (v != stamp) {
                    fprintf(stderr, "vmmc-dsm-bench: read %ld, expected %ld\n", v, stamp);
                    exit(1);
                }
            }
            check(vmmc_dsm_stats(&s1), "vmmc_dsm_stats");
            delay[r] = delay_mean_us(&s0, &s1);
            *done = 1;
        }
        check(vmmc_dsm_stats(&b1), "vmmc_dsm_stats");
        serve[r] = serve_mean_us(&b0, &b1, 0);
        swait[r] = serve_mean_us(&b0, &b1, 1);
        barrier();
    }
    barrier();
    from_rank1(serve);
    from_rank1(swait);
    free(o);
}

/* Both ranks write their own object of a pair allocated together. */
static void false_sharing(double *lat)
{
    volatile long *o[2];
    for (int i = 0; i < 2; i++)
        o[i] = alloc_by(128, 0);
    volatile long *mine = o[rank];
    int n = 0;
    for (int r = 0; r < reps; r++) {
        barrier();
        double t = now_us();
        for (int i = 0; i < FS_WRITES; i++) {
            mine[0]++;
            double until = now_us() + FS_GAP_US; /* so the two ranks' writes interleave */
            while (now_us() < until)
                ;
        }
        barrier();
        lat[n++] = (now_us() - t) / FS_WRITES;
    }
    if (rank == 0)
        for (int i = 0; i < 2; i++)
            if (o[i][0] != (long)reps * FS_WRITES) {
                fprintf(stderr, "vmmc-dsm-bench: false sharing: rank %d's counter is %ld, not %ld\n",
                        i, o[i][0], (long)reps * FS_WRITES);
                exit(1);
            }
    barrier();
}

/* A fixed private computation; its time in us. */
static double compute(void)
{
    volatile double x = 1.0;
    double t = now_us();
    for (int i = 0; i < 200000; i++)
        x = x * 1.0000001 + 1e-9;
    return now_us() - t;
}

int main(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "r:k:")) != -1) {
        if (c != 'r' && c != 'k') {
            fprintf(stderr, "usage: vmmc run -n 2 -- vmmc-dsm-bench [-r batches] [-k per-batch]\n");
            return 2;
        }
        int v = atoi(optarg);
        if (v < 1 || v > 1000) {
            fprintf(stderr, "vmmc-dsm-bench: -%c %s: expected 1..1000\n", c, optarg);
            return 2;
        }
        if (c == 'r')
            reps = v;
        else
            per = v;
    }
    if (optind < argc) {
        fprintf(stderr, "usage: vmmc run -n 2 -- vmmc-dsm-bench [-r batches] [-k per-batch]\n");
        return 2;
    }
    double alone[50], joined[50];
    for (int i = 0; i < 50; i++)
        alone[i] = compute();
    check(vmmc_dsm_init(NULL), "vmmc_dsm_init");
    rank = vmmc_dsm_rank();
    if (vmmc_dsm_size() != 2) {
        fprintf(stderr, "vmmc-dsm-bench: needs exactly 2 ranks (vmmc run -n 2), not %d\n",
                vmmc_dsm_size());
        return 2;
    }
    if (rank == 0) {
        const char *tr = getenv("VMMC_TRANSPORT");
        printf("mode %s\ntransport %s\n", vmmc_dsm_mode(), tr && *tr ? tr : "shm");
    }
    int ns = reps * per;
    double *lat = calloc((size_t)ns, sizeof(double)), *aux = calloc((size_t)ns, sizeof(double));
    double *serve = calloc((size_t)reps, sizeof(double)), *swait = calloc((size_t)reps, sizeof(double));
    if (!lat || !aux || !serve || !swait)
        return 1;
    static const size_t sizes[] = {128, 4096};
    for (int i = 0; i < 2; i++) {
        int idle = sizes[i] == 128;
        faults(1, 0, sizes[i], 0, lat, aux, idle ? serve : NULL, swait);
        report("read_fault", sizes[i], lat, ns);
        if (idle) {
            report("delay_idle", 0, aux, reps);
            report("serve_idle", 0, serve, reps);
            report("serve_wait_idle", 0, swait, reps);
            faults(1, 0, sizes[i], ASLEEP_US, lat, NULL, NULL, NULL);
            report("read_fault_asleep", sizes[i], lat, ns);
            faults(0, 0, sizes[i], 0, lat, NULL, NULL, NULL);
            report("read_fault_mgr", sizes[i], lat, ns);
        }
        faults(1, 1, sizes[i], 0, lat, NULL, NULL, NULL);
        report("write_fault", sizes[i], lat, ns);
    }
    locks(lat, aux);
    report("lock", 0, lat, ns);
    report("lock_local", 0, aux, ns);
    barriers(lat);
    report("barrier", 0, lat, ns);
    false_sharing(lat);
    report("false_sharing", 128, lat, reps);
    busy_owner(lat, aux, serve, swait);
    report("read_fault_busy", BUSY_SIZE, lat, ns);
    report("delay_busy", 0, aux, reps);
    report("serve_busy", 0, serve, reps);
    report("serve_wait_busy", 0, swait, reps);
    for (int i = 0; i < 50; i++)
        joined[i] = compute();
    report("compute_alone", 0, alone, 50);
    report("compute_dsm", 0, joined, 50);
    free(lat);
    free(aux);
    free(serve);
    free(swait);
    check(vmmc_dsm_finalize(), "vmmc_dsm_finalize");
    return 0;
}
