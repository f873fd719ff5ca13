/* Tagged traffic in bulk and the ways of learning that it completed:
 * both sides send 1000 messages before receiving any (the provider must
 * buffer or pace, never deadlock), the source address of a completion
 * (FI_SOURCE, fi_cq_readfrom), counters bound to FI_SEND/FI_RECV (and their
 * error count), fi_cq_sread blocking with a timeout, the FD wait object
 * (FI_GETWAIT, fi_trywait, poll; quiet once fi_trywait says so) and an
 * endpoint sending to itself.
 *
 *   t_ofi_tagged_flow [filter] */
#include "ofi_pair.h"

/* Sizes cycle through small, around the eager limit and rendezvous. */
static size_t flood_len(int i)
{
    size_t e = op_eager();
    switch (i % 8) {
    case 0: return 0;
    case 1: return 8;
    case 2: return 200;
    case 3: return e;
    case 4: return e + 1;
    case 5: return 1000;
    case 6: return 3 * e + 5;
    default: return 64;
    }
}

/* Both ranks post N sends, then N receives (one tag: matched in order),
 * then wait for all; every byte checked. */
static int s_flood(op_side_t *s, void *v)
{
    int n = *(int *)v;
    size_t maxlen = 3 * op_eager() + 5;
    uint8_t **sb = calloc((size_t)n, sizeof *sb), **rb = calloc((size_t)n, sizeof *rb);
    struct fi_context2 *sc = calloc((size_t)n, sizeof *sc), *rc = calloc((size_t)n, sizeof *rc);
    OP_CHECK(sb && rb && sc && rc);
    for (int i = 0; i < n; i++) {
        size_t len = flood_len(i);
        OP_CHECK((sb[i] = malloc(len + 1)) && (rb[i] = malloc(maxlen)));
        op_fill(sb[i], len, (uint64_t)(s->rank * 100000 + i));
    }
    for (int i = 0; i < n; i++)
        OP_POST(s, "tsend", fi_tsend(s->ep, sb[i], flood_len(i), NULL, s->peer, 6, &sc[i]));
    for (int i = 0; i < n; i++)
        OP_POST(s, "trecv", fi_trecv(s->ep, rb[i], maxlen, NULL, s->peer, 6, 0, &rc[i]));
    for (int i = 0; i < n; i++) {
        op_ent_t e = op_wait_ok(s, s->rxcq, &rc[i], "trecv of the flood");
        if (e.e.len != flood_len(i))
            OP_FAIL("receive %d: %zu bytes, message %d has %zu", i, e.e.len, i, flood_len(i));
        OP_VERIFY(rb[i], flood_len(i), (uint64_t)((1 - s->rank) * 100000 + i), 0, "flood data");
    }
    for (int i = 0; i < n; i++)
        op_wait_ok(s, s->txcq, &sc[i], "tsend of the flood");
    for (int i = 0; i < n; i++) {
        free(sb[i]);
        free(rb[i]);
    }
    free(sb);
    free(rb);
    free(sc);
    free(rc);
    return 0;
}

/* FI_SOURCE: fi_cq_readfrom names the sender as this side's AV knows it;
 * with the endpoint's own address in the AV too, a self-send names self. */
static int s_source(op_side_t *s, void *v)
{
    (void)v;
    char b[2][64];
    struct fi_context2 c[2], sc;
    if (!(s->info->caps & FI_SOURCE))
        OP_FAIL("asked for FI_SOURCE, got caps 0x%llx", (unsigned long long)s->info->caps);
    OP_POST(s, "trecv", fi_trecv(s->ep, b[0], 64, NULL, FI_ADDR_UNSPEC, 1, 0, &c[0]));
    OP_POST(s, "trecv", fi_trecv(s->ep, b[1], 64, NULL, FI_ADDR_UNSPEC, 2, 0, &c[1]));
    op_barrier(s);
    char m[16] = "from";
    OP_POST(s, "tsend to peer", fi_tsend(s->ep, m, 16, NULL, s->peer, 1, &sc));
    op_wait_ok(s, s->txcq, &sc, "tsend to peer");
    OP_POST(s, "tsend to self", fi_tsend(s->ep, m, 8, NULL, s->self, 2, &sc));
    op_wait_ok(s, s->txcq, &sc, "tsend to self");
    op_ent_t e = op_wait_ok(s, s->rxcq, &c[0], "trecv from peer");
    if (e.src != s->peer)
        OP_FAIL("source of the peer's message: fi_addr %llu, the peer is %llu",
                (unsigned long long)e.src, (unsigned long long)s->peer);
    e = op_wait_ok(s, s->rxcq, &c[1], "trecv from self");
    if (e.src != s->self)
        OP_FAIL("source of own message: fi_addr %llu, self is %llu", (unsigned long long)e.src,
                (unsigned long long)s->self);
    return 0;
}

/* Counters: FI_SEND counts sends (with a CQ entry or not: inject too),
 * FI_RECV receives; a truncated receive counts as an error. */
static int s_counters(op_side_t *s, void *v)
{
    (void)v;
    enum { N = 10 };
    char b[N][200];
    struct fi_context2 c[N];
    OP_CHECK(fi_cntr_read(s->scntr) == 0 && fi_cntr_read(s->rcntr) == 0);
    if (s->rank == 0) {
        op_barrier(s);
        for (int i = 0; i < N; i++) {
            op_fill(b[i], 100, (uint64_t)i);
            if (i % 3 == 2 && s->info->tx_attr->inject_size >= 100)
                OP_POST(s, "tinject", fi_tinject(s->ep, b[i], 100, s->peer, 7));
            else
                OP_POST(s, "tsend", fi_tsend(s->ep, b[i], 100, NULL, s->peer, 7, &c[i]));
        }
        op_wait_cntr(s, s->scntr, N, "send counter");
        op_barrier(s);
        OP_POST(s, "tsend", fi_tsend(s->ep, b[0], 150, NULL, s->peer, 8, &c[0]));
        op_barrier(s);
        OP_CHECK(fi_cntr_read(s->rcntr) == 0);
    } else {
        for (int i = 0; i < N; i++)
            OP_POST(s, "trecv", fi_trecv(s->ep, b[i], 200, NULL, s->peer, 7, 0, &c[i]));
        op_barrier(s);
        op_wait_cntr(s, s->rcntr, N, "recv counter");
        for (int i = 0; i < N; i++)
            op_wait_ok(s, s->rxcq, &c[i], "trecv");
        op_barrier(s);
        OP_POST(s, "trecv", fi_trecv(s->ep, b[0], 100, NULL, s->peer, 8, 0, &c[0]));
        op_wait_err(s, s->rxcq, &c[0], FI_ETRUNC, "truncated trecv");
        if (fi_cntr_readerr(s->rcntr) != 1)
            OP_FAIL("recv counter errors %llu after a truncated receive, expected 1",
                    (unsigned long long)fi_cntr_readerr(s->rcntr));
        OP_CHECK(fi_cntr_read(s->scntr) == 0);
        /* fi_cntr_wait returns at once for a value reached */
        OP_OK(fi_cntr_wait(s->rcntr, N, 10000));
        op_barrier(s);
    }
    OP_CHECK(fi_cntr_read(s->rank == 0 ? s->scntr : s->rcntr) >= N);
    return 0;
}

/* fi_cq_sread: blocks until the message rank 0 sends after a pause
 * arrives (manual progress: the provider progresses while it blocks);
 * with nothing coming it returns -FI_EAGAIN at its timeout. */
static int s_sread(op_side_t *s, void *v)
{
    (void)v;
    char b[64];
    struct fi_context2 c;
    char go;
    if (s->rank == 0) {
        op_oob_recv(s, &go, 1);
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        op_fill(b, 50, 50);
        OP_POST(s, "tsend", fi_tsend(s->ep, b, 50, NULL, s->peer, 3, &c));
        struct fi_cq_tagged_entry e;
        ssize_t r = fi_cq_sread(s->txcq, &e, 1, NULL, (int)(OP_TIMEOUT * 1000));
        if (r != 1)
            OP_FAIL("fi_cq_sread of the send: %zd (%s)", r, fi_strerror((int)-r));
        OP_CHECK(e.op_context == &c);
        op_oob_recv(s, &go, 1);
        return 0;
    }
    struct fi_cq_tagged_entry e;
    ssize_t r = fi_cq_sread(s->rxcq, &e, 1, NULL, 100);
    if (r != -FI_EAGAIN)
        OP_FAIL("fi_cq_sread with nothing posted: %zd (%s), expected -FI_EAGAIN", r,
                fi_strerror((int)-r));
    OP_POST(s, "trecv", fi_trecv(s->ep, b, 64, NULL, s->peer, 3, 0, &c));
    op_oob_send(s, "g", 1);
    r = fi_cq_sread(s->rxcq, &e, 1, NULL, (int)(OP_TIMEOUT * 1000));
    if (r != 1)
        OP_FAIL("fi_cq_sread of the receive: %zd (%s)", r, fi_strerror((int)-r));
    OP_CHECK(e.op_context == &c && e.len == 50);
    OP_VERIFY(b, 50, 50, 0, "sread data");
    op_oob_send(s, "g", 1);
    return 0;
}

/* FI_WAIT_FD: after fi_trywait says so, poll() on the CQ's fd wakes when the
 * message arrives (a fd that never becomes readable fails at the deadline). */
static int s_waitfd(op_side_t *s, void *v)
{
    (void)v;
    enum { N = 3 };
    char b[64];
    struct fi_context2 c;
    char go;
    if (s->rank == 0) {
        for (int i = 0; i < N; i++) {
            op_oob_recv(s, &go, 1);
            struct timespec ts = {0, 100000000};
            nanosleep(&ts, NULL);
            op_fill(b, 40, (uint64_t)i);
            OP_POST(s, "tsend", fi_tsend(s->ep, b, 40, NULL, s->peer, 3, &c));
            op_wait_ok(s, s->txcq, &c, "tsend");
        }
        op_oob_recv(s, &go, 1);
        return 0;
    }
    int fd = -1;
    OP_OK(fi_control(&s->rxcq->fid, FI_GETWAIT, &fd));
    OP_CHECK(fd >= 0);
    for (int i = 0; i < N; i++) {
        OP_POST(s, "trecv", fi_trecv(s->ep, b, 64, NULL, s->peer, 3, 0, &c));
        op_oob_send(s, "g", 1);
        double end = op_now() + OP_TIMEOUT;
        int sleeps = 0;
        for (;;) {
            struct fi_cq_tagged_entry e;
            ssize_t r = fi_cq_read(s->rxcq, &e, 1);
            if (r == 1) {
                OP_CHECK(e.op_context == &c && e.len == 40);
                break;
            }
            if (r != -FI_EAGAIN)
                OP_FAIL("fi_cq_read: %zd (%s)", r, fi_strerror((int)-r));
            struct fid *f = &s->rxcq->fid;
            int t = fi_trywait(s->fabric, &f, 1);
            if (t == -FI_EAGAIN)
                continue;
            if (t != 0)
                OP_FAIL("fi_trywait: %d (%s)", t, fi_strerror(-t));
            int left = (int)((end - op_now()) * 1000);
            struct pollfd p = {fd, POLLIN, 0};
            if (left <= 0 || poll(&p, 1, left) == 0)
                OP_FAIL("the CQ's fd never became readable (%d waits done, message %d)", sleeps,
                        i);
            sleeps++;
        }
        OP_VERIFY(b, 40, (uint64_t)i, 0, "waitfd data");
    }
    op_oob_send(s, "g", 1);
    return 0;
}

/* FI_WAIT_FD once a message was read: fi_trywait's 0 means "the fd is quiet
 * until something arrives", so a poll() right after it must not return at
 * once (an fd left readable makes an epoll loop spin, reading nothing).
 * The peer is idle meanwhile; a core event landing between fi_trywait and
 * poll() gets two more chances, each read first. */
static int s_quiet(op_side_t *s, void *v)
{
    (void)v;
    enum { N = 3 };
    char b[64];
    struct fi_context2 c;
    char go;
    if (s->rank == 0) {
        for (int i = 0; i < N; i++) {
            op_oob_recv(s, &go, 1);
            op_fill(b, 40, (uint64_t)i);
            OP_POST(s, "tsend", fi_tsend(s->ep, b, 40, NULL, s->peer, 5, &c));
            op_wait_ok(s, s->txcq, &c, "tsend");
        }
        op_oob_recv(s, &go, 1);
        return 0;
    }
    int fd = -1;
    OP_OK(fi_control(&s->rxcq->fid, FI_GETWAIT, &fd));
    struct fid *f = &s->rxcq->fid;
    for (int i = 0; i < N; i++) {
        OP_POST(s, "trecv", fi_trecv(s->ep, b, 64, NULL, s->peer, 5, 0, &c));
        op_oob_send(s, "g", 1);
        double end = op_now() + OP_TIMEOUT;
        for (;;) { /* the message, waiting on the fd */
            struct fi_cq_tagged_entry e;
            ssize_t r = fi_cq_read(s->rxcq, &e, 1);
            if (r == 1) {
                OP_CHECK(e.op_context == &c && e.len == 40);
                break;
            }
            if (r != -FI_EAGAIN)
                OP_FAIL("fi_cq_read: %zd (%s)", r, fi_strerror((int)-r));
            int t = fi_trywait(s->fabric, &f, 1);
            if (t == -FI_EAGAIN)
                continue;
            OP_CHECK(t == 0);
            int left = (int)((end - op_now()) * 1000);
            struct pollfd p = {fd, POLLIN, 0};
            if (left <= 0 || poll(&p, 1, left) == 0)
                OP_FAIL("the CQ's fd never became readable (message %d)", i);
        }
        OP_VERIFY(b, 40, (uint64_t)i, 0, "quiet data");
        int quiet = 0;
        for (int k = 0; k < 3 && !quiet; k++) {
            int t = fi_trywait(s->fabric, &f, 1);
            if (t != 0 && t != -FI_EAGAIN)
                OP_FAIL("fi_trywait: %d (%s)", t, fi_strerror(-t));
            struct pollfd p = {fd, POLLIN, 0};
            quiet = t == 0 && poll(&p, 1, 0) == 0;
            struct fi_cq_tagged_entry e;
            ssize_t r = fi_cq_read(s->rxcq, &e, 1);
            if (r != -FI_EAGAIN)
                OP_FAIL("fi_cq_read with nothing sent: %zd (%s)", r, fi_strerror((int)-r));
        }
        if (!quiet)
            OP_FAIL("after message %d the CQ's fd stays readable although fi_trywait says "
                    "there is nothing to read", i);
    }
    op_oob_send(s, "g", 1);
    return 0;
}

/* An endpoint sends to its own address: eager and rendezvous, posted
 * before and after. */
static int s_self(op_side_t *s, void *v)
{
    (void)v;
    if (s->rank == 1)
        return 0;
    const size_t lens[] = {0, 100, 4 * op_eager(), 1u << 20};
    for (size_t i = 0; i < 4; i++)
        for (int u = 0; u < 2; u++) {
            size_t len = lens[i];
            uint8_t *sb = malloc(len + 1), *rb = malloc(len + 1);
            struct fi_context2 sc, rc;
            OP_CHECK(sb && rb);
            op_fill(sb, len, len + (size_t)u);
            if (!u)
                OP_POST(s, "trecv", fi_trecv(s->ep, rb, len, NULL, s->self, 4, 0, &rc));
            OP_POST(s, "tsend", fi_tsend(s->ep, sb, len, NULL, s->self, 4, &sc));
            if (u)
                OP_POST(s, "trecv", fi_trecv(s->ep, rb, len, NULL, s->self, 4, 0, &rc));
            op_ent_t e = op_wait_ok(s, s->rxcq, &rc, "self trecv");
            op_wait_ok(s, s->txcq, &sc, "self tsend");
            if (e.e.len != len)
                OP_FAIL("self message of %zu bytes arrived with %zu", len, e.e.len);
            OP_VERIFY(rb, len, len + (size_t)u, 0, "self data");
            free(sb);
            free(rb);
        }
    return 0;
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    op_cfg_t c = op_cfg_default();
    int n = argc > 2 ? atoi(argv[2]) : 1000;
    if (op_want(argc, argv, "flood"))
        op_tally(&t, op_run("flood", &c, s_flood, &n));
    {
        op_cfg_t d = c;
        d.caps |= FI_SOURCE;
        d.insert_self = 1;
        if (op_want(argc, argv, "source"))
            op_tally(&t, op_run("source", &d, s_source, NULL));
    }
    {
        op_cfg_t d = c;
        d.cntr_send = d.cntr_recv = 1;
        d.cntr_wait = FI_WAIT_UNSPEC; /* fi_cntr_wait needs a wait object */
        if (op_want(argc, argv, "counters"))
            op_tally(&t, op_run("counters", &d, s_counters, NULL));
    }
    {
        op_cfg_t d = c;
        d.cq_wait = FI_WAIT_UNSPEC;
        if (op_want(argc, argv, "sread"))
            op_tally(&t, op_run("sread", &d, s_sread, NULL));
        d.cq_wait = FI_WAIT_FD;
        if (op_want(argc, argv, "waitfd"))
            op_tally(&t, op_run("waitfd", &d, s_waitfd, NULL));
        if (op_want(argc, argv, "quiet"))
            op_tally(&t, op_run("quiet", &d, s_quiet, NULL));
    }
    {
        op_cfg_t d = c;
        d.insert_self = 1;
        if (op_want(argc, argv, "self"))
            op_tally(&t, op_run("self", &d, s_self, NULL));
    }
    return op_tally_exit(&t);
}
