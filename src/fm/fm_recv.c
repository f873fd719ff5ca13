/* Fast Messages, receiving side: extract, handlers, fm_receive (the hook,
 * waiting and dead senders are in fm_progress.c, placement in fm_zrecv.c).
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

#include "fm/fm_recv.h"

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


ssize_t fm_receive(void *buf, fm_stream_t *s, size_t n)
{
    /* Fast path: the packet at hand holds all of it (a header, a short
     * message). Only the running handler's stream is cur_rs. */
    if (VMMC_LIKELY(s && s->fm->cur_rs == s && n - 1 < s->rlen - s->rpos && !s->rdirect && buf)) {
        fm_copy(buf, s->rp + s->rpos, n);
        s->rpos += n;
        return (ssize_t)n;
    }
    if (VMMC_UNLIKELY(s && s->fm->forked))
        return fm_forked_error(s->fm, "fm_receive");
    if (VMMC_UNLIKELY(!s || s->kind != FM_RECV || s->fm->cur_rs != s))
        return vmmc_error(VMMC_ERR_INVALID, "fm_receive: not the stream of the running handler");
    if (VMMC_UNLIKELY(n && !buf))
        return vmmc_error(VMMC_ERR_INVALID, "fm_receive: NULL buffer");
    char *b = buf;
    size_t got = 0;
    if (VMMC_UNLIKELY(s->rzc) && s->zstate == 0 && !s->rlast && n > s->rlen - s->rpos)
        fm_zc_post(s->fm, s->peer, s, b + (s->rlen - s->rpos), n - (s->rlen - s->rpos));
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
void fm_run_ctx(fm_t *fm, fm_peer_t *p)
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
        fm_run_ctx(fm, p);
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
        fm_run_ctx(fm, p);
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
        fm_run_ctx(fm, p);
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
    /* Only the peers that have a ring here (the active list). */
    int n = fm_act_n(fm), npk = 0, progress;
    fm_act_t *act = fm_act(fm);
    unsigned start = fm->rr < (unsigned)n ? fm->rr : 0;
    do {
        progress = 0;
        for (int i = 0; i < n; i++) {
            unsigned idx = start + (unsigned)i;
            if (idx >= (unsigned)n)
                idx -= (unsigned)n;
            fm_peer_t *p = act->p[idx];
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
        fm_peer_t *p = act->p[i];
        req_check(p);
        if (VMMC_UNLIKELY(p->req_pending) && p->tail > p->returned)
            fm_credit_return(fm, p);
    }
    return npk;
}


int fm_extract(fm_t *fm, size_t max_bytes)
{
    if (VMMC_UNLIKELY(!fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract: NULL fm");
    if (VMMC_UNLIKELY(fm->forked))
        return fm_forked_error(fm, "fm_extract");
    if (VMMC_UNLIKELY(fm_busy(fm)))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract called from a handler");
    fm_rlock(fm);
    fm->in_extract = 1;
    int r = fm_extract_locked(fm, max_bytes);
    if (VMMC_UNLIKELY(r == 0) && ++fm->empty_polls >= 4096) {
        fm->empty_polls = 0;
        if (fm_now_s() - fm->last_dead_check > 0.01)
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
