/* Fast Messages, sending side: direct placement of large messages into
 * the handler's buffer and the split copy (see fm_int.h and docs/fm.md). */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fm/fm_send.h"

void fm_zc_detach(fm_t *fm, fm_stream_t *s)
{
    if (s->zdst) {
        vmmc_mem_detach(fm->ep, s->zdst);
        s->zdst = NULL;
    }
}

/* Attach the descriptor's buffer if its allocation is mapped here already;
 * else the mapping goes on in the background (the first time the receiver
 * uses an allocation) and this is tried again at the next packet boundary,
 * while the bytes travel in packets meanwhile: a send never waits for an
 * import. */
void fm_zc_attach(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
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
int fm_zc_check(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
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
        fm_zc_verdict(p, d[FM_D_LEN] != 0);
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
    fm_zc_attach(fm, p, s);
    /* Split copy: the receiver claimed the offer and is copying the first
     * `pull` bytes of the piece. Take that up only while the offer is out
     * and nothing of the piece went out yet (else those bytes travel as
     * sent, and the pull is void). Either way fm_offer_settle() waits for the
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

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Settle the split-copy offer before the send call returns (the piece's
 * memory is the caller's again): revoke it if the receiver has not claimed
 * it, else wait until the receiver says it has read its last byte. The
 * receiver's copy is a plain memcpy between its claim and DONE, so the wait
 * is short; a dead receiver ends it with VMMC_ERR_PEER_DEAD, and a receiver
 * that stops cannot make us return while it may still read. */
VMMC_COLD int fm_offer_settle(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
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
                return fm_peer_dead(fm, p);
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
unsigned fm_split_offer(fm_t *fm, fm_peer_t *p, fm_stream_t *s, const char *b, size_t n)
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

/* The first packet of a ZC message is out and more data follows: give the
 * receiver a moment (VMMC_FM_ZCOPY_WAIT at most) to post its buffer, since
 * a byte sent in a packet costs the receiver a copy. After a while, serve
 * our own receive side meanwhile (the peer may be waiting for us the same
 * way). See zc_verdict for what a "none" or a timeout changes. */
int fm_zc_wait(fm_t *fm, fm_peer_t *p, fm_stream_t *s)
{
    s->zc_waited = 1;
    FM_CNT(fm, FM_C_ZC_WAIT, 1);
    uint64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        if (fm_zc_check(fm, p, s))
            return VMMC_OK;
        /* Every few microseconds: out of time? else serve our side once;
         * now and then, is the receiver still there to answer? */
        if (VMMC_UNLIKELY((i & 255) == 0)) {
            if (now_ns() - t0 > fm->zc_wait_ns) {
                fm_zc_verdict(p, 0); /* the receiver is busy: do not hold the next ones up */
                return VMMC_OK;
            }
            if ((i & 16383) == 0 && vmmc_peer_alive(fm->ep, p->rank) == 0)
                return fm_peer_dead(fm, p);
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
int fm_publish_direct(fm_t *fm, fm_peer_t *p, fm_stream_t *s, unsigned flags)
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
