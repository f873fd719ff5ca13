/* Fast Messages, sending side: streams and packets (credits are in
 * fm_credit.c, placement and the split copy in fm_zsend.c).
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
 * The packet layout of a message depends only on its bound and the current
 * head, so a non-blocking begin can reserve exactly the space the whole
 * message will take. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fm/fm_send.h"

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
    if (VMMC_UNLIKELY(dest < 0))
        return vmmc_error(VMMC_ERR_INVALID, "fm_begin_message: rank %d is negative", dest);
    if (VMMC_UNLIKELY(handler < 0 || handler > 0xffff))
        return vmmc_error(VMMC_ERR_INVALID, "fm_begin_message: handler id %d outside 0..65535",
                          handler);
    fm_peer_t *p;
    if (VMMC_LIKELY(dest < fm->size)) {
        p = &fm->peers[dest];
    } else {
        /* A peer beyond the job (fm_xpeer.c). */
        if (VMMC_UNLIKELY(fm->forked))
            return fm_forked_error(fm, "fm_begin_message");
        int st = fm_xpeer_get(fm, dest, &p, "fm_begin_message");
        if (st != VMMC_OK)
            return st;
    }
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
    if (VMMC_UNLIKELY(!fm_peer_ready(p))) {
        if (atomic_load_explicit(&p->conn, memory_order_relaxed) == FM_PC_FORKED)
            return fm_forked_error(fm, "fm_begin_message");
        /* First message to it on this channel: import its ring. On
         * fm_init()'s channel the peer has it open, so even a non-blocking
         * send waits for that (a control-plane round trip, once per peer),
         * as when fm_init() connected to every peer at once. */
        int st = fm_peer_connect(fm, p, !nb ? FM_CONNECT_WAIT
                                        : fm->collective ? FM_CONNECT_QUIET : FM_CONNECT_NB);
        if (st != VMMC_OK)
            return st;
    }
    if (VMMC_UNLIKELY(fm_peer_closed(p)))
        return fm_peer_stale(fm, p);
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
            return fm_send_again(fm, p);
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
            p->zc_skip = fm_zc_backoff(p);
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
        return s->fm->forked ? fm_forked_error(s->fm, "fm_send_piece") : s->err;
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
                st = publish(fm, p, s, FM_F_FIRST | fm_split_offer(fm, p, s, b, n));
                s->first = 0;
                s->pk_open = 0;
            }
            if (st == VMMC_OK && !s->first && !s->pk_open && !s->zdst) {
                size_t sent0 = s->sent;
                if (!s->zc_waited && !s->zc_probe)
                    st = fm_zc_wait(fm, p, s);
                else if (!fm_zc_check(fm, p, s) && s->zretry)
                    fm_zc_attach(fm, p, s);
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
                        fm_zc_detach(fm, s);
                    /* The last bytes of the message wait for end_message,
                     * which announces them with LAST. */
                    if (s->sent < s->bound || s->zdst)
                        st = fm_publish_direct(fm, p, s, 0);
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
                int st = fm_publish_direct(fm, p, s, 0);
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
        int st2 = fm_offer_settle(s->fm, s->peer, s);
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
    if (VMMC_UNLIKELY(st) && fm->forked)
        return fm_forked_error(fm, "fm_end_message");
    if (VMMC_UNLIKELY(s->zc)) {
        fm_zc_detach(fm, s);
        if (st == VMMC_OK && (s->zpend || s->opulled)) {
            /* Placed bytes end the message. */
            st = fm_publish_direct(fm, s->peer, s, FM_F_LAST);
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
        if (VMMC_LIKELY(locked && fm_peer_ready(p) && p->map && n <= p->paymax &&
                        (n < fm->zc_min || !fm->zc_min) && !p->ss.open && !p->sdead &&
                        !fm_peer_closed(p) &&
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
