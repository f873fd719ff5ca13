/* Ping-pong between rank 0 and each other rank, 0 B to 4 MiB (powers of two
 * and their odd neighbours, so both the eager and the rendezvous path and
 * their boundaries are crossed), every byte checked, in both directions;
 * then the same with MPI_Ssend (the send completes only once matched) and
 * MPI_Sendrecv. Exits non-zero at the first mismatch. */
#include "mpit.h"

#define MAX_SIZE ((size_t)4 << 20)

static void pingpong(int rank, int peer, size_t n, unsigned char *buf, int sync)
{
    int tag = (int)(n % 30000) + (sync ? 1 : 0);
    MPI_Status st;
    int count;
    if (rank == 0) {
        mpit_fill(buf, n, rank, peer, tag);
        if (sync)
            MPIT(MPI_Ssend(buf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
        else
            MPIT(MPI_Send(buf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
        memset(buf, 0xa5, n);
        MPIT(MPI_Recv(buf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
        MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
        MPIT_EQ(count, n);
        MPIT_EQ(st.MPI_SOURCE, peer);
        MPIT_EQ(st.MPI_TAG, tag);
        MPIT_DATA(buf, n, peer, rank, tag);
    } else {
        memset(buf, 0x5a, n);
        MPIT(MPI_Recv(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
        MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
        MPIT_EQ(count, n);
        MPIT_EQ(st.MPI_SOURCE, 0);
        MPIT_DATA(buf, n, 0, rank, tag);
        mpit_fill(buf, n, rank, 0, tag);
        if (sync)
            MPIT(MPI_Ssend(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD));
        else
            MPIT(MPI_Send(buf, (int)n, MPI_BYTE, 0, tag, MPI_COMM_WORLD));
    }
}

/* Every rank sends to its right and receives from its left at once (a ring):
 * both directions of every pair carry data at the same time. */
static void ring(int rank, int size, size_t n, unsigned char *sbuf, unsigned char *rbuf)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size, tag = 7;
    MPI_Status st;
    int count;
    mpit_fill(sbuf, n, rank, right, tag);
    memset(rbuf, 0, n);
    MPIT(MPI_Sendrecv(sbuf, (int)n, MPI_BYTE, right, tag, rbuf, (int)n, MPI_BYTE, left, tag,
                      MPI_COMM_WORLD, &st));
    MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
    MPIT_EQ(count, n);
    MPIT_DATA(rbuf, n, left, rank, tag);
}

int main(int argc, char **argv)
{
    int rank, size;
    mpit_init(&argc, &argv, &rank, &size, 2);
    unsigned char *buf = mpit_alloc(MAX_SIZE + 1), *rbuf = mpit_alloc(MAX_SIZE + 1);
    for (int sync = 0; sync <= 1; sync++)
        for (int peer = 1; peer < size; peer++) {
            if (rank != 0 && rank != peer)
                continue;
            int other = rank == 0 ? peer : 0;
            for (size_t n = 0; n <= MAX_SIZE; n = n ? n * 2 : 1) {
                pingpong(rank, other, n, buf, sync);
                if (n > 2) {
                    pingpong(rank, other, n - 1, buf, sync);
                    pingpong(rank, other, n + 1, buf, sync);
                }
            }
        }
    for (size_t n = 0; n <= MAX_SIZE; n = n ? n * 4 : 1)
        ring(rank, size, n, buf, rbuf);
    free(buf);
    free(rbuf);
    mpit_finish("mpi_pingpong");
    return 0;
}
