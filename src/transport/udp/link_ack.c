/* UDP link: the send side's half of reliability. Acknowledgements that
 * arrive (cumulative, selective, delivery reports), round-trip estimates,
 * and loss recovery: RACK-style detection, tail-loss probes, resent holes,
 * timeouts and their backoff (docs/udp.md, "Loss recovery"). Called by the
 * receive owner (link_rx.c) and the timers, with p->lock held. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/link_impl.h"

#include "vmmc/vmmc.h"

/* ---- acknowledgements received (send side) ------------------------------ */

/* RFC 6298's SRTT + 4 RTTVAR, but at most 3 SRTT and at least 1.5 SRTT:
 * on a host whose threads compete for cores the variance is scheduling
 * noise, and waiting it out costs more than an occasional needless
 * retransmission (a duplicate the receiver drops). */
static uint64_t rto_of(const peer_t *p)
{
    uint64_t rto = p->srtt + 4 * p->rttvar;
    if (rto < p->srtt + p->srtt / 2)
        rto = p->srtt + p->srtt / 2;
    return rto > 3 * p->srtt ? 3 * p->srtt : rto;
}

static void rtt_sample(vmmc_udp_link_t *l, peer_t *p, uint64_t r)
{
    const vmmc_udp_settings_t *s = vmmc_udp_settings();
    if (!p->min_rtt || r < p->min_rtt)
        p->min_rtt = r;
    if (!p->have_rtt) {
        p->srtt = r;
        p->rttvar = r / 2;
        p->have_rtt = 1;
    } else {
        uint64_t d = p->srtt > r ? p->srtt - r : r - p->srtt;
        p->rttvar = (3 * p->rttvar + d) / 4;
        p->srtt = (7 * p->srtt + r) / 8;
    }
    uint64_t rto = rto_of(p);
    p->rto = rto < s->rto_min_ns ? s->rto_min_ns : rto > s->rto_max_ns ? s->rto_max_ns : rto;
}

/* May RACK take @t's latest send time as that of the copy delivered? Not
 * for a resent datagram acknowledged sooner than the shortest round trip
 * seen: the original was delivered (RFC 8985 6.2), and taking the resend's
 * time would declare lost what was sent between the two and is still on
 * its way. */
static int rack_send_known(const peer_t *p, const txslot_t *t, uint64_t now)
{
    return t->retx == 0 || since(now, t->sent_ns) >= p->min_rtt;
}

/* Process the ack fields of a valid datagram from @p. Caller holds p->lock.
 * Returns -1 if the ack acknowledges data never sent (forged/corrupt). */
int vmmc_udp__on_ack(vmmc_udp_link_t *l, peer_t *p, const vmmc_udp_hdr_t *h, uint64_t now)
{
    uint32_t ack = h->ack;
    if ((int32_t)(ack - (p->snd_nxt - 1)) > 0)
        return -1;
    if (h->wnd >= 1)
        p->peer_wnd = h->wnd;
    if ((int32_t)(ack - (p->snd_una - 1)) < 0)
        return 0; /* an old ack, overtaken by newer ones */
    if ((h->wnd == 0) != p->peer_busy) {
        p->peer_busy = h->wnd == 0;
        pthread_cond_broadcast(&p->cond);
    }
    int progress = 0;
    uint64_t sample = 0, rack = 0;
    while ((int32_t)(ack - p->snd_una) >= 0) {
        txslot_t *t = &p->tx[p->snd_una % l->window];
        /* A datagram selectively acknowledged before gave its sample
         * then; now it only waited for the hole before it to fill. */
        if (t->retx == 0 && !t->sacked)
            sample = since(now, t->sent_ns);
        if (!t->sacked && t->sent_ns > rack && rack_send_known(p, t, now))
            rack = t->sent_ns;
        p->snd_una++;
        progress = 1;
    }
    /* Selective acks: bit i covers ack + 2 + i. */
    uint64_t sack = h->sack;
    for (int i = 0; sack && i < SACK_BITS; i++, sack >>= 1) {
        if (!(sack & 1))
            continue;
        uint32_t s = ack + 2 + (uint32_t)i;
        if ((int32_t)(s - p->snd_nxt) >= 0)
            break;
        txslot_t *t = &p->tx[s % l->window];
        if (!t->sacked) {
            t->sacked = 1;
            if (t->retx == 0 && !sample)
                sample = since(now, t->sent_ns);
            if (t->sent_ns > rack && rack_send_known(p, t, now))
                rack = t->sent_ns;
            p->acked_since_rto = 1;
            p->backoff = 0;
            p->probed = 0;
            p->sacked_ns = now;
        }
    }
    /* Delivery reports ride in imm of unsequenced datagrams; a DATA
     * datagram with F_DLV reports everything it acknowledges delivered. */
    if (h->type != VMMC_UDP_T_DATA || (h->flags & VMMC_UDP_F_DLV)) {
        uint32_t dlv = h->type != VMMC_UDP_T_DATA ? (uint32_t)h->imm : ack;
        if ((int32_t)(dlv - p->peer_dlv) > 0 && (int32_t)(dlv - ack) <= 0) {
            p->peer_dlv = dlv;
            progress = 1;
        }
    }
    if (sample)
        rtt_sample(l, p, sample);
    if (progress) {
        if (p->snd_una != p->snd_nxt)
            p->unacked_since = p->tx[p->snd_una % l->window].first_ns;
        p->progress_ns = now;
        p->acked_since_rto = 1;
        p->backoff = 0; /* the path works: the loss seen is not a silent peer */
        p->probed = 0;
        pthread_cond_broadcast(&p->cond);
    }
    if (rack > p->rack_ns)
        p->rack_ns = rack;
    /* Loss detection (RACK, RFC 8985): a datagram sent more than a
     * reordering window before one that was delivered, and still not
     * acknowledged, is lost: resend it now, without waiting for a timeout.
     * Its new send time is later than anything delivered so far, so it is
     * resent again only once something sent after the resend is delivered
     * (a lost retransmission is found the same way). Only while the
     * receiver reports a hole (selective acks): in-order traffic skips the
     * scan. */
    if (h->sack && p->snd_una != p->snd_nxt) {
        uint64_t reo = p->have_rtt ? p->srtt / 4 : 50000;
        txslot_t *batch[TX_BATCH];
        unsigned nb = 0;
        for (uint32_t s = p->snd_una; s != p->snd_nxt; s++) {
            txslot_t *t = &p->tx[s % l->window];
            if (t->sacked || t->sent_ns + reo >= p->rack_ns)
                continue;
            t->retx++;
            batch[nb++] = t;
            CNT_TX(p, fast_retransmits, 1);
            CNT_TX(p, retransmits, 1);
            if (nb == TX_BATCH) {
                vmmc_udp__xmit(l, p, batch, nb, now);
                nb = 0;
            }
        }
        if (nb)
            vmmc_udp__xmit(l, p, batch, nb, now);
    }
    return 0;
}

/* Resend @n slots (they count as retransmissions; @probe: as loss probes
 * too). Caller holds p->lock. */
static void resend(vmmc_udp_link_t *l, peer_t *p, txslot_t **v, unsigned n, uint64_t now,
                   int probe)
{
    for (unsigned i = 0; i < n; i += TX_BATCH) {
        unsigned k = n - i < TX_BATCH ? n - i : TX_BATCH;
        for (unsigned j = 0; j < k; j++) {
            v[i + j]->retx++;
            CNT_TX(p, retransmits, 1);
            if (probe)
                CNT_TX(p, loss_probes, 1);
        }
        vmmc_udp__xmit(l, p, v + i, k, now);
    }
}

/* The sender's timers for @p (caller holds p->lock); returns @next or an
 * earlier deadline.
 * - Retransmission timeout, per datagram: SRTT-based (rto_of), grown by
 *   the backoff only while the peer is silent (no acknowledgement at all
 *   since the last timeout), never while acknowledgements flow: loss is
 *   then loss, not congestion we could make worse, and a longer timeout
 *   only idles the link.
 * - Tail-loss probe: new data outstanding and no news for two round trips
 *   plus the receiver's ACK delay: resend the newest datagram, whose
 *   acknowledgement (with selective acks) shows what else is missing.
 * - Lost retransmissions: when everything still unacknowledged has been
 *   resent (a window held up by its holes: nothing sent after them could be
 *   delivered and show them lost), the queue ahead of them has drained, so
 *   they are resent after two minimum round trips plus the ACK delay. */
uint64_t vmmc_udp__loss_timers(vmmc_udp_link_t *l, peer_t *p, uint64_t now, uint64_t next)
{
    const vmmc_udp_settings_t *s = vmmc_udp_settings();
    unsigned sh = p->backoff < 16 ? p->backoff : 16;
    if (p->snd_una == p->snd_nxt) {
        /* Everything acknowledged, but not yet reported delivered (the
         * report travels in an ACK, which can be lost like anything else,
         * and nothing else would resend it before the next keep-alive): ask
         * with a keep-alive, which the peer answers with an ACK at once. */
        if (p->peer_dlv == p->snd_nxt - 1 || !p->have_rtt)
            return next;
        uint64_t pto = 2 * p->srtt + vmmc_udp_cfg_ack_delay;
        if (pto < s->rto_min_ns)
            pto = s->rto_min_ns;
        pto = (pto << sh) > s->rto_max_ns ? s->rto_max_ns : pto << sh;
        uint64_t due = (p->probed ? p->probe_ns : p->progress_ns) + pto;
        if (due <= now) {
            vmmc_udp__send_ctl(l, p->idx, p, VMMC_UDP_T_KEEPALIVE);
            CNT_TX(p, loss_probes, 1);
            if (p->probed && p->backoff < 16)
                p->backoff++;
            p->probed = 1;
            p->probe_ns = now;
            due = now + pto;
        }
        return due < next ? due : next;
    }
    uint64_t rto = (p->rto << sh) > s->rto_max_ns ? s->rto_max_ns : p->rto << sh;
    uint64_t re = 2 * p->min_rtt + vmmc_udp_cfg_ack_delay;
    re = re < s->rto_min_ns ? s->rto_min_ns : re > p->rto ? p->rto : re;
    re = (re << sh) > s->rto_max_ns ? s->rto_max_ns : re << sh;
    /* The timeout runs from a datagram's send, but never from before the
     * last acknowledgement of new data or the last timeout (RFC 6298 5.3):
     * while acknowledgements come, a datagram that waits in a queue longer
     * than the estimate is not lost, and the ones that are lost show as
     * holes in the selective acks (RACK, above). */
    uint64_t base = p->progress_ns > p->rto_ns ? p->progress_ns : p->rto_ns;
    txslot_t *holes[1024], *expired = NULL;
    unsigned nh = 0, fresh = 0;
    txslot_t *newest = NULL;
    uint64_t last_re = 0;
    for (uint32_t q = p->snd_una; q != p->snd_nxt; q++) {
        txslot_t *t = &p->tx[q % l->window];
        if (t->sacked)
            continue;
        newest = t;
        uint64_t due = (t->sent_ns > base ? t->sent_ns : base) + rto;
        if (due <= now) {
            if (!expired)
                expired = t;
            continue;
        }
        if (due < next)
            next = due;
        if (t->retx) {
            holes[nh++] = t;
            if (t->sent_ns > last_re)
                last_re = t->sent_ns;
        } else {
            fresh++;
        }
    }
    if (expired) {
        /* Only the oldest datagram is resent, as TCP does after a timeout:
         * if the timeout was spurious (a queue on the path grew past the
         * estimate) the acknowledgements of the originals cover the rest,
         * and if not, the resend's acknowledgement (or a loss probe's)
         * shows with selective acks what else is missing. Resending every
         * datagram past its timeout made such a queue longer, the next
         * timeouts spurious too, and no round trip measurable (Karn). */
        resend(l, p, &expired, 1, now, 0);
        CNT_TX(p, rto_expiries, 1);
        if (!p->acked_since_rto && p->backoff < 16)
            p->backoff++;
        p->acked_since_rto = 0;
        p->probed = 1;
        p->rto_ns = now;
        if (now + rto < next)
            next = now + rto;
        return next;
    }
    if (!newest || !p->have_rtt)
        return next;
    /* Any datagram newly acknowledged, selectively too: the path works. */
    uint64_t heard = p->sacked_ns > p->progress_ns ? p->sacked_ns : p->progress_ns;
    if (!fresh && nh) {
        /* Held-up holes wait out @re after their last resend and after the
         * last acknowledgement: while acknowledgements of the resends come,
         * the rest of them are on their way behind. */
        uint64_t due = (last_re > heard ? last_re : heard) + re;
        if (due <= now) {
            resend(l, p, holes, nh, now, 1);
            if (!p->acked_since_rto && p->backoff < 16)
                p->backoff++;
            p->acked_since_rto = 0;
            due = now + re;
        }
        return due < next ? due : next;
    }
    /* Probe again each PTO while the probes go unanswered (then with the
     * backoff, like the timeout). The clock restarts with any datagram newly
     * acknowledged, selectively too (RFC 8985 7.2): while selective acks
     * come, RACK sees the losses, and a probe per ack would only repeat the
     * newest datagram. */
    uint64_t pto = 2 * p->srtt + vmmc_udp_cfg_ack_delay;
    if (pto < s->rto_min_ns / 2)
        pto = s->rto_min_ns / 2;
    pto = (pto << sh) > s->rto_max_ns ? s->rto_max_ns : pto << sh;
    uint64_t due = (p->probed ? p->probe_ns : heard) + pto;
    if (due <= now) {
        resend(l, p, &newest, 1, now, 1);
        if (p->probed && !p->acked_since_rto && p->backoff < 16)
            p->backoff++;
        p->acked_since_rto = 0;
        p->probed = 1;
        p->probe_ns = now;
        due = now + pto;
    }
    if (due < next)
        next = due;
    return next;
}

