/* Two processes, each with its own libfabric endpoint, talking to each other:
 * the harness of the provider's tests (tests/ofi/).
 *
 *   op_cfg_t c = op_cfg_default();      // caps, CQ format, counters, ...
 *   c.caps |= FI_TAGGED;
 *   op_run("name", &c, side_fn, arg);   // forks rank 0 and rank 1
 *
 * The parent process never touches libfabric: it forks both sides (so every
 * scenario starts from a process with no fabric object and no provider state),
 * waits for both with a deadline and kills the other when one fails. Each side
 * calls fi_getinfo(hints)/fabric/domain/CQs/counters/AV/endpoint, enables it,
 * swaps fi_getname() with its peer over a socketpair, inserts the peer (and
 * itself, if asked) into its AV and runs side_fn(side, arg).
 *
 * Every wait is bounded (OP_TIMEOUT seconds, env OFI_TEST_TIMEOUT): a missing
 * completion fails the test with a message, never hangs it.
 * Exit codes: 0 pass, 1 fail, 77 skip (the provider does not load or does
 * not offer what the scenario asks; the reason is printed).
 *
 * The provider is "vmmc" unless OFI_TEST_PROV names another (e.g. "tcp",
 * "shm", "sockets": to check the tests themselves against libfabric's own
 * providers).
 *
 * Completions read while waiting for something else (a barrier progresses
 * the endpoint by reading its CQs) are kept in a per-CQ stash, so a test can
 * wait for one operation's completion by its context, in any order.
 * The stash holds FI_CQ_FORMAT_TAGGED entries: scenarios that open another
 * format read their CQ themselves. */
#ifndef VMMC_TESTS_OFI_PAIR_H
#define VMMC_TESTS_OFI_PAIR_H

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define OP_FI_VERSION FI_VERSION(1, 17)
#define OP_NAME_MAX 256
#define OP_STASH 4096

struct op_side;

/* What a side opens. op_cfg_default() gives an RDM endpoint with FI_TAGGED
 * and FI_MSG, one tagged-format CQ for tx and one for rx, no counters. */
typedef struct op_cfg {
    uint64_t caps, mode, mr_mode;
    uint64_t tx_op_flags, rx_op_flags; /* hints->tx_attr->op_flags, rx_attr->op_flags */
    enum fi_threading threading;       /* FI_THREAD_UNSPEC: provider's choice */
    enum fi_progress progress;         /* data_progress; FI_PROGRESS_UNSPEC */
    enum fi_av_type av_type;
    enum fi_cq_format cq_format;
    enum fi_wait_obj cq_wait;          /* FI_WAIT_NONE by default */
    size_t cq_size;                    /* 0: provider's default */
    uint64_t tx_bind, rx_bind;         /* extra bind flags (FI_SELECTIVE_COMPLETION) */
    int shared_cq;                     /* one CQ for both (txcq == rxcq) */
    int cntr_send, cntr_recv;          /* open and bind counters */
    enum fi_wait_obj cntr_wait;
    int insert_self;                   /* s->self: own address in the AV */
    int no_enable;                     /* leave the endpoint disabled, no exchange */
    int no_peer;                       /* one side only (op_run_solo) */
    int no_final_barrier;              /* a side may exit without closing (peer death) */
    /* called after binding and before fi_enable (fi_setopt, ...); 0 or fail */
    int (*pre_enable)(struct op_side *s);
    /* called on the fi_info list before opening: return the one to use */
    struct fi_info *(*pick)(struct fi_info *list, void *arg);
} op_cfg_t;

typedef struct op_ent {
    int err;                           /* 0: success entry */
    struct fi_cq_tagged_entry e;       /* op_context, flags, len, buf, data, tag */
    struct fi_cq_err_entry x;          /* when err: x.err, x.olen, x.prov_errno */
    fi_addr_t src;                     /* from fi_cq_readfrom / readerr */
} op_ent_t;

typedef struct op_stash {
    op_ent_t ent[OP_STASH];
    size_t n;
} op_stash_t;

typedef struct op_side {
    int rank;                          /* 0 or 1 */
    int fd;                            /* socketpair to the peer (out of band) */
    const op_cfg_t *cfg;
    const char *prov;
    struct fi_info *hints, *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fid_cq *txcq, *rxcq;
    struct fid_cntr *scntr, *rcntr;
    fi_addr_t peer, self;
    uint8_t name[OP_NAME_MAX], peername[OP_NAME_MAX];
    size_t namelen, peernamelen;
    op_stash_t *txs, *rxs;             /* same when shared_cq */
    void *user;
} op_side_t;

typedef int (*op_fn)(op_side_t *s, void *arg);

static const char *op_scenario = "";
static int op_rank = -1;

static inline double op_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline double op_timeout(void)
{
    const char *e = getenv("OFI_TEST_TIMEOUT");
    double t = e ? atof(e) : 0;
    return t > 0 ? t : 30.0;
}
#define OP_TIMEOUT op_timeout()

static inline void op_failv(const char *file, int line, const char *fmt, va_list ap)
{
    fprintf(stderr, "FAIL [%s rank %d] %s:%d: ", op_scenario, op_rank, file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    fflush(stderr);
}

static inline __attribute__((noreturn, format(printf, 3, 4))) void
op_fail_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    op_failv(file, line, fmt, ap);
    va_end(ap);
    _exit(1);
}
#define OP_FAIL(...) op_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define OP_CHECK(c)                                                                    \
    do {                                                                               \
        if (!(c))                                                                      \
            OP_FAIL("check failed: %s", #c);                                           \
    } while (0)
/* A libfabric call that must return @p want (0, a count, or -FI_E*). */
#define OP_EXPECT(want, expr)                                                          \
    do {                                                                               \
        long long op_r_ = (long long)(expr), op_w_ = (long long)(want);                \
        if (op_r_ != op_w_)                                                            \
            OP_FAIL("%s returned %lld (%s), expected %lld (%s)", #expr, op_r_,         \
                    op_r_ < 0 ? fi_strerror((int)-op_r_) : "ok", op_w_,                 \
                    op_w_ < 0 ? fi_strerror((int)-op_w_) : "ok");                       \
    } while (0)
#define OP_OK(expr) OP_EXPECT(0, expr)
#define OP_SKIP(...)                                                                   \
    do {                                                                               \
        printf("SKIP [%s rank %d]: ", op_scenario, op_rank);                           \
        printf(__VA_ARGS__);                                                           \
        printf("\n");                                                                  \
        fflush(stdout);                                                                \
        _exit(77);                                                                     \
    } while (0)

static inline op_cfg_t op_cfg_default(void)
{
    op_cfg_t c;
    memset(&c, 0, sizeof c);
    c.caps = FI_TAGGED | FI_MSG;
    c.mode = FI_CONTEXT | FI_CONTEXT2;
    c.mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    c.threading = FI_THREAD_UNSPEC;
    c.progress = FI_PROGRESS_UNSPEC;
    c.av_type = FI_AV_UNSPEC;
    c.cq_format = FI_CQ_FORMAT_TAGGED;
    c.cq_wait = FI_WAIT_NONE;
    c.cntr_wait = FI_WAIT_NONE;
    return c;
}

static inline const char *op_prov(void)
{
    const char *p = getenv("OFI_TEST_PROV");
    return p && *p ? p : "vmmc";
}

/* Is the provider under test vmmc (some checks are about our own limits)? */
static inline int op_is_vmmc(void) { return !strcmp(op_prov(), "vmmc"); }

/* ------------------------------------------------------------------------ */
/* out of band: bytes over the socketpair, bounded, progressing meanwhile */

static inline void op_progress(op_side_t *s);

static inline void op_oob_send(op_side_t *s, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(s->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            OP_FAIL("oob write: %s (peer gone?)", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

static inline void op_oob_recv(op_side_t *s, void *buf, size_t len)
{
    char *p = buf;
    double end = op_now() + OP_TIMEOUT;
    while (len) {
        struct pollfd pfd = {s->fd, POLLIN, 0};
        int r = poll(&pfd, 1, s->ep && !s->cfg->no_enable ? 1 : 100);
        if (r > 0) {
            ssize_t n = read(s->fd, p, len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                OP_FAIL("oob read: %s", n == 0 ? "peer exited" : strerror(errno));
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (op_now() > end)
            OP_FAIL("oob read: nothing from the peer in %.0f s", OP_TIMEOUT);
        op_progress(s);
    }
}

/* Both sides reach this point (the endpoint progresses while waiting). */
static inline void op_barrier(op_side_t *s)
{
    char c = 'b', d = 0;
    op_oob_send(s, &c, 1);
    op_oob_recv(s, &d, 1);
    if (d != 'b')
        OP_FAIL("barrier: got %d", d);
}

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

/* ------------------------------------------------------------------------ */
/* opening and closing one side */

#define OP_CALL(expr)                                                                  \
    do {                                                                               \
        int op_c_ = (int)(expr);                                                       \
        if (op_c_)                                                                     \
            OP_FAIL("%s: %d (%s)", #expr, op_c_, fi_strerror(-op_c_));                 \
    } while (0)

static inline struct fi_info *op_hints(const op_cfg_t *c)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        OP_FAIL("fi_allocinfo: out of memory");
    h->caps = c->caps;
    h->mode = c->mode;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = (int)c->mr_mode;
    h->domain_attr->threading = c->threading;
    h->domain_attr->data_progress = c->progress;
    h->domain_attr->av_type = c->av_type;
    h->tx_attr->op_flags = c->tx_op_flags;
    h->rx_attr->op_flags = c->rx_op_flags;
    h->fabric_attr->prov_name = strdup(op_prov());
    return h;
}

/* fi_getinfo, fabric, domain, CQs, counters, AV, endpoint, bind; enable
 * unless cfg->no_enable. Skips (77) when the provider offers nothing. */
static inline void op_side_open(op_side_t *s, const op_cfg_t *c, int rank)
{
    s->rank = rank;
    s->cfg = c;
    s->prov = op_prov();
    s->peer = s->self = FI_ADDR_NOTAVAIL;
    s->txs = calloc(1, sizeof *s->txs);
    s->rxs = c->shared_cq ? s->txs : calloc(1, sizeof *s->rxs);
    if (!s->txs || !s->rxs)
        OP_FAIL("out of memory");
    s->hints = op_hints(c);
    int r = fi_getinfo(OP_FI_VERSION, NULL, NULL, 0, s->hints, &s->info);
    if (r == -FI_ENODATA) {
        struct fi_info *any = NULL, *h = fi_allocinfo();
        h->fabric_attr->prov_name = strdup(s->prov);
        int loaded = fi_getinfo(OP_FI_VERSION, NULL, NULL, 0, h, &any) == 0;
        fi_freeinfo(h);
        fi_freeinfo(any);
        if (!loaded)
            OP_SKIP("provider \"%s\" not found (FI_PROVIDER_PATH=%s)", s->prov,
                    getenv("FI_PROVIDER_PATH") ? getenv("FI_PROVIDER_PATH") : "unset");
        OP_FAIL("provider \"%s\" loads but offers nothing for caps 0x%llx threading %d "
                "progress %d: -FI_ENODATA",
                s->prov, (unsigned long long)c->caps, c->threading, c->progress);
    }
    if (r)
        OP_FAIL("fi_getinfo: %d (%s)", r, fi_strerror(-r));
    struct fi_info *fi = c->pick ? c->pick(s->info, s->user) : s->info;
    if (!fi)
        OP_SKIP("no fi_info fits this scenario");
    OP_CALL(fi_fabric(fi->fabric_attr, &s->fabric, NULL));
    OP_CALL(fi_domain(s->fabric, fi, &s->domain, NULL));

    struct fi_cq_attr ca = {.format = c->cq_format, .wait_obj = c->cq_wait, .size = c->cq_size};
    OP_CALL(fi_cq_open(s->domain, &ca, &s->txcq, NULL));
    if (c->shared_cq)
        s->rxcq = s->txcq;
    else
        OP_CALL(fi_cq_open(s->domain, &ca, &s->rxcq, NULL));
    struct fi_cntr_attr na = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = c->cntr_wait};
    if (c->cntr_send)
        OP_CALL(fi_cntr_open(s->domain, &na, &s->scntr, NULL));
    if (c->cntr_recv)
        OP_CALL(fi_cntr_open(s->domain, &na, &s->rcntr, NULL));
    struct fi_av_attr aa = {.type = c->av_type != FI_AV_UNSPEC ? c->av_type
                                                               : fi->domain_attr->av_type};
    if (aa.type == FI_AV_UNSPEC)
        aa.type = FI_AV_MAP;
    OP_CALL(fi_av_open(s->domain, &aa, &s->av, NULL));
    OP_CALL(fi_endpoint(s->domain, fi, &s->ep, NULL));
    OP_CALL(fi_ep_bind(s->ep, &s->av->fid, 0));
    if (c->shared_cq) {
        OP_CALL(fi_ep_bind(s->ep, &s->txcq->fid, FI_TRANSMIT | FI_RECV | c->tx_bind | c->rx_bind));
    } else {
        OP_CALL(fi_ep_bind(s->ep, &s->txcq->fid, FI_TRANSMIT | c->tx_bind));
        OP_CALL(fi_ep_bind(s->ep, &s->rxcq->fid, FI_RECV | c->rx_bind));
    }
    if (s->scntr)
        OP_CALL(fi_ep_bind(s->ep, &s->scntr->fid, FI_SEND));
    if (s->rcntr)
        OP_CALL(fi_ep_bind(s->ep, &s->rcntr->fid, FI_RECV));
    if (c->pre_enable && c->pre_enable(s))
        OP_FAIL("pre_enable hook failed");
    if (c->no_enable)
        return;
    OP_CALL(fi_enable(s->ep));
    s->namelen = sizeof s->name;
    OP_CALL(fi_getname(&s->ep->fid, s->name, &s->namelen));
    if (c->insert_self)
        OP_EXPECT(1, fi_av_insert(s->av, s->name, 1, &s->self, 0, NULL));
}

/* Swap names with the peer and insert its address. */
static inline void op_side_connect(op_side_t *s)
{
    uint64_t n = s->namelen, pn = 0;
    op_oob_send(s, &n, sizeof n);
    op_oob_send(s, s->name, s->namelen);
    op_oob_recv(s, &pn, sizeof pn);
    if (pn == 0 || pn > OP_NAME_MAX)
        OP_FAIL("peer's name is %llu bytes", (unsigned long long)pn);
    op_oob_recv(s, s->peername, pn);
    s->peernamelen = pn;
    OP_EXPECT(1, fi_av_insert(s->av, s->peername, 1, &s->peer, 0, NULL));
    OP_CHECK(s->peer != FI_ADDR_NOTAVAIL);
}

/* Close in the order libfabric asks: endpoint, then what it was bound to. */
static inline void op_side_close(op_side_t *s)
{
    if (s->ep)
        OP_CALL(fi_close(&s->ep->fid));
    if (s->av)
        OP_CALL(fi_close(&s->av->fid));
    if (s->scntr)
        OP_CALL(fi_close(&s->scntr->fid));
    if (s->rcntr)
        OP_CALL(fi_close(&s->rcntr->fid));
    if (s->rxcq && s->rxcq != s->txcq)
        OP_CALL(fi_close(&s->rxcq->fid));
    if (s->txcq)
        OP_CALL(fi_close(&s->txcq->fid));
    if (s->domain)
        OP_CALL(fi_close(&s->domain->fid));
    if (s->fabric)
        OP_CALL(fi_close(&s->fabric->fid));
    fi_freeinfo(s->info);
    fi_freeinfo(s->hints);
    if (s->rxs != s->txs)
        free(s->rxs);
    free(s->txs);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------------ */
/* running a scenario */

static inline __attribute__((noreturn)) void op_child(const char *name, const op_cfg_t *c,
                                                      int rank, int fd, op_fn fn, void *arg)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    op_scenario = name;
    op_rank = rank;
    op_side_t s;
    memset(&s, 0, sizeof s);
    s.fd = fd;
    s.user = arg;
    op_side_open(&s, c, rank);
    if (!c->no_enable && !c->no_peer) {
        op_side_connect(&s);
        op_barrier(&s);
    }
    int r = fn(&s, arg);
    if (r)
        OP_FAIL("side function returned %d", r);
    /* Both done before either closes: a close must not cut the peer short. */
    if (!c->no_peer && !c->no_final_barrier)
        op_barrier(&s);
    op_side_close(&s);
    fflush(stdout);
    _exit(0);
}

/* Fork rank 0 and rank 1 (or rank 0 alone with cfg->no_peer), run @p fn on
 * each, wait for both at most 4 * OP_TIMEOUT. 0 pass, 1 fail, 77 skip. */
static inline int op_run(const char *name, const op_cfg_t *c, op_fn fn, void *arg)
{
    int sv[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        OP_FAIL("socketpair: %s", strerror(errno));
    int np = c->no_peer ? 1 : 2;
    pid_t pid[2] = {0, 0};
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < np; r++) {
        pid[r] = fork();
        if (pid[r] < 0)
            OP_FAIL("fork: %s", strerror(errno));
        if (pid[r] == 0) {
            close(sv[1 - r]);
            op_child(name, c, r, sv[r], fn, arg);
        }
    }
    close(sv[0]);
    close(sv[1]);
    int st[2] = {0, 0}, live = np, fail = 0, skip = 0;
    double end = op_now() + 4 * OP_TIMEOUT;
    while (live) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            int r = p == pid[0] ? 0 : 1;
            st[r] = status;
            pid[r] = 0;
            live--;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            if (code == 77)
                skip = 1;
            else if (code != 0) {
                if (WIFSIGNALED(status))
                    fprintf(stderr, "FAIL [%s rank %d]: killed by signal %d\n", name, r,
                            WTERMSIG(status));
                fail = 1;
                for (int o = 0; o < 2; o++)  /* the other side cannot finish alone */
                    if (pid[o] > 0)
                        kill(pid[o], SIGKILL);
            }
            continue;
        }
        if (op_now() > end) {
            fprintf(stderr, "FAIL [%s]: still running after %.0f s, killed\n", name,
                    4 * OP_TIMEOUT);
            for (int o = 0; o < 2; o++)
                if (pid[o] > 0)
                    kill(pid[o], SIGKILL);
            fail = 1;
            end = op_now() + 3600;
        }
        struct timespec t = {0, 5000000};
        nanosleep(&t, NULL);
    }
    (void)st;
    int res = fail ? 1 : skip ? 77 : 0;
    printf("%s %s\n", res == 0 ? "ok  " : res == 77 ? "skip" : "FAIL", name);
    fflush(stdout);
    return res;
}

/* One side alone (rank 0, no exchange). */
static inline int op_run_solo(const char *name, const op_cfg_t *c, op_fn fn, void *arg)
{
    op_cfg_t d = *c;
    d.no_peer = 1;
    return op_run(name, &d, fn, arg);
}

/* Combine scenario results: any fail is a fail; all skipped is a skip. */
typedef struct op_tally {
    int fail, pass, skip;
} op_tally_t;

static inline void op_tally(op_tally_t *t, int r)
{
    if (r == 0)
        t->pass++;
    else if (r == 77)
        t->skip++;
    else
        t->fail++;
}

static inline int op_tally_exit(const op_tally_t *t)
{
    printf("%d passed, %d failed, %d skipped\n", t->pass, t->fail, t->skip);
    if (t->fail)
        return 1;
    return t->pass ? 0 : 77;
}

/* Test data: byte i of message seed is a function of both. */
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
