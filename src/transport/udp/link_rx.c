/* UDP link: the receive side. It receives and checks datagrams, hands
 * their acknowledgements to link_ack.c, delivers data in order and sends
 * acknowledgements (at once or delayed). Only the receive owner runs it:
 * the progress thread (link_progress.c) or an application poll. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* recvmmsg */
#endif
#include "transport/udp/link_impl.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "vmmc/vmmc.h"

static int addr_eq(const struct sockaddr_storage *a, socklen_t alen, const void *bv, socklen_t blen)
{
    const struct sockaddr *b = bv;
    if (a->ss_family != b->sa_family)
        return 0;
    if (b->sa_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = bv;
        return blen >= sizeof *y && x->sin_port == y->sin_port &&
               x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (b->sa_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = bv;
        return blen >= sizeof *y && x->sin6_port == y->sin6_port &&
               !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr);
    }
    return alen == blen && !memcmp(a, b, alen);
}

/* ---- receive ------------------------------------------------------------ */

/* @p has acknowledgements (or a delivery report) to publish. Receive owner. */
static inline void ack_later(vmmc_udp_link_t *l, peer_t *p)
{
    p->ack_pending = 1;
    l->acks_pending = 1;
}

static void to_rec(const vmmc_udp_hdr_t *h, vmmc_udp_rec_t *r)
{
    r->kind = h->kind;
    r->flags = h->flags;
    r->region = h->region;
    r->gen = h->gen;
    memcpy(r->token, h->token, VMMC_UDP_TOKEN_SIZE);
    r->offset = h->offset;
    r->imm = h->imm;
}

/* The receiver refused a message (busy): pause the peer's delivery for
 * VMMC_UDP_BUSY_RETRY, doubling while it stays busy. */
static int refused(vmmc_udp_link_t *l, peer_t *p)
{
    CNT_RX(l, deliver_busy, 1);
    atomic_store_explicit(&l->held, 1, memory_order_release);
    if (!p->busy_until)
        ack_later(l, p); /* tell the sender */
    unsigned k = p->busy_streak < 6 ? p->busy_streak++ : 6;
    p->busy_until = vmmc_udp_now() + (vmmc_udp_settings()->busy_retry_ns << k);
    return -1;
}

static void took(vmmc_udp_link_t *l, peer_t *p)
{
    if (p->busy_until)
        ack_later(l, p); /* tell the sender we take data again */
    p->busy_until = 0;
    p->busy_streak = 0;
}

/* Hand the records of a multi-record datagram up in order, from payload
 * offset *@cur on; a refused one (busy) stays at *@cur for the next offer.
 * decode checked every record already. */
static int deliver_multi(vmmc_udp_link_t *l, uint32_t id, peer_t *p, const vmmc_udp_hdr_t *h,
                         const uint8_t *payload, uint32_t *cur)
{
    size_t pos = *cur;
    while (pos < h->length) {
        size_t at = pos;
        vmmc_udp_wrec_t w;
        if (VMMC_UNLIKELY(vmmc_udp_rec_decode(payload, h->length, &pos, &w) != 0))
            break; /* cannot happen (decode refuses such a datagram) */
        vmmc_udp_rec_t r;
        r.kind = w.kind;
        r.flags = (uint8_t)(w.flags | VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST);
        r.region = w.region;
        r.gen = w.gen;
        memcpy(r.token, w.token, VMMC_UDP_TOKEN_SIZE);
        r.offset = w.offset;
        r.imm = w.imm;
        if (VMMC_UNLIKELY(l->p.deliver(l->p.arg, id, &r, payload + pos - w.length, w.length) != 0)) {
            *cur = (uint32_t)at;
            return refused(l, p);
        }
        *cur = (uint32_t)pos;
        CNT_RX(l, rx_records, 1);
        CNT_RX(l, delivered_frags, 1);
        CNT_RX(l, delivered_bytes, w.length);
    }
    *cur = 0;
    took(l, p);
    return 0;
}

/* Hand one fragment (or the records of a multi-record datagram, from
 * *@cur on) up. Returns 0, or nonzero if the receiver is busy (then the
 * peer's delivery pauses for VMMC_UDP_BUSY_RETRY). */
static int deliver(vmmc_udp_link_t *l, uint32_t id, peer_t *p, const vmmc_udp_hdr_t *h,
                   const uint8_t *payload, uint32_t *cur)
{
    if (h->flags & VMMC_UDP_F_MULTI)
        return deliver_multi(l, id, p, h, payload, cur);
    vmmc_udp_rec_t r;
    to_rec(h, &r);
    if (VMMC_UNLIKELY(l->p.deliver(l->p.arg, id, &r, payload, h->length) != 0))
        return refused(l, p);
    took(l, p);
    CNT_RX(l, delivered_frags, 1);
    CNT_RX(l, delivered_bytes, h->length);
    return 0;
}

/* The capability check (params.accept) of every region a DATA datagram
 * writes to: 0 accept. */
static int accept_all(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_hdr_t *h,
                      const uint8_t *payload)
{
    if (!(h->flags & VMMC_UDP_F_MULTI))
        return h->region ? l->p.accept(l->p.arg, id, h->region, h->gen, h->token) : 0;
    size_t pos = 0;
    vmmc_udp_wrec_t w;
    while (pos < h->length && vmmc_udp_rec_decode(payload, h->length, &pos, &w) == 0)
        if (w.region && l->p.accept(l->p.arg, id, w.region, w.gen, w.token) != 0)
            return -1;
    return 0;
}

static int busy(peer_t *p)
{
    if (VMMC_LIKELY(!p->busy_until))
        return 0;
    if (vmmc_udp_now() >= p->busy_until) {
        p->busy_until = 0;
        return 0;
    }
    return 1;
}

/* Advance rcv_nxt over datagrams already held in the ring. */
static void advance(vmmc_udp_link_t *l, peer_t *p)
{
    while ((int32_t)(p->rcv_nxt - p->dlv_nxt) < (int32_t)l->window &&
           p->rx[p->rcv_nxt % l->ring].present &&
           p->rx[p->rcv_nxt % l->ring].hdr.seq == p->rcv_nxt)
        p->rcv_nxt++;
}

/* Deliver everything received in order and not yet delivered. Not nested. */
static void drain(vmmc_udp_link_t *l, uint32_t id, peer_t *p)
{
    while (p->dlv_nxt != p->rcv_nxt && !atomic_load(&l->stop) && !busy(p)) {
        rxslot_t *s = &p->rx[p->dlv_nxt % l->ring];
        p->dlv_nxt++; /* before the callback: a nested pass sees it as delivered */
        if (deliver(l, id, p, &s->hdr, s->buf + s->hdr.hlen, &s->cur) != 0) {
            p->dlv_nxt--; /* keep it: offered again later */
            break;
        }
        s->present = 0;
        ack_later(l, p); /* report the delivery */
        advance(l, p);
    }
    /* What the receiver refused (busy) or a stop left here must be offered
     * again by a later pass, or the sender sees a busy receiver for ever. */
    if (p->dlv_nxt != p->rcv_nxt)
        l->rx_backlog = 1;
}

uint64_t vmmc_udp__sack_bits(vmmc_udp_link_t *l, peer_t *p)
{
    /* Nothing stored above rcv_nxt (the common, in-order case): no sacks,
     * and no walk over the ring for every acknowledgement. */
    if ((int32_t)(p->rx_hi - p->rcv_nxt) <= 0)
        return 0;
    uint64_t bits = 0;
    for (uint32_t i = 0; i < SACK_BITS; i++) {
        uint32_t s = p->rcv_nxt + 1 + i;
        if ((int32_t)(s - p->dlv_nxt) >= (int32_t)l->window)
            break;
        const rxslot_t *r = &p->rx[s % l->ring];
        if (r->present && r->hdr.seq == s)
            bits |= 1ull << i;
    }
    return bits;
}

static void count_verdict(vmmc_udp_link_t *l, vmmc_udp_verdict_t v)
{
    switch (v) {
    case VMMC_UDP_BAD_TRUNCATED: CNT_RX(l, drop_truncated, 1); break;
    case VMMC_UDP_BAD_MAGIC: CNT_RX(l, drop_magic, 1); break;
    case VMMC_UDP_BAD_VERSION: CNT_RX(l, drop_version, 1); break;
    case VMMC_UDP_BAD_HEADER: CNT_RX(l, drop_header, 1); break;
    case VMMC_UDP_BAD_AUTH: CNT_RX(l, drop_auth, 1); break;
    case VMMC_UDP_BAD_RECORDS: CNT_RX(l, drop_records, 1); break;
    case VMMC_UDP_OK: break;
    }
}

/* Handle one received datagram. @nested: the progress thread is inside a
 * callback, so data is stored, never delivered.
 *
 * Every check comes before the first change of state: a datagram refused
 * for any reason (malformed, unknown source, wrong tag, dead peer, replayed
 * control counter, outside the window, duplicate, impossible ack, refused
 * capability) moves no sequence number, stores and delivers nothing, and
 * does not count as a sign of life; it is only counted. */
static void rx_one(vmmc_udp_link_t *l, const uint8_t *buf, size_t n, const void *from,
                   socklen_t fromlen, int nested, uint64_t now)
{
    CNT_RX(l, rx_dgrams, 1);
    CNT_RX(l, rx_bytes, n);
    vmmc_udp_hdr_t h;
    vmmc_udp_verdict_t v = vmmc_udp_decode(buf, n, &h);
    if (VMMC_UNLIKELY(v != VMMC_UDP_OK)) {
        count_verdict(l, v);
        return;
    }
    uint32_t id;
    if (VMMC_UNLIKELY(!vmmc_udp__rid_find(l, h.src, &id)) &&
        (!l->p.unknown || l->p.unknown(l->p.arg, &h, buf, from, fromlen, &id) != 0)) {
        CNT_RX(l, drop_unknown_peer, 1);
        return;
    }
    peer_t *p = vmmc_udp__peer(l, id);
    if (VMMC_UNLIKELY(!p)) {
        CNT_RX(l, drop_unknown_peer, 1);
        return;
    }
    int state = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
    if (VMMC_UNLIKELY(state == PEER_NONE || !addr_eq(&p->addr, p->alen, from, fromlen))) {
        CNT_RX(l, drop_unknown_peer, 1);
        return;
    }
    /* Made with the key of the link from that peer to us (which also says
     * it is for us), and not corrupted. */
    if (VMMC_UNLIKELY(vmmc_udp_auth(buf, &h, &p->rxk) != VMMC_UDP_OK)) {
        CNT_RX(l, drop_auth, 1);
        return;
    }
    if (VMMC_UNLIKELY(state != PEER_ALIVE)) {
        CNT_RX(l, drop_dead_peer, 1);
        return;
    }
    if (VMMC_UNLIKELY(h.type == VMMC_UDP_T_REFUSE)) {
        /* The peer will not take our handshake. Only as its first word: once
         * anything of it was accepted, it took us (a refusal then is old). */
        if (p->ctl_rx || p->rcv_nxt != 1) {
            CNT_RX(l, drop_replay, 1);
            return;
        }
        CNT_RX(l, refused_by_peer, 1);
        vmmc_udp__peer_down(l, id, PEER_DEAD, DOWN_REFUSED);
        return;
    }
    int32_t d = 0;
    if (h.type != VMMC_UDP_T_DATA) {
        /* Unsequenced: a fresh control counter, or a replay (or one
         * overtaken by a later one, whose news it would only undo). */
        if (VMMC_UNLIKELY(h.offset <= p->ctl_rx)) {
            CNT_RX(l, drop_replay, 1);
            return;
        }
    } else {
        d = (int32_t)(h.seq - p->rcv_nxt);
        if (d < 0 || (p->rx[h.seq % l->ring].present && p->rx[h.seq % l->ring].hdr.seq == h.seq)) {
            /* Already received: our ack was lost, the datagram was
             * duplicated, or it is replayed. Acknowledge again (the sender
             * may be waiting for that), change nothing else. */
            if (d >= -(int32_t)(4 * l->window)) {
                CNT_RX(l, drop_duplicate, 1);
                ack_later(l, p);
            } else {
                CNT_RX(l, drop_window, 1);
            }
            return;
        }
        if ((int32_t)(h.seq - p->dlv_nxt) >= (int32_t)l->window) {
            CNT_RX(l, drop_window, 1);
            return;
        }
        if (l->p.accept && VMMC_UNLIKELY(accept_all(l, id, &h, buf + h.hlen) != 0)) {
            CNT_RX(l, drop_bad_token, 1);
            return;
        }
    }
    pthread_mutex_lock(&p->lock);
    int bad = vmmc_udp__on_ack(l, p, &h, now);
    pthread_mutex_unlock(&p->lock);
    if (VMMC_UNLIKELY(bad)) {
        CNT_RX(l, drop_bad_ack, 1);
        return;
    }
    /* Accepted: from here on it counts. */
    if (h.type != VMMC_UDP_T_DATA)
        p->ctl_rx = h.offset;
    atomic_store_explicit(&p->last_rx_ns, now, memory_order_relaxed);

    if (h.type == VMMC_UDP_T_BYE) {
        vmmc_udp__peer_down(l, id, PEER_GONE, DOWN_BYE);
        return;
    }
    if (h.type == VMMC_UDP_T_KEEPALIVE) {
        /* Answered at once with an ACK: the peer may be asking for a
         * delivery report that was lost (loss_timers). */
        ack_later(l, p);
        l->ack_now = 1;
        return;
    }
    if (h.type != VMMC_UDP_T_DATA)
        return;

    ack_later(l, p);
    rxslot_t *s = &p->rx[h.seq % l->ring];
    if (d == 0 && !nested && p->dlv_nxt == p->rcv_nxt && !busy(p)) {
        p->rcv_nxt++;
        p->dlv_nxt++;
        uint32_t cur = 0;
        if (VMMC_LIKELY(deliver(l, id, p, &h, buf + h.hlen, &cur) == 0)) {
            advance(l, p);
            if (p->rcv_nxt != p->dlv_nxt)
                vmmc_udp__send_acks(l, 1, now); /* a hole filled: see below */
            drain(l, id, p);
            return;
        }
        /* The receiver is busy: keep the datagram in the ring. */
        p->dlv_nxt--;
        if (vmmc_udp__slot_buf(l, &s->buf, &s->cap, n) != 0) {
            p->rcv_nxt--; /* as if lost: the sender retransmits it */
            return;
        }
        memcpy(s->buf, buf, n);
        s->hdr = h;
        s->cur = cur; /* records before it were taken */
        s->present = 1;
        l->rx_backlog = 1;
        return;
    }
    if (vmmc_udp__slot_buf(l, &s->buf, &s->cap, n) != 0) {
        CNT_RX(l, drop_window, 1); /* no memory: behave as if lost */
        return;
    }
    memcpy(s->buf, buf, n);
    s->hdr = h;
    s->cur = 0;
    s->present = 1;
    l->rx_backlog = 1;
    if ((int32_t)(h.seq - p->rx_hi) > 0)
        p->rx_hi = h.seq;
    if (d == 0) {
        advance(l, p);
        /* A hole filled: acknowledge before delivering what waited behind
         * it (up to a window of copies, a millisecond here), or the sender
         * would take the filled hole for lost again. */
        vmmc_udp__send_acks(l, 1, now);
    }
    if (!nested)
        drain(l, id, p);
}

/* Send the ACK owed to @p now. Caller holds p->lock. */
static void ack_now(vmmc_udp_link_t *l, uint32_t i, peer_t *p)
{
    vmmc_udp__ack_paid(l, p);
    p->ack_sent = p->ack_pub;
    if (p->state == PEER_ALIVE)
        vmmc_udp__send_ctl(l, i, p, VMMC_UDP_T_ACK);
}

/* Publish acks for every peer we received from. Data going back carries the
 * published acks in its header, so a standalone ACK is delayed (delayed ACK,
 * as in TCP): it goes out at once only when @force, after a quarter window of
 * datagrams, or when the receiver's busy state changed; otherwise the
 * timers send it UDP_ACK_DELAY later. Delivery reports (for senders waiting
 * for remote completion) travel in the ACK too. */
void vmmc_udp__send_acks(vmmc_udp_link_t *l, int force, uint64_t now)
{
    if (!l->acks_pending)
        return;
    l->acks_pending = 0;
    force |= l->ack_now;
    l->ack_now = 0;
    FOR_PEERS(l, i, p) {
        if (!p->ack_pending)
            continue;
        p->ack_pending = 0;
        uint64_t sack = vmmc_udp__sack_bits(l, p);
        pthread_mutex_lock(&p->lock);
        int busy = p->busy_until != 0;
        int busy_changed = busy != p->busy_pub;
        p->ack_pub = p->rcv_nxt - 1;
        p->dlv_pub = p->dlv_nxt - 1;
        p->sack_pub = sack;
        p->busy_pub = busy;
        if (!p->ack_owed_ns) {
            p->ack_owed_ns = now;
            atomic_fetch_add_explicit(&l->acks_owed, 1, memory_order_relaxed);
        }
        /* A quarter window unacknowledged: the sender may be about to stall.
         * A hole (datagrams held above one missing): the sender's fast
         * retransmit needs the selective acks now, not a delay later. */
        if (force || busy_changed || !vmmc_udp_cfg_ack_delay || sack ||
            (uint32_t)(p->ack_pub - p->ack_sent) * 4 >= l->window ||
            now - p->ack_owed_ns >= vmmc_udp_cfg_ack_delay)
            ack_now(l, i, p);
        pthread_mutex_unlock(&p->lock);
    }
}

/* Send the delayed ACKs whose time has come; returns the next such time. */
uint64_t vmmc_udp__owed_acks(vmmc_udp_link_t *l, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    if (!atomic_load_explicit(&l->acks_owed, memory_order_relaxed))
        return next;
    FOR_PEERS(l, i, p) {
        if (!__atomic_load_n(&p->ack_owed_ns, __ATOMIC_RELAXED))
            continue;
        pthread_mutex_lock(&p->lock);
        if (p->ack_owed_ns) {
            if (now - p->ack_owed_ns >= vmmc_udp_cfg_ack_delay)
                ack_now(l, i, p);
            else if (p->ack_owed_ns + vmmc_udp_cfg_ack_delay < next)
                next = p->ack_owed_ns + vmmc_udp_cfg_ack_delay;
        }
        pthread_mutex_unlock(&p->lock);
    }
    return next;
}

/* Receive until the socket is empty (bounded per call). Returns datagrams.
 * @one (an application poll that found nothing last time): ask for a single
 * datagram first and end the pass once one came, so that it goes back to
 * the application at once (ping-pong); while polls keep finding data they
 * receive in batches. */
int vmmc_udp__rx_pass(vmmc_udp_link_t *l, int nested, int one)
{
    unsigned base = nested ? RX_BATCH : 0, nb = nested ? l->rx_nested : l->rx_outer;
    int total = 0;
    if (VMMC_UNLIKELY(!nb) &&
        !(nb = vmmc_udp__rx_bufs(l, nested, nested ? RX_BATCH_NESTED : RX_FIRST)))
        return 0; /* no memory now: the datagrams wait in the socket */
    if (one)
        nb = 1;
    if (VMMC_UNLIKELY(atomic_load_explicit(&l->retry, memory_order_relaxed)) &&
        atomic_exchange(&l->retry, 0)) {
        /* The receiver made room: what it refused is offered below. */
        FOR_PEERS(l, i, p) {
            if (atomic_load_explicit(&p->busy_until, memory_order_relaxed))
                atomic_store_explicit(&p->busy_until, 1, memory_order_relaxed);
            p->busy_streak = 0;
        }
    }
    for (int round = 0; round < 64 && !atomic_load_explicit(&l->stop, memory_order_relaxed);
         round++) {
        /* Only the in/out fields change between calls (the bindings may
         * also permute entries within the vector, which keeps each one's
         * buffer and address pointers valid). */
        for (unsigned i = base; i < base + nb; i++) {
            l->rxmsg[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
            l->rxmsg[i].msg_hdr.msg_flags = 0;
        }
        int r = l->b.recvmmsg(l->b.ctx, l->fd, l->rxmsg + base, nb);
        if (r <= 0)
            break;
        uint64_t now = vmmc_udp_now();
        for (int k = 0; k < r; k++) {
            struct mmsghdr *m = &l->rxmsg[base + (unsigned)k];
            size_t len = m->msg_len;
            if (m->msg_hdr.msg_flags & MSG_TRUNC)
                len = 0; /* larger than any datagram we send: counted as truncated */
            rx_one(l, m->msg_hdr.msg_iov[0].iov_base, len, m->msg_hdr.msg_name,
                   m->msg_hdr.msg_namelen, nested, now);
        }
        total += r;
        vmmc_udp__send_acks(l, nested, now);
        if (one || (unsigned)r < nb)
            break;
        if (VMMC_UNLIKELY(nb < RX_BATCH) && !nested && total >= RX_GROW)
            nb = vmmc_udp__rx_bufs(l, 0, RX_BATCH); /* a burst: receive in batches */
    }
    if (!nested && l->rx_backlog) {
        /* Data stored by a nested pass (or refused by a busy receiver) may
         * now be deliverable. */
        int held = 0;
        FOR_PEERS(l, i, p) {
            if (p->rx && p->dlv_nxt != p->rcv_nxt && p->state == PEER_ALIVE) {
                drain(l, i, p);
                held |= p->dlv_nxt != p->rcv_nxt;
            }
        }
        l->rx_backlog = held;
        vmmc_udp__send_acks(l, 0, vmmc_udp_now());
    }
    return total;
}
