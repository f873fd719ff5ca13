/* Fast Messages, sending side: what fm_send.c (streams and packets),
 * fm_credit.c (credits and control words) and fm_zsend.c (placement and the
 * split copy) share. See fm_int.h for the wire format. */
#ifndef VMMC_FM_SEND_H
#define VMMC_FM_SEND_H

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

/* fm_credit.c */
VMMC_COLD int fm_peer_dead(fm_t *fm, fm_peer_t *p);
int fm_ctrl_write(fm_t *fm, fm_peer_t *p, size_t off, uint64_t v);
VMMC_COLD int fm_wait_space(fm_t *fm, fm_peer_t *p, uint64_t *need_io, size_t cap, uint64_t *skip);
VMMC_COLD int fm_send_again(fm_t *fm, fm_peer_t *p);
int fm_write_skip(fm_t *fm, fm_peer_t *p, uint64_t skip);

/* Make room at the head for a packet of @cap payload bytes: wait for
 * credits if allowed (never in non-blocking mode or a handler), and fill
 * the ring's end with a skip packet if the slot does not fit before it. */
static inline int reserve(fm_t *fm, fm_peer_t *p, size_t cap, int nb)
{
    uint64_t skip;
    uint64_t need = next_need(p, cap, &skip);
    if (VMMC_UNLIKELY(!has_space(p, need))) {
        if (nb || fm_busy(fm))
            return fm_send_again(fm, p); /* handlers never wait */
        int st = fm_wait_space(fm, p, &need, cap, &skip);
        if (st != VMMC_OK)
            return st;
    }
    if (VMMC_UNLIKELY(skip))
        return fm_write_skip(fm, p, skip);
    return VMMC_OK;
}

/* What the last large message to @p showed: whether its receiver places
 * (then the next ones wait for its descriptors) or not (then the next 1, 2,
 * 4, 8, at most 16 after as many misses in a row go as plain messages, and
 * the one after probes without waiting): a receiver that mixes buffer kinds
 * loses little placement, one that never places costs few waits. */
static inline unsigned fm_zc_backoff(const fm_peer_t *p)
{
    return 1u << (p->zc_miss - 1);
}

static inline void fm_zc_verdict(fm_peer_t *p, int places)
{
    p->zc_ok = places;
    if (places) {
        p->zc_miss = 0;
        p->zc_skip = 0;
    } else {
        if (p->zc_miss < 5)
            p->zc_miss++;
        p->zc_skip = fm_zc_backoff(p);
    }
}

/* fm_zsend.c */
void fm_zc_detach(fm_t *fm, fm_stream_t *s);
void fm_zc_attach(fm_t *fm, fm_peer_t *p, fm_stream_t *s);
int fm_zc_check(fm_t *fm, fm_peer_t *p, fm_stream_t *s);
VMMC_COLD int fm_offer_settle(fm_t *fm, fm_peer_t *p, fm_stream_t *s);
unsigned fm_split_offer(fm_t *fm, fm_peer_t *p, fm_stream_t *s, const char *b, size_t n);
int fm_zc_wait(fm_t *fm, fm_peer_t *p, fm_stream_t *s);
int fm_publish_direct(fm_t *fm, fm_peer_t *p, fm_stream_t *s, unsigned flags);

#endif
