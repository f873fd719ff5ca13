/* Point-to-point semantics that the matching layer must get right: wildcard
 * receives (MPI_ANY_TAG, MPI_ANY_SOURCE), message order between one pair
 * (non-overtaking), MPI_Probe / Iprobe / Mprobe / Mrecv, non-blocking calls
 * (Isend / Irecv / Waitall / Test / Testall / Waitany), MPI_Bsend, MPI_Ssend
 * and MPI_Issend (not complete before the receive is posted), and a
 * truncated receive reported as MPI_ERR_TRUNCATE under MPI_ERRORS_RETURN.
 * Every rank > 0 plays the sender against rank 0, so with 4 ranks the
 * wildcard receives see three sources at once. */
#include "mpit.h"

#define NMSG 64
#define BIG ((size_t)1 << 20) /* beyond any eager limit */

static size_t msg_len(int i)
{
    static const size_t lens[] = {0, 1, 8, 100, 4096, 65536, 200000, BIG};
    return lens[i % (int)(sizeof lens / sizeof *lens)];
}

/* Senders send NMSG messages with tags 0..NMSG-1 (lengths varying); rank 0
 * receives them all with MPI_ANY_SOURCE / MPI_ANY_TAG and checks that, per
 * source, the tags arrive in order and each message's contents are its own. */
static void wildcard(int rank, int size, unsigned char *buf)
{
    if (rank != 0) {
        for (int t = 0; t < NMSG; t++) {
            mpit_fill(buf, msg_len(t), rank, 0, t);
            MPIT(MPI_Send(buf, (int)msg_len(t), MPI_BYTE, 0, t, MPI_COMM_WORLD));
        }
        return;
    }
    int next[64] = {0};
    for (int i = 0; i < NMSG * (size - 1); i++) {
        MPI_Status st;
        int count;
        MPIT(MPI_Recv(buf, (int)BIG, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
        if (st.MPI_SOURCE < 1 || st.MPI_SOURCE >= size)
            MPIT_FAIL("MPI_ANY_SOURCE gave source %d", st.MPI_SOURCE);
        MPIT_EQ(st.MPI_TAG, next[st.MPI_SOURCE]);
        MPIT_EQ(count, msg_len(st.MPI_TAG));
        MPIT_DATA(buf, (size_t)count, st.MPI_SOURCE, 0, st.MPI_TAG);
        next[st.MPI_SOURCE]++;
    }
}

/* Specific tags received in reverse order of sending: the matching must
 * skip the unexpected ones (held) and take each when its receive comes. */
static void reverse_tags(int rank, int size, unsigned char *buf)
{
    enum { n = 16 };
    if (rank != 0) { /* non-blocking: a large send waits for its receive */
        MPI_Request req[n];
        unsigned char *b[n];
        for (int t = 0; t < n; t++) {
            b[t] = mpit_alloc(msg_len(t));
            mpit_fill(b[t], msg_len(t), rank, 0, 100 + t);
            MPIT(MPI_Isend(b[t], (int)msg_len(t), MPI_BYTE, 0, 100 + t, MPI_COMM_WORLD, &req[t]));
        }
        MPIT(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
        for (int t = 0; t < n; t++)
            free(b[t]);
        return;
    }
    for (int src = size - 1; src >= 1; src--)
        for (int t = n - 1; t >= 0; t--) {
            MPI_Status st;
            int count;
            MPIT(MPI_Recv(buf, (int)BIG, MPI_BYTE, src, 100 + t, MPI_COMM_WORLD, &st));
            MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
            MPIT_EQ(count, msg_len(t));
            MPIT_DATA(buf, (size_t)count, src, 0, 100 + t);
        }
}

/* Probe, Iprobe, Mprobe + Mrecv, Improbe: the size is learnt before the
 * receive, and a matched message (Mprobe) can be received by nobody else. */
static void probes(int rank, int size, unsigned char *buf)
{
    if (rank != 0) {
        for (int t = 0; t < 8; t++) {
            mpit_fill(buf, msg_len(t), rank, 0, 200 + t);
            MPIT(MPI_Send(buf, (int)msg_len(t), MPI_BYTE, 0, 200 + t, MPI_COMM_WORLD));
        }
        return;
    }
    for (int src = 1; src < size; src++)
        for (int t = 0; t < 8; t++) {
            MPI_Status st;
            int count, flag = 0;
            switch (t % 4) {
            case 0: /* Probe, then Recv of exactly the size found */
                MPIT(MPI_Probe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                MPIT_EQ(st.MPI_TAG, 200 + t);
                MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
                MPIT_EQ(count, msg_len(t));
                MPIT(MPI_Recv(buf, count, MPI_BYTE, src, st.MPI_TAG, MPI_COMM_WORLD, &st));
                break;
            case 1: /* Iprobe until it is there */
                for (long spins = 0; !flag; spins++)
                    MPIT(MPI_Iprobe(src, 200 + t, MPI_COMM_WORLD, &flag, &st));
                MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
                MPIT_EQ(count, msg_len(t));
                MPIT(MPI_Recv(buf, count, MPI_BYTE, src, 200 + t, MPI_COMM_WORLD, &st));
                break;
            case 2: { /* Mprobe + Mrecv */
                MPI_Message m;
                MPIT(MPI_Mprobe(src, 200 + t, MPI_COMM_WORLD, &m, &st));
                MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
                MPIT_EQ(count, msg_len(t));
                MPIT(MPI_Mrecv(buf, count, MPI_BYTE, &m, &st));
                if (m != MPI_MESSAGE_NULL)
                    MPIT_FAIL("MPI_Mrecv left the message handle set");
                break;
            }
            default: { /* Improbe + Imrecv */
                MPI_Message m;
                MPI_Request r;
                while (!flag)
                    MPIT(MPI_Improbe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
                MPIT_EQ(st.MPI_TAG, 200 + t);
                MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
                MPIT(MPI_Imrecv(buf, count, MPI_BYTE, &m, &r));
                MPIT(MPI_Wait(&r, &st));
                break;
            }
            }
            MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
            MPIT_EQ(count, msg_len(t));
            MPIT_EQ(st.MPI_SOURCE, src);
            MPIT_DATA(buf, (size_t)count, src, 0, 200 + t);
        }
}

/* Receives posted before the sends (Irecv), all pairs at once, completed by
 * Waitall, Testall polling and Waitany. */
static void nonblocking(int rank, int size)
{
    const int per = 6;
    int nreq = 2 * per * (size - 1);
    MPI_Request *req = mpit_alloc(sizeof *req * (size_t)nreq);
    unsigned char **bufs = mpit_alloc(sizeof *bufs * (size_t)nreq);
    int k = 0;
    for (int peer = 0; peer < size; peer++) {
        if (peer == rank)
            continue;
        for (int i = 0; i < per; i++) {
            size_t n = msg_len(i + 2);
            bufs[k] = mpit_alloc(n);
            MPIT(MPI_Irecv(bufs[k], (int)n, MPI_BYTE, peer, 300 + i, MPI_COMM_WORLD, &req[k]));
            k++;
        }
    }
    MPIT(MPI_Barrier(MPI_COMM_WORLD)); /* every receive is posted before any send */
    for (int peer = 0; peer < size; peer++) {
        if (peer == rank)
            continue;
        for (int i = 0; i < per; i++) {
            size_t n = msg_len(i + 2);
            bufs[k] = mpit_alloc(n);
            mpit_fill(bufs[k], n, rank, peer, 300 + i);
            MPIT(MPI_Isend(bufs[k], (int)n, MPI_BYTE, peer, 300 + i, MPI_COMM_WORLD, &req[k]));
            k++;
        }
    }
    MPI_Status *st = mpit_alloc(sizeof *st * (size_t)nreq);
    int mode = rank % 3;
    if (mode == 0) {
        MPIT(MPI_Waitall(nreq, req, st));
    } else if (mode == 1) {
        int flag = 0;
        while (!flag)
            MPIT(MPI_Testall(nreq, req, &flag, st));
    } else {
        for (int left = nreq; left > 0; left--) {
            int idx;
            MPI_Status s;
            MPIT(MPI_Waitany(nreq, req, &idx, &s));
            if (idx == MPI_UNDEFINED)
                MPIT_FAIL("MPI_Waitany: no active request with %d left", left);
            if (req[idx] != MPI_REQUEST_NULL)
                MPIT_FAIL("MPI_Waitany left request %d active", idx);
        }
    }
    k = 0;
    for (int peer = 0; peer < size; peer++) {
        if (peer == rank)
            continue;
        for (int i = 0; i < per; i++, k++)
            MPIT_DATA(bufs[k], msg_len(i + 2), peer, rank, 300 + i);
    }
    for (int i = 0; i < nreq; i++)
        free(bufs[i]);
    free(bufs);
    free(req);
    free(st);
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
}

/* MPI_Test on a receive whose send comes only after a barrier: it must
 * report "not yet" first, then complete. */
static void test_pending(int rank, unsigned char *buf)
{
    if (rank > 1) {
        MPIT(MPI_Barrier(MPI_COMM_WORLD));
        return;
    }
    MPI_Request r;
    int flag = 1;
    if (rank == 0) {
        MPIT(MPI_Irecv(buf, 64, MPI_BYTE, 1, 400, MPI_COMM_WORLD, &r));
        MPIT(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        if (flag)
            MPIT_FAIL("MPI_Test completed a receive whose message was not sent yet");
        MPIT(MPI_Barrier(MPI_COMM_WORLD));
        while (!flag)
            MPIT(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        MPIT_DATA(buf, 64, 1, 0, 400);
    } else {
        MPIT(MPI_Barrier(MPI_COMM_WORLD));
        mpit_fill(buf, 64, 1, 0, 400);
        MPIT(MPI_Send(buf, 64, MPI_BYTE, 0, 400, MPI_COMM_WORLD));
    }
}

/* A message longer than the receive buffer: MPI_ERR_TRUNCATE (errors
 * returned, not fatal), and the next message still arrives intact. */
static void truncation(int rank, unsigned char *buf)
{
    if (rank > 1)
        return;
    const size_t sizes[] = {100, BIG};
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        if (rank == 1) {
            mpit_fill(buf, n, 1, 0, 500 + i);
            MPIT(MPI_Send(buf, (int)n, MPI_BYTE, 0, 500 + i, MPI_COMM_WORLD));
            mpit_fill(buf, 32, 1, 0, 510 + i);
            MPIT(MPI_Send(buf, 32, MPI_BYTE, 0, 510 + i, MPI_COMM_WORLD));
            continue;
        }
        MPI_Status st;
        MPIT(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        int rc = MPI_Recv(buf, (int)(n / 2), MPI_BYTE, 1, 500 + i, MPI_COMM_WORLD, &st);
        MPIT(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        int cls = -1;
        MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_TRUNCATE)
            MPIT_FAIL("a %zu-byte message into %zu bytes: error class %d, expected "
                      "MPI_ERR_TRUNCATE (%d)", n, n / 2, cls, MPI_ERR_TRUNCATE);
        MPIT_DATA(buf, n / 2, 1, 0, 500 + i); /* what fitted is the message's start */
        int count;
        MPIT(MPI_Recv(buf, 64, MPI_BYTE, 1, 510 + i, MPI_COMM_WORLD, &st));
        MPIT(MPI_Get_count(&st, MPI_BYTE, &count));
        MPIT_EQ(count, 32);
        MPIT_DATA(buf, 32, 1, 0, 510 + i);
    }
}

/* MPI_Bsend through an attached buffer: returns before the receive is
 * posted, and the data arrives intact. */
static void bsend(int rank, int size, unsigned char *buf)
{
    int n = 10000, cnt = 4, bsize = cnt * (n + MPI_BSEND_OVERHEAD);
    if (rank != 0) {
        void *att = mpit_alloc((size_t)bsize);
        MPIT(MPI_Buffer_attach(att, bsize));
        for (int i = 0; i < cnt; i++) {
            mpit_fill(buf, (size_t)n, rank, 0, 600 + i);
            MPIT(MPI_Bsend(buf, n, MPI_BYTE, 0, 600 + i, MPI_COMM_WORLD));
        }
        MPIT(MPI_Barrier(MPI_COMM_WORLD)); /* the receives come after this */
        int sz;
        void *old;
        MPIT(MPI_Buffer_detach(&old, &sz)); /* waits for the buffered sends */
        free(att);
        return;
    }
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    for (int src = 1; src < size; src++)
        for (int i = cnt - 1; i >= 0; i--) {
            MPIT(MPI_Recv(buf, n, MPI_BYTE, src, 600 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPIT_DATA(buf, (size_t)n, src, 0, 600 + i);
        }
}

/* MPI_Ssend / MPI_Issend: complete only once the receive matched (Open
 * MPI's mtl ofi sends an acknowledgement through the provider). Rank 0
 * posts nothing before the barrier, so no Issend may be complete there. */
static void ssend(int rank, int size, unsigned char *buf)
{
    size_t lens[] = {8, BIG};
    for (int k = 0; k < 2; k++) {
        size_t n = lens[k];
        if (rank != 0) {
            MPI_Request r;
            int done = 1;
            mpit_fill(buf, n, rank, 0, 700 + k);
            MPIT(MPI_Issend(buf, (int)n, MPI_BYTE, 0, 700 + k, MPI_COMM_WORLD, &r));
            for (int i = 0; i < 100; i++)
                MPIT(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
            if (done)
                MPIT_FAIL("MPI_Issend of %zu bytes completed before rank 0 posted its receive", n);
            MPIT(MPI_Barrier(MPI_COMM_WORLD));
            MPIT(MPI_Wait(&r, MPI_STATUS_IGNORE));
            mpit_fill(buf, n, rank, 1, 710 + k);
            MPIT(MPI_Ssend(buf, (int)n, MPI_BYTE, 0, 710 + k, MPI_COMM_WORLD));
            continue;
        }
        MPIT(MPI_Barrier(MPI_COMM_WORLD));
        for (int src = 1; src < size; src++) {
            MPIT(MPI_Recv(buf, (int)n, MPI_BYTE, src, 700 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPIT_DATA(buf, n, src, 0, 700 + k);
            MPIT(MPI_Recv(buf, (int)n, MPI_BYTE, src, 710 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPIT_DATA(buf, n, src, 1, 710 + k);
        }
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    mpit_init(&argc, &argv, &rank, &size, 2);
    if (size > 64)
        MPIT_FAIL("at most 64 ranks");
    unsigned char *buf = mpit_alloc(BIG);
    wildcard(rank, size, buf);
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    reverse_tags(rank, size, buf);
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    probes(rank, size, buf);
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    nonblocking(rank, size);
    test_pending(rank, buf);
    truncation(rank, buf);
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    bsend(rank, size, buf);
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    ssend(rank, size, buf);
    free(buf);
    mpit_finish("mpi_p2p");
    return 0;
}
