/* UDP link: coalescing small messages into one datagram.
 *
 * One datagram per small write costs a system call on each side and a
 * header on the wire for 8 bytes of data: a stream of short puts is bound
 * by the sendmmsg rate, not by the network. vmmc_udp_link_post() instead
 * appends the message, as a record (wire.h), to the peer's open batch,
 * built in place in the send slot of the next sequence number; the batch
 * becomes one DATA datagram (F_MULTI) with one sequence number, one tag and
 * one acknowledgement, and the receiver hands its records up in order.
 *
 * A batch is closed (numbered and sent) when the next record does not fit
 * (VMMC_UDP_COALESCE_MAX), before anything else is sent to that peer (so
 * the order of everything sent to it is the order of the calls), at a
 * flush or sync (which then wait for it like for any datagram), when the
 * application polls or announces a sleep (it waits for something, maybe for
 * an answer to what is in the batch), and at the latest VMMC_UDP_COALESCE
 * after it was opened, by the progress thread. */
#include "transport/udp/link_impl.h"

#include <string.h>

#include "transport/udp/crc32c.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

/* Largest message that goes in a record. */
#define REC_DATA_MAX 4096u
/* A batch leaves as soon as it holds a 1500-byte MTU's worth of payload
 * and at least this many records, without waiting to fill
 * VMMC_UDP_COALESCE_MAX: small records then go in datagrams of about 1472
 * bytes (26 puts of 8 bytes), so that the first is on its way while the
 * caller fills the next, and records of a few KiB still share a datagram
 * by threes or fours. */
#define BATCH_SEND_LEN (1472u - VMMC_UDP_HDR_SIZE)
#define BATCH_SEND_RECS 4u

void vmmc_udp__batch_close(vmmc_udp_link_t *l, peer_t *p, uint64_t now)
{
    if (!p->bat_n)
        return;
    txslot_t *t = &p->tx[p->snd_nxt % l->window];
    vmmc_udp_hdr_t *h = &t->hdr;
    memset(h, 0, sizeof *h);
    h->type = VMMC_UDP_T_DATA;
    h->flags = VMMC_UDP_F_FIRST | VMMC_UDP_F_LAST | VMMC_UDP_F_MULTI;
    h->src = l->p.self;
    h->length = p->bat_len;
    h->offset = p->bat_n; /* the record count */
    h->seq = p->snd_nxt;
    t->pcrc = p->bat_crc;
    t->plen = p->bat_len;
    t->retx = 0;
    t->sacked = 0;
    t->first_ns = now;
    if (p->snd_nxt == p->snd_una) {
        p->unacked_since = now;
        p->progress_ns = now;
    }
    p->snd_nxt++;
    __atomic_store_n(&p->bat_n, 0, __ATOMIC_RELAXED);
    atomic_fetch_sub_explicit(&l->batches_open, 1, memory_order_relaxed);
    CNT_TX(p, tx_data, 1);
    CNT_TX(p, tx_batches, 1);
    vmmc_udp__xmit(l, p, &t, 1, now);
}

uint64_t vmmc_udp__batch_timer(vmmc_udp_link_t *l, peer_t *p, uint64_t now, uint64_t next)
{
    if (!p->bat_n)
        return next;
    uint64_t due = p->bat_since + l->coalesce_ns;
    if (now >= due)
        vmmc_udp__batch_close(l, p, now);
    else if (due < next)
        next = due;
    return next;
}

void vmmc_udp__batch_push_all(vmmc_udp_link_t *l)
{
    if (!atomic_load_explicit(&l->batches_open, memory_order_relaxed))
        return;
    uint64_t now = vmmc_udp_now();
    FOR_PEERS(l, i, p) {
        if (!__atomic_load_n(&p->bat_n, __ATOMIC_RELAXED))
            continue;
        pthread_mutex_lock(&p->lock);
        vmmc_udp__batch_close(l, p, now);
        pthread_mutex_unlock(&p->lock);
    }
}

void vmmc_udp_link_push(vmmc_udp_link_t *l, uint32_t id)
{
    peer_t *p = vmmc_udp__peer(l, id);
    if (!p || !__atomic_load_n(&p->bat_n, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&p->lock);
    vmmc_udp__batch_close(l, p, vmmc_udp_now());
    pthread_mutex_unlock(&p->lock);
}

int vmmc_udp_link_post(vmmc_udp_link_t *l, uint32_t id, const vmmc_udp_rec_t *rec,
                       const void *data, size_t len, int nonblock)
{
    peer_t *p = vmmc_udp__peer(l, id);
    vmmc_udp_wrec_t r;
    r.region = rec->region;
    r.imm = rec->imm;
    unsigned hl = vmmc_udp_rec_hlen(&r);
    if (!l->coalesce_ns || !p || len > REC_DATA_MAX || (len && !data) ||
        (rec->flags & ~VMMC_UDP_F_NOTIFY) || hl + len > l->bat_max)
        return vmmc_udp_link_send_ex(l, id, rec, data, len, nonblock);
    pthread_mutex_lock(&p->lock);
    if (VMMC_UNLIKELY(p->state != PEER_ALIVE || atomic_load(&l->closing)))
        goto plain;
    uint64_t now = vmmc_udp_now();
    if (p->bat_n && p->bat_len + hl + len > l->bat_max)
        vmmc_udp__batch_close(l, p, now);
    txslot_t *t = &p->tx[p->snd_nxt % l->window];
    int opened = 0;
    if (!p->bat_n) {
        /* A batch needs the slot of the next sequence number: no room in
         * the window (or a busy receiver, for a non-blocking send), and
         * the message goes the ordinary way, which waits or says AGAIN. */
        uint32_t wnd = p->peer_wnd < l->window ? p->peer_wnd : l->window;
        if (p->snd_nxt - p->snd_una >= wnd || (nonblock && p->peer_busy) ||
            vmmc_udp__slot_buf(l, &t->buf, &t->cap, VMMC_UDP_HDR_SIZE + l->bat_max) != 0)
            goto plain;
        p->bat_len = 0;
        p->bat_crc = 0;
        p->bat_since = now;
        opened = 1;
        atomic_fetch_add_explicit(&l->batches_open, 1, memory_order_seq_cst);
    }
    r.kind = rec->kind;
    r.flags = rec->flags;
    r.length = (uint16_t)len;
    r.gen = rec->gen;
    r.offset = rec->offset;
    memcpy(r.token, rec->token, VMMC_UDP_TOKEN_SIZE);
    uint8_t *dst = t->buf + VMMC_UDP_HDR_SIZE + p->bat_len;
    vmmc_udp_rec_encode(dst, &r);
    uint32_t crc = vmmc_crc32c(p->bat_crc, dst, hl);
    if (len)
        crc = vmmc_crc32c_copy(crc, dst + hl, data, len);
    p->bat_crc = crc;
    p->bat_len += hl + (uint32_t)len;
    __atomic_store_n(&p->bat_n, p->bat_n + 1, __ATOMIC_RELAXED);
    CNT_TX(p, tx_coalesced, 1);
    if (p->bat_len + VMMC_UDP_REC_MIN > l->bat_max ||
        (p->bat_len >= BATCH_SEND_LEN && p->bat_n >= BATCH_SEND_RECS)) {
        vmmc_udp__batch_close(l, p, now); /* nothing more fits, or enough to go */
        opened = 0;
    }
    pthread_mutex_unlock(&p->lock);
    if (opened) {
        /* The progress thread closes it in time: if it sleeps past that
         * (it computed its deadline before this batch), wake it. Dekker
         * pairing with wait_events, which looks at batches_open after
         * publishing its sleep. Not while it leaves the socket to an
         * application that polls: a wake-up per batch would cost about
         * what the batch saves, and the next poll sends the batch anyway
         * (an application that stops polling without going to sleep
         * leaves it to the thread's look-back, VMMC_UDP_POLL_RECHECK). */
        uint64_t su = atomic_load(&l->sleep_until);
        if (su > now + l->coalesce_ns && !atomic_load(&l->skipping))
            vmmc_udp__wake_sleep(l, su);
    }
    return VMMC_OK;
plain:
    pthread_mutex_unlock(&p->lock);
    return vmmc_udp_link_send_ex(l, id, rec, data, len, nonblock);
}
