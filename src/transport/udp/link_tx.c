#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg */
#endif
/* UDP link: the send side. Senders queue into a peer's window (waiting for
 * room, bounded), stamp acks and hand batches to the socket; flush and sync
 * wait until what was sent is acknowledged or delivered. */
#include "transport/udp/link_impl.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/udp/crc32c.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

static peer_t *peer_get(vmmc_udp_link_t *l, uint32_t id)
{
    return vmmc_udp__peer(l, id);
}

static void abs_deadline(struct timespec *ts, uint64_t ns_from_now)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    uint64_t ns = (uint64_t)ts->tv_nsec + ns_from_now;
    ts->tv_sec += (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Stamp the current acks into the slots' headers and hand them to the socket.
 * Caller holds p->lock. */
int vmmc_udp__xmit(vmmc_udp_link_t *l, peer_t *p, txslot_t **slots, unsigned n, uint64_t now)
{
    struct mmsghdr msg[TX_BATCH];
    struct iovec iov[TX_BATCH];
    memset(msg, 0, sizeof(msg[0]) * n);
    for (unsigned i = 0; i < n; i++) {
        txslot_t *t = slots[i];
        t->hdr.ack = p->ack_pub;
        t->hdr.sack = p->sack_pub;
        t->hdr.wnd = p->busy_pub ? 0 : (uint16_t)l->window;
        t->hdr.flags = (uint8_t)((t->hdr.flags & ~VMMC_UDP_F_DLV) |
                                 (p->dlv_pub == p->ack_pub ? VMMC_UDP_F_DLV : 0));
        /* The header ends where the payload starts: its length varies
         * with the fields present (sack, imm). */
        uint8_t *start = t->buf + VMMC_UDP_HDR_SIZE - vmmc_udp_hdr_len(&t->hdr);
        unsigned hl = vmmc_udp_encode(start, &t->hdr, t->pcrc, &p->txk);
        t->sent_ns = now;
        iov[i].iov_base = start;
        iov[i].iov_len = hl + t->plen;
        msg[i].msg_hdr.msg_iov = &iov[i];
        msg[i].msg_hdr.msg_iovlen = 1;
        msg[i].msg_hdr.msg_name = &p->addr;
        msg[i].msg_hdr.msg_namelen = p->alen;
    }
    unsigned done = 0;
    int tries = 0;
    while (done < n) {
        int r = l->b.sendmmsg(l->b.ctx, l->fd, msg + done, n - done);
        if (r > 0) {
            for (unsigned i = done; i < done + (unsigned)r; i++) {
                CNT_TX(p, tx_dgrams, 1);
                CNT_TX(p, tx_bytes, iov[i].iov_len);
            }
            done += (unsigned)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && tries++ < 100) {
            /* Socket buffer full: wait briefly for room. A datagram that
             * still cannot go is simply retransmitted later. */
            struct pollfd pf = {.fd = l->fd, .events = POLLOUT};
            (void)poll(&pf, 1, 1);
            continue;
        }
        /* Anything else (unreachable, ...) is treated as loss: the
         * retransmission timer and the peer timeout take over. */
        CNT_TX(p, send_errors, n - done);
        break;
    }
    p->last_tx_ns = now;
    /* Data going back carried everything a delayed ACK would (acks, window,
     * and with F_DLV the delivery report): that ACK is no longer owed. */
    if (done && p->ack_owed_ns && p->dlv_pub == p->ack_pub) {
        vmmc_udp__ack_paid(l, p);
        p->ack_sent = p->ack_pub;
    }
    return VMMC_OK;
}

/* Send an unsequenced control datagram (ACK, KEEPALIVE, BYE). Caller holds
 * p->lock. */
void vmmc_udp__send_ctl(vmmc_udp_link_t *l, uint32_t id, peer_t *p, uint8_t type)
{
    uint8_t buf[VMMC_UDP_HDR_SIZE];
    vmmc_udp_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = type;
    h.wnd = p->busy_pub ? 0 : (uint16_t)l->window;
    h.src = l->p.self;
    /* Each control datagram has a fresh counter: a replayed one is refused. */
    h.offset = ++p->ctl_tx;
    h.seq = p->snd_nxt;
    h.ack = p->ack_pub;
    h.sack = p->sack_pub;
    h.imm = p->dlv_pub;
    struct iovec iov = {buf, vmmc_udp_encode(buf, &h, 0, &p->txk)};
    struct mmsghdr m;
    memset(&m, 0, sizeof m);
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
    m.msg_hdr.msg_name = &p->addr;
    m.msg_hdr.msg_namelen = p->alen;
    int r;
    do
        r = l->b.sendmmsg(l->b.ctx, l->fd, &m, 1);
    while (r < 0 && errno == EINTR);
    if (r == 1) {
        CNT_TX(p, tx_dgrams, 1);
        CNT_TX(p, tx_bytes, iov.iov_len);
        if (type == VMMC_UDP_T_ACK)
            CNT_TX(p, acks_sent, 1);
        else if (type == VMMC_UDP_T_KEEPALIVE)
            CNT_TX(p, keepalives_sent, 1);
    } else {
        CNT_TX(p, send_errors, 1);
    }
    p->last_tx_ns = vmmc_udp_now();
}

static int peer_status(vmmc_udp_link_t *l, peer_t *p, uint32_t id)
{
    if (atomic_load(&l->closing))
        return vmmc_error(VMMC_ERR_ENDPOINT, "udp link: closing");
    if (p->state == PEER_DEAD)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "udp link: peer %u is dead (%s)", id,
                          p->down_why == DOWN_KILLED    ? "reported dead"
                          : p->down_why == DOWN_REFUSED ? "refused: not listening"
                                                        : "no answer within the peer timeout");
    if (p->state == PEER_GONE)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "udp link: peer %u has left", id);
    return VMMC_OK;
}

/* Tell the layer above that this thread starts (@begin: with p->lock
 * dropped meanwhile, since it may take the layer's own locks; the window
 * and the state may change meanwhile, so look again after) or ends waiting
 * for @p (under p->lock: whatever the caller checked stays true). Caller
 * holds p->lock. */
static void waiting_hook(vmmc_udp_link_t *l, peer_t *p, int begin)
{
    if (!l->p.waiting)
        return;
    if (!begin) {
        l->p.waiting(l->p.arg, 0);
        return;
    }
    pthread_mutex_unlock(&p->lock);
    l->p.waiting(l->p.arg, 1);
    pthread_mutex_lock(&p->lock);
}

/* Wait for window space (or death). Caller holds p->lock. */
static int wait_window(vmmc_udp_link_t *l, peer_t *p, uint32_t id)
{
    int in_progress_thread = vmmc_udp__rx_owner(l), hooked = 0;
    while (p->state == PEER_ALIVE && !atomic_load(&l->closing)) {
        uint32_t wnd = p->peer_wnd < l->window ? p->peer_wnd : l->window;
        if (p->snd_nxt - p->snd_una < wnd)
            break;
        CNT_TX(p, window_waits, 1);
        if (in_progress_thread) {
            pthread_mutex_unlock(&p->lock);
            vmmc_udp__progress_nested(l, 1000000);
            pthread_mutex_lock(&p->lock);
        } else if (!hooked) {
            /* The peer may be waiting for us as we wait for it (each
             * receiver holding back the other's data): the layer above
             * makes room before this thread sleeps, then look again. */
            hooked = 1;
            waiting_hook(l, p, 1);
        } else {
            /* This thread stops polling while it waits: the acks come
             * through the progress thread. */
            vmmc_udp_link_idle(l);
            struct timespec ts;
            abs_deadline(&ts, 100000000); /* re-check at least every 100 ms */
            pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        }
    }
    if (hooked)
        waiting_hook(l, p, 0);
    if (p->state == PEER_ALIVE && !atomic_load(&l->closing))
        return VMMC_OK; /* room: the loop saw it, and p->lock was held since */
    return peer_status(l, p, id);
}

int vmmc_udp_link_send(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                       const void *data, size_t len)
{
    return vmmc_udp_link_send_ex(l, id, rec, data, len, 0);
}

/* One message from the pieces @iov (@len bytes in all), fragmented into
 * datagrams; each datagram's payload is gathered from the pieces while its
 * CRC is computed, so pieces cost no staging copy. */
static inline int link_sendv(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                             const struct iovec *iov, size_t len, int nonblock)
{
    peer_t *p = peer_get(l, id);
    if (VMMC_UNLIKELY(!p))
        return vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: no peer %u", id);
    pthread_mutex_lock(&p->lock);
    if (VMMC_UNLIKELY(p->state != PEER_ALIVE)) {
        int st = p->state == PEER_NONE
                     ? vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: peer %u not registered", id)
                     : peer_status(l, p, id);
        pthread_mutex_unlock(&p->lock);
        return st;
    }
    /* Small messages posted before this one leave first. */
    if (p->bat_n)
        vmmc_udp__batch_close(l, p, vmmc_udp_now());
    if (nonblock) {
        uint32_t wnd = p->peer_wnd < l->window ? p->peer_wnd : l->window;
        size_t frags = len ? (len + l->payload - 1) / l->payload : 1;
        if (p->peer_busy || (size_t)(p->snd_nxt - p->snd_una) + frags > wnd) {
            pthread_mutex_unlock(&p->lock);
            return VMMC_ERR_AGAIN; /* transient, no message: the caller retries */
        }
    }
    size_t left = len, poff = 0; /* position: piece iov, byte poff in it */
    uint64_t off = rec->offset;
    int first = 1, st = VMMC_OK;
    txslot_t *batch[TX_BATCH];
    unsigned nb = 0;
    /* One clock reading per batch: the send times only feed RTT samples
     * and timers, for which the time a batch was started is close enough. */
    uint64_t now = vmmc_udp_now();
    do {
        if (p->snd_nxt - p->snd_una >= (p->peer_wnd < l->window ? p->peer_wnd : l->window)) {
            if (nb) {
                vmmc_udp__xmit(l, p, batch, nb, now);
                nb = 0;
            }
            if ((st = wait_window(l, p, id)) != VMMC_OK)
                break;
            now = vmmc_udp_now();
        }
        size_t n = left < l->payload ? left : l->payload;
        txslot_t *t = &p->tx[p->snd_nxt % l->window];
        if (vmmc_udp__slot_buf(l, &t->buf, &t->cap, VMMC_UDP_HDR_SIZE + n) != 0) {
            st = vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory for the send window");
            break;
        }
        vmmc_udp_hdr_t *h = &t->hdr;
        h->type = VMMC_UDP_T_DATA;
        h->flags = (uint8_t)((rec->flags & VMMC_UDP_F_NOTIFY) | (first ? VMMC_UDP_F_FIRST : 0) |
                             (n == left ? VMMC_UDP_F_LAST : 0) |
                             (first && n == left ? rec->flags & VMMC_UDP_F_HEADLAST : 0));
        h->kind = rec->kind;
        h->src = l->p.self;
        if (rec->region)
            memcpy(h->token, rec->token, VMMC_UDP_TOKEN_SIZE);
        else
            memset(h->token, 0, VMMC_UDP_TOKEN_SIZE);
        h->region = rec->region;
        h->gen = rec->gen;
        h->length = (uint32_t)n;
        h->offset = off;
        h->seq = p->snd_nxt;
        h->imm = rec->imm;
        uint32_t crc = 0;
        for (size_t k = 0; k < n;) {
            size_t m = iov->iov_len - poff < n - k ? iov->iov_len - poff : n - k;
            crc = vmmc_crc32c_copy(crc, t->buf + VMMC_UDP_HDR_SIZE + k,
                                   (const uint8_t *)iov->iov_base + poff, m);
            k += m;
            poff += m;
            if (poff == iov->iov_len) {
                iov++;
                poff = 0;
            }
        }
        t->pcrc = crc;
        t->plen = (uint32_t)n;
        t->retx = 0;
        t->sacked = 0;
        t->first_ns = now;
        if (p->snd_nxt == p->snd_una) {
            p->unacked_since = now;
            p->progress_ns = now;
        }
        p->snd_nxt++;
        CNT_TX(p, tx_data, 1);
        batch[nb++] = t;
        if (nb == TX_BATCH) {
            vmmc_udp__xmit(l, p, batch, nb, now);
            nb = 0;
            now = vmmc_udp_now();
        }
        off += n;
        left -= n;
        first = 0;
    } while (left);
    if (nb)
        vmmc_udp__xmit(l, p, batch, nb, now);
    pthread_mutex_unlock(&p->lock);
    return st;
}

int vmmc_udp_link_send_ex(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                          const void *data, size_t len, int nonblock)
{
    if (VMMC_UNLIKELY(len && !data))
        return vmmc_error(VMMC_ERR_INVALID, "udp link: NULL data");
    struct iovec one = {(void *)data, len};
    return link_sendv(l, id, rec, &one, len, nonblock);
}

int vmmc_udp_link_sendv(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                        const struct iovec *iov, int iovcnt, int nonblock)
{
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (VMMC_UNLIKELY(iov[i].iov_len && !iov[i].iov_base))
            return vmmc_error(VMMC_ERR_INVALID, "udp link: NULL piece %d", i);
        if (VMMC_UNLIKELY(iov[i].iov_len > SIZE_MAX - len))
            return vmmc_error(VMMC_ERR_INVALID, "udp link: pieces overflow");
        len += iov[i].iov_len;
    }
    struct iovec none = {NULL, 0};
    return link_sendv(l, id, rec, iovcnt ? iov : &none, len, nonblock);
}

static int vmmc_udp__wait(vmmc_udp_link_t *l, uint32_t id, int timeout_ms, int delivered);

int vmmc_udp_link_flush(vmmc_udp_link_t *l, uint32_t id, int timeout_ms)
{
    return vmmc_udp__wait(l, id, timeout_ms, 0);
}

int vmmc_udp_link_sync(vmmc_udp_link_t *l, uint32_t id, int timeout_ms, int unless_busy)
{
    return vmmc_udp__wait(l, id, timeout_ms, unless_busy ? 2 : 1);
}

/* @delivered: 0 wait for acks, 1 for delivery, 2 for delivery unless the
 * peer's receiver says it is busy. */
static int outstanding(const peer_t *p, int delivered)
{
    if (delivered == 2 && p->peer_busy && p->snd_una == p->snd_nxt)
        return 0;
    return delivered ? p->peer_dlv != p->snd_nxt - 1 : p->snd_una != p->snd_nxt;
}

/* Wait until everything sent to @id is acknowledged (@delivered: handed to
 * the peer's receive callback). */
static int vmmc_udp__wait(vmmc_udp_link_t *l, uint32_t id, int timeout_ms, int delivered)
{
    peer_t *p = peer_get(l, id);
    if (!p || p->state == PEER_NONE)
        return vmmc_error(VMMC_ERR_NOT_FOUND, "udp link: no peer %u", id);
    struct timespec ts;
    if (timeout_ms >= 0)
        abs_deadline(&ts, (uint64_t)timeout_ms * 1000000ull);
    int in_progress_thread = vmmc_udp__rx_owner(l), hooked = 0;
    int st = VMMC_OK;
    pthread_mutex_lock(&p->lock);
    if (p->bat_n) /* what waits in the batch is part of "everything sent" */
        vmmc_udp__batch_close(l, p, vmmc_udp_now());
    if (!in_progress_thread && outstanding(p, delivered)) {
        vmmc_udp_link_idle(l); /* the reports come through the progress thread */
        hooked = 1;             /* and the peer may wait for us: see wait_window */
        waiting_hook(l, p, 1);
    }
    while (outstanding(p, delivered)) {
        if (p->state != PEER_ALIVE) {
            st = peer_status(l, p, id);
            break;
        }
        if (in_progress_thread) {
            pthread_mutex_unlock(&p->lock);
            vmmc_udp__progress_nested(l, 1000000);
            pthread_mutex_lock(&p->lock);
            if (timeout_ms >= 0) {
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec > ts.tv_sec || (now.tv_sec == ts.tv_sec && now.tv_nsec >= ts.tv_nsec)) {
                    st = vmmc_error(VMMC_ERR_TIMEOUT, "udp link: flush to peer %u timed out", id);
                    break;
                }
            }
        } else if (timeout_ms >= 0) {
            if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) == ETIMEDOUT &&
                outstanding(p, delivered)) {
                st = vmmc_error(VMMC_ERR_TIMEOUT, "udp link: flush to peer %u timed out "
                                "(%u datagrams unacknowledged)", id, p->snd_nxt - p->snd_una);
                break;
            }
        } else {
            struct timespec t2;
            abs_deadline(&t2, 100000000);
            pthread_cond_timedwait(&p->cond, &p->lock, &t2);
        }
    }
    if (hooked)
        waiting_hook(l, p, 0);
    pthread_mutex_unlock(&p->lock);
    return st;
}
