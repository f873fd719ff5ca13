/* The fabric transport's progress thread, and the reading of its receive
 * queue.
 *
 * Receives complete on rxcq. One thread at a time reads it (rxlock) and
 * handles what it held (fab_rx.c), in order, so that data lands before its
 * notification and a control message is handled after the writes sent
 * before it: the progress thread, or a thread that drives the endpoint
 * itself (vmmc_progress, the spin of vmmc_wait: vmmc_fab__poll), which then
 * takes what arrives for it without a hand-over. The progress thread sleeps
 * in poll() on the queues' wait fds (FI_WAIT_FD, fi_trywait first) and on
 * an eventfd that wakes it to stop, to take held messages again, or to
 * report failed peers (noted by any thread, reported from here). */
#include "transport/fabric/fab_int.h"
#include "util/clock.h"

#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

void vmmc_fab__kick(fab_ep_t *f)
{
    uint64_t one = 1;
    ssize_t w = write(f->wakefd, &one, sizeof one);
    (void)w;
}

/* ---- failed peers: noted by any thread, reported by the progress thread -- */

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct fab_fail {
    fab_ep_t *f;
    int peer;
    char why[96];
    struct fab_fail *next;
} fab_fail_t;
static fab_fail_t *fails;

void vmmc_fab__note_failed(fab_ep_t *f, int peer, const char *why)
{
    fab_fail_t *x = malloc(sizeof *x);
    if (!x)
        return;
    x->f = f;
    x->peer = peer;
    snprintf(x->why, sizeof x->why, "%s", why);
    pthread_mutex_lock(&fail_lock);
    x->next = fails;
    fails = x;
    pthread_mutex_unlock(&fail_lock);
    vmmc_fab__kick(f);
}

static void report_failed(fab_ep_t *f)
{
    for (;;) {
        fab_fail_t *x = NULL;
        pthread_mutex_lock(&fail_lock);
        for (fab_fail_t **pp = &fails; *pp; pp = &(*pp)->next)
            if ((*pp)->f == f) {
                x = *pp;
                *pp = x->next;
                break;
            }
        pthread_mutex_unlock(&fail_lock);
        if (!x)
            return;
        if (!atomic_load_explicit(&f->stop, memory_order_acquire)) {
            vmmc_tl_peer_failed(f->ep, x->peer, -1, x->why);
            vmmc_fab__waits_fail(f, x->peer, VMMC_ERR_PEER_DEAD);
        }
        free(x);
    }
}


/* The endpoint whose receive queue this thread reads now (rxlock held). */
static __thread const fab_ep_t *rx_reader;

/* The progress thread, or a thread handling what the receive queue held:
 * neither may wait for a peer. */
int vmmc_fab__on_progress_thread(const fab_ep_t *f)
{
    return rx_reader == f || (f->thread_up && pthread_equal(f->thread, pthread_self()));
}

/* ---- receives: the progress thread ----------------------------------------- */

static int post_rx(fab_ep_t *f, fab_rxb_t *b)
{
    for (;;) {
        ssize_t rc = fi_recv(f->fep, b->buf, FAB_RXBUF, f->rx_reg ? f->rx_reg->desc : NULL,
                             FI_ADDR_UNSPEC, &b->ctx);
        if (rc == 0)
            return VMMC_OK;
        if (rc != -FI_EAGAIN)
            return vmmc_error(VMMC_ERR_SYSTEM, "fabric: fi_recv: %s", fi_strerror((int)-rc));
        (void)vmmc_fab__tx_progress(f);
        if (atomic_load(&f->stop))
            return VMMC_ERR_SYSTEM;
        sched_yield();
    }
}

/* Handle what was received, each sender's messages in their order; a
 * message whose turn has not come (an earlier one still completes) or that
 * finds the notification queue full waits in held[]. */
static int rx_handle(fab_ep_t *f)
{
    int done = 0;
    f->busy = 0;
    for (int i = 0; i < f->nheld;) {
        struct fi_cq_data_entry *e = &f->held[i];
        fab_rxb_t *b = e->op_context; /* NULL: remote CQ data (no buffer) */
        fab_peer_t *p = fab_peer_of(f, f->held_peer[i]);
        fab_hdr_t h;
        if (b)
            memcpy(&h, b->buf, sizeof h);
        if (b ? h.seq != p->rx_seq : !vmmc_fab__rx_cqd_due(p, e->data)) {
            vmmc_tl_peer_t *tp = vmmc_tl_peer_at(f->ep, f->held_peer[i]);
            if (tp && atomic_load_explicit(&tp->state, memory_order_acquire) == PEER_DEAD) {
                /* Its turn never comes: the peer died before the message
                 * in front of it completed (a large one the provider was
                 * still fetching). Its buffer goes back to receiving, or
                 * a few such deaths would leave none for the live peers. */
                f->nheld--;
                memmove(f->held + i, f->held + i + 1, (size_t)(f->nheld - i) * sizeof *f->held);
                memmove(f->held_peer + i, f->held_peer + i + 1,
                        (size_t)(f->nheld - i) * sizeof *f->held_peer);
                atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
                if (b)
                    (void)post_rx(f, b);
                continue;
            }
            i++;
            continue;
        }
        if (b ? vmmc_fab__rx(f, f->held_peer[i], p, b->buf, e->len)
              : vmmc_fab__rx_cqd(f, f->held_peer[i], e->data)) {
            f->busy = 1; /* nothing of anyone's before the queue has room (order) */
            return done;
        }
        if (b)
            vmmc_fab__rx_handled(f, f->held_peer[i], p);
        f->nheld--;
        memmove(f->held + i, f->held + i + 1, (size_t)(f->nheld - i) * sizeof *f->held);
        memmove(f->held_peer + i, f->held_peer + i + 1, (size_t)(f->nheld - i) * sizeof *f->held_peer);
        if (b)
            (void)post_rx(f, b);
        done++;
        i = 0; /* one of this sender's that waited may be next now */
    }
    return done;
}

static int rx_progress(fab_ep_t *f)
{
    int done = 0;
    struct fi_cq_data_entry e[16];
    fi_addr_t src[16];
    /* never more than held[] takes (fab_rx.c) */
    int room = vmmc_fab__rx_room(f);
    ssize_t n = room > 0 ? fi_cq_readfrom(f->rxcq, e, room < 16 ? (size_t)room : 16, src) : 0;
    for (ssize_t i = 0; f->nosrc && i < n; i++)
        src[i] = FI_ADDR_NOTAVAIL; /* the sender's claim, checked below, says who */
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof err);
        if (fi_cq_readerr(f->rxcq, &err, 0) == 1) {
            if (err.err != FI_ECANCELED)
                vmmc_debug("fabric: receive failed: %s", fi_strerror(err.err));
            atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
            if (err.op_context && !atomic_load(&f->stop))
                (void)post_rx(f, err.op_context);
        }
        done++;
    }
    for (ssize_t i = 0; i < n; i++) {
        fab_rxb_t *b = e[i].op_context;
        if (!b) { /* a remote write's CQ data */
            vmmc_fab__rx_cqd_hold(f, &e[i]);
            done++;
            continue;
        }
        /* who sent it (fab_accept.c: HELLOs and refusals are taken there) */
        int h = vmmc_fab__rx_source(f, src[i], b->buf, e[i].len);
        if (h == FAB_RX_DROP) {
            (void)post_rx(f, b);
            continue;
        }
        f->held[f->nheld] = e[i];
        f->held_peer[f->nheld++] = h;
        done++;
    }
    if (n > 0 || (f->nheld && !f->busy) || done)
        done += rx_handle(f);
    return done;
}

/* Read the receive queue and handle what it holds, unless another thread
 * does so now (then 0). *busy: the notification queue stayed full. */
static int rx_turn(fab_ep_t *f, int *busy)
{
    if (pthread_mutex_trylock(&f->rxlock) != 0)
        return 0;
    rx_reader = f;
    int n = rx_progress(f);
    if (f->busy)
        n += rx_handle(f); /* the core may have taken notifications meanwhile */
    *busy = f->busy;
    rx_reader = NULL;
    pthread_mutex_unlock(&f->rxlock);
    return n;
}

void vmmc_fab__poll(fab_ep_t *f)
{
    int busy = 0;
    if (f->thread_up && atomic_load_explicit(&f->started, memory_order_acquire) &&
        !atomic_load_explicit(&f->stop, memory_order_acquire) && rx_turn(f, &busy) > 0) {
        atomic_fetch_add_explicit(&f->c_rx_polled, 1, memory_order_relaxed);
        vmmc_fab__active(f);
    }
}

static void *progress_main(void *arg)
{
    fab_ep_t *f = arg;
    uint64_t idle_since = 0;
    while (!atomic_load_explicit(&f->stop, memory_order_acquire)) {
        int started = atomic_load_explicit(&f->started, memory_order_acquire);
        int busy = 0;
        int n = started ? rx_turn(f, &busy) : 0;
        n += vmmc_fab__tx_progress(f);
        report_failed(f);
        if (n && !busy) {
            idle_since = 0;
            vmmc_fab__active(f);
            continue;
        }
        /* After activity, keep reading the queues for VMMC_FABRIC_SPIN
         * (yielding between reads: the cpu is shared) before sleeping: a
         * wake through the provider's wait fd costs tens of microseconds,
         * paid by every request and answer that finds this thread asleep. */
        if (started && !busy && vmmc_fab_cfg_spin) {
            uint64_t now = vmmc_now_ns();
            if (!idle_since)
                idle_since = now;
            if (now - idle_since < vmmc_fab_cfg_spin) {
                sched_yield();
                continue;
            }
        }
        /* A wake is activity even when it completes nothing here: the
         * provider may have taken a peer's RMA request, whose answer it
         * sends from later reads of the queues (a read served for a peer
         * completes nothing at this end): spin again after it. */
        if (vmmc_fab__sleep(f, started))
            idle_since = 0;
    }
    return NULL;
}

int vmmc_fab__start(fab_ep_t *f)
{
    f->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    f->rx = calloc(FAB_NRX, sizeof *f->rx);
    f->held_cap = FAB_NRX + (f->cq_data ? 1024 : 0);
    f->held = calloc((size_t)f->held_cap, sizeof *f->held);
    f->held_peer = calloc((size_t)f->held_cap, sizeof *f->held_peer);
    if (f->wakefd < 0 || !f->rx || !f->held || !f->held_peer)
        return vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory or descriptors");
    /* one registration for every receive buffer, held while the endpoint lives */
    if (f->cache && !(f->rx_reg = fab_cache_get(f->cache, f->rx, FAB_NRX * sizeof *f->rx, FI_RECV)))
        return VMMC_ERR_NOMEM;
    for (int i = 0; i < FAB_NRX; i++) {
        int st = post_rx(f, &f->rx[i]);
        if (st != VMMC_OK)
            return st;
    }
    if (pthread_create(&f->thread, NULL, progress_main, f) != 0)
        return vmmc_error(VMMC_ERR_NOMEM, "fabric: cannot start the progress thread");
    f->thread_up = 1;
    return VMMC_OK;
}

void vmmc_fab__stop(fab_ep_t *f)
{
    if (f->thread_up) {
        atomic_store(&f->stop, 1);
        vmmc_fab__kick(f);
        pthread_join(f->thread, NULL);
        f->thread_up = 0;
        vmmc_fab__waits_fail(f, -1, VMMC_ERR_PEER_DEAD);
        /* sends still in flight: their buffers come back as completions */
        for (int i = 0; i < 1000 && vmmc_fab__tx_progress(f); i++)
            ;
        pthread_mutex_lock(&fail_lock);
        for (fab_fail_t **pp = &fails; *pp;) {
            fab_fail_t *x = *pp;
            if (x->f == f) {
                *pp = x->next;
                free(x);
            } else {
                pp = &x->next;
            }
        }
        pthread_mutex_unlock(&fail_lock);
    }
    if (f->wakefd >= 0) {
        close(f->wakefd);
        f->wakefd = -1;
    }
}
