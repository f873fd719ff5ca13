/* Fast Messages, receiving side: what fm_recv.c (extract, handlers,
 * fm_receive), fm_progress.c (the progress hook, waiting, dead senders) and
 * fm_zrecv.c (posting buffers for placement) share. */
#ifndef VMMC_FM_RECV_H
#define VMMC_FM_RECV_H

#include "fm/fm_int.h"

/* Is there a packet at @pos with sequence @seq? */
static inline int peek_at(const fm_peer_t *p, uint64_t pos, uint32_t seq, uint64_t *w0,
                          uint32_t *len)
{
    const char *h = p->ring + (pos & (p->rR - 1));
    uint64_t w1 = atomic_load_explicit((_Atomic uint64_t *)(h + 8), memory_order_acquire);
    if ((uint32_t)w1 != seq)
        return 0;
    *len = (uint32_t)(w1 >> 32);
    *w0 = *(const uint64_t *)h;
    return 1;
}

/* Bytes the packet at @pos occupies, or 0 if its header is malformed. */
static inline uint64_t slot_of(const fm_peer_t *p, uint64_t pos, uint64_t w0, uint32_t len)
{
    uint64_t room = p->rR - (pos & (p->rR - 1));
    unsigned flags = (unsigned)(w0 >> 16) & 0xff;
    if (flags & FM_F_SKIP)
        return room;
    uint64_t slot = fm_slot(len, flags);
    return slot <= room ? slot : 0;
}

static inline void req_check(fm_peer_t *p)
{
    uint64_t r = atomic_load_explicit((_Atomic uint64_t *)(p->ctrl + FM_REQ_OFF),
                                      memory_order_acquire);
    if (VMMC_UNLIKELY(r != p->req_seen)) {
        p->req_seen = r;
        p->req_pending = 1;
    }
}

/* fm_progress.c */
void fm_credit_return(fm_t *fm, fm_peer_t *p);
double fm_now_s(void);
/* fm_recv.c */
void fm_run_ctx(fm_t *fm, fm_peer_t *p);
/* fm_zrecv.c */
void fm_zc_post(fm_t *fm, fm_peer_t *p, fm_stream_t *s, char *dst, size_t want);

/* Release the packet at tail: zero the header word of every line it covered
 * (so stale payload never looks like a header), advance, maybe give credits. */
static inline void consume(fm_t *fm, fm_peer_t *p, uint64_t slot, int skip)
{
    char *base = p->ring + (p->tail & (p->rR - 1));
    uint64_t zl = skip ? FM_LINE : slot;
    for (uint64_t x = 0; x < zl; x += FM_LINE)
        atomic_store_explicit((_Atomic uint64_t *)(base + x + 8), 0, memory_order_relaxed);
    p->tail += slot;
    p->rseq = fm_seq_next(p->rseq);
    if (p->seen < p->tail) {
        p->seen = p->tail;
        p->seen_seq = p->rseq;
    }
    if (VMMC_UNLIKELY(p->tail - p->returned >= fm->credit_batch || p->req_pending))
        fm_credit_return(fm, p);
}

#endif
