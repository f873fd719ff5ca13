/* Fast Messages, sending side: streams, packets, credits.
 *
 * A message is cut into packets of at most paymax payload bytes; pieces are
 * copied straight into the packet being filled, which lives in the mapped
 * ring of the receiver (one copy) or, without a mapping, in a staging packet
 * that goes out with vmmc_send(). Messages of at most FM_STAGE_MAX bytes are
 * staged locally even with a mapping and copied in one go, so that the
 * receiver, which polls the packet's first line, does not take that line
 * away between pieces; in longer packets only the first line is assembled
 * aside, for the same reason. A full packet goes out at once, unless the
 * message's bound says nothing can follow it; the last packet goes out at
 * end_message. So a message shorter than a packet always travels as one
 * packet (FIRST|LAST) and its handler never needs a context of its own.
 *
 * Credits: the sender may have at most R bytes (its ring at the receiver) in
 * flight: head - credit <= R, where credit is the receiver's consumed count
 * that the receiver writes into our memory. The packet layout of a message
 * depends only on its bound and the current head, so a non-blocking begin can
 * reserve exactly the space the whole message will take. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fm/fm_int.h"

static inline int has_space(fm_peer_t *p, uint64_t need)
{
    if (VMMC_LIKELY(p->head + need - p->credit <= p->R))
        return 1;
    p->credit = atomic_load_explicit(p->credit_word, memory_order_acquire);
    return p->head + need - p->credit <= p->R;
}

/* Ring bytes the next packet takes: its slot, plus the skip to the ring's
 * start if it does not fit before the end. */
static inline uint64_t next_need(const fm_peer_t *p, size_t cap, uint64_t *skip)
{
    uint64_t slot = fm_align64(FM_HDR + cap);
    uint64_t off = p->head & (p->R - 1);
    *skip = (p->R - off < slot) ? p->R - off : 0;
    return *skip + slot;
}

/* Ring bytes a whole message of @bound bytes takes from the current head, or
 * UINT64_MAX if more than the ring. */
static uint64_t layout_bytes(const fm_peer_t *p, size_t bound)
{
    uint64_t pos = p->head & (p->R - 1), bytes = 0;
    size_t left = bound;
    do {
        size_t c = left < p->paymax ? left : p->paymax;
        uint64_t slot = fm_align64(FM_HDR + c);
        if (p->R - pos < slot) {
            bytes += p->R - pos;
            pos = 0;
        }
        bytes += slot;
        pos = (pos + slot) & (p->R - 1);
        left -= c;
        if (bytes > p->R)
            return UINT64_MAX;
    } while (left);
    return bytes;
}

static VMMC_COLD int peer_dead(fm_t *fm, fm_peer_t *p)
{
    p->sdead = 1;
    return vmmc_error(VMMC_ERR_PEER_DEAD, "fm: rank %d died; cannot send to it", p->rank);
}

/* Write a remote control word (credit or credit request) into @p's region. */
static int ctrl_write(fm_t *fm, fm_peer_t *p, size_t off, uint64_t v)
{
    if (p->map) {
        atomic_store_explicit((_Atomic uint64_t *)(p->map + off), v, memory_order_release);
        return VMMC_OK;
    }
    int st = vmmc_send(p->px, off, &v, sizeof v, 0);
    if (st == VMMC_ERR_PEER_DEAD)
        p->sdead = 1;
    return st;
}

int fm_send_request_credit(fm_t *fm, fm_peer_t *p)
{
    if (p->req && p->req_credit == p->credit)
        return VMMC_OK; /* already asked at this credit level */
    p->req++;
    p->req_credit = p->credit;
    FM_CNT(fm, FM_C_CREDIT_REQ, 1);
    int st = ctrl_write(fm, p, FM_REQ_OFF, p->req);
    if (st == VMMC_OK && p->px)
        vmmc_signal(fm->ep, p->rank);
    return st;
}

/* Used by the receive side to give credits back (fm_recv.c). */
int fm_send_credit(fm_t *fm, fm_peer_t *p, uint64_t consumed)
{
    int st = ctrl_write(fm, p, FM_CREDIT_OFF, consumed);
    if (st == VMMC_OK && p->px)
        vmmc_signal(fm->ep, p->rank);
    return st;
}

/* Used by the receive side to post a placement descriptor (fm_recv.c): the
 * words first, the sequence number last, so a sender never reads a
 * half-written one (and re-checks the sequence after reading, since the
 * next descriptor may overwrite this one while it reads). */
int fm_send_desc(fm_t *fm, fm_peer_t *p, uint64_t msg, uint64_t off, uint64_t len,
                 const vmmc_mkey_t *key, uint64_t pull)
{
    uint64_t d[FM_D_WORDS] = {0};
    d[FM_D_SEQ] = ++p->dseq;
    d[FM_D_MSG] = (msg & 0xffffffffu) | pull << 32;
    d[FM_D_OFF] = off;
    d[FM_D_LEN] = len;
    if (key)
        memcpy(&d[FM_D_KEY], key->opaque, sizeof key->opaque);
    FM_CNT(fm, FM_C_ZC_POST, 1);
    if (p->map) {
        _Atomic uint64_t *w = (_Atomic uint64_t *)(p->map + FM_DESC_OFF);
        atomic_store_explicit(&w[FM_D_SEQ], 0, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        for (int i = 1; i < FM_D_WORDS; i++)
            atomic_store_explicit(&w[i], d[i], memory_order_relaxed);
        atomic_store_explicit(&w[FM_D_SEQ], d[FM_D_SEQ], memory_order_release);
        return VMMC_OK;
    }
    int st = vmmc_send(p->px, FM_DESC_OFF + 8, &d[1], sizeof d - 8, 0);
    if (st == VMMC_OK)
        st = vmmc_send(p->px, FM_DESC_OFF, &d[0], 8, 0);
    if (st == VMMC_ERR_PEER_DEAD)
        p->sdead = 1;
    return st;
}

/* Wait until @need bytes of credit are there: extract our own receive side
 * meanwhile (so two ranks sending to each other cannot deadlock), then sleep
 * in vmmc_wait(); the receiver's credit write and signal wake us. */
static VMMC_COLD int wait_space(fm_t *fm, fm_peer_t *p, uint64_t *need_io, size_t cap,
                                uint64_t *skip)
{
    int st = VMMC_OK;
    unsigned iter = 0;
    FM_CNT(fm, FM_C_CREDIT_WAIT, 1);
    atomic_store_explicit(&p->swaiting, 1, memory_order_relaxed);
    for (;;) {
        *need_io = next_need(p, cap, skip);
        if (has_space(p, *need_io))
            break;
        atomic_store_explicit(&p->swait_credit, p->credit, memory_order_release);
        if ((st = fm_send_request_credit(fm, p)) != VMMC_OK)
            break;
        fm_rlock(fm);
        fm->in_extract = 1;
        int n = fm_extract_locked(fm, p->paymax);
        fm->in_extract = 0;
        fm_runlock(fm);
        if (n < 0) {
            st = n;
            break;
        }
        /* Now and then, even while other senders keep us busy: is it alive? */
        if (p->px && (++iter & 63) == 0 && vmmc_peer_alive(fm->ep, p->rank) == 0) {
            st = peer_dead(fm, p);
            break;
        }
        if (n > 0)
            continue;
        *need_io = next_need(p, cap, skip);
        if (has_space(p, *need_io))
            break;
        int w = vmmc_wait(fm->ep, 20);
        if (w < 0 && w != VMMC_ERR_PEER_DEAD) {
            st = w;
            break;
        }
        /* (PEER_DEAD from vmmc_wait may be about another rank: check ours.) */
        if (p->px && w <= 0 && vmmc_peer_alive(fm->ep, p->rank) == 0) {
            st = peer_dead(fm, p);
            break;
        }
    }
    atomic_store_explicit(&p->swaiting, 0, memory_order_relaxed);
    return st;
}

static VMMC_COLD int send_again(fm_t *fm, fm_peer_t *p)
{
    FM_CNT(fm, FM_C_AGAIN, 1);
    fm_send_request_credit(fm, p);
    if (p->px && (__atomic_load_n(&fm->cnt[FM_C_AGAIN], __ATOMIC_RELAXED) & 63) == 0 && vmmc_peer_alive(fm->ep, p->rank) == 0)
        return peer_dead(fm, p);
    return VMMC_ERR_AGAIN;
}

/* Publish the packet being filled (len payload bytes at p->pk_pos). */
static inline int publish(fm_t *fm, fm_peer_t *p, fm_stream_t *s, unsigned flags)
{
    size_t len = s->pk_len;
    if (flags & FM_F_FIRST) {
        p->smsg++;
        if (s->zc)
            flags |= FM_F_ZC;
    }
    uint64_t off = p->pk_pos & (p->R - 1);
    uint64_t w0 = (uint64_t)s->handler | ((uint64_t)flags << 16);
    uint64_t w1 = (uint64_t)p->seq | ((uint64_t)len << 32);
    if (VMMC_LIKELY(p->map != NULL)) {
        char *h = p->map + FM_CTRL + off;
        if (VMMC_UNLIKELY(flags & FM_F_OFFER)) {
            char *o = h + FM_HDR + ((len + 7) & ~(size_t)7);
            memcpy(o, &s->ooff, 8);
            memcpy(o + 8, &s->oseq, 8);
            memcpy(o + 16, &s->okey, sizeof s->okey);
        }
        if (s->staged) {
            uint64_t *st = (uint64_t *)p->staging;
            st[0] = w0;
            st[1] = 0;
            memcpy(h, st, FM_HDR + len);
        } else {
            /* The first line's payload was held back (fm_send_piece). */
            size_t first = len < FM_LINE - FM_HDR ? len : FM_LINE - FM_HDR;
            memcpy(h + FM_HDR, p->staging + FM_HDR, first);
            *(uint64_t *)h = w0;
        }
        atomic_store_explicit((_Atomic uint64_t *)(h + 8), w1, memory_order_release);
    } else {
        /* One send that lands the packet, then its header, then (release)
         * the word that publishes it: over udp one datagram. */
        uint64_t *h = (uint64_t *)p->staging;
        h[0] = w0;
        h[1] = w1;
        int st = vmmc_send(p->px, FM_CTRL + off, p->staging, FM_HDR + len, VMMC_SEND_HEAD_LAST);
        if (st != VMMC_OK) {
            if (st == VMMC_ERR_PEER_DEAD)
                p->sdead = 1;
            return st;
        }
    }
    p->head = p->pk_pos + fm_slot(len, flags);
    p->seq = fm_seq_next(p->seq);
    FM_CNT(fm, FM_C_PKT_SENT, 1);
    FM_CNT(fm, FM_C_BYTES_SENT, len);
    if (p->px)
        vmmc_signal(fm->ep, p->rank);
    return VMMC_OK;
}

static int write_skip(fm_t *fm, fm_peer_t *p, uint64_t skip)
{
    uint64_t off = p->head & (p->R - 1);
    uint64_t w0 = (uint64_t)FM_F_SKIP << 16;
    uint64_t w1 = (uint64_t)p->seq;
    if (p->map) {
        char *h = p->map + FM_CTRL + off;
        *(uint64_t *)h = w0;
        atomic_store_explicit((_Atomic uint64_t *)(h + 8), w1, memory_order_release);
    } else {
        uint64_t w[2] = {w0, w1};
        int st = vmmc_send(p->px, FM_CTRL + off, w, sizeof w, VMMC_SEND_HEAD_LAST);
        if (st != VMMC_OK) {
            if (st == VMMC_ERR_PEER_DEAD)
                p->sdead = 1;
            return st;
        }
    }
    p->head += skip;
    p->seq = fm_seq_next(p->seq);
    return VMMC_OK;
}

/* Make room at the head for a packet of @cap payload bytes: wait for
 * credits if allowed (never in non-blocking mode or a handler), and fill
 * the ring's end with a skip packet if the slot does not fit before it. */
static inline int reserve(fm_t *fm, fm_peer_t *p, size_t cap, int nb)
{
    uint64_t skip;
    uint64_t need = next_need(p, cap, &skip);
    if (VMMC_UNLIKELY(!has_space(p, need))) {
        if (nb || fm_busy(fm))
            return send_again(fm, p); /* handlers never wait */
        int st = wait_space(fm, p, &need, cap, &skip);
        if (st != VMMC_OK)
            return st;
    }
    if (VMMC_UNLIKELY(skip))
        return write_skip(fm, p, skip);
    return VMMC_OK;
}

/* ---- direct placement (zero-copy; see fm_int.h) ---- */

static void zc_detach(fm_t *fm, fm_stream_t *s)
{
    if (s->zdst) {
        vmmc_mem_detach(fm->ep, s->zdst);
        s->zdst = NULL;
    }
}

/* What the last large message to @p showed: whether its receiver places
 * (then the next ones wait for its descriptors) or not (then the next 1, 2,
 * 4, 8, at most 16 after as many misses in a row go as plain messages, and
 * the one after probes without waiting): a receiver that mixes buffer kinds
 * loses little placement, one that never places costs few waits. */
static inline unsigned zc_backoff(const fm_peer_t *p)
{
    return 1u << (p->zc_miss - 1);
}

static inline void zc_verdict(fm_peer_t *p, int places)
{
    p->zc_ok = places;
    if (places) {
        p->zc_miss = 0;
        p->zc_skip = 0;
    } else {
        if (p->zc_miss < 5)
            p->zc_miss++;
        p->zc_skip = zc_backoff(p);
    }
}

/* Attach the descriptor's buffer if its allocation is mapped here already;
 * else the mapping goes on in the background (the first time the receiver
 * uses an allocation) and this is tried again at the next packet boundary,
 * while the bytes travel in packets meanwhile: a send never waits for an
 * import. */
static void zc_attach(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
{
    void *ptr;
    int st = vmmc_mem_attach(fm->ep, p->rank, &s->zkey, 0, &ptr);
    if (st == VMMC_ERR_AGAIN)
        return;
    s->zretry = 0;
    if (st != VMMC_OK) {
        vmmc_debug("fm: cannot attach rank %d's buffer (%s); sending in packets", p->rank,
                   vmmc_last_error());
        return;
    }
    if (s->sent >= s->zkM + s->zkN) { /* too late: all of it went in packets */
        vmmc_mem_detach(fm->ep, ptr);
        return;
    }
    s->zdst = (char *)ptr + (s->sent - s->zkM);
    s->zM = s->sent;
    s->zN = s->zkM + s->zkN - s->sent;
}

/* Read a new descriptor for our current message, if there is one, and
 * attach it. Returns 1 if the receiver answered (a buffer, or "none"). */
static int zc_check(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
{
    const _Atomic uint64_t *w = (const _Atomic uint64_t *)(p->ctrl + FM_DESC_OFF);
    uint64_t seq = atomic_load_explicit(&w[FM_D_SEQ], memory_order_acquire);
    if (VMMC_LIKELY(seq == p->dseen) || seq == 0)
        return 0;
    uint64_t d[FM_D_WORDS];
    for (int i = 1; i < FM_D_WORDS; i++)
        d[i] = atomic_load_explicit(&w[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&w[FM_D_SEQ], memory_order_relaxed) != seq)
        return 0; /* being rewritten: read it next time */
    p->dseen = seq;
    /* Even a late answer (about an earlier message) says whether this
     * receiver's handlers take placement. */
    if (d[FM_D_LEN] || d[FM_D_OFF] != FM_DESC_NOT_NOW)
        zc_verdict(p, d[FM_D_LEN] != 0);
    if ((uint32_t)d[FM_D_MSG] != (uint32_t)p->smsg)
        return 0; /* about an earlier message */
    uint64_t off = d[FM_D_OFF], len = d[FM_D_LEN], pull = d[FM_D_MSG] >> 32;
    /* The receiver does not know the bound: a handler may ask for more. */
    if (len == 0 || off > s->bound)
        return 1;
    if (len > s->bound - off)
        len = s->bound - off;
    if (off > s->sent || off + len <= s->sent)
        return 1; /* nothing left of it for us: carry on in packets */
    memcpy(s->zkey.opaque, &d[FM_D_KEY], sizeof s->zkey.opaque);
    if (VMMC_UNLIKELY(vmmc_mkey_len(&s->zkey) < len)) {
        /* A protocol violation: counted, and said once per peer (a peer
         * must not be able to flood our log). */
        FM_CNT(fm, FM_C_PROTOCOL, 1);
        if (!p->bad_desc_warned++)
            vmmc_warn("fm: rank %d posted a %llu-byte buffer with a key for %zu bytes; sending "
                      "in packets (said once)", p->rank, (unsigned long long)len,
                      vmmc_mkey_len(&s->zkey));
        return 1;
    }
    s->zkM = off;
    s->zkN = len;
    s->zretry = 1;
    zc_attach(fm, p, s);
    /* Split copy: the receiver claimed the offer and is copying the first
     * `pull` bytes of the piece. Take that up only while the offer is out
     * and nothing of the piece went out yet (else those bytes travel as
     * sent, and the pull is void). Either way offer_settle() waits for the
     * receiver's copy before the call returns. */
    if (pull && s->offer && s->olive && s->zdst && off == s->ooff && s->sent == off && pull < len &&
        pull < vmmc_mkey_len(&s->okey)) {
        s->opulled = pull;
        s->sent += pull; /* fm_send_piece skips them */
        FM_CNT(fm, FM_C_SPLIT_SENT, pull);
    }
    s->offer = 0;
    return 1;
}

static uint64_t now_ns(void);

/* Settle the split-copy offer before the send call returns (the piece's
 * memory is the caller's again): revoke it if the receiver has not claimed
 * it, else wait until the receiver says it has read its last byte. The
 * receiver's copy is a plain memcpy between its claim and DONE, so the wait
 * is short; a dead receiver ends it with VMMC_ERR_PEER_DEAD, and a receiver
 * that stops cannot make us return while it may still read. */
static VMMC_COLD int offer_settle(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
{
    _Atomic uint64_t *w = (_Atomic uint64_t *)(p->ctrl + FM_OFFER_OFF);
    const uint64_t claimed = fm_oword(s->oseq, FM_O_CLAIMED), done = fm_oword(s->oseq, FM_O_DONE);
    uint64_t v = fm_oword(s->oseq, FM_O_OFFERED);
    s->olive = 0;
    if (atomic_compare_exchange_strong_explicit(w, &v, fm_oword(s->oseq, FM_O_REVOKED),
                                                memory_order_acq_rel, memory_order_acquire))
        return VMMC_OK; /* never claimed: the receiver reads nothing */
    uint64_t t0 = 0;
    for (unsigned i = 1; v == claimed; i++) {
        if (VMMC_LIKELY(i < 4096)) {
            __builtin_ia32_pause();
        } else {
            /* Long: the receiver may be waiting for this CPU. */
            if (!t0)
                t0 = now_ns();
            if ((i & 63) == 0 && vmmc_peer_alive(fm->ep, p->rank) == 0)
                return peer_dead(fm, p);
            struct timespec ts = {0, now_ns() - t0 < 1000000 ? 0 : 50000};
            if (ts.tv_nsec)
                nanosleep(&ts, NULL);
            else
                sched_yield();
        }
        v = atomic_load_explicit(w, memory_order_acquire);
    }
    if (VMMC_UNLIKELY(v != done)) {
        FM_CNT(fm, FM_C_PROTOCOL, 1);
        return vmmc_error(VMMC_ERR_PROTOCOL, "fm: rank %d wrote 0x%llx into the split-copy word "
                          "of offer %llu; only the receiver's claim or its end may be there",
                          p->rank, (unsigned long long)v, (unsigned long long)s->oseq);
    }
    return VMMC_OK;
}

/* The piece that overflows a ZC message's first packet: offer the receiver a
 * split copy if the message is large (the bound: a header piece in front
 * changes nothing), the piece not small, and it lies in vmmc_mem_alloc()
 * memory. */
static unsigned split_offer(fm_t *fm, fm_peer_t *p, fm_stream_t *s, const char *b, size_t n)
{
    s->offer = 0;
    if (!fm->split_min || s->bound < fm->split_min || n < FM_SPLIT_PIECE_MIN || b == p->split_nokey ||
        fm_slot(s->pk_len, FM_F_OFFER) > fm_align64(FM_HDR + s->pk_cap))
        return 0;
    int st = vmmc_mem_key(fm->ep, b, n, p->rank, &s->okey);
    if (st != VMMC_OK) {
        /* malloc() memory, usually the same buffer again: remember it. */
        if (st == VMMC_ERR_UNSUPPORTED)
            p->split_nokey = b;
        return 0;
    }
    s->offer = 1;
    s->ooff = s->sent;
    s->oseq = ++p->oseq;
    s->olive = 1;
    /* Out before the packet that names it (publish's release store). */
    atomic_store_explicit((_Atomic uint64_t *)(p->ctrl + FM_OFFER_OFF),
                          fm_oword(s->oseq, FM_O_OFFERED), memory_order_relaxed);
    return FM_F_OFFER;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The first packet of a ZC message is out and more data follows: give the
 * receiver a moment (VMMC_FM_ZCOPY_WAIT at most) to post its buffer, since
 * a byte sent in a packet costs the receiver a copy. After a while, serve
 * our own receive side meanwhile (the peer may be waiting for us the same
 * way). See zc_verdict for what a "none" or a timeout changes. */
static int zc_wait(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
{
    s->zc_waited = 1;
    FM_CNT(fm, FM_C_ZC_WAIT, 1);
    uint64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        if (zc_check(fm, p, s))
            return VMMC_OK;
        /* Every few microseconds: out of time? else serve our side once;
         * now and then, is the receiver still there to answer? */
        if (VMMC_UNLIKELY((i & 255) == 0)) {
            if (now_ns() - t0 > fm->zc_wait_ns) {
                zc_verdict(p, 0); /* the receiver is busy: do not hold the next ones up */
                return VMMC_OK;
            }
            if ((i & 16383) == 0 && vmmc_peer_alive(fm->ep, p->rank) == 0)
                return peer_dead(fm, p);
            if (!fm_busy(fm)) {
                fm_rlock(fm);
                fm->in_extract = 1;
                int n = fm_extract_locked(fm, p->paymax);
                fm->in_extract = 0;
                fm_runlock(fm);
                if (n < 0)
                    return VMMC_OK; /* (our receive side's trouble, reported by extract) */
            }
        }
        if ((i & 7) == 0)
            __builtin_ia32_pause();
    }
}

/* Announce the bytes placed directly: a header-only DIRECT packet. */
static int publish_direct(fm_t *fm, fm_peer_t *p, fm_stream_t *s, unsigned flags)
{
    int st = reserve(fm, p, 0, 0);
    if (st != VMMC_OK)
        return st;
    char *h = p->map + FM_CTRL + (p->head & (p->R - 1));
    if (s->opulled) {
        flags |= FM_F_PULLED; /* the receiver's part comes first */
        FM_CNT(fm, FM_C_BYTES_SENT, s->opulled);
        s->opulled = 0;
    }
    *(uint64_t *)h = (uint64_t)s->handler | ((uint64_t)(flags | FM_F_DIRECT) << 16);
    atomic_store_explicit((_Atomic uint64_t *)(h + 8), (uint64_t)p->seq | (s->zpend << 32),
                          memory_order_release);
    p->head += fm_slot(0, FM_F_DIRECT);
    p->seq = fm_seq_next(p->seq);
    FM_CNT(fm, FM_C_PKT_SENT, 1);
    FM_CNT(fm, FM_C_BYTES_SENT, s->zpend);
    s->zpend = 0;
    vmmc_signal(fm->ep, p->rank);
    return VMMC_OK;
}

/* Copy @c bytes (room is there) into the packet being filled. */
static inline void pk_append(fm_peer_t *p, fm_stream_t *s, const char *b, size_t c)
{
    if (VMMC_UNLIKELY(s->pk_len < FM_LINE - FM_HDR) && p->map && !s->staged) {
        /* The first line (header + 48 payload bytes) is assembled aside
         * and written once at publish: the receiver spins on it, and
         * every earlier write would take it away. */
        size_t h = FM_LINE - FM_HDR - s->pk_len;
        if (h > c)
            h = c;
        fm_copy(p->staging + FM_HDR + s->pk_len, b, h);
        if (c > h)
            memcpy(s->pk + s->pk_len + h, b + h, c - h);
    } else {
        fm_copy(s->pk + s->pk_len, b, c);
    }
    s->pk_len += c;
    s->sent += c;
}

/* Start the next packet of @s: get its ring space (waiting if allowed). */
static inline int pkt_start(fm_t *fm, fm_peer_t *p, fm_stream_t *s, int nb)
{
    size_t left = s->bound - s->sent;
    size_t cap = left < p->paymax ? left : p->paymax;
    int st = reserve(fm, p, cap, nb);
    if (st != VMMC_OK)
        return st;
    p->pk_pos = p->head;
    s->staged = p->map && s->bound <= FM_STAGE_MAX && s->bound <= p->paymax;
    s->pk = (p->map && !s->staged ? p->map + FM_CTRL + (p->head & (p->R - 1)) : p->staging) +
            FM_HDR;
    s->pk_len = 0;
    s->pk_cap = cap;
    s->pk_open = 1;
    return VMMC_OK;
}

/* FM_THREADS: one thread at a time sends to a peer (FM 2.x's send-queue
 * lock), from fm_begin_message() to fm_end_message(). Others wait for it,
 * or get VMMC_ERR_AGAIN when they must not wait. */
static inline int send_trylock(fm_peer_t *p)
{
    int z = 0;
    if (!atomic_compare_exchange_strong_explicit(&p->slock, &z, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return 0;
    atomic_store_explicit(&p->sowner, fm_self(), memory_order_relaxed);
    return 1;
}

static inline void send_unlock(fm_peer_t *p)
{
    atomic_store_explicit(&p->sowner, 0, memory_order_relaxed);
    atomic_store_explicit(&p->slock, 0, memory_order_release);
}

static int send_lock(fm_t *fm, fm_peer_t *p, int nb, int in_handler)
{
    for (unsigned i = 1;; i++) {
        if (send_trylock(p))
            return VMMC_OK;
        if (atomic_load_explicit(&p->sowner, memory_order_relaxed) == fm_self()) {
            if (in_handler) {
                FM_CNT(fm, FM_C_AGAIN, 1);
                return VMMC_ERR_AGAIN;
            }
            return vmmc_error(VMMC_ERR_BUSY, "fm_begin_message: this thread has a message to "
                              "rank %d open already", p->rank);
        }
        if (nb) {
            FM_CNT(fm, FM_C_AGAIN, 1);
            return VMMC_ERR_AGAIN;
        }
        __builtin_ia32_pause();
        if (i % 256 == 0)
            sched_yield(); /* the holder may be waiting for this CPU */
    }
}

static int begin_locked(fm_t *fm, fm_peer_t *p, size_t max_length, int handler, int nb,
                        int in_handler, fm_stream_t **sp);

int fm_begin_message(fm_t *fm, int dest, size_t max_length, int handler, fm_stream_t **sp)
{
    if (VMMC_UNLIKELY(!fm || !sp))
        return vmmc_error(VMMC_ERR_INVALID, "fm_begin_message: NULL %s", fm ? "stream pointer" : "fm");
    if (VMMC_UNLIKELY(dest < 0 || dest >= fm->size))
        return vmmc_error(VMMC_ERR_INVALID, "fm_begin_message: rank %d outside 0..%d", dest,
                          fm->size - 1);
    if (VMMC_UNLIKELY(handler < 0 || handler > 0xffff))
        return vmmc_error(VMMC_ERR_INVALID, "fm_begin_message: handler id %d outside 0..65535",
                          handler);
    fm_peer_t *p = &fm->peers[dest];
    int in_handler = fm_in_handler(fm);
    int nb = in_handler || (fm->flags & FM_NONBLOCK);
    if (!fm->mt)
        return begin_locked(fm, p, max_length, handler, nb, in_handler, sp);
    int st = send_lock(fm, p, nb, in_handler);
    if (st != VMMC_OK)
        return st;
    if ((st = begin_locked(fm, p, max_length, handler, nb, in_handler, sp)) != VMMC_OK)
        send_unlock(p);
    return st;
}

static int begin_locked(fm_t *fm, fm_peer_t *p, size_t max_length, int handler, int nb,
                        int in_handler, fm_stream_t **sp)
{
    int dest = p->rank;
    fm_stream_t *s = &p->ss;
    if (VMMC_UNLIKELY(p->sdead))
        return vmmc_error(VMMC_ERR_PEER_DEAD, "fm_begin_message: rank %d died", dest);
    if (VMMC_UNLIKELY(s->open)) {
        if (in_handler) {
            FM_CNT(fm, FM_C_AGAIN, 1);
            return VMMC_ERR_AGAIN;
        }
        return vmmc_error(VMMC_ERR_BUSY, "fm_begin_message: a message to rank %d is already open",
                          dest);
    }
    if (nb) {
        uint64_t need;
        if (max_length <= p->paymax) {
            uint64_t skip;
            need = next_need(p, max_length, &skip);
        } else {
            need = layout_bytes(p, max_length);
            if (need == UINT64_MAX)
                return vmmc_error(VMMC_ERR_INVALID, "fm_begin_message: a %zu-byte message does not "
                                  "fit rank %d's ring of %llu bytes, so it cannot be sent without "
                                  "blocking", max_length, dest, (unsigned long long)p->R);
        }
        if (!has_space(p, need))
            return send_again(fm, p);
    }
    s->open = 1;
    s->err = 0;
    s->handler = (uint16_t)handler;
    s->first = 1;
    s->bound = max_length;
    s->sent = 0;
    s->nb = nb;
    s->zc = !nb && fm->zc_min && max_length >= fm->zc_min && p->map && p->px;
    s->zc_probe = 0;
    if (s->zc && !p->zc_ok) {
        /* The receiver said "none" (or did not answer) lately: send plain
         * messages, and now and then one flagged but without waiting, to see
         * if it places again (a descriptor that comes is still used). */
        if (p->zc_skip) {
            p->zc_skip--;
            s->zc = 0;
        } else {
            p->zc_skip = zc_backoff(p);
            s->zc_probe = 1;
        }
    }
    s->zpend = 0;
    s->zdst = NULL;
    s->zc_waited = 0;
    s->zretry = 0;
    s->offer = 0;
    s->opulled = 0;
    s->olive = 0;
    if (s->zc)
        FM_CNT(fm, FM_C_ZC_MSG, 1);
    int st = pkt_start(fm, p, s, nb);
    if (VMMC_UNLIKELY(st != VMMC_OK)) {
        s->open = 0;
        return st;
    }
    *sp = s;
    return VMMC_OK;
}

static inline int send_piece(fm_stream_t *s, const void *buf, size_t n)
{
    if (VMMC_UNLIKELY(!s || s->kind != FM_SEND || !s->open))
        return vmmc_error(VMMC_ERR_INVALID, "fm_send_piece: not an open send stream");
    if (VMMC_UNLIKELY(s->err))
        return s->err;
    if (VMMC_UNLIKELY(n > s->bound - s->sent))
        return vmmc_error(VMMC_ERR_OVERFLOW, "fm_send_piece: %zu more bytes would exceed the "
                          "message's bound of %zu (%zu sent)", n, s->bound, s->sent);
    if (VMMC_UNLIKELY(n && !buf))
        return vmmc_error(VMMC_ERR_INVALID, "fm_send_piece: NULL buffer");
    fm_t *fm = s->fm;
    fm_peer_t *p = s->peer;
    const char *b = buf;
    while (n) {
        if (VMMC_UNLIKELY(s->zc)) {
            int st = VMMC_OK;
            if (s->first && s->pk_open && (n > s->pk_cap - s->pk_len || n >= FM_ZC_POST_MIN)) {
                /* The piece overflows the first packet, or is worth placing
                 * though it fits: send what the packet holds now, so the
                 * receiver can post its buffer for the rest (a probe too:
                 * it does not wait, but the answer comes). If that is
                 * nothing, the message's first FM_ZC_LEAD bytes, so that a
                 * handler reading a header first finds it there. A sender
                 * that gathered a header piece sends just that: the handler
                 * then typically receives the header aside and the payload
                 * at the start of its buffer, so the placed bytes start on a
                 * line of their own, which no other copy shares. */
                if (s->pk_len == 0) {
                    size_t x = FM_ZC_LEAD < s->pk_cap ? FM_ZC_LEAD : s->pk_cap;
                    if (x >= n)
                        x = n - 1;
                    pk_append(p, s, b, x);
                    b += x;
                    n -= x;
                }
                st = publish(fm, p, s, FM_F_FIRST | split_offer(fm, p, s, b, n));
                s->first = 0;
                s->pk_open = 0;
            }
            if (st == VMMC_OK && !s->first && !s->pk_open && !s->zdst) {
                size_t sent0 = s->sent;
                if (!s->zc_waited && !s->zc_probe)
                    st = zc_wait(fm, p, s);
                else if (!zc_check(fm, p, s) && s->zretry)
                    zc_attach(fm, p, s);
                /* A split copy was taken up: the receiver copies these. */
                b += s->sent - sent0;
                n -= s->sent - sent0;
            }
            if (st == VMMC_OK && s->zdst) {
                uint64_t end = s->zM + s->zN;
                size_t c = n < end - s->sent ? n : (size_t)(end - s->sent);
                memcpy(s->zdst + (s->sent - s->zM), b, c);
                s->sent += c;
                s->zpend += c;
                FM_CNT(fm, FM_C_ZC_SENT, c);
                b += c;
                n -= c;
                if (s->sent == end || s->zpend >= ((uint64_t)1 << 30)) {
                    if (s->sent == end)
                        zc_detach(fm, s);
                    /* The last bytes of the message wait for end_message,
                     * which announces them with LAST. */
                    if (s->sent < s->bound || s->zdst)
                        st = publish_direct(fm, p, s, 0);
                }
            }
            if (st != VMMC_OK) {
                s->err = st;
                return st;
            }
            if (s->zdst || !n)
                continue;
        }
        if (VMMC_UNLIKELY(!s->pk_open)) {
            if (VMMC_UNLIKELY(s->zpend || s->opulled)) {
                int st = publish_direct(fm, p, s, 0);
                if (st != VMMC_OK) {
                    s->err = st;
                    return st;
                }
            }
            int st = pkt_start(fm, p, s, s->nb);
            if (st != VMMC_OK) {
                s->err = st;
                return st;
            }
        }
        size_t c = s->pk_cap - s->pk_len;
        if (c > n)
            c = n;
        pk_append(p, s, b, c);
        b += c;
        n -= c;
        /* A full packet goes out at once unless the bound says the message
         * ends here (then end_message sends it as FIRST|LAST). */
        if (VMMC_UNLIKELY(s->pk_len == s->pk_cap) && s->sent < s->bound) {
            int st = publish(fm, p, s, s->first ? FM_F_FIRST : 0);
            if (st != VMMC_OK) {
                s->err = st;
                return st;
            }
            s->first = 0;
            s->pk_open = 0;
        }
    }
    return VMMC_OK;
}

int fm_send_piece(fm_stream_t *s, const void *buf, size_t n)
{
    /* Fast paths: a short message assembled in the staging packet (its
     * capacity is its bound, so the piece never fills a packet early), and
     * a header piece that fits in the first line of a longer message's
     * first packet (that line is assembled aside, see below). */
    if (VMMC_LIKELY(s && s->pk_open && s->kind == FM_SEND && s->open && !s->err && (buf || !n) &&
                    (s->staged ? n <= s->pk_cap - s->pk_len
                               : s->peer->map && s->pk_len + n <= FM_LINE - FM_HDR &&
                                     n < s->pk_cap - s->pk_len))) {
        pk_append(s->peer, s, buf, n);
        return VMMC_OK;
    }
    int st = send_piece(s, buf, n);
    if (VMMC_UNLIKELY(s && s->kind == FM_SEND && s->olive)) {
        int st2 = offer_settle(s->fm, s->peer, s);
        if (st == VMMC_OK && st2 != VMMC_OK)
            st = s->err = st2;
    }
    return st;
}

int fm_end_message(fm_stream_t *s)
{
    if (VMMC_UNLIKELY(!s || s->kind != FM_SEND || !s->open))
        return vmmc_error(VMMC_ERR_INVALID, "fm_end_message: not an open send stream");
    fm_t *fm = s->fm;
    int st = s->err;
    if (VMMC_UNLIKELY(s->zc)) {
        zc_detach(fm, s);
        if (st == VMMC_OK && (s->zpend || s->opulled)) {
            /* Placed bytes end the message. */
            st = publish_direct(fm, s->peer, s, FM_F_LAST);
            s->open = 0;
            if (fm->mt)
                send_unlock(s->peer);
            if (st == VMMC_OK)
                FM_CNT(fm, FM_C_MSG_SENT, 1);
            return st;
        }
    }
    if (VMMC_UNLIKELY(st == VMMC_OK && !s->pk_open))
        st = pkt_start(fm, s->peer, s, s->nb); /* an empty packet carries LAST */
    if (VMMC_LIKELY(st == VMMC_OK))
        st = publish(fm, s->peer, s, (s->first ? FM_F_FIRST : 0) | FM_F_LAST);
    s->open = 0;
    if (fm->mt)
        send_unlock(s->peer);
    if (VMMC_LIKELY(st == VMMC_OK))
        FM_CNT(fm, FM_C_MSG_SENT, 1);
    return st;
}

int fm_send_4(fm_t *fm, int dest, int handler, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3)
{
    uint32_t w[4] = {i0, i1, i2, i3};
    return fm_send(fm, dest, handler, w, sizeof w);
}

int fm_send(fm_t *fm, int dest, int handler, const void *buf, size_t n)
{
    /* Fast path: one packet into a mapped ring with room before its end. */
    if (VMMC_LIKELY(fm && dest >= 0 && dest < fm->size && handler >= 0 && handler <= 0xffff &&
                    (buf || !n))) {
        fm_peer_t *p = &fm->peers[dest];
        int locked = !fm->mt || send_trylock(p);
        uint64_t slot = fm_align64(FM_HDR + n);
        uint64_t off = locked ? p->head & (p->R - 1) : 0;
        /* (A message large enough to be placed goes the long way.) */
        if (VMMC_LIKELY(locked && p->map && n <= p->paymax && (n < fm->zc_min || !fm->zc_min) &&
                        !p->ss.open && !p->sdead &&
                        p->R - off >= slot && has_space(p, slot))) {
            char *h = p->map + FM_CTRL + off;
            /* The first line last: the receiver spins on it. */
            size_t first = n < FM_LINE - FM_HDR ? n : FM_LINE - FM_HDR;
            if (n > first)
                memcpy(h + FM_LINE, (const char *)buf + first, n - first);
            if (first)
                memcpy(h + FM_HDR, buf, first);
            *(uint64_t *)h = (uint64_t)handler | ((uint64_t)(FM_F_FIRST | FM_F_LAST) << 16);
            atomic_store_explicit((_Atomic uint64_t *)(h + 8), (uint64_t)p->seq | ((uint64_t)n << 32),
                                  memory_order_release);
            p->head += slot;
            p->seq = fm_seq_next(p->seq);
            p->smsg++;
            FM_CNT(fm, FM_C_MSG_SENT, 1);
            FM_CNT(fm, FM_C_PKT_SENT, 1);
            FM_CNT(fm, FM_C_BYTES_SENT, n);
            if (fm->mt)
                send_unlock(p);
            if (p->px)
                vmmc_signal(fm->ep, p->rank);
            return VMMC_OK;
        }
        if (fm->mt && locked)
            send_unlock(p);
    }
    fm_stream_t *s;
    int st = fm_begin_message(fm, dest, n, handler, &s);
    if (st != VMMC_OK)
        return st;
    st = fm_send_piece(s, buf, n);
    int st2 = fm_end_message(s);
    return st != VMMC_OK ? st : st2;
}
