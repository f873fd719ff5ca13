/* Untagged messages (fi_msg(3)): fi_send/fi_recv in send order, remote CQ
 * data, FI_MULTI_RECV buffers (several messages in one buffer, each
 * completion pointing into it, FI_MULTI_RECV on the completion that releases
 * it once less than FI_OPT_MIN_MULTI_RECV is left), and tagged and untagged
 * messages never matching each other.
 *
 *   t_ofi_msg [filter] */
#include "ofi_pair.h"

typedef struct marg {
    int unexp;
    size_t msg;    /* multi-recv: each message's length */
    size_t buf;    /* multi-recv: the buffer */
    size_t min;    /* FI_OPT_MIN_MULTI_RECV */
    int nmsg;      /* multi-recv: messages into the first buffer */
} marg_t;

static marg_t *cur; /* the scenario's arguments, for the pre_enable hook */

/* fi_send/fi_recv: 64 messages of alternating sizes keep their order. */
static int s_order(op_side_t *s, void *v)
{
    marg_t *a = v;
    enum { N = 64 };
    size_t big = 3 * op_eager() + 1;
    uint8_t *b[N];
    struct fi_context2 c[N];
    for (int i = 0; i < N; i++)
        OP_CHECK((b[i] = malloc(big)) != NULL);
    if (s->rank == 0) {
        if (!a->unexp)
            op_barrier(s);
        for (int i = 0; i < N; i++) {
            size_t len = i % 3 == 1 ? big : (size_t)i * 7;
            op_fill(b[i], len, (uint64_t)i);
            if (i % 5 == 4)
                OP_POST(s, "senddata",
                        fi_senddata(s->ep, b[i], len, NULL, (uint64_t)i, s->peer, &c[i]));
            else
                OP_POST(s, "send", fi_send(s->ep, b[i], len, NULL, s->peer, &c[i]));
        }
        if (a->unexp)
            op_barrier(s);
        for (int i = 0; i < N; i++) {
            op_ent_t e = op_wait_ok(s, s->txcq, &c[i], "send");
            if ((e.e.flags & (FI_MSG | FI_SEND)) != (FI_MSG | FI_SEND))
                OP_FAIL("send completion flags 0x%llx lack FI_MSG|FI_SEND",
                        (unsigned long long)e.e.flags);
        }
    } else {
        if (a->unexp) {
            op_barrier(s);
            op_settle(s, 0.05);
        }
        for (int i = 0; i < N; i++)
            OP_POST(s, "recv", fi_recv(s->ep, b[i], big, NULL, s->peer, &c[i]));
        if (!a->unexp)
            op_barrier(s);
        for (int i = 0; i < N; i++) {
            op_ent_t e = op_wait_ok(s, s->rxcq, &c[i], "recv");
            size_t len = i % 3 == 1 ? big : (size_t)i * 7;
            if (e.e.len != len)
                OP_FAIL("receive %d: %zu bytes, message %d has %zu (order lost)", i, e.e.len, i,
                        len);
            if ((e.e.flags & (FI_MSG | FI_RECV)) != (FI_MSG | FI_RECV) || (e.e.flags & FI_TAGGED))
                OP_FAIL("recv completion flags 0x%llx", (unsigned long long)e.e.flags);
            int hasdata = i % 5 == 4;
            if (!!(e.e.flags & FI_REMOTE_CQ_DATA) != hasdata ||
                (hasdata && e.e.data != (uint64_t)i))
                OP_FAIL("receive %d: flags 0x%llx data %llu, expected %s", i,
                        (unsigned long long)e.e.flags, (unsigned long long)e.e.data,
                        hasdata ? "FI_REMOTE_CQ_DATA" : "no data");
            OP_VERIFY(b[i], len, (uint64_t)i, 0, "message data");
        }
    }
    for (int i = 0; i < N; i++)
        free(b[i]);
    return 0;
}

static int set_min(op_side_t *s)
{
    size_t min = cur->min;
    int r = fi_setopt(&s->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min);
    if (r)
        OP_FAIL("fi_setopt(FI_OPT_MIN_MULTI_RECV, %zu): %d (%s)", min, r, fi_strerror(-r));
    size_t got = 0, glen = sizeof got;
    OP_OK(fi_getopt(&s->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &glen));
    OP_CHECK(got == min);
    return 0;
}

/* Messages that must land in one FI_MULTI_RECV buffer: nmsg messages fit
 * before less than min is left; the completion releasing the buffer has
 * FI_MULTI_RECV; the messages after go to the next buffer. */
static int s_multi(op_side_t *s, void *v)
{
    marg_t *a = v;
    int total = a->nmsg + 3;
    uint8_t *sb = malloc(a->msg + 1);
    OP_CHECK(sb);
    if (s->rank == 0) {
        struct fi_context2 c;
        op_barrier(s);
        for (int i = 0; i < total; i++) {
            op_fill(sb, a->msg, (uint64_t)i);
            OP_POST(s, "send", fi_send(s->ep, sb, a->msg, NULL, s->peer, &c));
            op_wait_ok(s, s->txcq, &c, "send");
        }
        op_barrier(s);
        free(sb);
        return 0;
    }
    uint8_t *mb[2];
    struct fi_context2 mc[2];
    for (int k = 0; k < 2; k++) {
        OP_CHECK((mb[k] = malloc(a->buf)) != NULL);
        memset(mb[k], 0, a->buf);
        struct iovec iov = {mb[k], a->buf};
        struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = s->peer, .context = &mc[k]};
        OP_POST(s, "recvmsg FI_MULTI_RECV", fi_recvmsg(s->ep, &m, FI_MULTI_RECV));
    }
    op_barrier(s);
    size_t used[2] = {0, 0};
    int got[2] = {0, 0}, released[2] = {0, 0};
    for (int i = 0; i < total;) {
        op_ent_t e = op_wait_ok(s, s->rxcq, NULL, "a message in a multi-recv buffer");
        int k = e.e.op_context == &mc[0] ? 0 : e.e.op_context == &mc[1] ? 1 : -1;
        if (k < 0)
            OP_FAIL("completion with context %p, neither multi-recv buffer", e.e.op_context);
        if (released[k])
            OP_FAIL("completion for buffer %d after the one that released it", k);
        if (e.e.flags & FI_MULTI_RECV)
            released[k] = 1;
        if (e.e.len == 0 && (e.e.flags & FI_MULTI_RECV))
            continue; /* a release without data */
        uint8_t *p = e.e.buf;
        if (!p || p < mb[k] || p + e.e.len > mb[k] + a->buf)
            OP_FAIL("message %d: buf %p len %zu outside buffer %d [%p, +%zu)", i, (void *)p,
                    e.e.len, k, (void *)mb[k], a->buf);
        if (p < mb[k] + used[k])
            OP_FAIL("message %d at offset %zu overlaps the %zu bytes used", i,
                    (size_t)(p - mb[k]), used[k]);
        if (e.e.len != a->msg)
            OP_FAIL("message %d: len %zu, sent %zu", i, e.e.len, a->msg);
        OP_VERIFY(p, a->msg, (uint64_t)i, 0, "multi-recv data");
        used[k] = (size_t)(p - mb[k]) + e.e.len;
        got[k]++;
        i++;
    }
    if (got[0] != a->nmsg || !released[0])
        OP_FAIL("first buffer (%zu bytes, min %zu) took %d messages of %zu (released: %d), "
                "expected %d and released",
                a->buf, a->min, got[0], a->msg, released[0], a->nmsg);
    if (got[1] != 3 || released[1])
        OP_FAIL("second buffer took %d messages (released %d), expected 3, not released",
                got[1], released[1]);
    /* the second buffer still takes messages: cancel it to get it back */
    OP_OK(fi_cancel(&s->ep->fid, &mc[1]));
    op_ent_t e = op_wait_for(s, s->rxcq, &mc[1], OP_TIMEOUT, "cancel of the multi-recv buffer");
    if (e.err && e.err != FI_ECANCELED)
        OP_FAIL("cancelled multi-recv buffer: error %d (%s)", e.err, fi_strerror(e.err));
    op_barrier(s);
    free(mb[0]);
    free(mb[1]);
    free(sb);
    return 0;
}

/* Tagged and untagged messages live in separate queues: a receive of one
 * kind never takes a message of the other, whatever the order. */
static int s_kinds(op_side_t *s, void *v)
{
    marg_t *a = v;
    char b1[64], b2[64], b3[64];
    struct fi_context2 c1, c2, c3;
    if (s->rank == 0) {
        if (!a->unexp)
            op_barrier(s);
        op_fill(b1, 10, 1);
        op_fill(b2, 20, 2);
        op_fill(b3, 30, 3);
        OP_POST(s, "send", fi_send(s->ep, b1, 10, NULL, s->peer, &c1));
        OP_POST(s, "tsend", fi_tsend(s->ep, b2, 20, NULL, s->peer, 0, &c2));
        OP_POST(s, "send", fi_send(s->ep, b3, 30, NULL, s->peer, &c3));
        if (a->unexp)
            op_barrier(s);
        op_wait_ok(s, s->txcq, &c1, "send");
        op_wait_ok(s, s->txcq, &c2, "tsend");
        op_wait_ok(s, s->txcq, &c3, "send");
        return 0;
    }
    if (a->unexp) {
        op_barrier(s);
        op_settle(s, 0.05);
    }
    /* the tagged receive first, with every tag bit ignored */
    OP_POST(s, "trecv", fi_trecv(s->ep, b2, 64, NULL, s->peer, 0, ~0ULL, &c2));
    OP_POST(s, "recv", fi_recv(s->ep, b1, 64, NULL, s->peer, &c1));
    OP_POST(s, "recv", fi_recv(s->ep, b3, 64, NULL, s->peer, &c3));
    if (!a->unexp)
        op_barrier(s);
    op_ent_t e = op_wait_ok(s, s->rxcq, &c2, "trecv");
    if (e.e.len != 20 || !(e.e.flags & FI_TAGGED))
        OP_FAIL("the tagged receive got %zu bytes, flags 0x%llx: the untagged message?",
                e.e.len, (unsigned long long)e.e.flags);
    e = op_wait_ok(s, s->rxcq, &c1, "recv");
    if (e.e.len != 10 || (e.e.flags & FI_TAGGED))
        OP_FAIL("the untagged receive got %zu bytes, flags 0x%llx", e.e.len,
                (unsigned long long)e.e.flags);
    e = op_wait_ok(s, s->rxcq, &c3, "recv");
    OP_CHECK(e.e.len == 30);
    OP_VERIFY(b1, 10, 1, 0, "untagged");
    OP_VERIFY(b2, 20, 2, 0, "tagged");
    OP_VERIFY(b3, 30, 3, 0, "untagged");
    return 0;
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    op_cfg_t c = op_cfg_default();
    char name[80];
    for (int u = 0; u < 2; u++) {
        marg_t a = {.unexp = u};
        snprintf(name, sizeof name, "order_%s", u ? "unexpected" : "posted");
        if (op_want(argc, argv, name))
            op_tally(&t, op_run(name, &c, s_order, &a));
        snprintf(name, sizeof name, "kinds_%s", u ? "unexpected" : "posted");
        if (op_want(argc, argv, name))
            op_tally(&t, op_run(name, &c, s_kinds, &a));
    }
    /* 200-byte messages in 4096 bytes with min 256: 19 leave 296, the 20th
     * leaves 96 < 256. Rendezvous-sized ones: 5 of 3*eager+1 in a buffer of
     * 16*eager with min 2*eager: 5 leave eager-5 < min. */
    size_t e = op_eager();
    marg_t ms[] = {{.msg = 200, .buf = 4096, .min = 256, .nmsg = 20},
                   {.msg = 3 * e + 1, .buf = 16 * e, .min = 2 * e, .nmsg = 5}};
    for (int i = 0; i < 2; i++) {
        op_cfg_t d = c;
        d.caps |= FI_MULTI_RECV;
        d.pre_enable = set_min;
        cur = &ms[i];
        snprintf(name, sizeof name, "multi_recv_%zu", ms[i].msg);
        if (op_want(argc, argv, name))
            op_tally(&t, op_run(name, &d, s_multi, &ms[i]));
    }
    return op_tally_exit(&t);
}
