/* Tagged messages between two endpoints (fi_tagged(3)): matching by tag and
 * ignore mask, directed and any-source receives, send-after-send order,
 * receives posted before and after the message, every size class (0, 1,
 * around the eager limit, 64K, 4M, 16M), gather/scatter with uneven pieces,
 * truncation, remote CQ data, inject and selective completion.
 *
 *   t_ofi_tagged [filter]   runs the scenarios whose name holds filter */
#include "ofi_pair.h"

typedef struct xarg {
    size_t len;   /* message length */
    size_t cap;   /* receive buffer (truncation) */
    int unexp;    /* post the receive after the message arrived */
    int data;     /* fi_tsenddata */
} xarg_t;

#define TAG 0x5a5a

/* Rank 0 sends, rank 1 receives; posted before or after (unexpected). The
 * completion gives the message's length and tag, the flags name the
 * operation, the bytes past the message stay untouched. */
static int s_size(op_side_t *s, void *v)
{
    xarg_t *a = v;
    size_t cap = a->cap ? a->cap : a->len + 64;
    uint8_t *buf = malloc((a->len > cap ? a->len : cap) + 64);
    struct fi_context2 ctx;
    uint64_t data = 0x0123456789abcdefULL & (s->info->domain_attr->cq_data_size >= 8
                                                 ? ~0ULL
                                                 : (1ULL << (8 * s->info->domain_attr->cq_data_size)) - 1);
    OP_CHECK(buf);
    if (s->rank == 0) {
        op_fill(buf, a->len, a->len);
        if (!a->unexp)
            op_barrier(s);
        if (a->data)
            OP_POST(s, "tsenddata",
                    fi_tsenddata(s->ep, buf, a->len, NULL, data, s->peer, TAG, &ctx));
        else
            OP_POST(s, "tsend", fi_tsend(s->ep, buf, a->len, NULL, s->peer, TAG, &ctx));
        if (a->unexp)
            op_barrier(s);
        op_ent_t e = op_wait_ok(s, s->txcq, &ctx, "tsend");
        if ((e.e.flags & (FI_TAGGED | FI_SEND)) != (FI_TAGGED | FI_SEND))
            OP_FAIL("send completion flags 0x%llx lack FI_TAGGED|FI_SEND",
                    (unsigned long long)e.e.flags);
    } else {
        memset(buf, 0xee, cap + 64);
        if (a->unexp) {
            op_barrier(s);
            op_settle(s, 0.05);
        }
        OP_POST(s, "trecv", fi_trecv(s->ep, buf, cap, NULL, s->peer, TAG, 0, &ctx));
        if (!a->unexp)
            op_barrier(s);
        size_t got = a->len < cap ? a->len : cap;
        op_ent_t e;
        if (a->len > cap) {
            e = op_wait_err(s, s->rxcq, &ctx, FI_ETRUNC, "truncated trecv");
            if (e.x.olen != a->len - cap)
                OP_FAIL("olen %zu, expected %zu (message %zu, buffer %zu)", e.x.olen,
                        a->len - cap, a->len, cap);
        } else {
            e = op_wait_ok(s, s->rxcq, &ctx, "trecv");
        }
        /* fi_cq(3): len is what was placed in the buffer; providers often
         * give the message's length in a truncation's entry: both tell the
         * application what it needs, with olen. */
        if (e.e.len != got && !(a->len > cap && e.e.len == a->len))
            OP_FAIL("completion len %zu, expected %zu", e.e.len, got);
        if (e.e.tag != TAG)
            OP_FAIL("completion tag 0x%llx, expected 0x%x", (unsigned long long)e.e.tag, TAG);
        if ((e.e.flags & (FI_TAGGED | FI_RECV)) != (FI_TAGGED | FI_RECV))
            OP_FAIL("recv completion flags 0x%llx lack FI_TAGGED|FI_RECV",
                    (unsigned long long)e.e.flags);
        if (a->data && a->len <= cap) {
            if (!(e.e.flags & FI_REMOTE_CQ_DATA))
                OP_FAIL("fi_tsenddata: no FI_REMOTE_CQ_DATA (flags 0x%llx)",
                        (unsigned long long)e.e.flags);
            if (e.e.data != data)
                OP_FAIL("remote CQ data 0x%llx, expected 0x%llx", (unsigned long long)e.e.data,
                        (unsigned long long)data);
        }
        if (!a->data && (e.e.flags & FI_REMOTE_CQ_DATA))
            OP_FAIL("fi_tsend: FI_REMOTE_CQ_DATA set without data");
        OP_VERIFY(buf, got, a->len, 0, "received data");
        for (size_t i = got; i < cap + 64; i++)
            if (buf[i] != 0xee)
                OP_FAIL("byte %zu past the %zu received was written", i, got);
    }
    free(buf);
    return 0;
}

/* Receives posted for tags 3, 1, a masked 0x1XX and 2; messages sent 1, 2,
 * 3, 0x1ab, 0x2ab: each lands where its tag says; 0x2ab waits (unexpected)
 * for a later exact receive. Then two unexpected ones taken in reverse. */
static int s_match(op_side_t *s, void *v)
{
    (void)v;
    enum { N = 5 };
    static const uint64_t stag[N] = {1, 2, 3, 0x1ab, 0x2ab};
    static const uint64_t rtag[N] = {3, 1, 0x100, 2, 0x2ab};
    static const uint64_t rign[N] = {0, 0, 0xff, 0, 0};
    static const int want[N] = {2, 0, 3, 1, 4}; /* receive i gets message want[i] */
    char buf[N][128];
    struct fi_context2 ctx[N];
    if (s->rank == 0) {
        op_barrier(s);
        for (int i = 0; i < N; i++) {
            op_fill(buf[i], 100 + i, 1000 + i);
            OP_POST(s, "tsend", fi_tsend(s->ep, buf[i], 100 + i, NULL, s->peer, stag[i], &ctx[i]));
        }
        for (int i = 0; i < N; i++)
            op_wait_ok(s, s->txcq, &ctx[i], "tsend");
        op_barrier(s);
        op_fill(buf[0], 50, 77);
        op_fill(buf[1], 60, 78);
        OP_POST(s, "tsend", fi_tsend(s->ep, buf[0], 50, NULL, s->peer, 77, &ctx[0]));
        OP_POST(s, "tsend", fi_tsend(s->ep, buf[1], 60, NULL, s->peer, 78, &ctx[1]));
        op_wait_ok(s, s->txcq, &ctx[0], "tsend 77");
        op_wait_ok(s, s->txcq, &ctx[1], "tsend 78");
        op_barrier(s);
        return 0;
    }
    for (int i = 0; i < N - 1; i++)
        OP_POST(s, "trecv",
                fi_trecv(s->ep, buf[i], 128, NULL, s->peer, rtag[i], rign[i], &ctx[i]));
    op_barrier(s);
    op_settle(s, 0.05); /* 0x2ab arrives with no receive for it */
    OP_POST(s, "trecv", fi_trecv(s->ep, buf[N - 1], 128, NULL, s->peer, rtag[N - 1], 0,
                                 &ctx[N - 1]));
    for (int i = 0; i < N; i++) {
        op_ent_t e = op_wait_ok(s, s->rxcq, &ctx[i], "trecv");
        int m = want[i];
        if (e.e.tag != stag[m] || e.e.len != (size_t)(100 + m))
            OP_FAIL("receive for tag 0x%llx/ignore 0x%llx got tag 0x%llx len %zu, expected "
                    "message %d (tag 0x%llx len %d)",
                    (unsigned long long)rtag[i], (unsigned long long)rign[i],
                    (unsigned long long)e.e.tag, e.e.len, m, (unsigned long long)stag[m],
                    100 + m);
        OP_VERIFY(buf[i], 100 + (size_t)m, 1000 + (uint64_t)m, 0, "matched data");
    }
    op_barrier(s);
    op_barrier(s);
    OP_POST(s, "trecv", fi_trecv(s->ep, buf[1], 128, NULL, s->peer, 78, 0, &ctx[1]));
    OP_POST(s, "trecv", fi_trecv(s->ep, buf[0], 128, NULL, s->peer, 77, 0, &ctx[0]));
    op_ent_t e1 = op_wait_ok(s, s->rxcq, &ctx[1], "unexpected 78");
    op_ent_t e0 = op_wait_ok(s, s->rxcq, &ctx[0], "unexpected 77");
    OP_CHECK(e1.e.len == 60 && e1.e.tag == 78 && e0.e.len == 50 && e0.e.tag == 77);
    OP_VERIFY(buf[1], 60, 78, 0, "unexpected 78");
    OP_VERIFY(buf[0], 50, 77, 0, "unexpected 77");
    return 0;
}

/* FI_DIRECTED_RECV: rank 1 posts a receive from rank 0 only, then sends the
 * same tag to itself: its own message must not take that receive; rank 0's
 * does; an any-source receive then gets rank 1's own message. */
static int s_directed(op_side_t *s, void *v)
{
    (void)v;
    char b0[64], b1[64], sb[64];
    struct fi_context2 c0, c1, cs;
    if (!(s->info->caps & FI_DIRECTED_RECV))
        OP_FAIL("asked for FI_DIRECTED_RECV, fi_getinfo gave caps 0x%llx",
                (unsigned long long)s->info->caps);
    if (s->rank == 0) {
        op_barrier(s);
        op_fill(sb, 40, 40);
        OP_POST(s, "tsend", fi_tsend(s->ep, sb, 40, NULL, s->peer, 9, &cs));
        op_wait_ok(s, s->txcq, &cs, "tsend");
        return 0;
    }
    OP_POST(s, "trecv from peer", fi_trecv(s->ep, b0, 64, NULL, s->peer, 9, 0, &c0));
    op_fill(sb, 30, 30);
    OP_POST(s, "tsend to self", fi_tsend(s->ep, sb, 30, NULL, s->self, 9, &cs));
    op_wait_ok(s, s->txcq, &cs, "tsend to self");
    op_settle(s, 0.05);
    op_barrier(s);
    op_ent_t e = op_wait_ok(s, s->rxcq, &c0, "directed trecv");
    if (e.e.len != 40)
        OP_FAIL("directed receive from the peer got a %zu-byte message (own: 30, peer: 40)",
                e.e.len);
    OP_VERIFY(b0, 40, 40, 0, "directed data");
    OP_POST(s, "trecv any", fi_trecv(s->ep, b1, 64, NULL, FI_ADDR_UNSPEC, 9, 0, &c1));
    e = op_wait_ok(s, s->rxcq, &c1, "any-source trecv");
    OP_CHECK(e.e.len == 30);
    OP_VERIFY(b1, 30, 30, 0, "self data");
    return 0;
}

/* FI_ORDER_SAS: 64 messages with one tag, eager and rendezvous by turns,
 * are matched in the order they were sent (posted before or unexpected). */
static int s_order(op_side_t *s, void *v)
{
    xarg_t *a = v;
    enum { N = 64 };
    size_t big = 4 * op_eager() + 3;
    uint8_t *buf[N];
    struct fi_context2 ctx[N];
    if (!(s->info->tx_attr->msg_order & FI_ORDER_SAS))
        OP_FAIL("tx_attr->msg_order 0x%llx lacks FI_ORDER_SAS",
                (unsigned long long)s->info->tx_attr->msg_order);
    for (int i = 0; i < N; i++)
        OP_CHECK((buf[i] = malloc(big)) != NULL);
    if (s->rank == 0) {
        if (!a->unexp)
            op_barrier(s);
        for (int i = 0; i < N; i++) {
            size_t len = i % 2 ? big : 100 + (size_t)i;
            op_fill(buf[i], len, (uint64_t)i);
            OP_POST(s, "tsend", fi_tsend(s->ep, buf[i], len, NULL, s->peer, 5, &ctx[i]));
        }
        if (a->unexp)
            op_barrier(s);
        for (int i = 0; i < N; i++)
            op_wait_ok(s, s->txcq, &ctx[i], "tsend");
    } else {
        if (a->unexp) {
            op_barrier(s);
            op_settle(s, 0.05);
        }
        for (int i = 0; i < N; i++)
            OP_POST(s, "trecv", fi_trecv(s->ep, buf[i], big, NULL, s->peer, 5, 0, &ctx[i]));
        if (!a->unexp)
            op_barrier(s);
        for (int i = 0; i < N; i++) {
            op_ent_t e = op_wait_ok(s, s->rxcq, &ctx[i], "trecv");
            size_t len = i % 2 ? big : 100 + (size_t)i;
            if (e.e.len != len)
                OP_FAIL("receive %d got %zu bytes, message %d has %zu: out of order", i,
                        e.e.len, i, len);
            OP_VERIFY(buf[i], len, (uint64_t)i, 0, "ordered data");
        }
    }
    for (int i = 0; i < N; i++)
        free(buf[i]);
    return 0;
}

/* fi_tsendv / fi_trecvv with uneven pieces on both sides. */
static int s_iov(op_side_t *s, void *v)
{
    xarg_t *a = v;
    size_t n = a->len;
    uint8_t *src = malloc(n), *dst = malloc(n + 200);
    struct fi_context2 ctx;
    OP_CHECK(src && dst);
    if (s->info->tx_attr->iov_limit < 4 || s->info->rx_attr->iov_limit < 4)
        OP_FAIL("iov_limit tx %zu rx %zu < 4", s->info->tx_attr->iov_limit,
                s->info->rx_attr->iov_limit);
    if (s->rank == 0) {
        op_fill(src, n, n);
        size_t cut[4] = {1, 1000, n - 1001 - 7, 7};
        struct iovec iov[4];
        size_t off = 0;
        for (int i = 0; i < 4; i++) {
            iov[i].iov_base = src + off;
            iov[i].iov_len = cut[i];
            off += cut[i];
        }
        op_barrier(s);
        OP_POST(s, "tsendv", fi_tsendv(s->ep, iov, NULL, 4, s->peer, TAG, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "tsendv");
    } else {
        memset(dst, 0, n + 200);
        size_t cut[4] = {3, 4093, 17, n - 4113 + 200};
        struct iovec iov[4];
        size_t off = 0;
        for (int i = 0; i < 4; i++) {
            /* a gap of 0 bytes would hide a piece written at the wrong place:
             * pieces are laid out reversed in the buffer */
            iov[3 - i].iov_len = cut[3 - i];
        }
        off = 0;
        for (int i = 3; i >= 0; i--) {
            iov[i].iov_base = dst + off;
            off += cut[i];
        }
        OP_POST(s, "trecvv", fi_trecvv(s->ep, iov, NULL, 4, s->peer, TAG, 0, &ctx));
        op_barrier(s);
        op_ent_t e = op_wait_ok(s, s->rxcq, &ctx, "trecvv");
        OP_CHECK(e.e.len == n);
        size_t moff = 0;
        for (int i = 0; i < 4 && moff < n; i++) {
            size_t k = cut[i] < n - moff ? cut[i] : n - moff;
            OP_VERIFY(iov[i].iov_base, k, n, moff, "scattered piece");
            moff += k;
        }
    }
    free(src);
    free(dst);
    return 0;
}

/* fi_tinject / fi_tinjectdata: the buffer is the caller's again on return
 * (overwritten at once), no send completion, the data arrives intact. */
static int s_inject(op_side_t *s, void *v)
{
    (void)v;
    enum { N = 16 };
    size_t isz = s->info->tx_attr->inject_size;
    if (isz == 0)
        OP_FAIL("inject_size is 0");
    uint8_t *buf = malloc(isz + 1), *rb[N];
    struct fi_context2 ctx[N];
    OP_CHECK(buf);
    for (int i = 0; i < N; i++)
        OP_CHECK((rb[i] = malloc(isz + 1)) != NULL);
    if (s->rank == 0) {
        op_barrier(s);
        for (int i = 0; i < N; i++) {
            size_t len = i % 2 ? isz : (size_t)i;
            op_fill(buf, len, (uint64_t)i);
            if (i % 4 == 3)
                OP_POST(s, "tinjectdata",
                        fi_tinjectdata(s->ep, buf, len, (uint64_t)i + 100, s->peer, 3));
            else
                OP_POST(s, "tinject", fi_tinject(s->ep, buf, len, s->peer, 3));
            memset(buf, 0xa5, isz);
        }
        if (s->scntr)
            op_wait_cntr(s, s->scntr, N, "send counter after injects");
        op_expect_none(s, s->txcq, 0.2, "fi_tinject");
    } else {
        for (int i = 0; i < N; i++)
            OP_POST(s, "trecv", fi_trecv(s->ep, rb[i], isz + 1, NULL, s->peer, 3, 0, &ctx[i]));
        op_barrier(s);
        for (int i = 0; i < N; i++) {
            op_ent_t e = op_wait_ok(s, s->rxcq, &ctx[i], "trecv of an inject");
            size_t len = i % 2 ? isz : (size_t)i;
            OP_CHECK(e.e.len == len);
            OP_VERIFY(rb[i], len, (uint64_t)i, 0, "injected data");
            if (i % 4 == 3)
                OP_CHECK((e.e.flags & FI_REMOTE_CQ_DATA) && e.e.data == (uint64_t)i + 100);
        }
    }
    for (int i = 0; i < N; i++)
        free(rb[i]);
    free(buf);
    return 0;
}

/* FI_SELECTIVE_COMPLETION on both CQs: only operations with FI_COMPLETION
 * write an entry; the counters see all of them. */
static int s_selective(op_side_t *s, void *v)
{
    (void)v;
    enum { N = 8 };
    char buf[N][256];
    struct fi_context2 ctx[N];
    if (s->rank == 0) {
        op_barrier(s);
        for (int i = 0; i < N; i++) {
            size_t len = 10 + (size_t)i;
            op_fill(buf[i], len, (uint64_t)i);
            struct iovec iov = {buf[i], len};
            struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = s->peer,
                                      .tag = 4, .context = &ctx[i]};
            OP_POST(s, "tsendmsg", fi_tsendmsg(s->ep, &m, i % 2 ? FI_COMPLETION : 0));
        }
        op_wait_cntr(s, s->scntr, N, "send counter");
        for (int i = 1; i < N; i += 2)
            op_wait_ok(s, s->txcq, &ctx[i], "tsendmsg with FI_COMPLETION");
        op_expect_none(s, s->txcq, 0.2, "tsendmsg without FI_COMPLETION");
    } else {
        for (int i = 0; i < N; i++) {
            struct iovec iov = {buf[i], sizeof buf[i]};
            struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = s->peer,
                                      .tag = 4, .context = &ctx[i]};
            OP_POST(s, "trecvmsg", fi_trecvmsg(s->ep, &m, i % 3 == 0 ? FI_COMPLETION : 0));
        }
        op_barrier(s);
        op_wait_cntr(s, s->rcntr, N, "recv counter");
        for (int i = 0; i < N; i += 3) {
            op_ent_t e = op_wait_ok(s, s->rxcq, &ctx[i], "trecvmsg with FI_COMPLETION");
            OP_CHECK(e.e.len == 10 + (size_t)i);
        }
        op_expect_none(s, s->rxcq, 0.2, "trecvmsg without FI_COMPLETION");
        for (int i = 0; i < N; i++)
            OP_VERIFY(buf[i], 10 + (size_t)i, (uint64_t)i, 0, "selective data");
    }
    return 0;
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    op_cfg_t c = op_cfg_default();
    char name[96];
    size_t e = op_eager();
    const size_t sizes[] = {0, 1, e - 1, e, e + 1, 65536, 4u << 20, 16u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int u = 0; u < 2; u++) {
            xarg_t a = {.len = sizes[i], .unexp = u};
            snprintf(name, sizeof name, "size_%zu_%s", sizes[i], u ? "unexpected" : "posted");
            if (op_want(argc, argv, name))
                op_tally(&t, op_run(name, &c, s_size, &a));
        }
    /* truncation and remote CQ data, eager and rendezvous */
    const size_t tl[2][2] = {{1000, 600}, {1u << 20, 300000}};
    for (int i = 0; i < 2; i++)
        for (int u = 0; u < 2; u++) {
            xarg_t a = {.len = tl[i][0], .cap = tl[i][1], .unexp = u};
            snprintf(name, sizeof name, "trunc_%zu_%s", tl[i][0], u ? "unexpected" : "posted");
            if (op_want(argc, argv, name))
                op_tally(&t, op_run(name, &c, s_size, &a));
            xarg_t d = {.len = tl[i][0], .unexp = u, .data = 1};
            snprintf(name, sizeof name, "data_%zu_%s", tl[i][0], u ? "unexpected" : "posted");
            if (op_want(argc, argv, name))
                op_tally(&t, op_run(name, &c, s_size, &d));
        }
    if (op_want(argc, argv, "match"))
        op_tally(&t, op_run("match", &c, s_match, NULL));
    for (int u = 0; u < 2; u++) {
        xarg_t a = {.unexp = u};
        snprintf(name, sizeof name, "order_%s", u ? "unexpected" : "posted");
        if (op_want(argc, argv, name))
            op_tally(&t, op_run(name, &c, s_order, &a));
    }
    const size_t il[] = {5000, 300001, 5u << 20};
    for (size_t i = 0; i < 3; i++) {
        xarg_t a = {.len = il[i]};
        snprintf(name, sizeof name, "iov_%zu", il[i]);
        if (op_want(argc, argv, name))
            op_tally(&t, op_run(name, &c, s_iov, &a));
    }
    {
        op_cfg_t d = c;
        d.caps |= FI_DIRECTED_RECV;
        d.insert_self = 1;
        if (op_want(argc, argv, "directed"))
            op_tally(&t, op_run("directed", &d, s_directed, NULL));
    }
    {
        op_cfg_t d = c;
        d.cntr_send = 1;
        if (op_want(argc, argv, "inject"))
            op_tally(&t, op_run("inject", &d, s_inject, NULL));
        d.cntr_recv = 1;
        d.tx_bind = d.rx_bind = FI_SELECTIVE_COMPLETION;
        if (op_want(argc, argv, "selective"))
            op_tally(&t, op_run("selective", &d, s_selective, NULL));
    }
    return op_tally_exit(&t);
}
