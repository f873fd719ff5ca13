/* MPI figures for `vmmc bench mpi`: the same program, run through several
 * paths of Open MPI in one bench run (the vmmc provider over shm and udp,
 * Open MPI's vader, UCX, TCP), so that the figures can be put side by side.
 * `vmmc bench` compiles it at bench time with Open MPI's mpicc and runs it
 * with 2 ranks bound to distinct cores.
 *
 *   mpi_bench [-q] [-b BATCHES] [-s MIN:MAX]
 *
 * Every figure is the median over BATCHES timed batches (after a warm-up
 * batch), with their min and max; rank 0 prints one line per figure:
 *   lat   SIZE med min max   one-way latency, us (blocking ping-pong, OSU)
 *   bw    SIZE med min max   GB/s, rank 0 -> 1: WIN Isends / Irecvs (into one
 *                            buffer, as osu_bw), then an ack
 *   bibw  SIZE med min max   GB/s, both ways at once (the sum)
 *   rate  SIZE med min max   Mmsg/s of SIZE-byte messages, windowed as bw
 *   allreduce|alltoall|bcast SIZE med min max   us per call (SIZE: bytes per rank)
 * -q: fewer sizes and iterations. Every received message is checked once
 * per batch (its first and last byte), so a path that loses data fails. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN 64
#define MAXB 100

static int me, quick, batches = 5;
static size_t lo = 1, hi = (size_t)4 << 20;

static const size_t lat_full[] = {1, 8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20};
static const size_t lat_quick[] = {8, 65536};
static const size_t bw_full[] = {8192, 65536, 1 << 20, 4 << 20};
static const size_t bw_quick[] = {65536};
static const size_t coll_full[] = {8, 1024, 65536};
static const size_t coll_quick[] = {8};

static void die(const char *what)
{
    fprintf(stderr, "mpi_bench: rank %d: %s\n", me, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
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

/* OSU's counts: up to 8 KiB 10000 round trips, above 1000, 4 MiB 100. */
static int lat_iters(size_t n)
{
    int it = n <= 8192 ? 10000 : n < (4u << 20) ? 1000 : 100;
    return quick ? it / 10 : it;
}

static void check(const char *buf, size_t n, char want)
{
    if (n && (buf[0] != want || buf[n - 1] != want))
        die("a received message does not hold what was sent");
}

static double lat_once(char *sb, char *rb, size_t n, int iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (me == 0) {
            MPI_Send(sb, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rb, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rb, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sb, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
    double us = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
    check(rb, n, me == 0 ? 'b' : 'a');
    return us;
}

/* @iters windows of WIN messages from rank 0 to 1 (both ways if @bidi);
 * returns seconds. */
static double stream_once(char *sb, char *rb, size_t n, int iters, int bidi)
{
    MPI_Request req[2 * WIN];
    int peer = 1 - me;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        int k = 0;
        if (me == 1 || bidi)
            for (int w = 0; w < WIN; w++)
                MPI_Irecv(rb, (int)n, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[k++]);
        if (me == 0 || bidi)
            for (int w = 0; w < WIN; w++)
                MPI_Isend(sb, (int)n, MPI_CHAR, peer, 2, MPI_COMM_WORLD, &req[k++]);
        MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
        int ack = 0;
        if (me == 1)
            MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        else
            MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    double s = MPI_Wtime() - t0;
    if (me == 1 || bidi)
        check(rb, n, me == 0 ? 'b' : 'a');
    return s;
}

static void latency(char *sb, char *rb)
{
    const size_t *s = quick ? lat_quick : lat_full;
    int ns = quick ? 2 : 8;
    for (int i = 0; i < ns; i++) {
        if (s[i] < lo || s[i] > hi)
            continue;
        double v[MAXB];
        int it = lat_iters(s[i]);
        lat_once(sb, rb, s[i], it / 10 + 1);
        for (int b = 0; b < batches; b++)
            v[b] = lat_once(sb, rb, s[i], it);
        print("lat", s[i], v, batches);
    }
}

static void streams(char *sb, char *rb)
{
    const size_t *s = quick ? bw_quick : bw_full;
    int ns = quick ? 1 : 4;
    for (int bidi = 0; bidi <= 1; bidi++)
        for (int i = 0; i < ns; i++) {
            if (s[i] < lo || s[i] > hi)
                continue;
            /* about 64 MiB per batch (quick: 16), at least 2 windows */
            int it = (int)(((quick ? 16u : 64u) << 20) / (s[i] * WIN));
            it = it < 2 ? 2 : it;
            double v[MAXB];
            stream_once(sb, rb, s[i], 1, bidi);
            for (int b = 0; b < batches; b++) {
                double sec = stream_once(sb, rb, s[i], it, bidi);
                v[b] = (double)s[i] * WIN * it * (bidi ? 2 : 1) / sec / 1e9;
            }
            print(bidi ? "bibw" : "bw", s[i], v, batches);
        }
    if (8 >= lo && 8 <= hi) {
        int it = quick ? 200 : 2000;
        double v[MAXB];
        stream_once(sb, rb, 8, it / 10, 0);
        for (int b = 0; b < batches; b++)
            v[b] = (double)WIN * it / stream_once(sb, rb, 8, it, 0) / 1e6;
        print("rate", 8, v, batches);
    }
}

static void collectives(char *sb, char *rb)
{
    const size_t *s = quick ? coll_quick : coll_full;
    int ns = quick ? 1 : 3, np;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int op = 0; op < 3; op++)
        for (int i = 0; i < ns; i++) {
            size_t n = s[i];
            if (n < lo || n > hi)
                continue;
            int it = n <= 1024 ? (quick ? 200 : 2000) : (quick ? 20 : 200);
            double v[MAXB];
            for (int b = -1; b < batches; b++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int k = 0; k < it; k++) {
                    if (op == 0)
                        MPI_Allreduce(sb, rb, (int)(n / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                    else if (op == 1)
                        MPI_Alltoall(sb, (int)n, MPI_CHAR, rb, (int)n, MPI_CHAR, MPI_COMM_WORLD);
                    else
                        MPI_Bcast(sb, (int)n, MPI_CHAR, k % np, MPI_COMM_WORLD);
                }
                double us = (MPI_Wtime() - t0) * 1e6 / it;
                if (b >= 0)
                    v[b] = us;
            }
            static const char *const names[] = {"allreduce", "alltoall", "bcast"};
            print(names[op], n, v, batches);
        }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int np;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q"))
            quick = 1;
        else if (!strcmp(argv[i], "-b") && i + 1 < argc)
            batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc &&
                 sscanf(argv[++i], "%zu:%zu", &lo, &hi) == 2)
            ;
        else
            die("usage: mpi_bench [-q] [-b BATCHES] [-s MIN:MAX]");
    }
    if (np != 2)
        die("runs with exactly 2 ranks");
    if (batches < 1 || batches > MAXB)
        die("-b: 1 to 100 batches");
    /* 2 x 4 MiB: alltoall's two blocks; the window's receives all land in
     * one buffer, as OSU's osu_bw does */
    size_t big = (size_t)8 << 20;
    char *sb = malloc(big), *rb = malloc(big);
    if (!sb || !rb)
        die("out of memory");
    memset(sb, me == 0 ? 'a' : 'b', big);
    memset(rb, 0, big);
    latency(sb, rb);
    streams(sb, rb);
    collectives(sb, rb);
    free(sb);
    free(rb);
    MPI_Finalize();
    return 0;
}
