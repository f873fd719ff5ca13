/* Bad inputs and bad luck (fi_msg(3), fi_endpoint(3), fi_av(3)): a message
 * longer than max_msg_size, more iov entries than iov_limit, an inject over
 * inject_size, an fi_addr_t the AV never gave, operations before fi_enable
 * (-FI_EOPBADSTATE), closing what is still in use (-FI_EBUSY), garbage
 * addresses offered to the AV, and a peer that exits in the middle of a
 * rendezvous: the survivor's operations end with an error completion, in
 * bounded time, and it closes cleanly; a receive directed at a peer that
 * exits without sending ends too.
 *
 * Where fi_*(3) leave the exact code open, any error is accepted but never
 * 0 or -FI_EAGAIN (which would invite a retry forever), and an operation
 * accepted must then fail by an error completion.
 *
 *   t_ofi_err [filter] */
#include "ofi_pair.h"

/* An operation that must fail: at once (a negative code other than
 * -FI_EAGAIN, one of @p ok if given), or with an error completion. */
static void expect_fail(op_side_t *s, ssize_t r, void *ctx, const char *what, const int *ok,
                        int nok)
{
    if (r == -FI_EAGAIN)
        OP_FAIL("%s: -FI_EAGAIN, a retry would never succeed", what);
    if (r < 0) {
        if (!nok)
            return;
        for (int i = 0; i < nok; i++)
            if (r == -ok[i])
                return;
        OP_FAIL("%s: %zd (%s), expected %s", what, r, fi_strerror((int)-r), fi_strerror(ok[0]));
    }
    if (r > 0)
        OP_FAIL("%s: returned %zd", what, r);
    op_ent_t e = op_wait_for(s, s->txcq, ctx, OP_TIMEOUT, what);
    if (!e.err)
        OP_FAIL("%s: accepted and completed successfully", what);
}

/* Inputs outside the limits fi_getinfo reported, and addresses the AV
 * never gave. Nothing here may reach the peer: it checks that afterwards. */
static int s_limits(op_side_t *s, void *v)
{
    (void)v;
    struct fi_context2 c;
    char small[64];
    memset(small, 0, sizeof small);
    if (s->rank == 1) {
        op_barrier(s);
        op_expect_none(s, s->rxcq, 0.2, "nothing was sent");
        OP_POST(s, "trecv", fi_trecv(s->ep, small, 64, NULL, s->peer, 1, 0, &c));
        op_barrier(s);
        op_ent_t e = op_wait_ok(s, s->rxcq, &c, "the good message after the bad ones");
        OP_CHECK(e.e.len == 5);
        return 0;
    }
    const int einval[] = {FI_EINVAL, FI_EMSGSIZE};
    size_t max = s->info->ep_attr->max_msg_size;
    if (max < SIZE_MAX) {
        /* never touched: the length is refused before any byte is read */
        ssize_t r = fi_tsend(s->ep, small, max + 1, NULL, s->peer, 1, &c);
        expect_fail(s, r, &c, "fi_tsend of max_msg_size + 1 bytes", einval, 2);
    }
    size_t lim = s->info->tx_attr->iov_limit;
    struct iovec iov[64];
    if (lim < 64) {
        for (size_t i = 0; i <= lim; i++) {
            iov[i].iov_base = small;
            iov[i].iov_len = 1;
        }
        ssize_t r = fi_tsendv(s->ep, iov, NULL, lim + 1, s->peer, 1, &c);
        expect_fail(s, r, &c, "fi_tsendv with iov_limit + 1 entries", einval, 2);
        struct fi_msg_tagged m = {.msg_iov = iov, .iov_count = lim + 1, .addr = s->peer,
                                  .tag = 1, .context = &c};
        r = fi_trecvmsg(s->ep, &m, 0);
        if (r >= 0)
            OP_FAIL("fi_trecvmsg with iov_limit + 1 entries accepted (%zd)", r);
    }
    size_t isz = s->info->tx_attr->inject_size;
    char *big = calloc(1, isz + 2);
    OP_CHECK(big);
    ssize_t r = fi_tinject(s->ep, big, isz + 1, s->peer, 1);
    if (r >= 0 || r == -FI_EAGAIN)
        OP_FAIL("fi_tinject of inject_size + 1 = %zu bytes: %zd", isz + 1, r);
    free(big);
    /* addresses never inserted */
    const fi_addr_t bad[] = {s->peer + 1, s->peer + 1000, (fi_addr_t)1 << 40, FI_ADDR_NOTAVAIL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[80];
        snprintf(what, sizeof what, "fi_tsend to fi_addr %llu (not in the AV)",
                 (unsigned long long)bad[i]);
        r = fi_tsend(s->ep, small, 5, NULL, bad[i], 1, &c);
        expect_fail(s, r, &c, what, NULL, 0);
        r = fi_tinject(s->ep, small, 5, bad[i], 1);
        if (r >= 0 || r == -FI_EAGAIN)
            OP_FAIL("fi_tinject to fi_addr %llu (not in the AV): %zd",
                    (unsigned long long)bad[i], r);
    }
    op_barrier(s);
    op_barrier(s);
    op_fill(small, 5, 0);
    OP_POST(s, "tsend", fi_tsend(s->ep, small, 5, NULL, s->peer, 1, &c));
    op_wait_ok(s, s->txcq, &c, "the good message");
    return 0;
}

/* Before fi_enable: -FI_EOPBADSTATE for data transfers. */
static int s_not_enabled(op_side_t *s, void *v)
{
    (void)v;
    char b[16] = {0};
    struct fi_context2 c;
    OP_EXPECT(-FI_EOPBADSTATE, fi_tsend(s->ep, b, 8, NULL, 0, 1, &c));
    OP_EXPECT(-FI_EOPBADSTATE, fi_send(s->ep, b, 8, NULL, 0, &c));
    OP_EXPECT(-FI_EOPBADSTATE, fi_trecv(s->ep, b, 8, NULL, FI_ADDR_UNSPEC, 1, 0, &c));
    OP_EXPECT(-FI_EOPBADSTATE, fi_recv(s->ep, b, 8, NULL, FI_ADDR_UNSPEC, &c));
    OP_EXPECT(-FI_EOPBADSTATE, fi_tinject(s->ep, b, 8, 0, 1));
    /* and it still enables afterwards */
    OP_OK(fi_enable(s->ep));
    return 0;
}

/* Closing what an endpoint uses, or a domain or fabric with children:
 * -FI_EBUSY, and nothing is freed (the normal close after still works). */
static int s_close_order(op_side_t *s, void *v)
{
    (void)v;
    OP_EXPECT(-FI_EBUSY, fi_close(&s->fabric->fid));
    OP_EXPECT(-FI_EBUSY, fi_close(&s->domain->fid));
    OP_EXPECT(-FI_EBUSY, fi_close(&s->av->fid));
    OP_EXPECT(-FI_EBUSY, fi_close(&s->txcq->fid));
    OP_EXPECT(-FI_EBUSY, fi_close(&s->rxcq->fid));
    if (s->scntr)
        OP_EXPECT(-FI_EBUSY, fi_close(&s->scntr->fid));
    /* the endpoint still works: a message to itself */
    char b[8] = "1234567", r[8] = {0};
    struct fi_context2 c1, c2;
    OP_POST(s, "trecv", fi_trecv(s->ep, r, 8, NULL, s->self, 2, 0, &c1));
    OP_POST(s, "tsend", fi_tsend(s->ep, b, 8, NULL, s->self, 2, &c2));
    op_wait_ok(s, s->rxcq, &c1, "self receive after refused closes");
    op_wait_ok(s, s->txcq, &c2, "self send after refused closes");
    OP_CHECK(!memcmp(b, r, 8));
    return 0;
}

/* Garbage offered to the AV: refused (0 inserted, FI_ADDR_NOTAVAIL); a
 * well-formed address of nobody, if accepted, fails its first send. */
static int s_av_garbage(op_side_t *s, void *v)
{
    (void)v;
    size_t alen = s->info->src_addrlen ? s->info->src_addrlen : s->namelen;
    uint8_t g[OP_NAME_MAX];
    fi_addr_t fa;
    OP_CHECK(alen <= OP_NAME_MAX);
    const int fills[] = {0x00, 0xff, 0x5a};
    for (size_t i = 0; i < 3; i++) {
        memset(g, fills[i], alen);
        fa = 7;
        int r = fi_av_insert(s->av, g, 1, &fa, 0, NULL);
        if (r < 0)
            r = 0; /* refused with a code */
        if (r == 1 && op_is_vmmc())
            OP_FAIL("an address of %zu bytes 0x%02x was inserted (fi_addr %llu)", alen,
                    fills[i], (unsigned long long)fa);
        if (r == 0 && fa != FI_ADDR_NOTAVAIL)
            OP_FAIL("refused insert left fi_addr %llu, not FI_ADDR_NOTAVAIL",
                    (unsigned long long)fa);
        if (r == 1) {
            char b[8] = {0};
            struct fi_context2 c;
            expect_fail(s, fi_tsend(s->ep, b, 8, NULL, fa, 1, &c), &c,
                        "fi_tsend to a garbage address", NULL, 0);
        }
    }
    /* our own name with each byte flipped in turn: never a crash; an
     * accepted one that names nobody fails when used (bounded) */
    int accepted = 0;
    for (size_t i = 0; i < s->namelen; i++) {
        memcpy(g, s->name, s->namelen);
        g[i] ^= 0x81;
        int r = fi_av_insert(s->av, g, 1, &fa, 0, NULL);
        if (r > 1)
            OP_FAIL("fi_av_insert of a flipped address: %d", r);
        accepted += r == 1; /* < 0: refused with a code, as providers do */
    }
    printf("  %d of %zu one-byte forgeries of a real address were inserted\n", accepted,
           s->namelen);
    OP_EXPECT(0, fi_av_insert(s->av, NULL, 0, &fa, 0, NULL));
    return 0;
}

/* A peer that exits in the middle of a rendezvous. mode 0: rank 1 is the
 * receiver and dies; rank 0's send must end. mode 1: rank 1 is the sender
 * and dies; rank 0's matched receive must end. mode 2: rank 1 sends and
 * exits at once, and rank 0 posts its receive only once rank 1 is gone: the
 * receive matches the announcement, and its answer can never go to the dead
 * sender. Then a new operation to the dead peer also ends, and rank 0
 * closes.
 *
 * The large message must have left rank 1 before it dies, or rank 0's
 * receive (from any source) has nothing to do with it. A first message to
 * a peer waits for the connection (the provider keeps it in its backlog and
 * fi_tsend() returns 0), so the two first exchange a message the same way
 * (a rendezvous one in modes 0 and 1: every channel it needs is then
 * connected), and the large send goes out at once. */
typedef struct darg {
    int mode;
} darg_t;

/* Wait until the peer process has exited (its end of the pipe closes). */
static void wait_peer_exit(op_side_t *s)
{
    double end = op_now() + OP_TIMEOUT;
    char c;
    for (;;) {
        struct pollfd pfd = {s->fd, POLLIN, 0};
        if (poll(&pfd, 1, 10) > 0) {
            ssize_t n = read(s->fd, &c, 1);
            if (n == 0)
                return;
            if (n < 0 && errno != EINTR)
                OP_FAIL("oob read: %s", strerror(errno));
        }
        if (op_now() > end)
            OP_FAIL("the peer did not exit in %.0f s", OP_TIMEOUT);
    }
}

static int s_peer_dies(op_side_t *s, void *v)
{
    darg_t *a = v;
    size_t len = 64u << 20;
    size_t wlen = a->mode == 2 ? 64 : op_eager() + 4096;
    uint8_t *b = malloc(len);
    struct fi_context2 c, c2;
    OP_CHECK(b);
    memset(b, 1, len);
    int sender = a->mode == 0 ? 0 : 1;
    /* The first message, in the direction of the large one. */
    if (s->rank == sender) {
        OP_POST(s, "tsend", fi_tsend(s->ep, b, wlen, NULL, s->peer, 3, &c));
        op_wait_ok(s, s->txcq, &c, "the first send");
    } else {
        OP_POST(s, "trecv", fi_trecv(s->ep, b, wlen, NULL, s->peer, 3, 0, &c));
        op_wait_ok(s, s->rxcq, &c, "the first receive");
    }
    if (s->rank == 1) {
        if (sender == 1) {
            op_barrier(s);
            OP_POST(s, "tsend", fi_tsend(s->ep, b, len, NULL, s->peer, 1, &c));
            if (a->mode == 1)
                op_settle(s, 0.01);
        } else {
            OP_POST(s, "trecv", fi_trecv(s->ep, b, len, NULL, s->peer, 1, 0, &c));
            op_barrier(s);
            op_settle(s, 0.01);
        }
        _exit(0); /* no close: as if killed */
    }
    if (sender == 0) {
        op_barrier(s);
        /* the peer may be gone already: then the send may fail at once */
        ssize_t r;
        double end = op_now() + OP_TIMEOUT;
        while ((r = fi_tsend(s->ep, b, len, NULL, s->peer, 1, &c)) == -FI_EAGAIN) {
            if (op_now() > end)
                OP_FAIL("a send to a dying peer: -FI_EAGAIN for %.0f s", OP_TIMEOUT);
            op_settle(s, 0.001);
        }
        if (r < 0) {
            printf("  send to a dead peer refused at once: %s\n", fi_strerror((int)-r));
            free(b);
            return 0;
        }
    } else if (a->mode == 1) {
        OP_POST(s, "trecv", fi_trecv(s->ep, b, len, NULL, s->peer, 1, 0, &c));
        op_barrier(s);
    } else {
        op_barrier(s);
        wait_peer_exit(s);
        OP_POST(s, "trecv", fi_trecv(s->ep, b, len, NULL, s->peer, 1, 0, &c));
    }
    double t0 = op_now();
    op_ent_t e = op_wait_for(s, sender == 0 ? s->txcq : s->rxcq, &c, OP_TIMEOUT,
                             "the operation with the dead peer");
    printf("  %s with a dead peer ended after %.1f s: %s\n", sender == 0 ? "send" : "receive",
           op_now() - t0, e.err ? fi_strerror(e.err) : "success");
    if (!e.err && e.e.len != len)
        OP_FAIL("success with %zu of %zu bytes", e.e.len, len);
    /* the peer is gone: a new send to it must end too */
    ssize_t r;
    double end = op_now() + OP_TIMEOUT;
    while ((r = fi_tsend(s->ep, b, 100000, NULL, s->peer, 2, &c2)) == -FI_EAGAIN &&
           op_now() < end)
        op_settle(s, 0.001);
    if (r == 0) {
        e = op_wait_for(s, s->txcq, &c2, OP_TIMEOUT, "a send to a dead peer");
        if (!e.err)
            OP_FAIL("a 100000-byte send to a dead peer completed successfully");
    } else if (r == -FI_EAGAIN) {
        OP_FAIL("a send to a dead peer: -FI_EAGAIN for %.0f s", OP_TIMEOUT);
    }
    free(b);
    return 0;
}

/* A receive directed at a peer that exits without sending it anything
 * more: it can never match, so it must end with an error rather than wait
 * forever. @p v: the peers first swap one message each way (so each knows
 * the other as a live peer), or not at all. */
static int s_directed_dead(op_side_t *s, void *v)
{
    int talk = *(int *)v;
    char b[64];
    struct fi_context2 c, c2;
    if (!(s->info->caps & FI_DIRECTED_RECV))
        OP_FAIL("asked for FI_DIRECTED_RECV, got caps 0x%llx", (unsigned long long)s->info->caps);
    if (talk) {
        OP_POST(s, "trecv", fi_trecv(s->ep, b, sizeof b, NULL, s->peer, 9, 0, &c2));
        OP_POST(s, "tsend", fi_tsend(s->ep, "hello", 6, NULL, s->peer, 9, &c));
        op_wait_ok(s, s->txcq, &c, "hello sent");
        op_wait_ok(s, s->rxcq, &c2, "hello received");
    }
    if (s->rank == 1) {
        op_barrier(s);
        _exit(0);
    }
    OP_POST(s, "trecv", fi_trecv(s->ep, b, sizeof b, NULL, s->peer, 1, 0, &c));
    op_barrier(s);
    op_ent_t e = op_wait_for(s, s->rxcq, &c, OP_TIMEOUT, "a receive directed at a dead peer");
    if (!e.err)
        OP_FAIL("a receive from a peer that sent nothing completed successfully");
    return 0;
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    op_cfg_t c = op_cfg_default();
    if (op_want(argc, argv, "limits"))
        op_tally(&t, op_run("limits", &c, s_limits, NULL));
    {
        op_cfg_t d = c;
        d.no_enable = 1;
        if (op_want(argc, argv, "not_enabled"))
            op_tally(&t, op_run_solo("not_enabled", &d, s_not_enabled, NULL));
    }
    {
        op_cfg_t d = c;
        d.insert_self = 1;
        d.cntr_send = 1;
        if (op_want(argc, argv, "close_order"))
            op_tally(&t, op_run_solo("close_order", &d, s_close_order, NULL));
        if (op_want(argc, argv, "av_garbage"))
            op_tally(&t, op_run_solo("av_garbage", &d, s_av_garbage, NULL));
    }
    for (int m = 0; m < 3; m++) {
        op_cfg_t d = c;
        d.no_final_barrier = 1;
        darg_t a = {.mode = m};
        static const char *const names[] = {"peer_dies_receiving", "peer_dies_sending",
                                            "peer_dies_unanswered"};
        const char *n = names[m];
        if (op_want(argc, argv, n))
            op_tally(&t, op_run(n, &d, s_peer_dies, &a));
    }
    {
        op_cfg_t d = c;
        d.no_final_barrier = 1;
        d.caps |= FI_DIRECTED_RECV;
        static int talk = 1, silent = 0;
        if (op_want(argc, argv, "directed_dead"))
            op_tally(&t, op_run("directed_dead", &d, s_directed_dead, &talk));
        /* The same with no message ever exchanged: run only when named
         * (the provider learns of a peer's death from its traffic). */
        if (argc > 1 && !strcmp(argv[1], "silent_dead"))
            op_tally(&t, op_run("silent_dead", &d, s_directed_dead, &silent));
    }
    return op_tally_exit(&t);
}
