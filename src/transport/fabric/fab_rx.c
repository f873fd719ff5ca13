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
 * orders this message after them; or the remote CQ data of the last of
 * them). The core checks the export, its generation and token and the
 * range's end as for a write of nothing; 1: not now (the notification
 * queue is full), 0 queued, -1 refused. */
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
        return -1;
    }
    notify_queue(f, peer, h, h->off, h->len);
    return 0;
}

/* Remote CQ data is due once every message its sender numbered before it
 * was handled: its sequence field is the number of the sender's next
 * message then. Serial-number arithmetic over FAB_CQD_SEQ_MASK: ahead by
 * less than half the range waits, anything else is due (never held for
 * ever: a gap of half the range or more would be handled early). */
int vmmc_fab__rx_cqd_due(const fab_peer_t *p, uint64_t data)
{
    uint32_t ahead = (FAB_CQD_SEQ(data) - p->rx_seq) & FAB_CQD_SEQ_MASK;
    return ahead == 0 || ahead > FAB_CQD_SEQ_MASK / 2;
}

void vmmc_fab__rx_handled(fab_ep_t *f, int peer, fab_peer_t *p)
{
    p->rx_seq++;
    if (VMMC_LIKELY(!f->cq_data || p->rx_seq % FAB_SEQACK_EVERY))
        return;
    /* best effort: a sender that hears nothing keeps to NOTE messages */
    fab_hdr_t a = {.kind = F_SEQACK, .id = p->rx_seq};
    (void)vmmc_fab__send(f, peer, &a, NULL, 0, 1);
}

int vmmc_fab__rx_cqd(fab_ep_t *f, int peer, uint64_t data)
{
    fab_hdr_t h;
    if (vmmc_fab__nslot_note(f, data, peer, &h) != 0) {
        /* its slot ended since it was read (the export ended) */
        atomic_fetch_add_explicit(&f->c_bad_cqd, 1, memory_order_relaxed);
        return 0;
    }
    int r = on_note(f, peer, &h);
    if (r == 1)
        return 1;
    atomic_fetch_add_explicit(&f->c_rx, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(r == 0 ? &f->c_notes_cqd : &f->c_bad_cqd, 1,
                              memory_order_relaxed);
    return 0;
}

/* Remote CQ data (a completion with no receive buffer): held, in its
 * sender's order, for rx_handle. Its sender is its slot's importer (the
 * provider names none: fab_nslot.c); no such slot, a wrong check, or no
 * room: dropped and counted. */
void vmmc_fab__rx_cqd_hold(fab_ep_t *f, const struct fi_cq_data_entry *e)
{
    int h = (e->flags & FI_REMOTE_CQ_DATA) ? vmmc_fab__nslot_owner(f, e->data) : -1;
    if (h < 0 || !fab_peer_of(f, h) || f->nheld >= f->held_cap) {
        atomic_fetch_add_explicit(&f->c_bad_cqd, 1, memory_order_relaxed);
        vmmc_debug("fabric: remote CQ data %016llx dropped (%s)", (unsigned long long)e->data,
                   h < 0 ? "no such slot" : f->nheld >= f->held_cap ? "no room" : "no peer");
        return;
    }
    f->held[f->nheld] = *e;
    f->held_peer[f->nheld++] = h;
}

/* The oldest remote CQ data goes now, due or not (its order with the
 * messages its sender numbered before it is lost; nothing waits for ever). */
static void cqd_force(fab_ep_t *f)
{
    for (int i = 0; i < f->nheld; i++) {
        if (f->held[i].op_context)
            continue;
        if (vmmc_fab__rx_cqd(f, f->held_peer[i], f->held[i].data))
            return; /* the notification queue is full: room comes when it drains */
        f->nheld--;
        memmove(f->held + i, f->held + i + 1, (size_t)(f->nheld - i) * sizeof *f->held);
        memmove(f->held_peer + i, f->held_peer + i + 1,
                (size_t)(f->nheld - i) * sizeof *f->held_peer);
        return;
    }
}

/* Room in held[] for what the next read of the queue brings. Remote CQ
 * data uses no receive buffer, so it may wait there in any number for the
 * messages its senders numbered before it, which come behind it in the
 * queue: while the notification queue has room, held[] grows (up to
 * FAB_HELD_MAX) so that those messages can be read; while it is full,
 * reading stops at held[]'s size (the provider keeps the rest). At
 * FAB_HELD_MAX (a peer that sends CQ data numbered after messages it never
 * sends) the oldest goes early. */
int vmmc_fab__rx_room(fab_ep_t *f)
{
    int room = f->held_cap - f->nheld;
    if (room >= 16 || f->busy || !f->cq_data)
        return room;
    if (f->held_cap < FAB_HELD_MAX) {
        int cap = f->held_cap * 2 < FAB_HELD_MAX ? f->held_cap * 2 : FAB_HELD_MAX;
        struct fi_cq_data_entry *h = realloc(f->held, (size_t)cap * sizeof *h);
        if (h)
            f->held = h;
        int *hp = h ? realloc(f->held_peer, (size_t)cap * sizeof *hp) : NULL;
        if (hp) {
            f->held_peer = hp;
            f->held_cap = cap;
        }
    } else {
        cqd_force(f);
    }
    return f->held_cap - f->nheld;
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
        if (on_note(f, peer, &h) == 1)
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
    case F_SEQACK: {
        /* forward only (never below what was acknowledged, never beyond
         * what we sent: a confused or hostile peer gets NOTE messages) */
        uint32_t a = (uint32_t)h.id, old = atomic_load(&p->acked_seq);
        uint32_t sent = __atomic_load_n(&p->tx_seq, __ATOMIC_RELAXED);
        if ((int32_t)(a - old) > 0 && (int32_t)(sent - a) >= 0)
            atomic_store(&p->acked_seq, a);
        return 0;
    }
    case F_NSRETIRE: {
        /* the peer retired its notification slot for us (a forger guessed at
         * its check): no CQ data of ours on it from now on, and we say so
         * behind the last one (fab_nslot.c) */
        uint32_t slot = (uint32_t)h.id;
        if (slot >= FAB_CQD_SLOTS)
            return 0;
        pthread_mutex_lock(&p->seqlock);
        p->ns_retired[slot / 64] |= 1ull << (slot % 64);
        pthread_mutex_unlock(&p->seqlock);
        fab_hdr_t a = {.kind = F_NSRETIRED, .id = slot};
        (void)vmmc_fab__send(f, peer, &a, NULL, 0, 1);
        return 0;
    }
    case F_NSRETIRED:
        vmmc_fab__nslot_retired(f, peer, (uint32_t)h.id);
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
