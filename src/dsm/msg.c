/* Messages: every one is a notification on the destination's export of its
 * privileged view (vmmc_send_imm with VMMC_SEND_NOTIFY): the 64-bit
 * immediate says what it is, and a DATA message carries the minipage's
 * bytes, which the core has placed at their own offset of the privileged
 * view before the handler runs. The handler (dsm_notify) runs in vmmc's
 * service thread, so a rank that computes still serves requests, and
 * nobody polls.
 *
 * Messages are posted under dsm.lock into a thread-local outbox and sent by
 * dsm_flush() once the lock is dropped; a message to this rank itself is
 * handled there, by the flushing thread. Every field of a message from
 * another rank is checked before it changes anything. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsm/dsm_int.h"

static __thread dsm_out_t *ob;
static __thread size_t ob_n, ob_cap;
static pthread_key_t ob_key; /* frees a thread's outbox when it ends */
static pthread_once_t ob_once = PTHREAD_ONCE_INIT;

static void ob_key_make(void)
{
    (void)pthread_key_create(&ob_key, free);
}

static void post(int dest, uint64_t imm, size_t off, size_t len)
{
    if (ob_n == ob_cap) {
        size_t cap = ob_cap ? ob_cap * 2 : 64;
        dsm_out_t *p = realloc(ob, cap * sizeof *p);
        if (!p) {
            dsm_break("out of memory for outgoing messages");
            return;
        }
        ob = p;
        ob_cap = cap;
        pthread_once(&ob_once, ob_key_make);
        (void)pthread_setspecific(ob_key, ob);
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

void dsm_flush(void)
{
    for (size_t i = 0; i < ob_n; i++) {
        dsm_out_t o = ob[i];
        if (o.dest == dsm.me) {
            pthread_mutex_lock(&dsm.lock);
            dispatch(o.dest, o.imm, o.off, o.len); /* may post more */
            pthread_mutex_unlock(&dsm.lock);
        } else {
            int st = vmmc_send_imm(dsm.px[o.dest], o.off, o.len ? dsm.priv + o.off : NULL, o.len,
                                   VMMC_SEND_NOTIFY, o.imm);
            if (st != VMMC_OK) {
                const char *why = vmmc_last_error();
                pthread_mutex_lock(&dsm.lock);
                dsm_break("sending to rank %d: %s: %s", o.dest, vmmc_strerror(st), why);
                pthread_mutex_unlock(&dsm.lock);
            }
        }
        atomic_fetch_sub(&dsm.sending, 1);
    }
    ob_n = 0;
}

/* Types only the manager receives, and types only the manager sends. */
static int to_manager(unsigned t)
{
    return t == M_REQ_R || t == M_REQ_W || t == M_ACK || t == M_DONE || t == M_MALLOC ||
           t == M_FREE || t == M_PUSH || t == M_LOCK || t == M_UNLOCK || t == M_BAR;
}

static int from_manager(unsigned t)
{
    return t == M_FWD_R || t == M_FWD_W || t == M_FWD_PUSH || t == M_GRANT_R || t == M_GRANT_W ||
           t == M_NACK || t == M_INV || t == M_MALLOC_REP || t == M_FREE_REP || t == M_PUSH_REP ||
           t == M_LOCK_GRANT || t == M_BAR_GO;
}

#define BAD(why)                                                                                   \
    do {                                                                                           \
        dsm_bad_msg(src, imm, why);                                                                \
        return;                                                                                    \
    } while (0)

static void dispatch(int src, uint64_t imm, size_t off, size_t len)
{
    unsigned t = IMM_TYPE(imm);
    if (t == 0 || t >= M_NTYPES)
        BAD("unknown type");
    if (len && t != M_DATA_R && t != M_DATA_W)
        BAD("bytes with a control message");
    if (to_manager(t) && !dsm.mgr)
        BAD("a manager's message to a rank that is not the manager");
    if (from_manager(t) && src != dsm_manager())
        BAD("a manager's message from another rank");
    if (t != M_MALLOC && t != M_MALLOC_REP && t != M_BCAST &&
        (IMM_RANK(imm) >= dsm.n || IMM_ID(imm) >= dsm.npages * dsm.views))
        BAD("rank or minipage out of range");
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

void dsm_notify(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)arg;
    if (n->sender < 0 || n->sender >= dsm.n || n->sender == dsm.me)
        return; /* not a rank of the job (or a forged self) */
    pthread_mutex_lock(&dsm.lock);
    if (dsm.active)
        dispatch(n->sender, n->imm, n->offset, n->length);
    pthread_mutex_unlock(&dsm.lock);
    dsm_flush();
}

/* Wait for a change (lock held), looking for dead ranks now and then:
 * the core fails sends to a dead rank, but a rank that only waits for an
 * answer from it would otherwise wait for ever. */
int dsm_wait_locked(void)
{
    if (dsm.broken)
        return dsm_error(VMMC_ERR_PEER_DEAD, "%s", dsm.broken_why);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc = pthread_cond_timedwait(&dsm.cond, &dsm.lock, &ts);
    if (rc == ETIMEDOUT) {
        for (int r = 0; r < dsm.n && !dsm.broken; r++)
            if (r != dsm.me && vmmc_peer_alive(dsm.ep, r) == 0)
                dsm_break("rank %d died (or left the job) while this rank waited for the DSM", r);
    }
    if (dsm.broken)
        return dsm_error(VMMC_ERR_PEER_DEAD, "%s", dsm.broken_why);
    return VMMC_OK;
}
