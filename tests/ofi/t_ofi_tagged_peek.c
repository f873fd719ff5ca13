/* Probing and withdrawing tagged receives (fi_tagged(3), fi_endpoint(3)):
 * FI_PEEK (found: a completion with the message's length, tag and data, the
 * message stays; not found: FI_ENOMSG), FI_PEEK|FI_CLAIM then FI_CLAIM with
 * the same context gets exactly that message, FI_DISCARD after a claim or
 * with a peek drops it, fi_cancel of a posted receive (FI_ECANCELED; a
 * completed one is left alone). Eager and rendezvous messages alike.
 *
 *   t_ofi_tagged_peek [filter] */
#include "ofi_pair.h"

typedef struct parg {
    size_t len; /* first message's length */
} parg_t;

/* A receive-side fi_trecvmsg with @p flags (no buffer if @p buf is NULL). */
static ssize_t trecvmsg(op_side_t *s, void *buf, size_t len, uint64_t tag, void *ctx,
                        uint64_t flags)
{
    struct iovec iov = {buf, len};
    struct fi_msg_tagged m = {.msg_iov = buf ? &iov : NULL, .iov_count = buf ? 1 : 0,
                              .addr = s->peer, .tag = tag, .ignore = 0, .context = ctx};
    return fi_trecvmsg(s->ep, &m, flags);
}

/* Peek for @p tag until a message is found (FI_ENOMSG until it arrives),
 * bounded: the successful completion. */
static op_ent_t peek_until(op_side_t *s, uint64_t tag, void *ctx, uint64_t flags)
{
    double end = op_now() + OP_TIMEOUT;
    for (;;) {
        OP_POST(s, "peek", trecvmsg(s, NULL, 0, tag, ctx, FI_PEEK | flags));
        op_ent_t e = op_wait_for(s, s->rxcq, ctx, OP_TIMEOUT, "peek");
        if (!e.err)
            return e;
        if (e.err != FI_ENOMSG)
            OP_FAIL("peek: error %d (%s), expected success or FI_ENOMSG", e.err,
                    fi_strerror(e.err));
        if (op_now() > end)
            OP_FAIL("peek for tag 0x%llx: FI_ENOMSG for %.0f s after the send",
                    (unsigned long long)tag, OP_TIMEOUT);
        op_settle(s, 0.001);
    }
}

/* Rank 0 sends message 1 (len, with data 0x77) and message 2 (100 bytes),
 * both tag 11, then waits for rank 1 to say it is done. */
static void send_two(op_side_t *s, size_t len)
{
    uint8_t *b1 = malloc(len + 1), b2[100];
    struct fi_context2 c1, c2;
    OP_CHECK(b1);
    op_fill(b1, len, 1);
    op_fill(b2, 100, 2);
    OP_POST(s, "tsenddata", fi_tsenddata(s->ep, b1, len, NULL, 0x77, s->peer, 11, &c1));
    OP_POST(s, "tsend", fi_tsend(s->ep, b2, 100, NULL, s->peer, 11, &c2));
    op_barrier(s);
    op_wait_ok(s, s->txcq, &c1, "send 1");
    op_wait_ok(s, s->txcq, &c2, "send 2");
    op_barrier(s);
    free(b1);
}

/* Receive one tag-11 message into a fresh buffer and check it is message
 * @p which (1: len bytes, seed 1; 2: 100 bytes, seed 2). */
static void recv_check(op_side_t *s, int which, size_t len, uint64_t flags, void *ctx)
{
    size_t want = which == 1 ? len : 100;
    uint8_t *b = malloc(len + 200);
    struct fi_context2 own;
    OP_CHECK(b);
    if (!ctx)
        ctx = &own;
    OP_POST(s, "trecv", trecvmsg(s, b, len + 200, 11, ctx, flags));
    op_ent_t e = op_wait_ok(s, s->rxcq, ctx, which == 1 ? "receive of message 1"
                                                        : "receive of message 2");
    if (e.e.len != want)
        OP_FAIL("expected message %d (%zu bytes), got %zu bytes", which, want, e.e.len);
    OP_VERIFY(b, want, (uint64_t)which, 0, "message data");
    free(b);
}

/* FI_PEEK finds message 1 (length, tag, data), leaves it; a peek for a
 * tag never sent says FI_ENOMSG; both messages are then received in order. */
static int s_peek(op_side_t *s, void *v)
{
    parg_t *a = v;
    if (s->rank == 0) {
        send_two(s, a->len);
        return 0;
    }
    struct fi_context2 c;
    op_barrier(s);
    op_ent_t e = peek_until(s, 11, &c, 0);
    if (e.e.len != a->len || e.e.tag != 11)
        OP_FAIL("peek: len %zu tag 0x%llx, expected %zu and 11", e.e.len,
                (unsigned long long)e.e.tag, a->len);
    if (!(e.e.flags & FI_REMOTE_CQ_DATA) || e.e.data != 0x77)
        OP_FAIL("peek: flags 0x%llx data 0x%llx, expected FI_REMOTE_CQ_DATA 0x77",
                (unsigned long long)e.e.flags, (unsigned long long)e.e.data);
    /* a second peek finds it still there */
    e = peek_until(s, 11, &c, 0);
    OP_CHECK(e.e.len == a->len);
    OP_POST(s, "peek", trecvmsg(s, NULL, 0, 12, &c, FI_PEEK));
    op_wait_err(s, s->rxcq, &c, FI_ENOMSG, "peek for a tag never sent");
    recv_check(s, 1, a->len, 0, NULL);
    recv_check(s, 2, a->len, 0, NULL);
    op_barrier(s);
    return 0;
}

/* FI_PEEK|FI_CLAIM on message 1; a plain receive then gets message 2; the
 * FI_CLAIM receive with the same context gets message 1. */
static int s_claim(op_side_t *s, void *v)
{
    parg_t *a = v;
    if (s->rank == 0) {
        send_two(s, a->len);
        return 0;
    }
    struct fi_context2 c;
    op_barrier(s);
    op_ent_t e = peek_until(s, 11, &c, FI_CLAIM);
    OP_CHECK(e.e.len == a->len);
    recv_check(s, 2, a->len, 0, NULL);
    recv_check(s, 1, a->len, FI_CLAIM, &c);
    op_barrier(s);
    return 0;
}

/* FI_PEEK|FI_CLAIM then FI_CLAIM|FI_DISCARD drops message 1: the next
 * receive gets message 2. FI_PEEK|FI_DISCARD does the same in one step. */
static int s_discard(op_side_t *s, void *v)
{
    parg_t *a = v;
    if (s->rank == 0) {
        send_two(s, a->len);
        send_two(s, a->len);
        return 0;
    }
    struct fi_context2 c;
    op_barrier(s);
    peek_until(s, 11, &c, FI_CLAIM);
    OP_POST(s, "claim|discard", trecvmsg(s, NULL, 0, 11, &c, FI_CLAIM | FI_DISCARD));
    op_ent_t e = op_wait_ok(s, s->rxcq, &c, "FI_CLAIM|FI_DISCARD");
    (void)e;
    recv_check(s, 2, a->len, 0, NULL);
    op_barrier(s);
    op_barrier(s);
    peek_until(s, 11, &c, FI_DISCARD);
    recv_check(s, 2, a->len, 0, NULL);
    op_barrier(s);
    return 0;
}

/* fi_cancel of a posted receive: FI_ECANCELED with its context; the message
 * sent afterwards goes to a later receive, not to the cancelled buffer.
 * Cancelling a receive that completed changes nothing. */
static int s_cancel(op_side_t *s, void *v)
{
    parg_t *a = v;
    uint8_t *b = malloc(a->len + 1), *c2b = malloc(a->len + 1);
    struct fi_context2 c1, c2, c3;
    OP_CHECK(b && c2b);
    if (s->rank == 0) {
        op_barrier(s);
        op_fill(b, a->len, 5);
        OP_POST(s, "tsend", fi_tsend(s->ep, b, a->len, NULL, s->peer, 20, &c1));
        op_wait_ok(s, s->txcq, &c1, "tsend");
        op_barrier(s);
    } else {
        memset(b, 0xcc, a->len + 1);
        OP_POST(s, "trecv", fi_trecv(s->ep, b, a->len, NULL, s->peer, 20, 0, &c1));
        OP_POST(s, "trecv", fi_trecv(s->ep, b, a->len, NULL, s->peer, 21, 0, &c3));
        OP_OK(fi_cancel(&s->ep->fid, &c1));
        op_ent_t e = op_wait_err(s, s->rxcq, &c1, FI_ECANCELED, "cancelled trecv");
        OP_CHECK(e.e.op_context == &c1);
        OP_OK(fi_cancel(&s->ep->fid, &c3));
        op_wait_err(s, s->rxcq, &c3, FI_ECANCELED, "second cancelled trecv");
        op_barrier(s); /* now rank 0 sends */
        OP_POST(s, "trecv", fi_trecv(s->ep, c2b, a->len, NULL, s->peer, 20, 0, &c2));
        e = op_wait_ok(s, s->rxcq, &c2, "trecv after the cancel");
        OP_CHECK(e.e.len == a->len);
        OP_VERIFY(c2b, a->len, 5, 0, "data after cancel");
        for (size_t i = 0; i < a->len; i++)
            if (b[i] != 0xcc)
                OP_FAIL("the cancelled receive's buffer was written at byte %zu", i);
        ssize_t r = fi_cancel(&s->ep->fid, &c2);
        if (r != 0 && r != -FI_ENOENT)
            OP_FAIL("fi_cancel of a completed receive: %zd (%s)", r, fi_strerror((int)-r));
        op_expect_none(s, s->rxcq, 0.1, "fi_cancel of a completed receive");
        op_barrier(s);
    }
    free(b);
    free(c2b);
    return 0;
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    op_cfg_t c = op_cfg_default();
    char name[64];
    const size_t lens[] = {300, 1u << 20};
    struct {
        const char *n;
        op_fn fn;
    } sc[] = {{"peek", s_peek}, {"claim", s_claim}, {"discard", s_discard}, {"cancel", s_cancel}};
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++)
        for (size_t i = 0; i < 2; i++) {
            parg_t a = {.len = lens[i]};
            snprintf(name, sizeof name, "%s_%zu", sc[k].n, lens[i]);
            if (op_want(argc, argv, name))
                op_tally(&t, op_run(name, &c, sc[k].fn, &a));
        }
    return op_tally_exit(&t);
}
