/* MPI peer for `vmmc bench peers`: ping-pong latency and windowed streaming
 * bandwidth between two ranks, OSU style. `vmmc bench` compiles it at bench
 * time with each installed mpicc (Open MPI, MPICH) and runs it with 2 ranks
 * bound to distinct cores.
 *
 *   mpi_pingpong [-q] [-b BATCHES] [-s MIN:MAX]
 *
 * Latency, as OSU's osu_latency measures it: blocking MPI_Send/MPI_Recv
 * ping-pong, a warm-up of `skip` round trips, then `iters` timed ones with
 * MPI_Wtime; one-way = time / (2 * iters). OSU's counts: up to 8 KiB 1000 +
 * 10000, above it 100 + 1000 (-q: a tenth). Each batch is one such run; the
 * figure is the median batch.
 * Floor (at 8 B): the same ping-pong, batches alternating with the MPI ones,
 * with each message replaced by a store of one 8-byte word into a window
 * both ranks map (MPI_Win_allocate_shared) and a spin on it: the same
 * processes, binding, clock and counts. An MPI figure below it means the two
 * did not see the same machine.
 * Bandwidth: rank 0 posts WIN Isends of one buffer, rank 1 WIN Irecvs into
 * one buffer, both wait, rank 1 sends a 4-byte ack; GB/s = bytes / time.
 * Per size: one warm-up batch, then BATCHES timed batches. Rank 0 prints
 *   floor <size> <median_us> <min_us> <max_us>     (8 B, when ranks share memory)
 *   lat <size> <median_us> <min_us> <max_us>
 *   bw  <size> <median_GBps> <min_GBps> <max_GBps>
 * one line per size, median/min/max over the batches. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN 64
#define MAXB 100

static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 4 << 20};
#define OSU_LARGE 8192 /* OSU's LARGE_MESSAGE_SIZE: fewer iterations above it */
static const int bw_iters[] = {400, 200, 40, 6, 2};
#define NSIZES (int)(sizeof sizes / sizeof *sizes)

/* One OSU-style latency run: @skip warm-up round trips, then @iters timed;
 * one-way us. */
static double mpi_run(int me, char *buf, char *rb, size_t n, int skip, int iters)
{
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iters; i++) {
        if (i == skip)
            t0 = MPI_Wtime();
        if (me == 0) {
            MPI_Send(buf, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rb, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rb, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

/* The same run with each message a store into the shared window @w (two
 * words a cache line apart; @seq continues across runs). */
static double floor_run(int me, volatile uint64_t *w, uint64_t *seq, int skip, int iters)
{
    volatile uint64_t *ping = w, *pong = w + 8;
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < skip + iters; i++) {
        if (i == skip)
            t0 = MPI_Wtime();
        uint64_t s = ++*seq;
        if (me == 0) {
            __atomic_store_n(ping, s, __ATOMIC_RELEASE);
            while (__atomic_load_n(pong, __ATOMIC_ACQUIRE) != s)
                ;
        } else {
            while (__atomic_load_n(ping, __ATOMIC_ACQUIRE) != s)
                ;
            __atomic_store_n(pong, s, __ATOMIC_RELEASE);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int quick = 0, nb = 7;
    size_t lo = 1, hi = (size_t)1 << 30;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q"))
            quick = 1;
        else if (!strcmp(argv[i], "-b") && i + 1 < argc)
            nb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
            const char *s = argv[++i];
            const char *c = strchr(s, ':');
            lo = parse_size(s);
            hi = c ? parse_size(c + 1) : lo;
        }
    }
    if (nb < 1 || nb > MAXB)
        nb = 7;
    if (np != 2) {
        if (me == 0)
            fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks, got %d\n", np);
        MPI_Finalize();
        return 1;
    }
    size_t maxsz = 4 << 20;
    char *buf = malloc(maxsz), *rb = malloc(maxsz);
    if (!buf || !rb)
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, 1, maxsz);
    memset(rb, 0, maxsz);
    MPI_Request rq[WIN];
    int ack = 0;
    double v[MAXB], fl[MAXB];
    /* The floor's window: shared by the two ranks when they share a node. */
    MPI_Comm node;
    int node_size = 0;
    MPI_Win win = MPI_WIN_NULL;
    volatile uint64_t *w = NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    if (node_size == 2) {
        void *base;
        MPI_Aint wsize;
        int disp;
        if (MPI_Win_allocate_shared(me == 0 ? 4096 : 0, 1, MPI_INFO_NULL, node, &base, &win) ==
                MPI_SUCCESS &&
            MPI_Win_shared_query(win, 0, &wsize, &disp, &base) == MPI_SUCCESS && wsize >= 128) {
            w = base;
            if (me == 0)
                memset(base, 0, 128);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    uint64_t seq = 0;
    for (int s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        if (n < lo || n > hi || (quick && n != 8))
            continue;
        int iters = n <= OSU_LARGE ? 10000 : 1000, skip = n <= OSU_LARGE ? 1000 : 100;
        if (quick) {
            iters /= 10;
            skip /= 10;
        }
        int with_floor = w && n == 8;
        for (int b = 0; b < nb; b++) {
            if (with_floor)
                fl[b] = floor_run(me, w, &seq, skip, iters);
            v[b] = mpi_run(me, buf, rb, n, skip, iters);
        }
        if (me == 0) {
            if (with_floor) {
                qsort(fl, (size_t)nb, sizeof *fl, cmpd);
                printf("floor %zu %.6g %.6g %.6g\n", n, fl[nb / 2], fl[0], fl[nb - 1]);
            }
            qsort(v, (size_t)nb, sizeof *v, cmpd);
            printf("lat %zu %.6g %.6g %.6g\n", n, v[nb / 2], v[0], v[nb - 1]);
            fflush(stdout);
        }
    }
    for (int s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        if (n < lo || n > hi || (quick && n != (1 << 20)))
            continue;
        int it = bw_iters[s];
        for (int b = -1; b < nb; b++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < it; i++) {
                if (me == 0) {
                    for (int w = 0; w < WIN; w++)
                        MPI_Isend(buf, (int)n, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &rq[w]);
                    MPI_Waitall(WIN, rq, MPI_STATUSES_IGNORE);
                    MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int w = 0; w < WIN; w++)
                        MPI_Irecv(rb, (int)n, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &rq[w]);
                    MPI_Waitall(WIN, rq, MPI_STATUSES_IGNORE);
                    MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
                }
            }
            if (b >= 0)
                v[b] = (double)n * WIN * it / (MPI_Wtime() - t0) / 1e9;
        }
        if (me == 0) {
            qsort(v, (size_t)nb, sizeof *v, cmpd);
            printf("bw %zu %.6g %.6g %.6g\n", n, v[nb / 2], v[0], v[nb - 1]);
            fflush(stdout);
        }
    }
    free(buf);
    free(rb);
    if (win != MPI_WIN_NULL)
        MPI_Win_free(&win);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
