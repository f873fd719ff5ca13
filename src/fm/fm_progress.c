/* Fast Messages, receiving side: the receive lock, credit returns, the core
 * progress hook, waiting (fm_extract_wait) and dead senders.
 *
 * The hook never runs handlers (the receiver decides when handlers run, as
 * in FM): it looks ahead in the rings so that vmmc_wait() wakes for new
 * packets, answers credit requests, discards the arrived rest of messages
 * being drained, and reports credits a blocked sender waits for. */
#include <sched.h>
#include <time.h>

#include "fm/fm_recv.h"

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

double fm_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A channel's sender may be here before we have imported its region: the
 * credits wait until we have (each later consume or extract tries again;
 * the sender asks for them when it runs short). Returns 1 when connected. */
static VMMC_COLD __attribute__((noinline)) int credit_peer_ready(fm_t *fm, fm_peer_t *p)
{
    if (fm_peer_closed(p)) {
        /* It closed the channel: nobody to give them to, and no import to
         * try again and again. */
        p->returned = p->tail;
        p->req_pending = 0;
        return 0;
    }
    return fm_peer_step(fm, p) == VMMC_OK;
}

void fm_credit_return(fm_t *fm, fm_peer_t *p)
{
    if (VMMC_UNLIKELY(!fm_peer_ready(p)) && !credit_peer_ready(fm, p))
        return;
    p->returned = p->tail;
    p->req_pending = 0;
    FM_CNT(fm, FM_C_CREDIT_RET, 1);
    fm_send_credit(fm, p, p->tail);
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

/* Look for ranks that died. A dead sender whose ring is empty is retired; a
 * handler suspended in its message is resumed with VMMC_ERR_PEER_DEAD.
 * Returns VMMC_ERR_PEER_DEAD if any rank is known dead. */
int fm_dead_check(fm_t *fm)
{
    fm->last_dead_check = fm_now_s();
    int n = fm_nslots(fm);
    for (int r = 0; r < n; r++) {
        fm_peer_t *p = fm_peer_at(fm, r);
        if (!p || r == fm->rank || p->rdead)
            continue;
        if (!p->sdead) {
            if (vmmc_peer_alive(fm->ep, r) != 0)
                continue;
            p->sdead = 1;
        }
        uint64_t w0;
        uint32_t len;
        if (!p->broken && fm_peer_has_ring(p) && peek_at(p, p->tail, p->rseq, &w0, &len))
            continue; /* it left packets: take them first */
        p->rdead = 1;
        /* A peer beyond the job that leaves is retired, not a dead rank of
         * a job: a server's waits go on for its other clients. */
        if (r < fm->size)
            fm->ndead++;
        if (p->ctx) {
            p->rs.err = VMMC_ERR_PEER_DEAD;
            fm_run_ctx(fm, p);
        }
    }
    for (int r = 0; r < fm->size; r++)
        if (fm->peers[r].rdead)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "fm: rank %d died", r);
    return VMMC_OK;
}

int fm_extract_wait(fm_t *fm, size_t max_bytes, int timeout_ms)
{
    if (VMMC_UNLIKELY(!fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract_wait: NULL fm");
    if (VMMC_UNLIKELY(fm->forked))
        return fm_forked_error(fm, "fm_extract_wait");
    if (fm_busy(fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_extract_wait called from a handler");
    double end = timeout_ms >= 0 ? fm_now_s() + timeout_ms * 1e-3 : 0;
    for (;;) {
        int r = fm_extract(fm, max_bytes);
        if (r != 0)
            return r;
        if (fm->ndead)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "fm: a rank of the job died and nothing is "
                              "left to extract");
        int slice = 20;
        double t = fm_now_s();
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
        if (w <= 0 || fm_now_s() - fm->last_dead_check > 0.02) {
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
    int n = 0, na = fm_act_n(fm);
    fm_act_t *act = fm_act(fm);
    for (int i = 0; i < na; i++) {
        fm_peer_t *p = act->p[i];
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
    int ev = 0, n = fm_act_n(fm);
    fm_act_t *act = fm_act(fm);
    for (int i = 0; i < n; i++) {
        fm_peer_t *p = act->p[i];
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
            fm_credit_return(fm, p);
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
    int pending = 0, n = fm_act_n(fm);
    fm_act_t *act = fm_act(fm);
    for (int i = 0; i < n && !pending; i++) {
        fm_peer_t *p = act->p[i];
        if (p->broken || p->rdead)
            continue;
        /* The endpoint is about to sleep: give back credits held in a batch,
         * so that an idle receiver never holds its senders up. */
        if (p->tail > p->returned)
            fm_credit_return(fm, p);
        uint64_t w0;
        uint32_t len;
        if (peek_at(p, p->seen, p->seen_seq, &w0, &len) || drainable(p, &w0, &len))
            pending = 1;
        req_check(p);
        if (p->req_pending && p->tail > p->returned)
            pending = 1;
        /* Credits held until its region is imported: do not sleep past that. */
        if (p->tail > p->returned &&
            atomic_load_explicit(&p->conn, memory_order_relaxed) == FM_PC_PENDING)
            pending = 1;
    }
    if (credit_waits(fm))
        pending = 1;
    fm_runlock(fm);
    return pending;
}
