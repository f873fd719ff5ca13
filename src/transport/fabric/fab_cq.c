/* The fabric transport's sends and what waits on them.
 *
 * Sends complete on txcq, which any thread may read (a sender that waits
 * for room drives the provider that way, and what it reads only frees send
 * buffers). A send copies the message into a buffer of its own (freed by
 * its completion), so the caller's memory is free on return. A failed
 * send's completion (the provider's error: connection refused or reset)
 * makes the peer fail through the core's upcall, from the progress thread
 * (a sender may hold the core's locks: fab_progress.c). Requests that wait
 * for an answer (a get, a flush) wait here. */
#include "transport/fabric/fab_int.h"
#include "util/clock.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- sends ------------------------------------------------------------------ */

void vmmc_fab__tx_free(fab_ep_t *f, fab_tx_t *tx)
{
    if (tx->reg)
        fab_cache_put(f->cache, tx->reg);
    if (tx->reg2)
        fab_cache_put(f->cache, tx->reg2);
    free(tx);
}

void vmmc_fab__tx_done(fab_ep_t *f, fab_tx_t *tx, int st)
{
    if (tx->waited) {
        int exp = VMMC_INPROGRESS;
        if (atomic_compare_exchange_strong(&tx->wstat, &exp, st)) {
            /* its waiter frees it: tx is not ours to touch any more */
            atomic_fetch_add(&f->tx_seq, 1);
            if (atomic_load(&f->tx_sleepers))
                syscall(SYS_futex, (uint32_t *)&f->tx_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL,
                        NULL, 0);
            return;
        }
    }
    vmmc_fab__tx_free(f, tx);
}

/* What the target's provider answers when an RMA operation names a region
 * it does not have (closed: the export ended) or beyond its end: the
 * operation fails, not the peer. */
static int rma_refusal(int err)
{
    return err == FI_EACCES || err == FI_EINVAL || err == FI_EKEYREJECTED || err == FI_EPERM ||
           err == FI_ENOKEY || err == FI_EREMOTEIO || err == FI_EFAULT || err == FI_ENOENT;
}

/* Read send completions (any thread): free their buffers; a failed one
 * fails its peer (an RMA operation the target refused fails only itself). */
int vmmc_fab__tx_progress(fab_ep_t *f)
{
    struct fi_cq_data_entry e[16];
    ssize_t n = fi_cq_read(f->txcq, e, 16);
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            vmmc_fab__completed(f, ((fab_tx_t *)e[i].op_context)->peer);
            vmmc_fab__tx_done(f, e[i].op_context, VMMC_OK);
        }
        return (int)n;
    }
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof err);
        if (fi_cq_readerr(f->txcq, &err, 0) == 1 && err.op_context) {
            fab_tx_t *tx = err.op_context;
            vmmc_fab__completed(f, tx->peer);
            char why[96];
            snprintf(why, sizeof why, "fabric: a %s to it failed: %s",
                     tx->rma ? "RMA operation" : "send", fi_strerror(err.err));
            int st = VMMC_ERR_PEER_DEAD;
            if (tx->rma && rma_refusal(err.err)) {
                atomic_fetch_add_explicit(&f->c_rma_refused, 1, memory_order_relaxed);
                vmmc_debug("%s (rank %d)", why, tx->peer);
                st = VMMC_ERR_PERMISSION;
            } else {
                atomic_fetch_add_explicit(&f->c_tx_err, 1, memory_order_relaxed);
                if (err.err != FI_ECANCELED && tx->peer >= 0) /* < 0: a refusal */
                    vmmc_fab__note_failed(f, tx->peer, why);
            }
            vmmc_fab__tx_done(f, tx, st);
        } else if (err.err) {
            atomic_fetch_add_explicit(&f->c_rma_refused, 1, memory_order_relaxed);
            vmmc_debug("fabric: an operation without context failed: %s", fi_strerror(err.err));
        }
        return 1;
    }
    return 0;
}

fab_peer_t *vmmc_fab__peer_live(fab_ep_t *f, int h, int *status)
{
    fab_peer_t *p = vmmc_fab__peer(f, h, status);
    if (p && (*status = vmmc_fab__peer_error(f, h)) != VMMC_OK)
        return NULL;
    return p;
}

int vmmc_fab__peer_error(fab_ep_t *f, int h)
{
    vmmc_tl_peer_t *tp = vmmc_tl_peer_at(f->ep, h);
    if (tp && atomic_load_explicit(&tp->state, memory_order_acquire) == PEER_DEAD)
        return vmmc_tl_peer_error(tp);
    return VMMC_OK;
}

/* Post message @tx (its header first in tx->buf; @m: @cnt pieces of it,
 * @desc their registrations) to @h, numbered, retrying while the provider
 * has no room; freed on failure. */
static int post_msg(fab_ep_t *f, int h, fab_peer_t *p, fab_tx_t *tx, const struct iovec *m,
                    void **desc, int cnt, int nonblock)
{
    int st;
    fab_hdr_t *th = (fab_hdr_t *)tx->buf;
    th->src = VMMC_TL_EP(f->ep)->rank;
    th->sec = f->sec;
    th->dst = p->dsec;
    struct timespec t0 = {0, 0};
    pthread_mutex_lock(&p->seqlock);
    for (unsigned spin = 0;; spin++) {
        th->seq = p->tx_seq;
        ssize_t rc = -FI_EAGAIN;
        if (vmmc_fab__window_take(f, p) &&
            (rc = cnt == 1 ? fi_send(f->fep, m[0].iov_base, m[0].iov_len, desc[0], p->fa,
                                     &tx->ctx)
                           : fi_sendv(f->fep, m, desc, (size_t)cnt, p->fa, &tx->ctx)) != 0)
            vmmc_fab__window_give(f, p);
        if (rc == 0) {
            p->tx_seq++;
            pthread_mutex_unlock(&p->seqlock);
            if (spin)
                vmmc_fab__waiting(f, 0);
            atomic_fetch_add_explicit(&f->c_tx, 1, memory_order_relaxed);
            vmmc_fab__posted(f);
            /* Software providers move data when their queues are read:
             * once now, or it waits for our progress thread's next wake. */
            (void)vmmc_fab__tx_progress(f);
            return VMMC_OK;
        }
        if (rc != -FI_EAGAIN) {
            pthread_mutex_unlock(&p->seqlock);
            if (spin)
                vmmc_fab__waiting(f, 0);
            vmmc_fab__tx_free(f, tx);
            return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric: send to %s %d: %s",
                              VMMC_PEER_WORD(f->ep, h), h, fi_strerror((int)-rc));
        }
        if (spin == 0)
            atomic_fetch_add_explicit(&f->c_tx_again, 1, memory_order_relaxed);
        if (nonblock) {
            pthread_mutex_unlock(&p->seqlock);
            vmmc_fab__tx_free(f, tx);
            return vmmc_error(VMMC_ERR_AGAIN, "fabric: no room to send to %s %d now",
                              VMMC_PEER_WORD(f->ep, h), h);
        }
        /* No room: drive the provider (our sends' completions) and let
         * others run; a dead peer ends the wait. While we wait, our own
         * notifications move to the core, so that our progress thread
         * takes the peer's messages: it may be waiting for us the same way. */
        if (spin == 0) {
            vmmc_fab__waiting(f, 1);
            clock_gettime(CLOCK_MONOTONIC, &t0);
        } else if ((spin & 255) == 0) {
            struct timespec t1;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
                          (uint64_t)(t1.tv_nsec - t0.tv_nsec);
            if (ns >= vmmc_fab_cfg_send_timeout) {
                pthread_mutex_unlock(&p->seqlock);
                vmmc_fab__waiting(f, 0);
                vmmc_fab__tx_free(f, tx);
                vmmc_fab__note_failed(f, h, "fabric: it took no message for VMMC_FABRIC_SEND_TIMEOUT");
                return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric: %s %d took no message for "
                                  "VMMC_FABRIC_SEND_TIMEOUT", VMMC_PEER_WORD(f->ep, h), h);
            }
        }
        if (vmmc_fab__tx_progress(f) == 0) {
            if (spin < 64) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            }
        }
        if ((st = vmmc_fab__peer_error(f, h)) != VMMC_OK || atomic_load(&f->stop)) {
            pthread_mutex_unlock(&p->seqlock);
            vmmc_fab__waiting(f, 0);
            vmmc_fab__tx_free(f, tx);
            return st != VMMC_OK ? st : vmmc_error(VMMC_ERR_PEER_DEAD, "fabric: closing");
        }
    }
}

int vmmc_fab__sendv(fab_ep_t *f, int h, const fab_hdr_t *hdr, const struct iovec *iov, int n,
                    size_t len, int nonblock)
{
    int st = VMMC_OK;
    fab_peer_t *p = vmmc_fab__peer_live(f, h, &st);
    if (!p)
        return st;
    size_t total = sizeof *hdr + len;
    fab_tx_t *tx = malloc(sizeof *tx + total);
    if (!tx)
        return vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory for a message");
    memset(tx, 0, sizeof *tx);
    tx->peer = h;
    tx->len = total;
    memcpy(tx->buf, hdr, sizeof *hdr);
    size_t at = sizeof *hdr;
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len)
            memcpy(tx->buf + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    void *desc = NULL;
    if (f->cache) {
        if (!(tx->reg = fab_cache_get(f->cache, tx->buf, total, FI_SEND))) {
            vmmc_fab__tx_free(f, tx);
            return VMMC_ERR_SYSTEM; /* the cache or fi_mr_reg said why */
        }
        desc = tx->reg->desc;
    }
    struct iovec m = {tx->buf, total};
    return post_msg(f, h, p, tx, &m, &desc, 1, nonblock);
}

int vmmc_fab__send_zc(fab_ep_t *f, int h, const fab_hdr_t *hdr, const void *data, size_t len,
                      int nonblock, fab_tx_t **txp)
{
    int st = VMMC_OK;
    *txp = NULL;
    fab_peer_t *p = vmmc_fab__peer_live(f, h, &st);
    if (!p)
        return st;
    fab_tx_t *tx = malloc(sizeof *tx + sizeof *hdr);
    if (!tx)
        return vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory for a message");
    memset(tx, 0, sizeof *tx);
    tx->peer = h;
    tx->waited = 1;
    atomic_init(&tx->wstat, VMMC_INPROGRESS);
    tx->len = sizeof *hdr;
    memcpy(tx->buf, hdr, sizeof *hdr);
    void *desc[2] = {NULL, NULL};
    if (f->cache) {
        if (!(tx->reg = fab_cache_get(f->cache, tx->buf, sizeof *hdr, FI_SEND)) ||
            !(tx->reg2 = fab_cache_get(f->cache, data, len, FI_SEND))) {
            vmmc_fab__tx_free(f, tx);
            return VMMC_ERR_SYSTEM; /* the cache or fi_mr_reg said why */
        }
        desc[0] = tx->reg->desc;
        desc[1] = tx->reg2->desc;
    }
    struct iovec m[2] = {{tx->buf, sizeof *hdr}, {(void *)data, len}};
    if ((st = post_msg(f, h, p, tx, m, desc, 2, nonblock)) == VMMC_OK) {
        atomic_fetch_add_explicit(&f->c_zcopy, 1, memory_order_relaxed);
        *txp = tx;
    }
    return st;
}

int vmmc_fab__send(fab_ep_t *f, int h, const fab_hdr_t *hdr, const void *data, size_t len,
                   int nonblock)
{
    struct iovec v = {(void *)data, len};
    return vmmc_fab__sendv(f, h, hdr, &v, len ? 1 : 0, len, nonblock);
}

void vmmc_fab__goodbye(fab_ep_t *f)
{
    int n = vmmc_tl_peer_count(f->ep);
    int sent = 0;
    for (int h = 0; h < n; h++) {
        fab_peer_t *p = fab_peer_of(f, h);
        if (!p || __atomic_load_n(&p->fa, __ATOMIC_ACQUIRE) == FI_ADDR_NOTAVAIL ||
            h == VMMC_TL_EP(f->ep)->rank || vmmc_fab__peer_error(f, h) != VMMC_OK)
            continue;
        fab_hdr_t bye = {.kind = F_BYE};
        sent += vmmc_fab__send(f, h, &bye, NULL, 0, 1) == VMMC_OK;
    }
    /* let the provider put them on the wire: their completions, or 0.2 s */
    for (int i = 0; sent && i < 2000; i++) {
        sent -= vmmc_fab__tx_progress(f);
        if (sent > 0) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- requests waiting for answers ------------------------------------------ */

uint64_t vmmc_fab__wait_add(fab_ep_t *f, fab_wait_t *w)
{
    pthread_mutex_lock(&f->lock);
    w->id = ++f->next_id;
    w->status = VMMC_INPROGRESS;
    w->got = 0;
    w->next = f->waits;
    f->waits = w;
    pthread_mutex_unlock(&f->lock);
    return w->id;
}

void vmmc_fab__waits_fail(fab_ep_t *f, int peer, int status)
{
    pthread_mutex_lock(&f->lock);
    for (fab_wait_t *w = f->waits; w; w = w->next)
        if ((peer < 0 || w->peer == peer) && w->status == VMMC_INPROGRESS)
            __atomic_store_n(&w->status, status, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

/* A thread of this endpoint waits for a peer. Two endpoints that fill each
 * other's notification queues while both wait for an answer would wait for
 * ever: while anyone waits, the progress thread moves the queue into the
 * core's (vmmc_tl_drain) instead of holding messages back (fab_rx.c). */
void vmmc_fab__waiting(fab_ep_t *f, int begin)
{
    if (!begin) {
        atomic_fetch_sub_explicit(&f->waiting, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&f->waiting, 1, memory_order_seq_cst);
    vmmc_tl_drain(f->ep);
    if (f->busy)
        vmmc_fab__kick(f);
}

int vmmc_fab__wait_done(fab_ep_t *f, fab_wait_t *w)
{
    vmmc_fab__waiting(f, 1);
    /* The answer usually comes within a round trip: spin for it a while
     * (VMMC_FABRIC_SPIN), driving the provider (reading the send queue
     * progresses the endpoint) and yielding to our progress thread, which
     * takes the answer, before sleeping on the condition it signals. */
    for (uint64_t t0 = vmmc_now_ns();
         __atomic_load_n(&w->status, __ATOMIC_ACQUIRE) == VMMC_INPROGRESS &&
         !atomic_load(&f->stop) && vmmc_now_ns() - t0 < vmmc_fab_cfg_spin;) {
        if (vmmc_fab__tx_progress(f) == 0)
            sched_yield();
    }
    pthread_mutex_lock(&f->lock);
    for (int ticks = 1; __atomic_load_n(&w->status, __ATOMIC_ACQUIRE) == VMMC_INPROGRESS;
         ticks++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&f->cond, &f->lock, &ts);
        if (w->status != VMMC_INPROGRESS)
            break;
        int st = vmmc_fab__peer_error(f, w->peer);
        if (st != VMMC_OK) {
            w->status = st;
            break;
        }
        if (atomic_load(&f->stop)) {
            w->status = vmmc_error(VMMC_ERR_PEER_DEAD, "fabric: the endpoint closes");
            break;
        }
        /* Every half second, a probe: to a dead peer, the provider fails
         * it (connection refused or reset), which fails the peer. */
        if (ticks % 5 == 0) {
            pthread_mutex_unlock(&f->lock);
            fab_hdr_t ping = {.kind = F_PING};
            (void)vmmc_fab__send(f, w->peer, &ping, NULL, 0, 1);
            pthread_mutex_lock(&f->lock);
        }
    }
    for (fab_wait_t **pp = &f->waits; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    pthread_mutex_unlock(&f->lock);
    vmmc_fab__waiting(f, 0);
    return w->status;
}
