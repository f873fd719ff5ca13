/* Fast Messages, receiving side: extract, handlers, fm_receive, credits,
 * the core progress hook, dead senders.
 *
 * Per sender the ring is read in order from `tail`; the sender is IDLE
 * (next packet starts a message), ACTIVE (a handler is suspended in
 * fm_receive() waiting for the next packet) or DRAIN (the handler returned
 * before the message ended; the rest is discarded). Extract serves the
 * senders round robin, one packet each per round, until its byte budget is
 * spent. A message that is one packet runs its handler directly on the
 * caller's stack; a longer one gets a pooled context (fm_ctx.c) and gives
 * control back at every packet boundary, which is what lets other senders'
 * messages interleave with a long one and keeps extract's budget exact. */
#include <sched.h>
#include <time.h>

#include "fm/fm_int.h"

void fm_rlock(fm_t *fm)
{
    unsigned spins = 0;
    while (atomic_exchange_explicit(&fm->rlock, 1, memory_order_acquire))
        while (atomic_load_explicit(&fm->rlock, memory_order_relaxed)) {
            __builtin_ia32_pause();
            if (VMMC_UNLIKELY(++spins % 1024 == 0))
                sched_yield(); /* another thread extracts: it may need this CPU */
        }
    if (fm->mt)
        atomic_store_explicit(&fm->rx_owner, fm_self(), memory_order_relaxed);
}

void fm_runlock(fm_t *fm)
{
    if (fm->mt)
        atomic_store_explicit(&fm->rx_owner, 0, memory_order_relaxed);
    atomic_store_explicit(&fm->rlock, 0, memory_order_release);
}

static inline int rtrylock(fm_t *fm)
{
    if (atomic_exchange_explicit(&fm->rlock, 1, memory_order_acquire))
        return 0;
    if (fm->mt)
        atomic_store_explicit(&fm->rx_owner, fm_self(), memory_order_relaxed);
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

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

static void credit_return(fm_t *fm, fm_peer_t *p)
{
    p->returned = p->tail;
    p->req_pending = 0;
    FM_CNT(fm, FM_C_CREDIT_RET, 1);
    fm_send_credit(fm, p, p->tail);
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
        credit_return(fm, p);
}

/* If the packet at @p's tail is the next one of a message being discarded
 * (and well formed), the bytes it occupies; else 0. */
static inline uint64_t drainable(const fm_peer_t *p, uint64_t *w0, uint32_t *len)
{
    if (p->rstate != FM_R_DRAIN || p->broken || p->rdead ||
        !peek_at(p, p->tail, p->rseq, w0, len) || ((*w0 >> 16) & (FM_F_FIRST | FM_F_DIRECT)))
        return 0;
    return slot_of(p, p->tail, *w0, *len);
}

/* Discard what has arrived of the message being drained (its handler
 * returned early, or its id is unknown), at most one ring's worth. No handler
 * runs for these bytes, so the progress hook does this too: a receiver that
 * has handled every message and stopped extracting (waiting in
 * vmmc_barrier(), say) would otherwise keep the ring full and hold up a
 * sender still finishing such a message. Anything unexpected (a FIRST
 * packet, a bad length) is left for extract to report. */
static void drain_arrived(fm_t *fm, fm_peer_t *p)
{
    uint64_t end = p->tail + p->rR, w0;
    uint32_t len;
    uint64_t slot;
    while (p->tail < end && (slot = drainable(p, &w0, &len)) != 0) {
        unsigned flags = (unsigned)(w0 >> 16) & 0xff;
        if (flags & FM_F_SKIP) {
            consume(fm, p, slot, 1);
            continue;
        }
        FM_CNT(fm, FM_C_PKT_RECV, 1);
        FM_CNT(fm, FM_C_BYTES_RECV, len);
        FM_CNT(fm, FM_C_DRAINED, len);
        consume(fm, p, slot, 0);
        if (flags & FM_F_LAST)
            p->rstate = FM_R_IDLE;
    }
}

/* Consume the packet the receive stream holds (payload pointer set). */
static void consume_current(fm_t *fm, fm_peer_t *p)
{
    fm_stream_t *s = &p->rs;
    FM_CNT(fm, FM_C_DRAINED, s->rlen - s->rpos);
    consume(fm, p, s->rslot, 0);
    s->mbase += s->rlen;
    s->rp = NULL;
    s->rlen = s->rpos = 0;
    s->rdirect = 0;
}

/* ZC message: the handler wants @want more bytes at @dst than the current
 * packet holds. Post @dst for them if it can take them directly. */
static void zc_post(fm_t *fm, fm_peer_t *p, fm_stream_t *s, char *dst, size_t want)
{
    vmmc_mkey_t k;
    uint64_t off = s->mbase + s->rlen;
    if (want < FM_ZC_POST_MIN)
        return;
    /* A handler that receives into malloc() memory usually does so again
     * with the same buffer: remember the last such buffer rather than ask
     * the core (which formats an error) for every message. At worst a
     * buffer later reallocated at that address is not placed into. */
    int st = dst == fm->zc_nokey ? VMMC_ERR_UNSUPPORTED
                                 : vmmc_mem_key(fm->ep, dst, want, p->rank, &k);
    if (st != VMMC_OK) {
        if (st == VMMC_ERR_UNSUPPORTED)
            fm->zc_nokey = dst;
        /* The rest comes in packets. */
        fm_send_desc(fm, p, p->rmsg, 0, 0, NULL, 0);
        s->zstate = 2;
        s->roffer = NULL;
        return;
    }
    /* Split copy (fm_int.h): the sender offered the piece that starts here;
     * copy its front ourselves while the sender copies the rest. We start a
     * cross-core hop earlier than it, so we take a little more. The offer
     * lies in the first packet, valid while that is the current one (mbase
     * 0), and the piece must start where the packet ends. A packet after it
     * means the sender stopped waiting and sends the piece in packets: a
     * pull would be for nothing. Not one byte is read before the offer word
     * in the sender's region (which we write through our mapping of it)
     * says the offer is ours: the sender revokes it before its call returns. */
    void *src = NULL;
    uint64_t pull = 0, w0, ooff, oseq = 0;
    uint32_t nl;
    vmmc_mkey_t okey;
    if (s->roffer && s->mbase == 0 && s->rp && fm->split_min && p->map &&
        (memcpy(&ooff, s->roffer, 8), ooff == off) &&
        !peek_at(p, p->tail + s->rslot, fm_seq_next(p->rseq), &w0, &nl)) {
        memcpy(&oseq, s->roffer + 8, 8);
        memcpy(&okey, s->roffer + 16, sizeof okey);
        uint64_t L = vmmc_mkey_len(&okey);
        if (L > want)
            L = want;
        if (L >= FM_SPLIT_PIECE_MIN) {
            int a = vmmc_mem_attach(fm->ep, p->rank, &okey, 0, &src);
            if (a == VMMC_OK) {
                pull = (L / 2 + 2048) & ~(uint64_t)63;
                if (pull > FM_PULL_MAX)
                    pull = FM_PULL_MAX;
                if (pull >= L)
                    pull = (L / 2) & ~(uint64_t)63;
                /* Copying is processing: no more than the extract call that
                 * runs this handler has left (fm_extract's max_bytes). */
                if ((int64_t)pull > fm->pull_budget)
                    pull = fm->pull_budget > 0 ? (uint64_t)fm->pull_budget & ~(uint64_t)63 : 0;
                if (pull < FM_SPLIT_PIECE_MIN / 2)
                    pull = 0;
                uint64_t o = fm_oword(oseq, FM_O_OFFERED);
                if (pull && (oseq >> 62 ||
                             !atomic_compare_exchange_strong_explicit(
                                 (_Atomic uint64_t *)(p->map + FM_OFFER_OFF), &o,
                                 fm_oword(oseq, FM_O_CLAIMED), memory_order_acq_rel,
                                 memory_order_relaxed)))
                    pull = 0; /* revoked: the sender has moved on */
            } else {
                src = NULL;
                if (a != VMMC_ERR_AGAIN) /* AGAIN: being mapped, ready next time */
                    vmmc_debug("fm: cannot attach rank %d's offered buffer (%s)", p->rank,
                               vmmc_last_error());
            }
        }
    }
    s->roffer = NULL;
    if (fm_send_desc(fm, p, p->rmsg, off, want, &k, pull) == VMMC_OK) {
        s->zstate = 1;
        s->zbuf = dst;
        s->zM = off;
        s->zN = want;
        if (pull) {
            memcpy(dst, src, pull);
            fm->pulled += pull;
            s->zpull = pull; /* counted once the sender's PULLED packet confirms it */
        }
    }
    if (pull) /* our last read of the sender's memory is done */
        atomic_store_explicit((_Atomic uint64_t *)(p->map + FM_OFFER_OFF),
                              fm_oword(oseq, FM_O_DONE), memory_order_release);
    if (src)
        vmmc_mem_detach(fm->ep, src);
}

ssize_t fm_receive(void *buf, fm_stream_t *s, size_t n)
{
    /* Fast path: the packet at hand holds all of it (a header, a short
     * message). Only the running handler's stream is cur_rs. */
    if (VMMC_LIKELY(s && s->fm->cur_rs == s && n - 1 < s->rlen - s->rpos && !s->rdirect && buf)) {
        fm_copy(buf, s->rp + s->rpos, n);
        s->rpos += n;
        return (ssize_t)n;
    }
    if (VMMC_UNLIKELY(!s || s->kind != FM_RECV || s->fm->cur_rs != s))
        return vmmc_error(VMMC_ERR_INVALID, "fm_receive: not the stream of the running handler");
    if (VMMC_UNLIKELY(n && !buf))
        return vmmc_error(VMMC_ERR_INVALID, "fm_receive: NULL buffer");
    char *b = buf;
    size_t got = 0;
    if (VMMC_UNLIKELY(s->rzc) && s->zstate == 0 && !s->rlast && n > s->rlen - s->rpos)
        zc_post(s->fm, s->peer, s, b + (s->rlen - s->rpos), n - (s->rlen - s->rpos));
    for (;;) {
        size_t avail = s->rlen - s->rpos;
        if (VMMC_LIKELY(avail && got < n)) {
            size_t c = n - got < avail ? n - got : avail;
            if (VMMC_UNLIKELY(s->rdirect)) {
                /* Already in place (the sender wrote it where this call's
                 * descriptor said); step() checked the range. */
                if (s->zbuf + (s->mbase + s->rpos - s->zM) != b + got || c != avail) {
                    s->zstate = 2;
                    s->peer->broken = 1;
                    return vmmc_error(VMMC_ERR_PROTOCOL, "fm_receive: rank %d placed data "
                                      "outside the buffer of this call", s->peer->rank);
                }
                FM_CNT(s->fm, FM_C_ZC_RECV, c);
            } else {
                fm_copy(b + got, s->rp + s->rpos, c);
            }
            s->rpos += c;
            got += c;
        }
        if (VMMC_LIKELY(got == n))
            break;
        if (VMMC_UNLIKELY(s->err))
            return s->err;
        if (s->rlast || s->inline_run)
            break; /* the message ended: short count */
        /* This packet is used up and more is wanted: release it and wait for
         * the next one; extract resumes us with it (or with an error). */
        fm_t *fm = s->fm;
        if (VMMC_UNLIKELY(s->rzc) && s->zstate == 0 && s->mbase == 0 && s->rp) {
            /* The sender waits for an answer to its first packet, and this
             * handler reads on in pieces too small to place: say "not this
             * message", or both would wait for each other until the sender
             * gives up. */
            fm_send_desc(fm, s->peer, s->peer->rmsg, FM_DESC_NOT_NOW, 0, NULL, 0);
            s->zstate = 2;
        }
        if (s->rp)
            consume_current(fm, s->peer);
        FM_CNT(fm, FM_C_SUSPEND, 1);
        fm_ctx_yield(fm);
    }
    if (VMMC_UNLIKELY(s->zstate == 1))
        s->zstate = 0; /* the descriptor ends with this call */
    return (ssize_t)got;
}

/* Run (or resume) the context of @p's message; clean up if it finished. */
static void run_ctx(fm_t *fm, fm_peer_t *p)
{
    fm->in_handler = 1;
    fm->cur_rs = &p->rs;
    int fin = fm_ctx_resume(fm, p->ctx);
    fm->cur_rs = NULL;
    fm->in_handler = 0;
    if (!fin)
        return;
    fm_ctx_put(fm, p->ctx);
    p->ctx = NULL;
    if (VMMC_UNLIKELY(p->rs.rzc) && p->rs.zstate == 0 && !p->rs.rlast && !p->broken &&
        !p->rs.mbase && !p->rs.rdirect)
        fm_send_desc(fm, p, p->rmsg, 0, 0, NULL, 0); /* no buffer will come */
    p->rs.rzc = 0;
    if (p->rs.rp) {
        int last = p->rs.rlast;
        consume_current(fm, p);
        p->rstate = last ? FM_R_IDLE : FM_R_DRAIN;
    } else {
        p->rstate = FM_R_IDLE;
    }
}

static VMMC_COLD void protocol_error(fm_t *fm, fm_peer_t *p, const char *what)
{
    FM_CNT(fm, FM_C_PROTOCOL, 1);
    vmmc_warn("fm: malformed packet from rank %d at ring position %llu (%s); ignoring that rank",
              p->rank, (unsigned long long)p->tail, what);
    p->broken = 1;
    if (p->ctx) {
        p->rs.err = VMMC_ERR_PROTOCOL;
        run_ctx(fm, p);
    }
}

static VMMC_COLD void unknown_handler(fm_t *fm, fm_peer_t *p, unsigned id)
{
    FM_CNT(fm, FM_C_UNKNOWN, 1);
    int warn = 1;
    if (id < (unsigned)fm->max_handlers) {
        warn = !fm->handlers[id].warned;
        fm->handlers[id].warned = 1;
    }
    if (warn)
        vmmc_warn("fm: message from rank %d for handler id %u, which is not registered here; "
                  "discarding it", p->rank, id);
}

/* Handle the valid, non-skip packet at @p's tail. */
static inline int step(fm_t *fm, fm_peer_t *p, uint64_t w0, uint32_t len, unsigned flags)
{
    fm_stream_t *s = &p->rs;
    const char *payload = p->ring + (p->tail & (p->rR - 1)) + FM_HDR;
    switch (p->rstate) {
    case FM_R_IDLE: {
        if (VMMC_UNLIKELY(!(flags & FM_F_FIRST))) {
            protocol_error(fm, p, "continuation packet without a message");
            return 0;
        }
        if (VMMC_UNLIKELY(flags & FM_F_DIRECT)) {
            protocol_error(fm, p, "a message starts with placed data");
            return 0;
        }
        FM_CNT(fm, FM_C_MSG_RECV, 1);
        p->rmsg++;
        unsigned id = (unsigned)(w0 & 0xffff);
        fm_hentry_t *h = id < (unsigned)fm->max_handlers ? &fm->handlers[id] : NULL;
        if (VMMC_UNLIKELY(!h || !h->fn)) {
            unknown_handler(fm, p, id);
            FM_CNT(fm, FM_C_DRAINED, len);
            consume(fm, p, fm_slot(len, flags), 0);
            p->rstate = (flags & FM_F_LAST) ? FM_R_IDLE : FM_R_DRAIN;
            if ((flags & (FM_F_ZC | FM_F_LAST)) == FM_F_ZC)
                fm_send_desc(fm, p, p->rmsg, 0, 0, NULL, 0);
            return 0;
        }
        s->rp = payload;
        s->rlen = len;
        s->rslot = fm_slot(len, flags);
        s->rpos = 0;
        s->rlast = (flags & FM_F_LAST) != 0;
        s->rdirect = 0;
        s->mbase = 0;
        s->rzc = (flags & FM_F_ZC) != 0;
        s->zstate = 0;
        s->err = 0;
        s->zpull = 0;
        s->roffer = NULL;
        if (VMMC_UNLIKELY(flags & FM_F_OFFER) && s->rzc && !s->rlast) {
            /* Inside the slot (slot_of). It may start a line of its own:
             * fetch it while the handler starts, read it in zc_post. */
            s->roffer = payload + ((len + 7u) & ~7u);
            __builtin_prefetch(s->roffer + FM_OFFER_BYTES - 1);
            /* The claim will write the offer word in the sender's region:
             * take its line now, while the handler starts, so the claim
             * does not delay the descriptor by a cross-core hop. */
            if (p->map) {
#if defined(__x86_64__)
                /* (PREFETCHW: a no-op on CPUs that lack it) */
                __asm__ volatile("prefetchw %0" ::"m"(*(const char *)(p->map + FM_OFFER_OFF)));
#else
                __builtin_prefetch(p->map + FM_OFFER_OFF, 1);
#endif
            }
        }
        if (VMMC_LIKELY(s->rlast)) {
            /* Whole message here: run on the caller's stack. */
            s->inline_run = 1;
            fm->in_handler = 1;
            fm->cur_rs = s;
            h->fn(s, p->rank, h->arg);
            fm->cur_rs = NULL;
            fm->in_handler = 0;
            s->inline_run = 0;
            FM_CNT(fm, FM_C_INLINE, 1);
            consume_current(fm, p);
            return 0;
        }
        fm_ctx_t *c;
        int st = fm_ctx_get(fm, &c);
        if (st != VMMC_OK) {
            s->rp = NULL;
            FM_CNT(fm, FM_C_MSG_RECV, (uint64_t)-1);
            return st; /* packet stays; a later extract retries */
        }
        fm_ctx_assign(c, p, h->fn, h->arg);
        p->ctx = c;
        p->rstate = FM_R_ACTIVE;
        run_ctx(fm, p);
        return 0;
    }
    case FM_R_ACTIVE: {
        if (VMMC_UNLIKELY(flags & FM_F_FIRST)) {
            protocol_error(fm, p, "new message inside a message");
            return 0;
        }
        uint64_t n = len;
        if (VMMC_UNLIKELY(flags & FM_F_PULLED)) {
            /* The sender took our split copy up: our bytes come first. */
            if (!(flags & FM_F_DIRECT) || !s->zpull || s->zstate != 1 || s->mbase != s->zM) {
                protocol_error(fm, p, "a split copy that was not offered");
                return 0;
            }
            n += s->zpull;
            FM_CNT(fm, FM_C_SPLIT_RECV, s->zpull);
            FM_CNT(fm, FM_C_BYTES_RECV, s->zpull);
        } else if (VMMC_UNLIKELY(s->zpull)) {
            /* Any other packet: the sender moved on; its bytes come again. */
            FM_CNT(fm, FM_C_SPLIT_VOID, s->zpull);
        }
        s->zpull = 0;
        if (VMMC_UNLIKELY(flags & FM_F_DIRECT) &&
            (s->zstate != 1 || s->mbase < s->zM || n > s->zM + s->zN - s->mbase)) {
            protocol_error(fm, p, "placed data outside the posted buffer");
            return 0;
        }
        s->rp = payload;
        s->rlen = n;
        s->rslot = fm_slot(len, flags);
        s->rpos = 0;
        s->rlast = (flags & FM_F_LAST) != 0;
        s->rdirect = (flags & FM_F_DIRECT) != 0;
        run_ctx(fm, p);
        return 0;
    }
    default: /* FM_R_DRAIN */
        if (VMMC_UNLIKELY(flags & (FM_F_FIRST | FM_F_DIRECT))) {
            protocol_error(fm, p, (flags & FM_F_FIRST) ? "new message inside a message"
                                                       : "placed data after the handler returned");
            return 0;
        }
        FM_CNT(fm, FM_C_DRAINED, len);
        consume(fm, p, fm_slot(len, flags), 0);
        if (flags & FM_F_LAST)
            p->rstate = FM_R_IDLE;
        return 0;
    }
}

int fm_extract_locked(fm_t *fm, size_t max_bytes)
{
    int64_t budget = max_bytes > (size_t)INT64_MAX ? INT64_MAX : (int64_t)max_bytes;
    if (budget == 0)
        budget = 1;
    int n = fm->size, npk = 0, progress;
    unsigned start = fm->rr;
    do {
        progress = 0;
        for (int i = 0; i < n; i++) {
            unsigned idx = start + (unsigned)i;
            if (idx >= (unsigned)n)
                idx -= (unsigned)n;
            fm_peer_t *p = &fm->peers[idx];
            uint64_t w0;
            uint32_t len;
            if (VMMC_UNLIKELY(p->broken || p->rdead))
                continue;
            if (!peek_at(p, p->tail, p->rseq, &w0, &len))
                continue;
            uint64_t slot = slot_of(p, p->tail, w0, len);
            if (VMMC_UNLIKELY(slot == 0)) {
                protocol_error(fm, p, "packet runs past the ring's end");
                continue;
            }
            unsigned flags = (unsigned)(w0 >> 16) & 0xff;
            if (VMMC_UNLIKELY(flags & FM_F_SKIP)) {
                consume(fm, p, slot, 1);
                progress = 1;
                if (!peek_at(p, p->tail, p->rseq, &w0, &len))
                    continue;
                if (!slot_of(p, p->tail, w0, len) || ((w0 >> 16) & FM_F_SKIP)) {
                    protocol_error(fm, p, "bad packet after a skip");
                    continue;
                }
                flags = (unsigned)(w0 >> 16) & 0xff;
            }
            fm->pull_budget = budget;
            fm->pulled = 0;
            int st = step(fm, p, w0, len, flags);
            fm->pull_budget = 0; /* (handlers resumed elsewhere, with an error, pull nothing) */
            if (VMMC_UNLIKELY(st < 0))
                return npk ? npk : st;
            npk++;
            FM_CNT(fm, FM_C_PKT_RECV, 1);
            FM_CNT(fm, FM_C_BYTES_RECV, len);
            budget -= (len ? (int64_t)len : 1) + (int64_t)fm->pulled;
            progress = 1;
            if (budget <= 0) {
                fm->rr = idx + 1 >= (unsigned)n ? 0 : idx + 1;
                goto credits;
            }
        }
    } while (progress);
    fm->rr = start + 1 >= (unsigned)n ? 0 : start + 1;
credits:
    /* Senders that asked for credits get them now. */
    for (int i = 0; i < n; i++) {
        fm_peer_t *p = &fm->peers[i];
        req_check(p);
        if (VMMC_UNLIKELY(p->req_pending) && p->tail > p->returned)
            credit_return(fm, p);
    }
    return npk;
}

/* Look for ranks that died. A dead sender whose ring is empty is retired; a
 * handler suspended in its message is resumed with VMMC_ERR_PEER_DEAD.
 * Returns VMMC_ERR_PEER_DEAD if any rank is known dead. */
int fm_dead_check(fm_t *fm)
{
    fm->last_dead_check = now_s();
    for (int r = 0; r < fm->size; r++) {
        fm_peer_t *p = &fm->peers[r];
        if (r == fm->rank || p->rdead)
            continue;
        if (!p->sdead) {
            if (vmmc_peer_alive(fm->ep, r) != 0)
                continue;
            p->sdead = 1;
        }
        uint64_t w0;
        uint32_t len;
        if (!p->broken && peek_at(p, p->tail, p->rseq, &w0, &len))
            continue; /* it left packets: take them first */
        p->rdead = 1;
        fm->ndead++;
        if (p->ctx) {
            p->rs.err = VMMC_ERR_PEER_DEAD;
            run_ctx(fm, p);
        }
    }
    for (int r = 0; r < fm->size; r++)
        if (fm->peers[r].rdead)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "fm: rank %d died", r);
    return VMMC_OK;
}

int fm_extract(fm_t *fm, size_t max_bytes)
{
    if (VMMC_UNLIKELY(!fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract: NULL fm");
    if (VMMC_UNLIKELY(fm_busy(fm)))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract called from a handler");
    fm_rlock(fm);
    fm->in_extract = 1;
    int r = fm_extract_locked(fm, max_bytes);
    if (VMMC_UNLIKELY(r == 0) && ++fm->empty_polls >= 4096) {
        fm->empty_polls = 0;
        if (now_s() - fm->last_dead_check > 0.01)
            r = fm_dead_check(fm);
    }
    fm->in_extract = 0;
    fm_runlock(fm);
    /* Nothing in the rings, and some sender's packets come through a
     * transport that lands data when driven (udp): drive it here, in the
     * polling thread, rather than leave every packet to that transport's
     * progress thread (a cross-core wake-up per datagram), then look again. */
    if (r == 0 && fm->unmapped) {
        (void)vmmc_progress(fm->ep);
        fm_rlock(fm);
        fm->in_extract = 1;
        r = fm_extract_locked(fm, max_bytes);
        fm->in_extract = 0;
        fm_runlock(fm);
    }
    return r;
}

int fm_extract_wait(fm_t *fm, size_t max_bytes, int timeout_ms)
{
    if (VMMC_UNLIKELY(!fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract_wait: NULL fm");
    if (fm_busy(fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract_wait called from a handler");
    double end = timeout_ms >= 0 ? now_s() + timeout_ms * 1e-3 : 0;
    for (;;) {
        int r = fm_extract(fm, max_bytes);
        if (r != 0)
            return r;
        if (fm->ndead)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "fm: a rank of the job died and nothing is "
                              "left to extract");
        int slice = 20;
        double t = now_s();
        if (timeout_ms >= 0) {
            double rem = (end - t) * 1e3;
            if (rem <= 0)
                return 0;
            if (rem < slice)
                slice = rem < 1 ? 1 : (int)rem;
        }
        int w = vmmc_wait(fm->ep, slice); /* the arm hook returns held credits */
        if (w < 0 && w != VMMC_ERR_PEER_DEAD)
            return w;
        if (w <= 0 || now_s() - fm->last_dead_check > 0.02) {
            fm_rlock(fm);
            fm->in_extract = 1;
            int d = fm_dead_check(fm);
            fm->in_extract = 0;
            fm_runlock(fm);
            if (d < 0) {
                r = fm_extract(fm, max_bytes);
                return r != 0 ? r : d;
            }
        }
    }
}

/* Senders waiting for credits whose credit word has changed since. */
static int credit_waits(fm_t *fm)
{
    int n = 0;
    for (int r = 0; r < fm->size; r++) {
        fm_peer_t *p = &fm->peers[r];
        if (atomic_load_explicit(&p->swaiting, memory_order_relaxed) &&
            atomic_load_explicit(p->credit_word, memory_order_acquire) !=
                atomic_load_explicit(&p->swait_credit, memory_order_relaxed))
            n++;
    }
    return n;
}

/* Core progress hook: look ahead in the rings (report each packet once, so
 * vmmc_wait() wakes for it but does not spin on packets the application is
 * deliberately leaving there), answer credit requests, and report credits
 * for which a sender waits. Never runs handlers. The arm function also gives
 * back batched credits before the endpoint sleeps. */
int fm_hook_poll(void *arg)
{
    fm_t *fm = arg;
    if (!rtrylock(fm))
        return 0;
    int ev = 0;
    for (int r = 0; r < fm->size; r++) {
        fm_peer_t *p = &fm->peers[r];
        if (p->broken || p->rdead)
            continue;
        uint64_t w0;
        uint32_t len;
        /* Discarding is no event: nothing is left for the application. */
        if (p->rstate == FM_R_DRAIN)
            drain_arrived(fm, p);
        for (int k = 0; k < 16 && peek_at(p, p->seen, p->seen_seq, &w0, &len); k++) {
            uint64_t slot = slot_of(p, p->seen, w0, len);
            if (!slot)
                break;
            p->seen += slot;
            p->seen_seq = fm_seq_next(p->seen_seq);
            ev++;
        }
        req_check(p);
        if (p->req_pending && p->tail > p->returned) {
            credit_return(fm, p);
            ev++;
        }
    }
    ev += credit_waits(fm);
    fm_runlock(fm);
    return ev;
}

int fm_hook_arm(void *arg)
{
    fm_t *fm = arg;
    if (!rtrylock(fm))
        return 1;
    int pending = 0;
    for (int r = 0; r < fm->size && !pending; r++) {
        fm_peer_t *p = &fm->peers[r];
        if (p->broken || p->rdead)
            continue;
        /* The endpoint is about to sleep: give back credits held in a batch,
         * so that an idle receiver never holds its senders up. */
        if (p->tail > p->returned)
            credit_return(fm, p);
        uint64_t w0;
        uint32_t len;
        if (peek_at(p, p->seen, p->seen_seq, &w0, &len) || drainable(p, &w0, &len))
            pending = 1;
        req_check(p);
        if (p->req_pending && p->tail > p->returned)
            pending = 1;
    }
    if (credit_waits(fm))
        pending = 1;
    fm_runlock(fm);
    return pending;
}
