/* The fabric transport's RMA path: puts and gets of an import the exporter
 * gave direct access to (fab_mr.c) go straight into its registered region,
 * with no receiver's thread in the way:
 *   a put is fi_write (fi_inject_write up to the provider's inject_size; a
 *   copy into a buffer of our own up to FAB_COPY_MAX, freed by its completion;
 *   beyond that the caller's buffer itself, registered through the
 *   translation cache where the provider needs local registrations, and
 *   waited for), so the source is reusable on return as for every put;
 *   a put with a notification: where it fits 64 bits of remote CQ data
 *   (fab_int.h FAB_CQD_*: the exporter's notification slot for us, offset,
 *   length, immediate) the put's last write is fi_writedata carrying it,
 *   which completes at the target only once the data is in place (and the
 *   writes before it: FI_ORDER_WAW); otherwise the data by fi_write, then
 *   an F_NOTE message the receiver queues the notification from; the provider
 *   orders sends after writes (FI_ORDER_SAW, required for this path), so
 *   the notification is handled only once the data is in place. A put with
 *   VMMC_SEND_HEAD_LAST that fits one message (FAB_CHUNK) stays a message
 *   (fab_rma.c: the core stores the head last), and so do zero-length
 *   puts; the receiver's thread applies those later, so the next RMA
 *   operation to that peer flushes first (vmmc_fab__after_messages);
 *   a get is fi_read into the caller's buffer, waited for.
 * Ordering with the message path (flushes, atomics' requests, writes to
 * redirectable exports of the same peer) is the provider's: this path is
 * used only where it orders writes, reads and sends among each other
 * (FI_ORDER_WAW, WAS, SAW, RAW, RAS), so a flush (F_FLUSH) sent after RMA
 * writes is answered only after they landed.
 * A target that refuses an operation (the export ended: its region is
 * closed) fails that operation, not the peer: a waited one returns the
 * error, an asynchronous one is counted (fabric.rma_refused), as the
 * message path counts writes the receiver refuses. */
#include "transport/fabric/fab_int.h"
#include "util/clock.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Writes up to this size are copied into a buffer of our own and not
 * waited for; larger ones go from the caller's buffer and are waited for
 * (the copy of 64 KiB cost more than the wait for its local completion). */
#define FAB_COPY_MAX (16u * 1024)

/* One write or read for post(). */
typedef struct {
    int read;
    void *buf;
    size_t len;
    void *desc;
    uint64_t raddr;
    const uint64_t *cqd;
} fab_rw_t;

static ssize_t issue_rw(fab_ep_t *f, fab_peer_t *p, const fab_rpx_t *r, fab_tx_t *tx, void *arg)
{
    const fab_rw_t *o = arg;
    if (o->read)
        return fi_read(f->fep, o->buf, o->len, o->desc, p->fa, o->raddr, r->key, &tx->ctx);
    if (!tx)
        return fi_inject_write(f->fep, o->buf, o->len, p->fa, o->raddr, r->key);
    if (o->cqd) /* (p->seqlock held: the next message's number is ours to name) */
        return fi_writedata(f->fep, o->buf, o->len, o->desc,
                            *o->cqd | (uint64_t)(p->tx_seq & FAB_CQD_SEQ_MASK) << 36, p->fa,
                            o->raddr, r->key, &tx->ctx);
    return fi_write(f->fep, o->buf, o->len, o->desc, p->fa, o->raddr, r->key, &tx->ctx);
}

int vmmc_fab__post_op(fab_ep_t *f, vmmc_tl_proxy_t *px, fab_peer_t *p, fab_tx_t *tx,
                      int nonblock, fab_issue_fn issue, void *arg, _Atomic uint64_t *count,
                      const char *what, size_t len)
{
    const fab_rpx_t *r = px->tl_priv;
    struct timespec t0 = {0, 0};
    for (unsigned spin = 0;; spin++) {
        ssize_t rc = -FI_EAGAIN;
        if ((!tx || vmmc_fab__window_take(f, p)) && (rc = issue(f, p, r, tx, arg)) != 0 && tx)
            vmmc_fab__window_give(f, p);
        if (rc == 0) {
            atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
            vmmc_fab__posted(f);
            /* Software providers move data when their queues are read:
             * once now, or it waits for our progress thread's next wake. */
            (void)vmmc_fab__tx_progress(f);
            return VMMC_OK;
        }
        if (rc != -FI_EAGAIN)
            return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric: %s of %zu bytes at rank %d: %s",
                              what, len, px->rank, fi_strerror((int)-rc));
        if (spin == 0)
            atomic_fetch_add_explicit(&f->c_tx_again, 1, memory_order_relaxed);
        if (nonblock)
            return vmmc_error(VMMC_ERR_AGAIN, "fabric: no room to write to rank %d now",
                              px->rank);
        if (spin == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t0);
        } else if ((spin & 255) == 0) {
            struct timespec t1;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            uint64_t ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000ull +
                          (uint64_t)(t1.tv_nsec - t0.tv_nsec);
            if (ns >= vmmc_fab_cfg_send_timeout)
                return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric: rank %d took no RMA "
                                  "operation for VMMC_FABRIC_SEND_TIMEOUT", px->rank);
        }
        if (vmmc_fab__tx_progress(f) == 0) {
            if (spin < 64) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            }
        }
        int st = vmmc_fab__peer_error(f, px->rank);
        if (st != VMMC_OK)
            return st;
        if (atomic_load(&f->stop))
            return vmmc_error(VMMC_ERR_PEER_DEAD, "fabric: closing");
    }
}

/* Post one write or read (@tx NULL: fi_inject_write), retrying while the
 * provider has no room. */
static int post(fab_ep_t *f, vmmc_tl_proxy_t *px, fab_peer_t *p, int read, fab_tx_t *tx,
                void *buf, size_t len, void *desc, uint64_t raddr, int nonblock,
                const uint64_t *cqd)
{
    fab_rw_t o = {read, buf, len, desc, raddr, cqd};
    return vmmc_fab__post_op(f, px, p, tx, nonblock, issue_rw, &o,
                             read ? &f->c_rma_reads : &f->c_rma_writes,
                             read ? "fi_read" : "fi_write", len);
}

/* A write carrying a notification as remote CQ data @cqd (fab_int.h):
 * posted under the peer's message numbering lock, so that the number it
 * carries is that of the next message, and the target handles it after
 * every message sent before it. Unless FAB_CQD_WINDOW of our messages may
 * still be unhandled there (the sequence field could wrap), or the target
 * retired the slot (F_NSRETIRE): then a plain write, *@carried 0, and the
 * caller sends the NOTE message. */
static int post_cqd(fab_ep_t *f, vmmc_tl_proxy_t *px, fab_peer_t *p, fab_tx_t *tx, void *buf,
                    size_t len, void *desc, uint64_t raddr, int nonblock, uint64_t cqd,
                    int *carried)
{
    pthread_mutex_lock(&p->seqlock);
    unsigned slot = FAB_CQD_SLOT(cqd);
    *carried = p->tx_seq - atomic_load_explicit(&p->acked_seq, memory_order_relaxed) <
                   FAB_CQD_WINDOW &&
               !(p->ns_retired[slot / 64] & (1ull << (slot % 64)));
    int st = post(f, px, p, 0, tx, buf, len, desc, raddr, nonblock, *carried ? &cqd : NULL);
    pthread_mutex_unlock(&p->seqlock);
    if (st != VMMC_OK)
        *carried = 0;
    return st;
}

/* Writes of ours that went as messages are applied before an RMA
 * operation reaches the same peer. */
int vmmc_fab__after_messages(vmmc_tl_proxy_t *px)
{
    fab_peer_t *p = fab_peer_of(F(px->ep), px->rank);
    if (VMMC_LIKELY(!p || !atomic_load_explicit(&p->msg_writes, memory_order_acquire)))
        return VMMC_OK;
    atomic_store_explicit(&p->msg_writes, 0, memory_order_release);
    return vmmc_fab__flush_peer(px->ep, VMMC_TL_PEER(px->peer));
}

/* Wait for @tx's completion: its status; once it completed, @n bytes at
 * @from (in its buffer: a fetched value) are copied to @to before it is
 * freed. Given up (the peer died, the endpoint closes): the completion
 * frees it when it comes. */
int vmmc_fab__wait_tx(fab_ep_t *f, fab_tx_t *tx, int h, const void *from, void *to, size_t n)
{
    /* Drive the provider ourselves (VMMC_FABRIC_SPIN), then sleep until a
     * waited operation completes (our progress thread reads the same queue
     * and wakes on it; vmmc_fab__tx_done wakes us), looking at the peer's
     * state every millisecond. */
    uint64_t t0 = vmmc_now_ns();
    for (;;) {
        uint32_t seq = atomic_load(&f->tx_seq);
        int st = atomic_load_explicit(&tx->wstat, memory_order_acquire);
        if (st != VMMC_INPROGRESS)
            break;
        if (vmmc_fab__tx_progress(f) == 0) {
            if (vmmc_now_ns() - t0 < vmmc_fab_cfg_spin) {
                sched_yield();
            } else {
                atomic_fetch_add(&f->tx_sleepers, 1);
                if (atomic_load_explicit(&tx->wstat, memory_order_acquire) == VMMC_INPROGRESS) {
                    struct timespec ts = {0, 1000000};
                    syscall(SYS_futex, (uint32_t *)&f->tx_seq, FUTEX_WAIT_PRIVATE, seq, &ts,
                            NULL, 0);
                }
                atomic_fetch_sub(&f->tx_sleepers, 1);
            }
        }
        st = vmmc_fab__peer_error(f, h);
        if (st == VMMC_OK && atomic_load(&f->stop))
            st = vmmc_error(VMMC_ERR_PEER_DEAD, "fabric: closing");
        int exp = VMMC_INPROGRESS;
        if (st != VMMC_OK && atomic_compare_exchange_strong(&tx->wstat, &exp, FAB_ABANDONED))
            return st;
    }
    int st = atomic_load(&tx->wstat);
    if (st == VMMC_OK && n)
        memcpy(to, from, n);
    vmmc_fab__tx_free(f, tx);
    if (st == VMMC_OK || st == VMMC_ERR_PERMISSION)
        return st;
    /* The connection failed: the progress thread fails the peer (not us: our
     * caller may hold the core's locks); give the core's error once it did. */
    for (int i = 0; i < 1000; i++) {
        int pe = vmmc_fab__peer_error(f, h);
        if (pe != VMMC_OK)
            return pe;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return vmmc_error(VMMC_ERR_PEER_DEAD, "fabric: an RMA operation to rank %d failed and the "
                      "provider ended the connection (a withdrawn region, or the peer is gone)",
                      h);
}

fab_tx_t *vmmc_fab__tx_new(fab_ep_t *f, int h, size_t copy, int waited)
{
    fab_tx_t *tx = malloc(sizeof *tx + copy);
    if (!tx) {
        vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory for an RMA operation");
        return NULL;
    }
    (void)f;
    memset(tx, 0, sizeof *tx);
    tx->peer = h;
    tx->rma = 1;
    tx->waited = waited;
    atomic_init(&tx->wstat, VMMC_INPROGRESS);
    tx->len = copy;
    return tx;
}

/* Register @buf through the cache where the provider needs it: its desc. */
int vmmc_fab__local_reg(fab_ep_t *f, fab_tx_t *tx, const void *buf, size_t len,
                        uint64_t access, void **desc)
{
    *desc = NULL;
    if (!f->cache)
        return VMMC_OK;
    if (!(tx->reg = fab_cache_get(f->cache, buf, len, access)))
        return VMMC_ERR_SYSTEM; /* the cache or fi_mr_reg said why */
    *desc = tx->reg->desc;
    return VMMC_OK;
}

/* @cqd: the last piece carries it as remote CQ data (NULL: none), if it
 * can (*@carried: post_cqd). */
static int rma_write(vmmc_tl_proxy_t *px, size_t off, const char *src, size_t len, int nonblock,
                     const uint64_t *cqd, int *carried)
{
    fab_ep_t *f = F(px->ep);
    const fab_rpx_t *r = px->tl_priv;
    int st = VMMC_OK;
    fab_peer_t *p = vmmc_fab__peer_live(f, px->rank, &st);
    if (!p)
        return st;
    size_t pos = 0;
    do {
        size_t n = len - pos < f->max_msg ? len - pos : f->max_msg;
        uint64_t raddr = r->base + off + pos;
        int nb = pos == 0 && nonblock; /* only the first piece may give up */
        /* Never fi_inject_write (below f->inject): on tcp;ofi_rxm an injected
         * write waited ~30 us in the provider (vmmc bench fabric, 64 B put
         * 33.7 us against 6.8 us for a write with a completion); the copy
         * below costs less. */
        if (n <= FAB_COPY_MAX) {
            /* a copy of our own: the caller's buffer is free on return */
            fab_tx_t *tx = vmmc_fab__tx_new(f, px->rank, n, 0);
            void *desc = NULL;
            if (!tx)
                return VMMC_ERR_NOMEM;
            memcpy(tx->buf, src + pos, n);
            if ((st = vmmc_fab__local_reg(f, tx, tx->buf, n, FI_WRITE, &desc)) == VMMC_OK)
                st = cqd && pos + n == len
                         ? post_cqd(f, px, p, tx, tx->buf, n, desc, raddr, nb, *cqd, carried)
                         : post(f, px, p, 0, tx, tx->buf, n, desc, raddr, nb, NULL);
            if (st != VMMC_OK)
                vmmc_fab__tx_free(f, tx);
        } else {
            /* large: from the caller's buffer, waited for */
            fab_tx_t *tx = vmmc_fab__tx_new(f, px->rank, 0, 1);
            void *desc = NULL;
            if (!tx)
                return VMMC_ERR_NOMEM;
            if ((st = vmmc_fab__local_reg(f, tx, src + pos, n, FI_WRITE, &desc)) == VMMC_OK)
                st = cqd && pos + n == len
                         ? post_cqd(f, px, p, tx, (void *)(src + pos), n, desc, raddr, nb, *cqd,
                                    carried)
                         : post(f, px, p, 0, tx, (void *)(src + pos), n, desc, raddr, nb, NULL);
            if (st != VMMC_OK)
                vmmc_fab__tx_free(f, tx);
            else if ((st = vmmc_fab__wait_tx(f, tx, px->rank, NULL, NULL, 0)) == VMMC_ERR_PERMISSION)
                st = vmmc_error(VMMC_ERR_PERMISSION, "fabric: rank %d's provider refused a "
                                "write of %zu bytes to '%s' (the export ended?)", px->rank, n,
                                px->name);
        }
        pos += n;
    } while (st == VMMC_OK && pos < len);
    return st;
}

/* The notification of an RMA write [off, off + len) just posted. */
static int note(vmmc_tl_proxy_t *px, size_t off, size_t len, uint64_t imm)
{
    fab_hdr_t h = {.kind = F_NOTE, .export_id = px->export_id, .gen = px->gen,
                   .token = {px->token[0], px->token[1]}, .off = off, .len = len, .imm = imm};
    int st = vmmc_fab__send(F(px->ep), px->rank, &h, NULL, 0, 0);
    if (st == VMMC_OK)
        VMMC_COUNT(px->ep, CNT_NOTIFY_SENT, 1);
    return st;
}

static int rma_put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int flags,
                   uint64_t imm);

/* Every RMA operation is bracketed like the core's copy path: a revocation
 * marks the proxy stale and waits until none is under way before it
 * acknowledges (its acknowledgement, a message, follows our writes). */
int vmmc_fab__rma_put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int flags,
                      uint64_t imm)
{
    /* (the flush waits for our progress thread, which a revocation holds
     * while operations are under way: before entering) */
    int st = vmmc_fab__after_messages(px);
    if (st != VMMC_OK || (st = vmmc_tl_px_enter(px)) != VMMC_OK)
        return st;
    st = rma_put(px, off, src, len, flags, imm);
    vmmc_tl_px_leave(px);
    return st;
}

static int rma_put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int flags,
                   uint64_t imm)
{
    if (((flags & VMMC_SEND_HEAD_LAST) && len <= FAB_CHUNK) || !len)
        return vmmc_fab__put(px, off, src, len, flags, imm); /* one message */
    if (flags & VMMC_SEND_HEAD_LAST) {
        /* the rest, then the head (and the notification) as one message */
        int st = rma_write(px, off + 16, (const char *)src + 16, len - 16,
                           flags & VMMC_SEND_NONBLOCK, NULL, NULL);
        if (st != VMMC_OK)
            return st;
        return vmmc_fab__put(px, off, src, 16, flags & ~VMMC_SEND_NONBLOCK, imm);
    }
    const fab_rpx_t *r = px->tl_priv;
    if ((flags & VMMC_SEND_NOTIFY) && fab_cqd_fits(r->nslot, off, len, imm)) {
        /* one operation: the write carries its notification */
        uint64_t cqd = fab_cqd_make(r->nslot, off, len, imm);
        int carried = 0;
        int st = rma_write(px, off, src, len, flags & VMMC_SEND_NONBLOCK, &cqd, &carried);
        if (st == VMMC_OK && carried)
            VMMC_COUNT(px->ep, CNT_NOTIFY_SENT, 1);
        else if (st == VMMC_OK)
            st = note(px, off, len, imm);
        return st;
    }
    int st = rma_write(px, off, src, len, flags & VMMC_SEND_NONBLOCK, NULL, NULL);
    if (st == VMMC_OK && (flags & VMMC_SEND_NOTIFY))
        st = note(px, off, len, imm);
    return st;
}

static int rma_putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt,
                    int flags, uint64_t imm);

int vmmc_fab__rma_putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt,
                       int flags, uint64_t imm)
{
    /* (the flush waits for our progress thread, which a revocation holds
     * while operations are under way: before entering) */
    int st = vmmc_fab__after_messages(px);
    if (st != VMMC_OK || (st = vmmc_tl_px_enter(px)) != VMMC_OK)
        return st;
    st = rma_putv(px, off, iov, iovcnt, flags, imm);
    vmmc_tl_px_leave(px);
    return st;
}

static int rma_putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt,
                    int flags, uint64_t imm)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (!total)
        return vmmc_fab__putv_msg(px, off, iov, iovcnt, flags, imm);
    /* a notification that fits: the last piece's write carries it */
    const fab_rpx_t *r = px->tl_priv;
    int fast = (flags & VMMC_SEND_NOTIFY) && fab_cqd_fits(r->nslot, off, total, imm);
    uint64_t cqd = fast ? fab_cqd_make(r->nslot, off, total, imm) : 0;
    int last = iovcnt - 1;
    while (last > 0 && !iov[last].iov_len)
        last--;
    size_t pos = 0;
    int st = VMMC_OK, carried = 0;
    for (int i = 0; i < iovcnt && st == VMMC_OK; i++) {
        if (iov[i].iov_len)
            st = rma_write(px, off + pos, iov[i].iov_base, iov[i].iov_len,
                           pos == 0 ? flags & VMMC_SEND_NONBLOCK : 0,
                           fast && i == last ? &cqd : NULL, &carried);
        pos += iov[i].iov_len;
    }
    if (st == VMMC_OK && carried)
        VMMC_COUNT(px->ep, CNT_NOTIFY_SENT, 1);
    else if (st == VMMC_OK && (flags & VMMC_SEND_NOTIFY))
        st = note(px, off, total, imm);
    return st;
}

static int rma_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len);

int vmmc_fab__rma_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len)
{
    /* (the flush waits for our progress thread, which a revocation holds
     * while operations are under way: before entering) */
    int st = vmmc_fab__after_messages(px);
    if (st != VMMC_OK || (st = vmmc_tl_px_enter(px)) != VMMC_OK)
        return st;
    st = rma_get(px, off, dst, len);
    vmmc_tl_px_leave(px);
    return st;
}

static int rma_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len)
{
    fab_ep_t *f = F(px->ep);
    const fab_rpx_t *r = px->tl_priv;
    int st = VMMC_OK;
    fab_peer_t *p = vmmc_fab__peer_live(f, px->rank, &st);
    if (!p)
        return st;
    for (size_t pos = 0; st == VMMC_OK && pos < len;) {
        size_t n = len - pos < f->max_msg ? len - pos : f->max_msg;
        fab_tx_t *tx = vmmc_fab__tx_new(f, px->rank, 0, 1);
        void *desc = NULL;
        if (!tx)
            return VMMC_ERR_NOMEM;
        if ((st = vmmc_fab__local_reg(f, tx, (char *)dst + pos, n, FI_READ, &desc)) == VMMC_OK)
            st = post(f, px, p, 1, tx, (char *)dst + pos, n, desc, r->base + off + pos, 0, NULL);
        if (st != VMMC_OK) {
            vmmc_fab__tx_free(f, tx);
            break;
        }
        if ((st = vmmc_fab__wait_tx(f, tx, px->rank, NULL, NULL, 0)) == VMMC_ERR_PERMISSION)
            st = vmmc_error(VMMC_ERR_PERMISSION, "fetch of %zu bytes at offset %zu from rank "
                            "%d refused by its provider (the export '%s' ended?)", len, off,
                            px->rank, px->name);
        pos += n;
    }
    return st;
}
