/* Collectives, each checked exactly against what every rank can compute on
 * its own: Barrier, Bcast, Reduce, Allreduce, Allgather, Alltoall,
 * Alltoallv, Gather, Scatter, at sizes from one element to a few MiB (so
 * the collectives' point-to-point messages take the eager and the
 * rendezvous paths). */
#include "mpit.h"

static const int counts[] = {1, 7, 1000, 65536, 1 << 20};
#define NCOUNTS ((int)(sizeof counts / sizeof *counts))

/* The value rank @r contributes at index @i (small enough to sum exactly). */
static int val(int r, int i) { return (r + 1) * 1000 + i % 997; }

static void bcast(int rank, int size)
{
    for (int c = 0; c < NCOUNTS; c++)
        for (int root = 0; root < size; root++) {
            size_t n = (size_t)counts[c] * 4;
            unsigned char *b = mpit_alloc(n);
            if (rank == root)
                mpit_fill(b, n, root, -1, c);
            else
                memset(b, 0, n);
            MPIT(MPI_Bcast(b, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
            MPIT_DATA(b, n, root, -1, c);
            free(b);
        }
}

static void reduce(int rank, int size)
{
    for (int c = 0; c < NCOUNTS; c++) {
        int n = counts[c];
        int *in = mpit_alloc(sizeof(int) * (size_t)n), *out = mpit_alloc(sizeof(int) * (size_t)n);
        double *din = mpit_alloc(sizeof(double) * (size_t)n),
               *dout = mpit_alloc(sizeof(double) * (size_t)n);
        for (int i = 0; i < n; i++) {
            in[i] = val(rank, i);
            din[i] = (double)val(rank, i) * 0.5;
        }
        int root = c % size;
        memset(out, 0, sizeof(int) * (size_t)n);
        MPIT(MPI_Reduce(in, out, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int i = 0; i < n; i++) {
                int want = 0;
                for (int r = 0; r < size; r++)
                    want += val(r, i);
                if (out[i] != want)
                    MPIT_FAIL("MPI_Reduce(SUM) count %d [%d] = %d, expected %d", n, i, out[i], want);
            }
        MPIT(MPI_Allreduce(in, out, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            if (out[i] != val(size - 1, i))
                MPIT_FAIL("MPI_Allreduce(MAX) count %d [%d] = %d", n, i, out[i]);
        MPIT(MPI_Allreduce(din, dout, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            double want = 0; /* halves of integers: every partial sum is exact */
            for (int r = 0; r < size; r++)
                want += (double)val(r, i) * 0.5;
            if (dout[i] != want)
                MPIT_FAIL("MPI_Allreduce(SUM, double) count %d [%d] = %g, expected %g", n, i,
                          dout[i], want);
        }
        for (int i = 0; i < n; i++)
            out[i] = in[i];
        MPIT(MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            if (out[i] != val(0, i))
                MPIT_FAIL("MPI_Allreduce(MIN, in place) count %d [%d] = %d", n, i, out[i]);
        free(in);
        free(out);
        free(din);
        free(dout);
    }
}

static void gathers(int rank, int size)
{
    for (int c = 0; c < NCOUNTS - 1; c++) {
        size_t n = (size_t)counts[c] * 4;
        unsigned char *mine = mpit_alloc(n), *all = mpit_alloc(n * (size_t)size);
        mpit_fill(mine, n, rank, -2, c);
        memset(all, 0, n * (size_t)size);
        MPIT(MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, MPI_COMM_WORLD));
        for (int r = 0; r < size; r++)
            MPIT_DATA(all + n * (size_t)r, n, r, -2, c);
        int root = (c + 1) % size;
        memset(all, 0, n * (size_t)size);
        MPIT(MPI_Gather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++)
                MPIT_DATA(all + n * (size_t)r, n, r, -2, c);
        /* Scatter: the root's part r goes to rank r */
        if (rank == root)
            for (int r = 0; r < size; r++)
                mpit_fill(all + n * (size_t)r, n, root, r, c);
        memset(mine, 0, n);
        MPIT(MPI_Scatter(all, (int)n, MPI_BYTE, mine, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
        MPIT_DATA(mine, n, root, rank, c);
        free(mine);
        free(all);
    }
}

static void alltoalls(int rank, int size)
{
    for (int c = 0; c < NCOUNTS - 1; c++) {
        size_t n = (size_t)counts[c];
        unsigned char *s = mpit_alloc(n * (size_t)size), *r = mpit_alloc(n * (size_t)size);
        for (int p = 0; p < size; p++)
            mpit_fill(s + n * (size_t)p, n, rank, p, c);
        memset(r, 0, n * (size_t)size);
        MPIT(MPI_Alltoall(s, (int)n, MPI_BYTE, r, (int)n, MPI_BYTE, MPI_COMM_WORLD));
        for (int p = 0; p < size; p++)
            MPIT_DATA(r + n * (size_t)p, n, p, rank, c);
        free(s);
        free(r);
    }
    /* Alltoallv: rank i sends (i + 1) * (j + 1) * k bytes to rank j, some zero */
    for (int k = 0; k < 3; k++) {
        int scnt[64], sdis[64], rcnt[64], rdis[64], st = 0, rt = 0;
        for (int p = 0; p < size; p++) {
            scnt[p] = (rank + 1) * (p + 1) * k * 1000;
            rcnt[p] = (p + 1) * (rank + 1) * k * 1000;
            sdis[p] = st;
            rdis[p] = rt;
            st += scnt[p];
            rt += rcnt[p];
        }
        unsigned char *s = mpit_alloc((size_t)st), *r = mpit_alloc((size_t)rt);
        for (int p = 0; p < size; p++)
            mpit_fill(s + sdis[p], (size_t)scnt[p], rank, p, 50 + k);
        memset(r, 0, (size_t)rt);
        MPIT(MPI_Alltoallv(s, scnt, sdis, MPI_BYTE, r, rcnt, rdis, MPI_BYTE, MPI_COMM_WORLD));
        for (int p = 0; p < size; p++)
            MPIT_DATA(r + rdis[p], (size_t)rcnt[p], p, rank, 50 + k);
        free(s);
        free(r);
    }
}

/* Barriers interleaved with a ring of tokens: each round's token is sent only
 * after the round's barrier, and must be that round's. */
static void barrier(int rank, int size)
{
    for (int round = 0; round < 20; round++) {
        int token = -1;
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        MPI_Request req;
        MPIT(MPI_Irecv(&token, 1, MPI_INT, left, 900 + round, MPI_COMM_WORLD, &req));
        MPIT(MPI_Barrier(MPI_COMM_WORLD));
        int mine = rank * 100 + round;
        MPIT(MPI_Send(&mine, 1, MPI_INT, right, 900 + round, MPI_COMM_WORLD));
        MPIT(MPI_Wait(&req, MPI_STATUS_IGNORE));
        MPIT_EQ(token, left * 100 + round);
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    mpit_init(&argc, &argv, &rank, &size, 2);
    if (size > 64)
        MPIT_FAIL("at most 64 ranks");
    barrier(rank, size);
    bcast(rank, size);
    reduce(rank, size);
    gathers(rank, size);
    alltoalls(rank, size);
    mpit_finish("mpi_coll");
    return 0;
}
