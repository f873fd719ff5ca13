/* MPI peer for `vmmc bench peers`: ping-pong latency and windowed streaming
 * bandwidth between two ranks, OSU style. `vmmc bench` compiles it at bench
 * time with each installed mpicc (Open MPI, MPICH) and runs it with 2 ranks
 * bound to distinct cores.
 *
 *   mpi_pingpong [-q] [-b BATCHES] [-s MIN:MAX]
 *
 * Latency: one-way = time / (2 * iterations) of blocking Send/Recv pairs.
 * Bandwidth: rank 0 posts WIN Isends of one buffer, rank 1 WIN Irecvs into
 * one buffer, both wait, rank 1 sends a 4-byte ack; GB/s = bytes / time.
 * Per size: one warm-up batch, then BATCHES timed batches. Rank 0 prints
 *   lat <size> <median_us> <min_us> <max_us>
 *   bw  <size> <median_GBps> <min_GBps> <max_GBps>
 * one line per size, median/min/max over the batches. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIN 64
#define MAXB 100

static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 4 << 20};
static const int lat_iters[] = {20000, 20000, 2000, 300, 80};
static const int bw_iters[] = {400, 200, 40, 6, 2};
#define NSIZES (int)(sizeof sizes / sizeof *sizes)

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
    double v[MAXB];
    for (int s = 0; s < NSIZES; s++) {
        size_t n = sizes[s];
        if (n < lo || n > hi || (quick && n != 8))
            continue;
        int it = quick ? lat_iters[s] / 10 : lat_iters[s];
        for (int b = -1; b < nb; b++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < it; i++) {
                if (me == 0) {
                    MPI_Send(buf, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(rb, (int)n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rb, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
                }
            }
            if (b >= 0)
                v[b] = (MPI_Wtime() - t0) * 1e6 / (2.0 * it);
        }
        if (me == 0) {
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
    MPI_Finalize();
    return 0;
}
