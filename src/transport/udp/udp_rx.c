/* The udp transport's receive side: what the link delivers (writes applied
 * through the core, control messages, read and atomic requests served,
 * their replies), the notification queue the core drains, and the socket
 * handed back to the link's thread before the endpoint sleeps. The message
 * kinds are described in udp.c. */
#include "transport/udp/udp_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- receive side (link progress thread) -------------------------------- */

/* A notifying write was applied: queue its notification for the core
 * (udp_drain hands it over, in order) and wake the endpoint. */
static void notify_queue(udp_ep_t *u, int sender, uint32_t export_id, uint32_t gen, uint64_t off,
                         uint64_t len, uint64_t imm)
{
    vmmc_nrec_t rec = {export_id, gen, sender, 0, off, len, imm};
    pthread_mutex_lock(&u->nlock);
    if (u->nq_n == u->nq_cap) {
        size_t cap = u->nq_cap ? u->nq_cap * 2 : 64;
        vmmc_nrec_t *n = realloc(u->nq, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&u->nlock);
            VMMC_COUNT(u->ep, CNT_NOTIFY_DROPPED, 1);
            vmmc_log(VMMC_LOG_ERROR, "udp: out of memory queueing a notification: dropped");
            return;
        }
        u->nq = n;
        u->nq_cap = cap;
    }
    u->nq[u->nq_n++] = rec;
    atomic_fetch_add_explicit(&u->nq_count, 1, memory_order_release);
    pthread_mutex_unlock(&u->nlock);
    vmmc_tl_wake(u->ep);
}

/* The core takes the queued notifications (vmmc_progress, or a sender that
 * waits for room). */
int vmmc_udp__drain(vmmc_ep_t *ep, void (*push)(vmmc_ep_t *ep, const vmmc_nrec_t *rec))
{
    udp_ep_t *u = U(ep);
    if (!atomic_load_explicit(&u->nq_count, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&u->nlock);
    size_t n = u->nq_n;
    for (size_t i = 0; i < n; i++)
        push(ep, &u->nq[i]);
    u->nq_n = 0;
    atomic_store_explicit(&u->nq_count, 0, memory_order_release);
    pthread_mutex_unlock(&u->nlock);
    if (n)
        vmmc_udp_link_retry(u->link); /* writes held back for room go in now */
    return (int)n;
}

/* A thread of this endpoint starts (@begin: no lock of the link held) or
 * ends (a count down, maybe under a link lock) waiting for a peer in the
 * link or for a read's reply. Two endpoints that send each other
 * notifying writes without running their notifications would otherwise
 * wait for each other for ever: each one's queue is full, so each link
 * holds back the other's writes, so neither sender gets room. As a shm
 * sender that waits for room does, the waiter moves this endpoint's
 * notifications into the core's queue (run at its next progress, never
 * inside this send), and while it waits the receiving thread does the same
 * whenever the queue fills (vmmc_udp__deliver). */
void vmmc_udp__waiting(void *arg, int begin)
{
    udp_ep_t *u = arg;
    if (!begin) {
        atomic_fetch_sub_explicit(&u->waiting, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&u->waiting, 1, memory_order_seq_cst);
    vmmc_tl_drain(u->ep);
}

/* The endpoint is about to sleep, so nobody polls the socket until it
 * wakes: hand it back to the progress thread now (it delivers, and the
 * delivery wakes the sleeper). */
int vmmc_udp__arm(vmmc_ep_t *ep)
{
    udp_ep_t *u = U(ep);
    if (u && __atomic_load_n(&u->link, __ATOMIC_ACQUIRE))
        vmmc_udp_link_idle(u->link);
    return 0;
}

static void get_finish(udp_ep_t *u, get_req_t *g, int status)
{
    /* a release store: a reader spinning for its answer (udp_rpc) reads
     * the status without the lock, and the data before it */
    __atomic_store_n(&g->status, status, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&u->cond);
}

void vmmc_udp__gets_fail(udp_ep_t *u, int rank, int status)
{
    pthread_mutex_lock(&u->lock);
    for (get_req_t *g = u->gets; g; g = g->next)
        if (g->rank == rank && g->status == VMMC_INPROGRESS)
            get_finish(u, g, status);
    pthread_mutex_unlock(&u->lock);
}

static get_req_t *get_find(udp_ep_t *u, int rank, uint64_t id)
{
    for (get_req_t *g = u->gets; g; g = g->next)
        if (g->id == id && g->rank == rank)
            return g;
    return NULL;
}

static void serve_get(udp_ep_t *u, uint32_t peer, const void *data, size_t len)
{
    get_wire_t w;
    if (len != sizeof w)
        return;
    memcpy(&w, data, sizeof w);
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.imm = w.id;
    uint8_t *buf = w.len ? malloc(w.len < GET_CHUNK ? w.len : GET_CHUNK) : NULL;
    int st = w.len && !buf ? VMMC_ERR_NOMEM : VMMC_OK;
    for (uint64_t pos = 0; st == VMMC_OK && pos < w.len;) {
        size_t n = w.len - pos < GET_CHUNK ? (size_t)(w.len - pos) : GET_CHUNK;
        st = vmmc_tl_deliver_read(u->ep, w.export_id, w.gen, w.token, w.off + pos, buf, n);
        if (st != VMMC_OK)
            break;
        rec.kind = K_GET_REP;
        rec.offset = pos;
        if (vmmc_udp_link_send(u->link, peer, &rec, buf, n) != VMMC_OK) {
            free(buf);
            return; /* the requester is gone */
        }
        pos += n;
    }
    free(buf);
    if (st != VMMC_OK) {
        int32_t s32 = st;
        rec.kind = K_GET_ERR;
        rec.offset = 0;
        (void)vmmc_udp_link_send(u->link, peer, &rec, &s32, sizeof s32);
    }
}

static void serve_atomic(udp_ep_t *u, uint32_t peer, const void *data, size_t len)
{
    atomic_wire_t w;
    if (len != sizeof w)
        return;
    memcpy(&w, data, sizeof w);
    vmmc_udp_rec_t rec;
    memset(&rec, 0, sizeof rec);
    rec.imm = w.id;
    uint64_t old = 0;
    int32_t st = vmmc_tl_deliver_atomic(u->ep, (int)peer, w.export_id, w.gen, w.token, w.off, w.op,
                                     w.size, w.fetch, w.operand, w.compare, &old);
    rec.kind = st == VMMC_OK ? K_GET_REP : K_GET_ERR;
    if (st == VMMC_OK)
        (void)vmmc_udp_link_send(u->link, peer, &rec, &old, sizeof old);
    else
        (void)vmmc_udp_link_send(u->link, peer, &rec, &st, sizeof st);
    /* A changed word wakes a sleeping endpoint, as a write does (a fence
     * and a load when nobody sleeps), after the answer has gone: the
     * requester's vmmc_signal right behind it then needs no datagram
     * (udp_atomic, udp_signal). */
    if (st == VMMC_OK && w.op != VMMC_ATOMIC_READ)
        vmmc_tl_wake(u->ep);
}


int vmmc_udp__deliver(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec, const void *data,
                       size_t len)
{
    udp_ep_t *u = arg;
    vmmc_ep_t *ep = u->ep;
    udp_peer_t *up = udp_peer_of(u, peer);
    if (!up)
        return 0; /* cannot happen: registered before its datagrams are taken */
    udp_rx_t *r = &up->rx;
    switch (rec->kind) {
    case K_WRITE: {
        /* Bounded notification queue: while VMMC_NOTIFY_QUEUE notifications
         * wait for the application, a notifying write waits in the link
         * (which then holds back this sender, as a full ring does on shm). */
        if ((rec->flags & VMMC_UDP_F_NOTIFY) && (rec->flags & VMMC_UDP_F_LAST) &&
            VMMC_UNLIKELY(atomic_load_explicit(&u->nq_count, memory_order_acquire) >=
                          VMMC_TL_EP(ep)->notify_queue)) {
            /* Unless one of our threads waits for a peer: then the queue
             * moves to the core's (see vmmc_udp__waiting). */
            if (!atomic_load_explicit(&u->waiting, memory_order_seq_cst))
                return 1;
            vmmc_tl_drain(ep);
            if (atomic_load_explicit(&u->nq_count, memory_order_acquire) >=
                VMMC_TL_EP(ep)->notify_queue)
                return 1; /* the core is running them: offered again soon */
        }
        if (rec->flags & VMMC_UDP_F_FIRST) {
            r->msg_off = rec->offset;
            r->msg_ok = 1;
        }
        uint64_t tok[2];
        memcpy(tok, rec->token, sizeof tok);
        int head_last = (rec->flags & VMMC_UDP_F_HEADLAST) && (rec->flags & VMMC_UDP_F_FIRST) &&
                        (rec->flags & VMMC_UDP_F_LAST);
        int st = rec->region ? vmmc_tl_deliver_write(ep, rec->region - 1, rec->gen, tok, rec->offset,
                                                  data, len, head_last)
                             : VMMC_ERR_PROTOCOL;
        if (st == VMMC_ERR_AGAIN)
            return 1; /* no room now: the link offers it again later */
        if (st != VMMC_OK) {
            r->msg_ok = 0;
            int why = st == VMMC_ERR_STALE ? 0 : st == VMMC_ERR_PERMISSION ? 1
                    : st == VMMC_ERR_BOUNDS ? 2 : 3;
            atomic_fetch_add_explicit(&u->refused[why], 1, memory_order_relaxed);
            vmmc_debug("udp: write from rank %u to export %u refused: %s", peer,
                       rec->region - 1, vmmc_strerror(st));
        }
        /* A complete write wakes a sleeping endpoint (a fence and a load
         * when nobody sleeps): the sender's vmmc_signal right behind it
         * then needs no datagram of its own (udp_signal). Queueing its
         * notification wakes it already. */
        if ((rec->flags & VMMC_UDP_F_LAST) && (rec->flags & VMMC_UDP_F_NOTIFY) && r->msg_ok)
            notify_queue(u, (int)peer, rec->region - 1, rec->gen, r->msg_off,
                         rec->offset + len - r->msg_off, rec->imm);
        else if (rec->flags & VMMC_UDP_F_LAST)
            vmmc_tl_wake(ep);
        return 0;
    }
    case K_CTL:
        if (rec->flags & VMMC_UDP_F_FIRST)
            r->ctl_len = 0;
        if (rec->offset != r->ctl_len || len > sizeof r->ctl.b - r->ctl_len) {
            if (r->ctl_len <= sizeof r->ctl.b)
                atomic_fetch_add_explicit(&u->ctl_bad, 1, memory_order_relaxed);
            r->ctl_len = sizeof r->ctl.b + 1; /* malformed: drop the whole message */
            return 0;
        }
        memcpy(r->ctl.b + r->ctl_len, data, len);
        r->ctl_len += len;
        if (rec->flags & VMMC_UDP_F_LAST) {
            /* Make sure the core knows the peer first: the core answers an
             * import while holding ep->lock and looks the peer up then, which
             * must not need ep->lock to create it. */
            int st;
            (void)vmmc_tl_peer_get(ep, (int)peer, &st);
            vmmc_tl_ctl_recv(ep, (int)peer, &r->ctl.m, r->ctl_len, NULL, 0);
        }
        return 0;
    case K_GET_REQ:
        serve_get(u, peer, data, len);
        vmmc_udp_link_linger(u->link);
        return 0;
    case K_ATOMIC_REQ:
        serve_atomic(u, peer, data, len);
        vmmc_udp_link_linger(u->link);
        return 0;
    case K_GET_REP:
    case K_GET_ERR: {
        pthread_mutex_lock(&u->lock);
        get_req_t *g = get_find(u, (int)peer, rec->imm);
        if (g && g->status == VMMC_INPROGRESS) {
            if (rec->kind == K_GET_ERR) {
                int32_t s32 = VMMC_ERR_PROTOCOL;
                if (len == sizeof s32)
                    memcpy(&s32, data, sizeof s32);
                get_finish(u, g, s32 < 0 ? s32 : VMMC_ERR_PROTOCOL);
            } else if (rec->offset > g->len || len > g->len - rec->offset) {
                get_finish(u, g, VMMC_ERR_PROTOCOL);
            } else {
                memcpy(g->dst + rec->offset, data, len);
                g->got += len;
                if (g->got >= g->len)
                    get_finish(u, g, VMMC_OK);
            }
        }
        pthread_mutex_unlock(&u->lock);
        return 0;
    }
    case K_SIGNAL:
        vmmc_tl_wake(ep);
        return 0;
    case K_HELLO: /* the link took it (on_unknown) or the peer knew us already */
        return 0;
    default:
        return 0;
    }
}
