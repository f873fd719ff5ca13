/* The fabric transport's receive side (its progress thread): writes applied
 * through the core (which checks the export, generation, capability token,
 * bounds and rights, and honours redirection), control messages handed to
 * the core, reads and flushes answered, answers matched to the requests
 * that wait for them, and the notification queue the core drains.
 *
 * Who sent a message is what the provider says (FI_SOURCE: the address
 * vector entry of the connection it came on), never what the message says;
 * messages from addresses that are not our peers are dropped and counted. */
#include "transport/fabric/fab_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void notify_queue(fab_ep_t *f, int sender, const fab_hdr_t *h, uint64_t off, uint64_t len)
{
    vmmc_nrec_t rec = {h->export_id, h->gen, sender, 0, off, len, h->imm};
    pthread_mutex_lock(&f->nlock);
    if (f->nq_n == f->nq_cap) {
        size_t cap = f->nq_cap ? f->nq_cap * 2 : 64;
        vmmc_nrec_t *n = realloc(f->nq, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&f->nlock);
            VMMC_COUNT(f->ep, CNT_NOTIFY_DROPPED, 1);
            vmmc_log(VMMC_LOG_ERROR, "fabric: out of memory queueing a notification: dropped");
            return;
        }
        f->nq = n;
        f->nq_cap = cap;
    }
    f->nq[f->nq_n++] = rec;
    atomic_fetch_add_explicit(&f->nq_count, 1, memory_order_release);
    pthread_mutex_unlock(&f->nlock);
    vmmc_tl_wake(f->ep);
}

int vmmc_fab__drain(vmmc_ep_t *ep, void (*push)(vmmc_ep_t *ep, const vmmc_nrec_t *rec))
{
    fab_ep_t *f = F(ep);
    if (!f || !atomic_load_explicit(&f->nq_count, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&f->nlock);
    size_t n = f->nq_n;
    for (size_t i = 0; i < n; i++)
        push(ep, &f->nq[i]);
    f->nq_n = 0;
    atomic_store_explicit(&f->nq_count, 0, memory_order_release);
    pthread_mutex_unlock(&f->nlock);
    if (n && f->busy) { /* messages held for room go in now */
        uint64_t one = 1;
        ssize_t w = write(f->wakefd, &one, sizeof one);
        (void)w;
    }
    return (int)n;
}

static void answer_err(fab_ep_t *f, int peer, uint64_t id, int st)
{
    fab_hdr_t r = {.kind = F_GET_ERR, .id = id, .imm = (uint64_t)(int64_t)st};
    (void)vmmc_fab__send(f, peer, &r, NULL, 0, 0);
}

static void serve_get(fab_ep_t *f, int peer, const fab_hdr_t *h)
{
    uint8_t *buf = h->len ? malloc(h->len < FAB_CHUNK ? h->len : FAB_CHUNK) : NULL;
    int st = h->len && !buf ? VMMC_ERR_NOMEM : VMMC_OK;
    fab_hdr_t r = {.kind = F_GET_REP, .id = h->id};
    for (uint64_t pos = 0; st == VMMC_OK && pos < h->len;) {
        size_t n = h->len - pos < FAB_CHUNK ? (size_t)(h->len - pos) : FAB_CHUNK;
        if (h->off + pos < h->off) {
            st = VMMC_ERR_BOUNDS;
            break;
        }
        st = vmmc_tl_deliver_read(f->ep, h->export_id, h->gen, h->token, h->off + pos, buf, n);
        if (st != VMMC_OK)
            break;
        r.off = pos;
        if (vmmc_fab__send(f, peer, &r, buf, n, 0) != VMMC_OK) {
            free(buf);
            return; /* the requester is gone */
        }
        pos += n;
    }
    free(buf);
    if (st != VMMC_OK)
        answer_err(f, peer, h->id, st);
    else if (h->len == 0) {
        r.off = 0;
        (void)vmmc_fab__send(f, peer, &r, NULL, 0, 0);
    }
}

static void answered(fab_ep_t *f, int peer, const fab_hdr_t *h, const uint8_t *data, size_t len)
{
    pthread_mutex_lock(&f->lock);
    fab_wait_t *w = f->waits;
    while (w && !(w->id == h->id && w->peer == peer))
        w = w->next;
    if (w && w->status == VMMC_INPROGRESS) {
        int st = VMMC_INPROGRESS;
        if (h->kind == F_GET_ERR) {
            int64_t s = (int64_t)h->imm;
            st = s < 0 && s > -1000 ? (int)s : VMMC_ERR_PROTOCOL;
        } else if (h->kind == F_FLUSH_ACK) {
            st = VMMC_OK;
        } else if (h->off > w->len || len > w->len - h->off) {
            st = VMMC_ERR_PROTOCOL;
        } else {
            if (len)
                memcpy(w->dst + h->off, data, len);
            w->got += len;
            if (w->got >= w->len)
                st = VMMC_OK;
        }
        if (st != VMMC_INPROGRESS) {
            __atomic_store_n(&w->status, st, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&f->cond);
        }
    }
    pthread_mutex_unlock(&f->lock);
}

/* 1: not now (the notification queue is full): offer it again later. */
static int on_write(fab_ep_t *f, int peer, fab_peer_t *p, const fab_hdr_t *h, const uint8_t *data,
                    size_t len)
{
    vmmc_ep_t *ep = f->ep;
    if ((h->flags & F_NOTIFY) && (h->flags & F_LAST) &&
        VMMC_UNLIKELY(atomic_load_explicit(&f->nq_count, memory_order_acquire) >=
                      VMMC_TL_EP(ep)->notify_queue)) {
        if (!atomic_load_explicit(&f->waiting, memory_order_seq_cst))
            return 1;
        vmmc_tl_drain(ep);
        if (atomic_load_explicit(&f->nq_count, memory_order_acquire) >=
            VMMC_TL_EP(ep)->notify_queue)
            return 1;
    }
    if (h->flags & F_FIRST) {
        p->msg_off = h->off;
        p->msg_ok = 1;
    }
    int head_last = (h->flags & F_HEADLAST) && (h->flags & F_FIRST) && (h->flags & F_LAST);
    int st = vmmc_tl_deliver_write(ep, h->export_id, h->gen, h->token, h->off, data, len,
                                   head_last);
    if (st == VMMC_ERR_AGAIN)
        return 1;
    if (st != VMMC_OK) {
        p->msg_ok = 0;
        atomic_fetch_add_explicit(&f->c_refused, 1, memory_order_relaxed);
        vmmc_debug("fabric: write from rank %d to export %u refused: %s", peer, h->export_id,
                   vmmc_strerror(st));
    }
    if ((h->flags & F_LAST) && (h->flags & F_NOTIFY) && p->msg_ok)
        notify_queue(f, peer, h, p->msg_off, h->off + len - p->msg_off);
    else if (h->flags & F_LAST)
        vmmc_tl_wake(ep);
    return 0;
}

/* The notification of RMA writes that landed before it (the provider
 * orders this message after them). The core checks the export, its
 * generation and token and the range's start as for a write of nothing;
 * 1: not now (the notification queue is full). */
static int on_note(fab_ep_t *f, int peer, const fab_hdr_t *h)
{
    vmmc_ep_t *ep = f->ep;
    if (VMMC_UNLIKELY(atomic_load_explicit(&f->nq_count, memory_order_acquire) >=
                      VMMC_TL_EP(ep)->notify_queue)) {
        if (!atomic_load_explicit(&f->waiting, memory_order_seq_cst))
            return 1;
        vmmc_tl_drain(ep);
        if (atomic_load_explicit(&f->nq_count, memory_order_acquire) >=
            VMMC_TL_EP(ep)->notify_queue)
            return 1;
    }
    static const uint8_t nothing[1];
    int st = h->off + h->len < h->off ? VMMC_ERR_BOUNDS
                                      : vmmc_tl_deliver_write(ep, h->export_id, h->gen, h->token,
                                                              h->off + h->len, nothing, 0, 0);
    if (st == VMMC_ERR_AGAIN)
        return 1;
    if (st != VMMC_OK) {
        atomic_fetch_add_explicit(&f->c_refused, 1, memory_order_relaxed);
        vmmc_debug("fabric: notification from rank %d for export %u refused: %s", peer,
                   h->export_id, vmmc_strerror(st));
        vmmc_tl_wake(ep);
        return 0;
    }
    notify_queue(f, peer, h, h->off, h->len);
    return 0;
}

int vmmc_fab__rx(fab_ep_t *f, int peer, fab_peer_t *p, const void *buf, size_t len)
{
    fab_hdr_t h;
    if (len < sizeof h) {
        atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
        return 0;
    }
    memcpy(&h, buf, sizeof h);
    const uint8_t *data = (const uint8_t *)buf + sizeof h;
    size_t dlen = len - sizeof h;
    if (h.kind != F_WRITE && h.kind != F_NOTE)
        atomic_fetch_add_explicit(&f->c_rx, 1, memory_order_relaxed);
    switch (h.kind) {
    case F_NOTE:
        if (on_note(f, peer, &h))
            return 1;
        atomic_fetch_add_explicit(&f->c_rx, 1, memory_order_relaxed);
        return 0;
    case F_WRITE:
        if (on_write(f, peer, p, &h, data, dlen))
            return 1;
        atomic_fetch_add_explicit(&f->c_rx, 1, memory_order_relaxed);
        return 0;
    case F_CTL: {
        vmmc_ctl_msg_t m;
        if (dlen != sizeof m) {
            atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
            return 0;
        }
        memcpy(&m, data, sizeof m);
        /* The core answers an import while holding its endpoint lock and
         * looks the peer up then: make sure it exists first. */
        int st;
        (void)vmmc_tl_peer_get(f->ep, peer, &st);
        vmmc_tl_ctl_recv(f->ep, peer, &m, sizeof m, NULL, 0);
        return 0;
    }
    case F_GET_REQ:
        serve_get(f, peer, &h);
        return 0;
    case F_FLUSH: {
        fab_hdr_t r = {.kind = F_FLUSH_ACK, .id = h.id};
        (void)vmmc_fab__send(f, peer, &r, NULL, 0, 0);
        return 0;
    }
    case F_GET_REP:
    case F_GET_ERR:
    case F_FLUSH_ACK:
        answered(f, peer, &h, data, dlen);
        return 0;
    case F_SIGNAL:
        vmmc_tl_wake(f->ep);
        return 0;
    case F_PING:
    case F_HELLO: /* its sender was taken as it came (fab_accept.c) */
        return 0;
    case F_BYE:
        /* after everything it sent before (in order): it has left */
        vmmc_tl_peer_failed(f->ep, peer, -1, "left (fabric goodbye)");
        vmmc_fab__waits_fail(f, peer, VMMC_ERR_PEER_DEAD);
        return 0;
    default:
        atomic_fetch_add_explicit(&f->c_bad, 1, memory_order_relaxed);
        return 0;
    }
}
