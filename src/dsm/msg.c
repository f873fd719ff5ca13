/* Messages: every one is a notification on the destination's export of its
 * privileged view (vmmc_send_imm with VMMC_SEND_NOTIFY): the 64-bit
 * immediate says what it is, and a DATA message carries the minipage's
 * bytes, which the core has placed at their own offset of the privileged
 * view before the handler runs. The handler (dsm_notify) runs in vmmc's
 * service thread, so a rank that computes still serves requests, and
 * nobody polls.
 *
 * Messages are posted under dsm.lock into the rank's outbox and sent by
 * dsm_unlock_flush() without the lock, in the order they were posted; a
 * message to this rank itself is handled there, by the flushing thread.
 * Every field of a message from another rank is checked before it changes
 * anything. Requests carry the sender's clock at the send (stats.c), from
 * which the serving rank counts how long each waited for it. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "dsm/dsm_int.h"

/* The outbox: one FIFO for the whole rank, filled under dsm.lock. One
 * thread at a time (the first that flushes) sends it, in order, so messages
 * leave in the order the protocol posted them whichever thread posted
 * them: a reader served by this rank gets its copy before an invalidation
 * of it posted later by another thread. */
static dsm_out_t *ob;
static size_t ob_head, ob_n, ob_cap;
static int flushing;

static void post(int dest, uint64_t imm, size_t off, size_t len)
{
    if (ob_head && ob_head == ob_n)
        ob_head = ob_n = 0;
    if (ob_n == ob_cap) {
        if (ob_head) { /* slide the unsent part down */
            memmove(ob, ob + ob_head, (ob_n - ob_head) * sizeof *ob);
            ob_n -= ob_head;
            ob_head = 0;
        }
        if (ob_n == ob_cap) {
            size_t cap = ob_cap ? ob_cap * 2 : 64;
            dsm_out_t *p = realloc(ob, cap * sizeof *p);
            if (!p) {
                dsm_break("out of memory for outgoing messages");
                return;
            }
            ob = p;
            ob_cap = cap;
        }
    }
    ob[ob_n++] = (dsm_out_t){dest, imm, off, len};
    atomic_fetch_add(&dsm.sending, 1);
}

void dsm_post(int dest, uint64_t imm)
{
    post(dest, imm, 0, 0);
}

void dsm_post_data(int dest, uint64_t imm, size_t off, size_t len)
{
    post(dest, imm, off, len);
}

static void dispatch(int src, uint64_t imm, size_t off, size_t len);

/* Send what is posted, then drop dsm.lock (held on entry). If another
 * thread is sending, it sends ours too. Messages to this rank are handled
 * here, in order. Waiters are woken only once everything is sent: a woken
 * application thread that shares this thread's core runs at once and may
 * compute for a while, and a message still in the outbox (a barrier's
 * release, a minipage's DONE) would wait for it. */
void dsm_unlock_flush(void)
{
    if (flushing) { /* that thread wakes the waiters once all is sent */
        pthread_mutex_unlock(&dsm.lock);
        return;
    }
    flushing = 1;
    while (ob_head < ob_n) {
        dsm_out_t o = ob[ob_head++];
        if (o.dest == dsm.me) {
            dispatch(o.dest, o.imm, o.off, o.len); /* may post more */
        } else {
            pthread_mutex_unlock(&dsm.lock); /* (waking waits until all is sent) */
            int st = vmmc_send_imm(dsm.px[o.dest], o.off, o.len ? dsm.priv + o.off : NULL, o.len,
                                   VMMC_SEND_NOTIFY, dsm_stamp(o.imm, dsm_now_ns()));
            const char *why = st != VMMC_OK ? vmmc_last_error() : NULL;
            pthread_mutex_lock(&dsm.lock);
            if (st == VMMC_OK)
                atomic_fetch_add_explicit(&dsm.st_msgs_sent, 1, memory_order_relaxed);
            else
                dsm_break("sending to rank %d: %s: %s", o.dest, vmmc_strerror(st), why);
        }
        atomic_fetch_sub(&dsm.sending, 1);
    }
    ob_head = ob_n = 0;
    flushing = 0;
    dsm_unlock();
}

void dsm_outbox_free(void)
{
    free(ob);
    ob = NULL;
    ob_head = ob_n = ob_cap = 0;
}

/* Types a home receives (about a minipage it is home of), types only rank 0
 * receives (placement, locks, barrier), and types a home or rank 0 sends. */
static int to_home(unsigned t)
{
    return t == M_REQ_R || t == M_REQ_W || t == M_ACK || t == M_DONE || t == M_FREE ||
           t == M_PUSH;
}

static int to_rank0(unsigned t)
{
    return t == M_MALLOC || t == M_LOCK || t == M_UNLOCK || t == M_BAR || t == M_RELEASE ||
           t == M_WHERE;
}

static int from_manager(unsigned t)
{
    return t == M_FWD_R || t == M_FWD_W || t == M_FWD_PUSH || t == M_GRANT_R || t == M_GRANT_W ||
           t == M_NACK || t == M_INV || t == M_MALLOC_REP || t == M_FREE_REP || t == M_PUSH_REP ||
           t == M_LOCK_GRANT || t == M_BAR_GO || t == M_CREATE;
}

#define BAD(why)                                                                                   \
    do {                                                                                           \
        dsm_bad_msg(src, imm, why);                                                                \
        return;                                                                                    \
    } while (0)

/* May @src send this rank the manager's message @imm? Rank 0 may send any;
 * a home only about a minipage of its pages (a new one's bytes for
 * MALLOC_REP); locks, the barrier and CREATE come from rank 0 only. */
static int manager_sent(int src, uint64_t imm)
{
    unsigned t = IMM_TYPE(imm);
    if (src == dsm_manager())
        return 1;
    if (t == M_LOCK_GRANT || t == M_BAR_GO || t == M_CREATE)
        return 0;
    if (t == M_MALLOC_REP)
        return dsm.spread && src == dsm_home_page((size_t)(imm >> 18) / DSM_PAGE);
    return src == dsm_home(IMM_ID(imm));
}

static void dispatch(int src, uint64_t imm, size_t off, size_t len)
{
    unsigned t = IMM_TYPE(imm);
    if (t == 0 || t >= M_NTYPES)
        BAD("unknown type");
    if (len && t != M_DATA_R && t != M_DATA_W)
        BAD("bytes with a control message");
    if (t != M_MALLOC && t != M_MALLOC_REP && t != M_BCAST &&
        ((t != M_CREATE && IMM_RANK(imm) >= dsm.n) || IMM_ID(imm) >= dsm.npages * dsm.views))
        BAD("rank or minipage out of range");
    if (to_rank0(t) && dsm.me != dsm_manager())
        BAD("a message for rank 0 to another rank");
    if (to_home(t) && (!dsm.mgr || (dsm_home(IMM_ID(imm)) != dsm.me && src != dsm_manager() &&
                                    !(t == M_FREE && dsm.page_mode))))
        BAD("a manager's message to a rank that is not the minipage's home");
    if (from_manager(t) && !manager_sent(src, imm))
        BAD("a manager's message from a rank that is not the minipage's home");
    switch (t) {
    case M_REQ_R:
    case M_REQ_W:
    case M_PUSH:
    case M_FREE:
        dsm_mgr_request(src, imm);
        break;
    case M_ACK:
        dsm_mgr_ack(src, imm);
        break;
    case M_DONE:
        dsm_mgr_done(src, imm);
        break;
    case M_MALLOC:
        dsm_mgr_malloc(src, imm);
        break;
    case M_CREATE:
        dsm_mgr_create_msg(src, imm);
        break;
    case M_RELEASE:
        dsm_mgr_release_msg(src, imm);
        break;
    case M_WHERE:
        dsm_mgr_where(src, imm);
        break;
    case M_FWD_R:
    case M_FWD_W:
    case M_FWD_PUSH:
        dsm_on_forward(src, imm);
        break;
    case M_DATA_R:
    case M_DATA_W:
        dsm_on_data(src, imm, off, len);
        break;
    case M_GRANT_R:
    case M_GRANT_W:
        dsm_on_grant(src, imm);
        break;
    case M_NACK:
        dsm_on_nack(src, imm);
        break;
    case M_REQ_D:
        dsm_on_req_d(src, imm);
        break;
    case M_NOTOWN:
        dsm_on_notown(src, imm);
        break;
    case M_DINV:
        dsm_on_dinv(src, imm);
        break;
    case M_DACK:
        dsm_on_dack(src, imm);
        break;
    case M_INV:
        dsm_on_inval(src, imm);
        break;
    case M_MALLOC_REP:
    case M_FREE_REP:
    case M_PUSH_REP:
        dsm_on_reply(src, imm);
        break;
    default: /* locks, barrier, broadcast */
        dsm_sync_on_msg(src, imm);
        break;
    }
}

/* Answers an application thread of this rank waits for. With
 * VMMC_DSM_SERVICE_SPIN=always the service thread that handled one spins on
 * in vmmc's wait (VMMC_SPIN) for the next notification; when the woken
 * thread shares its core (a rank bound to one core, or a loaded machine),
 * that spin delays it, and yielding once hands the core over at once
 * (VMMC_DSM_YIELD). By default the spin gate closes instead (wait.c). */
static int wakes_waiter(unsigned t)
{
    return t == M_DATA_R || t == M_DATA_W || t == M_GRANT_R || t == M_GRANT_W || t == M_NACK ||
           t == M_NOTOWN || t == M_MALLOC_REP || t == M_FREE_REP || t == M_PUSH_REP ||
           t == M_LOCK_GRANT || t == M_BAR_GO || t == M_BCAST;
}

void dsm_notify(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)arg;
    if (n->sender < 0 || n->sender >= dsm.n || n->sender == dsm.me)
        return; /* not a rank of the job (or a forged self) */
    uint64_t start = dsm_now_ns();
    pthread_mutex_lock(&dsm.lock);
    int active = dsm.active;
    if (active)
        dispatch(n->sender, n->imm, n->offset, n->length);
    int woke = active && dsm.waiters > 0 && wakes_waiter(IMM_TYPE(n->imm));
    dsm_unlock_flush();
    if (woke && dsm_cfg.yield && !dsm.spin_gated)
        sched_yield(); /* the thread just woken may share this core (see wakes_waiter) */
    if (active) /* served: what it asked for is sent (docs/dsm.md, Counters) */
        dsm_stats_serve(n->sender, n->imm, start, dsm_now_ns());
}
