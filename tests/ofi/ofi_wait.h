/* Completions, bounded waits and test data for the provider's tests: the
 * second half of the harness (ofi_pair.h includes it; see there). */
#ifndef VMMC_TESTS_OFI_WAIT_H
#define VMMC_TESTS_OFI_WAIT_H

#include "ofi_pair.h"

/* ------------------------------------------------------------------------ */
/* completions */

static inline op_stash_t *op_stash_of(op_side_t *s, struct fid_cq *cq)
{
    return cq == s->rxcq ? s->rxs : s->txs;
}

/* Read everything @p cq has now into its stash: 1 if something came. */
static inline int op_poll_cq(op_side_t *s, struct fid_cq *cq)
{
    op_stash_t *st = op_stash_of(s, cq);
    int got = 0;
    for (;;) {
        if (st->n == OP_STASH)
            OP_FAIL("more than %d completions not waited for", OP_STASH);
        op_ent_t *x = &st->ent[st->n];
        memset(x, 0, sizeof *x);
        x->src = FI_ADDR_NOTAVAIL;
        ssize_t r = (s->cfg->caps & FI_SOURCE) ? fi_cq_readfrom(cq, &x->e, 1, &x->src)
                                               : fi_cq_read(cq, &x->e, 1);
        if (r == 1) {
            st->n++;
            got = 1;
            continue;
        }
        if (r == -FI_EAGAIN)
            return got;
        if (r != -FI_EAVAIL)
            OP_FAIL("fi_cq_read: %zd (%s)", r, fi_strerror((int)-r));
        r = fi_cq_readerr(cq, &x->x, 0);
        if (r != 1)
            OP_FAIL("fi_cq_readerr after -FI_EAVAIL: %zd (%s)", r, fi_strerror((int)-r));
        x->err = x->x.err ? x->x.err : -1;
        x->e.op_context = x->x.op_context;
        x->e.flags = x->x.flags;
        x->e.len = x->x.len;
        x->e.buf = x->x.buf;
        x->e.data = x->x.data;
        x->e.tag = x->x.tag;
        x->x.err_data = NULL;
        st->n++;
        got = 1;
    }
}

static inline void op_progress(op_side_t *s)
{
    if (!s->ep || s->cfg->no_enable || s->cfg->cq_format != FI_CQ_FORMAT_TAGGED)
        return;
    if (s->txcq)
        op_poll_cq(s, s->txcq);
    if (s->rxcq && s->rxcq != s->txcq)
        op_poll_cq(s, s->rxcq);
}

/* Give the cores to others between polls after a short spin: tests share
 * the machine, and two sides on two cores must not starve each other. */
static inline void op_pause(unsigned *spins)
{
    if (++*spins < 200) {
        sched_yield();
        return;
    }
    struct timespec t = {0, 20000};
    nanosleep(&t, NULL);
}

static inline op_ent_t op_take(op_stash_t *st, size_t i)
{
    op_ent_t e = st->ent[i];
    memmove(&st->ent[i], &st->ent[i + 1], (st->n - i - 1) * sizeof st->ent[0]);
    st->n--;
    return e;
}

/* The completion (success or error) of the operation with context @p ctx
 * (NULL: the oldest one), waited for at most @p secs. Fails the test on
 * timeout, naming what it waited for. */
static inline op_ent_t op_wait_for(op_side_t *s, struct fid_cq *cq, void *ctx, double secs,
                                   const char *what)
{
    op_stash_t *st = op_stash_of(s, cq);
    double end = op_now() + secs;
    unsigned spins = 0;
    for (;;) {
        for (size_t i = 0; i < st->n; i++)
            if (!ctx || st->ent[i].e.op_context == ctx)
                return op_take(st, i);
        if (op_poll_cq(s, cq))
            continue;
        if (cq != s->txcq && s->txcq)
            op_poll_cq(s, s->txcq);
        if (cq != s->rxcq && s->rxcq)
            op_poll_cq(s, s->rxcq);
        if (op_now() > end)
            OP_FAIL("no completion for %s (context %p) in %.0f s (%zu others waiting)", what,
                    ctx, secs, st->n);
        op_pause(&spins);
    }
}

/* A successful completion of @p ctx. */
static inline op_ent_t op_wait_ok(op_side_t *s, struct fid_cq *cq, void *ctx, const char *what)
{
    op_ent_t e = op_wait_for(s, cq, ctx, OP_TIMEOUT, what);
    if (e.err)
        OP_FAIL("%s: error completion %d (%s), prov_errno %d, olen %zu", what, e.err,
                fi_strerror(e.err), e.x.prov_errno, e.x.olen);
    return e;
}

/* An error completion of @p ctx with error @p err (positive FI_E*). */
static inline op_ent_t op_wait_err(op_side_t *s, struct fid_cq *cq, void *ctx, int err,
                                   const char *what)
{
    op_ent_t e = op_wait_for(s, cq, ctx, OP_TIMEOUT, what);
    if (!e.err)
        OP_FAIL("%s: success completion (len %zu, flags 0x%llx), expected error %d (%s)",
                what, e.e.len, (unsigned long long)e.e.flags, err, fi_strerror(err));
    if (e.err != err)
        OP_FAIL("%s: error %d (%s), expected %d (%s)", what, e.err, fi_strerror(e.err), err,
                fi_strerror(err));
    return e;
}

/* Nothing arrives on @p cq for @p secs (progressing meanwhile): for
 * operations that must not complete (fi_inject, selective completion). */
static inline void op_expect_none(op_side_t *s, struct fid_cq *cq, double secs,
                                  const char *what)
{
    op_stash_t *st = op_stash_of(s, cq);
    double end = op_now() + secs;
    unsigned spins = 0;
    while (op_now() < end) {
        op_poll_cq(s, cq);
        if (st->n)
            OP_FAIL("%s: unexpected completion (context %p, flags 0x%llx, err %d)", what,
                    st->ent[0].e.op_context, (unsigned long long)st->ent[0].e.flags,
                    st->ent[0].err);
        op_pause(&spins);
    }
}

/* Progress for @p secs, keeping what completes: lets messages arrive
 * before a receive is posted (an unexpected message). */
static inline void op_settle(op_side_t *s, double secs)
{
    double end = op_now() + secs;
    unsigned spins = 0;
    while (op_now() < end) {
        op_progress(s);
        op_pause(&spins);
    }
}

/* The eager limit of the provider (VMMC_OFI_EAGER, default 16K). */
static inline size_t op_eager(void)
{
    const char *e = getenv("VMMC_OFI_EAGER");
    if (!e)
        return 16384;
    char *end;
    unsigned long long v = strtoull(e, &end, 0);
    if (*end == 'k' || *end == 'K')
        v <<= 10;
    else if (*end == 'm' || *end == 'M')
        v <<= 20;
    return (size_t)v;
}

/* Should scenario @p name run (argv[1], if given, is a substring filter)? */
static inline int op_want(int argc, char **argv, const char *name)
{
    return argc < 2 || strstr(name, argv[1]) != NULL;
}

/* Retry an operation while it returns -FI_EAGAIN (progressing), bounded. */
#define OP_POST(s, what, expr)                                                         \
    do {                                                                               \
        double op_end_ = op_now() + OP_TIMEOUT;                                        \
        unsigned op_sp_ = 0;                                                           \
        ssize_t op_r_;                                                                 \
        while ((op_r_ = (expr)) == -FI_EAGAIN) {                                       \
            if (op_now() > op_end_)                                                    \
                OP_FAIL("%s: -FI_EAGAIN for %.0f s", what, OP_TIMEOUT);                \
            op_progress(s);                                                            \
            op_pause(&op_sp_);                                                         \
        }                                                                              \
        if (op_r_)                                                                     \
            OP_FAIL("%s: %s returned %zd (%s)", what, #expr, op_r_,                    \
                    fi_strerror((int)-op_r_));                                         \
    } while (0)

/* Wait until counter @p c reaches @p n (progressing), bounded. */
static inline void op_wait_cntr(op_side_t *s, struct fid_cntr *c, uint64_t n, const char *what)
{
    double end = op_now() + OP_TIMEOUT;
    unsigned spins = 0;
    while (fi_cntr_read(c) < n) {
        if (fi_cntr_readerr(c))
            OP_FAIL("%s: counter has %llu errors", what,
                    (unsigned long long)fi_cntr_readerr(c));
        if (op_now() > end)
            OP_FAIL("%s: counter at %llu, waited for %llu", what,
                    (unsigned long long)fi_cntr_read(c), (unsigned long long)n);
        op_progress(s);
        op_pause(&spins);
    }
}


static inline uint8_t op_byte(uint64_t seed, size_t i)
{
    uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ULL + i * 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return (uint8_t)(x ^ (x >> 17));
}

static inline void op_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        p[i] = op_byte(seed, i);
}

/* The first byte of @p buf that is not op_byte(seed, off + i); -1: all match. */
static inline long long op_verify(const void *buf, size_t len, uint64_t seed, size_t off)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i++)
        if (p[i] != op_byte(seed, off + i))
            return (long long)i;
    return -1;
}

#define OP_VERIFY(buf, len, seed, off, what)                                           \
    do {                                                                               \
        long long op_v_ = op_verify(buf, len, seed, off);                              \
        if (op_v_ >= 0)                                                                \
            OP_FAIL("%s: byte %lld of %zu wrong (0x%02x, expected 0x%02x)", what, op_v_, \
                    (size_t)(len), ((const uint8_t *)(buf))[op_v_],                    \
                    op_byte(seed, (size_t)(off) + (size_t)op_v_));                     \
    } while (0)


#endif
