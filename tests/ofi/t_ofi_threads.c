/* Threads and progress (fi_domain(3)): with FI_THREAD_SAFE, 4 threads per
 * side send, receive and read the shared CQs on one endpoint at once;
 * with FI_PROGRESS_AUTO, a side that makes no libfabric call at all still
 * lets its peer's rendezvous send (and receive) complete.
 *
 *   t_ofi_threads [filter] [messages per thread] */
#include <pthread.h>
#include <stdatomic.h>

#include "ofi_pair.h"

enum { NT = 4 };

typedef struct op {
    struct fi_context2 ctx; /* first: the completion's op_context */
    _Atomic int done;       /* 1 ok, -err */
    size_t len;
} op_t;

typedef struct targ {
    op_side_t *s;
    int k, m;
    uint8_t **sb, **rb;
    op_t *so, *ro;
} targ_t;

static size_t tlen(int i) { return i % 10 == 9 ? 3 * op_eager() + 1 : (size_t)(i * 13) % 2000; }

/* Read one entry from @p cq, whoever's it is, and mark its operation. */
static void poll_one(struct fid_cq *cq)
{
    struct fi_cq_tagged_entry e;
    ssize_t r = fi_cq_read(cq, &e, 1);
    if (r == 1) {
        op_t *o = e.op_context;
        o->len = e.len;
        atomic_store(&o->done, 1);
        return;
    }
    if (r == -FI_EAGAIN)
        return;
    if (r != -FI_EAVAIL)
        OP_FAIL("fi_cq_read from a thread: %zd (%s)", r, fi_strerror((int)-r));
    struct fi_cq_err_entry x;
    memset(&x, 0, sizeof x);
    r = fi_cq_readerr(cq, &x, 0);
    if (r == -FI_EAGAIN)
        return; /* another thread took it */
    if (r != 1)
        OP_FAIL("fi_cq_readerr from a thread: %zd", r);
    OP_FAIL("error completion in a thread: %d (%s)", x.err, fi_strerror(x.err));
}

static void wait_ops(targ_t *a, op_t *ops, const char *what)
{
    double end = op_now() + OP_TIMEOUT;
    unsigned spins = 0;
    for (int i = 0; i < a->m; i++)
        while (!atomic_load(&ops[i].done)) {
            poll_one(a->s->rxcq);
            poll_one(a->s->txcq);
            if (op_now() > end)
                OP_FAIL("thread %d: %s %d of %d never completed", a->k, what, i, a->m);
            op_pause(&spins);
        }
}

static ssize_t retry(targ_t *a, ssize_t (*post)(targ_t *, int), int i)
{
    double end = op_now() + OP_TIMEOUT;
    unsigned spins = 0;
    ssize_t r;
    while ((r = post(a, i)) == -FI_EAGAIN) {
        if (op_now() > end)
            OP_FAIL("thread %d: -FI_EAGAIN for %.0f s", a->k, OP_TIMEOUT);
        poll_one(a->s->rxcq);
        poll_one(a->s->txcq);
        op_pause(&spins);
    }
    return r;
}

static ssize_t post_recv(targ_t *a, int i)
{
    return fi_trecv(a->s->ep, a->rb[i], 3 * op_eager() + 1, NULL, a->s->peer, (uint64_t)a->k,
                    0, &a->ro[i].ctx);
}

static ssize_t post_send(targ_t *a, int i)
{
    return fi_tsend(a->s->ep, a->sb[i], tlen(i), NULL, a->s->peer, (uint64_t)a->k,
                    &a->so[i].ctx);
}

/* Thread k: post m receives for tag k, send m messages with tag k,
 * interleaved, then wait for all, reading the CQs itself. */
static void *thread_main(void *v)
{
    targ_t *a = v;
    for (int i = 0; i < a->m; i++) {
        ssize_t r = retry(a, post_recv, i);
        if (r)
            OP_FAIL("thread %d: fi_trecv %zd (%s)", a->k, r, fi_strerror((int)-r));
        r = retry(a, post_send, i);
        if (r)
            OP_FAIL("thread %d: fi_tsend %zd (%s)", a->k, r, fi_strerror((int)-r));
    }
    wait_ops(a, a->ro, "receive");
    wait_ops(a, a->so, "send");
    for (int i = 0; i < a->m; i++) {
        if (a->ro[i].len != tlen(i))
            OP_FAIL("thread %d: receive %d has %zu bytes, expected %zu", a->k, i, a->ro[i].len,
                    tlen(i));
        OP_VERIFY(a->rb[i], tlen(i), (uint64_t)((1 - a->s->rank) * 1000000 + a->k * 10000 + i),
                  0, "threaded data");
    }
    return NULL;
}

static int s_threads(op_side_t *s, void *v)
{
    int m = *(int *)v;
    if (s->info->domain_attr->threading != FI_THREAD_SAFE)
        OP_FAIL("asked for FI_THREAD_SAFE, got threading %d", s->info->domain_attr->threading);
    targ_t a[NT];
    pthread_t th[NT];
    for (int k = 0; k < NT; k++) {
        a[k] = (targ_t){.s = s, .k = k, .m = m};
        a[k].sb = calloc((size_t)m, sizeof(uint8_t *));
        a[k].rb = calloc((size_t)m, sizeof(uint8_t *));
        a[k].so = calloc((size_t)m, sizeof(op_t));
        a[k].ro = calloc((size_t)m, sizeof(op_t));
        OP_CHECK(a[k].sb && a[k].rb && a[k].so && a[k].ro);
        for (int i = 0; i < m; i++) {
            OP_CHECK((a[k].sb[i] = malloc(tlen(i) + 1)) != NULL);
            OP_CHECK((a[k].rb[i] = malloc(3 * op_eager() + 1)) != NULL);
            op_fill(a[k].sb[i], tlen(i), (uint64_t)(s->rank * 1000000 + k * 10000 + i));
        }
    }
    for (int k = 0; k < NT; k++)
        if (pthread_create(&th[k], NULL, thread_main, &a[k]))
            OP_FAIL("pthread_create");
    for (int k = 0; k < NT; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < NT; k++) {
        for (int i = 0; i < m; i++) {
            free(a[k].sb[i]);
            free(a[k].rb[i]);
        }
        free(a[k].sb);
        free(a[k].rb);
        free(a[k].so);
        free(a[k].ro);
    }
    return 0;
}

/* Out of band without touching the endpoint (the progress must come from
 * the provider's own thread). */
static void raw_wait(op_side_t *s, char *c)
{
    struct pollfd p = {s->fd, POLLIN, 0};
    if (poll(&p, 1, (int)(OP_TIMEOUT * 1000)) != 1 || read(s->fd, c, 1) != 1)
        OP_FAIL("the peer's operation did not complete while this side slept "
                "(no auto progress?)");
}

/* Round 0: rank 0 sends 16 MiB, rank 1 posted the receive and sleeps in
 * poll() until rank 0's send has completed. Round 1: the other way. */
static int s_auto(op_side_t *s, void *v)
{
    (void)v;
    size_t len = 16u << 20;
    uint8_t *b = malloc(len);
    struct fi_context2 c;
    OP_CHECK(b);
    if (s->info->domain_attr->data_progress != FI_PROGRESS_AUTO)
        OP_FAIL("asked for FI_PROGRESS_AUTO, got data_progress %d",
                s->info->domain_attr->data_progress);
    for (int round = 0; round < 2; round++) {
        int sender = round == 0 ? 0 : 1;
        char go = 0;
        if (s->rank == sender) {
            op_fill(b, len, (uint64_t)round);
            op_oob_recv(s, &go, 1); /* the receive is posted */
            OP_POST(s, "tsend", fi_tsend(s->ep, b, len, NULL, s->peer, 1, &c));
            op_wait_ok(s, s->txcq, &c, "send to a peer that makes no calls");
            op_oob_send(s, "d", 1);
        } else {
            memset(b, 0, len);
            OP_POST(s, "trecv", fi_trecv(s->ep, b, len, NULL, s->peer, 1, 0, &c));
            op_oob_send(s, "p", 1);
            raw_wait(s, &go);
            op_ent_t e = op_wait_ok(s, s->rxcq, &c, "receive");
            OP_CHECK(e.e.len == len);
            OP_VERIFY(b, len, (uint64_t)round, 0, "auto-progress data");
        }
    }
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    int m = argc > 2 ? atoi(argv[2]) : 200;
    op_cfg_t c = op_cfg_default();
    c.threading = FI_THREAD_SAFE;
    if (op_want(argc, argv, "thread_safe"))
        op_tally(&t, op_run("thread_safe", &c, s_threads, &m));
    op_cfg_t d = op_cfg_default();
    d.progress = FI_PROGRESS_AUTO;
    if (op_want(argc, argv, "auto_progress"))
        op_tally(&t, op_run("auto_progress", &d, s_auto, NULL));
    return op_tally_exit(&t);
}
