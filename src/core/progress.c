/* The progress engine.
 *
 * vmmc_progress() takes the notifications every transport queued for this
 * endpoint (their drain op: the one way notifications reach the core) into
 * a local FIFO, runs the
 * handlers unless notifications are blocked, and calls the progress hooks of
 * the layers above. Waiting on it (spin, then sleep; the event fd; the
 * service thread) is wait.c. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/export.h"

static __thread const vmmc_ep_t *tl_progress_ep VMMC_TLS_FAST;
static __thread int tl_handler_depth VMMC_TLS_FAST;

int vmmc_in_progress(const vmmc_ep_t *ep)
{
    return tl_progress_ep == ep;
}

/* The FIFO of notifications not yet run: ep->pending, a ring whose
 * capacity is a power of two (256, doubled when full), indexed by the
 * free-running counters pend_head and pend_tail masked: no division per
 * record. Only the thread that holds progress_lock touches it. */
#define PEND_SLOT(ep, i) (&(ep)->pending[(i) & ((ep)->pend_cap - 1)])

static void pending_push(vmmc_ep_t *ep, const vmmc_nrec_t *rec)
{
    if (ep->pend_tail - ep->pend_head == ep->pend_cap) {
        size_t cap = ep->pend_cap ? ep->pend_cap * 2 : 256; /* stays a power of two */
        vmmc_nrec_t *n = malloc(cap * sizeof *n);
        if (!n) {
            VMMC_COUNT(ep, CNT_NOTIFY_DROPPED, 1);
            vmmc_log(VMMC_LOG_ERROR, "out of memory queueing a notification: dropped");
            return;
        }
        size_t cnt = ep->pend_tail - ep->pend_head;
        for (size_t i = 0; i < cnt; i++)
            n[i] = *PEND_SLOT(ep, ep->pend_head + i);
        free(ep->pending);
        ep->pending = n;
        ep->pend_cap = cap;
        ep->pend_head = 0;
        ep->pend_tail = cnt;
    }
    *PEND_SLOT(ep, ep->pend_tail) = *rec;
    ep->pend_tail++;
}

/* The open transports' queued notification records into the FIFO. */
static inline int drain_transports(vmmc_ep_t *ep)
{
    int n = 0;
    for (int i = 0; ep->tl_drain[i]; i++)
        n += ep->tl_drain[i](ep, pending_push);
    return n;
}

static inline int progress_transports(vmmc_ep_t *ep)
{
    int n = 0;
    for (int i = 0; ep->tl_progress[i]; i++)
        n += ep->tl_progress[i](ep);
    return n;
}

/* A record comes from memory or datagrams its sender wrote: it must name a
 * range inside the export, and the sender must be one that may import it. */
static int notify_allowed(const vmmc_export_t *ex, const vmmc_nrec_t *rec)
{
    if (rec->offset > ex->len || rec->length > ex->len - rec->offset)
        return 0;
    if (ex->num_importers == 0)
        return 1;
    for (int i = 0; i < ex->num_importers; i++)
        if (ex->importers[i] == rec->sender)
            return 1;
    return 0;
}

/* Run queued handlers; called with progress_lock held. */
static int dispatch(vmmc_ep_t *ep)
{
    int n = 0;
    while (ep->pend_head != ep->pend_tail &&
           atomic_load_explicit(&ep->notify_blocked, memory_order_acquire) == 0) {
        /* Read in place: nothing is pushed while a handler runs (pushes need
         * progress_lock, which this thread holds, and a progress or drain
         * from inside the handler returns at once), and the handler gets
         * its own copy (note). */
        const vmmc_nrec_t *rec = PEND_SLOT(ep, ep->pend_head);
        ep->pend_head++;
        vmmc_export_t *ex = vmmc_export_by_id(ep, rec->export_id, rec->gen);
        if (!ex) {
            VMMC_COUNT(ep, CNT_NOTIFY_DROPPED, 1); /* unexported meanwhile */
            continue;
        }
        if (!notify_allowed(ex, rec)) {
            VMMC_COUNT(ep, CNT_NOTIFY_REFUSED, 1);
            continue;
        }
        if (VMMC_UNLIKELY(ex->cq != NULL)) {
            /* A full queue keeps the record in its own backlog, in order
             * behind the others waiting there; the next record, of any
             * export, goes on. Only running out of memory loses one. */
            if (vmmc_cq_notify(ex, rec) != VMMC_OK) {
                VMMC_COUNT(ep, CNT_NOTIFY_DROPPED, 1);
                vmmc_log(VMMC_LOG_ERROR, "%s: dropped", vmmc_last_error());
                continue;
            }
            VMMC_COUNT(ep, CNT_NOTIFY_RUN, 1);
            n++;
            continue;
        }
        if (!ex->handler)
            continue; /* no handler means no notification */
        vmmc_notification_t note = {ex, rec->sender, rec->offset, rec->length, rec->imm};
        atomic_fetch_add(&ep->notify_blocked, 1);
        tl_handler_depth++;
        ex->handler(ep, &note, ex->handler_arg);
        tl_handler_depth--;
        atomic_fetch_sub(&ep->notify_blocked, 1);
        VMMC_COUNT(ep, CNT_NOTIFY_RUN, 1);
        n++;
    }
    return n;
}

static int progress_locked(vmmc_ep_t *ep);

/* After unlocking the progress lock: did a thread about to sleep miss our
 * pass (vmmc_progress_before_sleep)? Then the flag is ours to act on. */
static inline int missed_take(vmmc_ep_t *ep)
{
    vmmc_wait_hot_fence();
    return atomic_load_explicit(&ep->progress_missed, memory_order_relaxed) &&
           atomic_exchange(&ep->progress_missed, 0);
}

int vmmc_progress(vmmc_ep_t *ep)
{
    VMMC_FORK_CHECK(ep);
    if (VMMC_UNLIKELY(!ep))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_progress: NULL endpoint");
    if (VMMC_UNLIKELY(__atomic_load_n(&ep->evfd_mode, __ATOMIC_RELAXED)) && tl_progress_ep != ep)
        vmmc_wait_app_reset(ep); /* the application's epoll loop calls us */
    if (tl_progress_ep == ep || pthread_mutex_trylock(&ep->progress_lock) != 0)
        return 0; /* from inside a handler, or another thread is progressing */
    return progress_locked(ep);
}

/* The pass of a thread about to sleep, after it announced itself
 * (`sleeping`, a fence). If another thread runs a pass, that pass may have
 * drained the transports before an event was published whose sender saw
 * nobody asleep yet; its thread may then leave progress for good (an
 * application returning from vmmc_barrier), and the event would wait for
 * the sleeper's next timed wake-up, a second. So the sleeper says it
 * missed a pass (progress_missed) and tries again; if the lock is still
 * held, the holder finds the flag once it has unlocked and runs another
 * pass, which sees the event. The Dekker pair (the flag, then the lock;
 * the unlock, then the flag) costs the holder no fence: the sleeper makes
 * every thread of the process fence (membarrier), as the wait path does.
 * The sleeper does not wait for the lock: a waiter must never block on
 * the progress lock, whose holder may be running a handler that waits for
 * something the waiter's thread holds. */
int vmmc_progress_before_sleep(vmmc_ep_t *ep)
{
    if (tl_progress_ep == ep)
        return 0;
    if (pthread_mutex_trylock(&ep->progress_lock) != 0) {
        atomic_store_explicit(&ep->progress_missed, 1, memory_order_relaxed);
        vmmc_wait_fence_all();
        if (pthread_mutex_trylock(&ep->progress_lock) != 0)
            return 0;
    }
    return progress_locked(ep);
}

static int progress_locked(vmmc_ep_t *ep)
{
    int n = 0;
    for (;;) {
        tl_progress_ep = ep;
        drain_transports(ep);
        int k = dispatch(ep);
        int nh = atomic_load_explicit(&ep->nhooks, memory_order_acquire);
        for (int i = 0; i < nh; i++)
            if (ep->hooks[i].poll)
                k += ep->hooks[i].poll(ep->hooks[i].arg);
        k += progress_transports(ep);
        if (k > 0)
            vmmc_wait_note_work(ep, k); /* wakes threads that sleep while we handle events */
        n += k;
        tl_progress_ep = NULL;
        pthread_mutex_unlock(&ep->progress_lock);
        if (VMMC_LIKELY(!missed_take(ep)))
            return n;
        pthread_mutex_lock(&ep->progress_lock); /* a sleeper missed a pass: one more */
    }
}

void vmmc_progress_drain(vmmc_ep_t *ep)
{
    /* Inside a handler the queue is being dispatched: leave it alone. */
    if (tl_progress_ep == ep || pthread_mutex_trylock(&ep->progress_lock) != 0)
        return; /* (or another thread progresses, and drains) */
    int n = drain_transports(ep);
    pthread_mutex_unlock(&ep->progress_lock);
    /* A sleeper that missed this pass (vmmc_progress_before_sleep) is woken
     * to pass itself: handlers do not run here. */
    if (missed_take(ep))
        n++;
    if (n > 0)
        vmmc_ep_wake(ep); /* they run at the next progress, maybe another thread's */
}

/* Is work pending that progress would handle? (before sleeping) */
int vmmc_hooks_armed(vmmc_ep_t *ep)
{
    int pending = vmmc_tl_arm_all(ep);
    if (!atomic_load_explicit(&ep->nhooks, memory_order_acquire))
        return pending;
    pthread_mutex_lock(&ep->hooks_lock);
    int nh = atomic_load_explicit(&ep->nhooks, memory_order_acquire);
    for (int i = 0; i < nh && !pending; i++)
        pending = ep->hooks[i].arm && ep->hooks[i].arm(ep->hooks[i].arg);
    pthread_mutex_unlock(&ep->hooks_lock);
    return pending;
}

int vmmc_notify_block(vmmc_ep_t *ep)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_notify_block: NULL endpoint");
    atomic_fetch_add(&ep->notify_blocked, 1);
    return VMMC_OK;
}

int vmmc_notify_unblock(vmmc_ep_t *ep)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_notify_unblock: NULL endpoint");
    int floor = tl_progress_ep == ep ? tl_handler_depth : 0;
    int cur = atomic_load(&ep->notify_blocked);
    for (;;) {
        if (cur <= floor)
            return vmmc_error(VMMC_ERR_INVALID, cur == 0 ? "notifications are not blocked"
                                                         : "a handler cannot unblock its own level");
        if (atomic_compare_exchange_weak(&ep->notify_blocked, &cur, cur - 1))
            break;
    }
    if (cur - 1 == 0) {
        /* Queued notifications run at the next progress; wake sleepers. */
        vmmc_ep_wake(ep);
        return 1;
    }
    return 0;
}

int vmmc_progress_hook_add(vmmc_ep_t *ep, vmmc_progress_fn_t poll_fn, vmmc_progress_fn_t arm,
                           void *arg)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || (!poll_fn && !arm))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_progress_hook_add: NULL %s",
                          !ep ? "endpoint" : "functions");
    int own = tl_progress_ep != ep;
    if (own)
        pthread_mutex_lock(&ep->progress_lock);
    pthread_mutex_lock(&ep->hooks_lock);
    int n = atomic_load(&ep->nhooks), rc = VMMC_OK;
    if (n == VMMC_MAX_HOOKS) {
        rc = vmmc_error(VMMC_ERR_AGAIN, "too many progress hooks (%d)", VMMC_MAX_HOOKS);
    } else {
        ep->hooks[n] = (vmmc_hook_t){poll_fn, arm, arg};
        atomic_store_explicit(&ep->nhooks, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&ep->hooks_lock);
    if (own)
        pthread_mutex_unlock(&ep->progress_lock);
    return rc;
}

int vmmc_progress_hook_remove(vmmc_ep_t *ep, vmmc_progress_fn_t poll_fn, void *arg)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_progress_hook_remove: NULL endpoint");
    /* Under both locks: once this returns, no thread is inside the hook's
     * poll (progress_lock) or arm (hooks_lock) function. */
    int own = tl_progress_ep != ep;
    if (own)
        pthread_mutex_lock(&ep->progress_lock);
    pthread_mutex_lock(&ep->hooks_lock);
    int n = atomic_load(&ep->nhooks), rc = VMMC_ERR_NOT_FOUND;
    for (int i = 0; i < n; i++) {
        if (ep->hooks[i].poll == poll_fn && ep->hooks[i].arg == arg) {
            memmove(&ep->hooks[i], &ep->hooks[i + 1], sizeof ep->hooks[0] * (size_t)(n - i - 1));
            atomic_store(&ep->nhooks, n - 1);
            rc = VMMC_OK;
            break;
        }
    }
    pthread_mutex_unlock(&ep->hooks_lock);
    if (own)
        pthread_mutex_unlock(&ep->progress_lock);
    return rc == VMMC_OK ? rc : vmmc_error(rc, "progress hook not registered");
}

int vmmc_signal(vmmc_ep_t *ep, int rank)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_signal: NULL endpoint");
    if (rank == ep->rank) {
        vmmc_ep_wake(ep);
        return VMMC_OK;
    }
    int rc;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &rc);
    if (!p)
        return rc;
    if (VMMC_UNLIKELY(atomic_load_explicit(&p->state, memory_order_acquire) != PEER_UP)) {
        rc = vmmc_peer_connect(ep, p, (int)(vmmc_core_cfg.connect_timeout_ns / 1000000));
        if (rc != VMMC_OK)
            return rc;
    }
    return p->tl->signal(ep, &p->view);
}

/* ---- requests ---- */

static int req_done(void *arg)
{
    return vmmc_test(arg) != VMMC_INPROGRESS;
}

int vmmc_request_wait(vmmc_request_t *req, int timeout_ms)
{
    vmmc_req_int_t *r = (vmmc_req_int_t *)req;
    if (!r || (r->type != REQ_SEND && r->type != REQ_FETCH && r->type != REQ_REDIRECT))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_request_wait: not an active request");
    int rc = vmmc_test(req);
    if (rc != VMMC_INPROGRESS)
        return rc;
    vmmc_ep_t *ep = r->type != REQ_REDIRECT ? r->px->ep : ((vmmc_export_t *)r->px)->ep;
    rc = vmmc_wait_until(ep, req_done, req, timeout_ms);
    if (rc != VMMC_OK)
        return rc;
    return vmmc_test(req);
}

static int peer_idle(void *arg)
{
    return atomic_load_explicit(&((vmmc_peer_t *)arg)->async_inflight, memory_order_acquire) == 0;
}

int vmmc_send_wait_async(vmmc_peer_t *peer)
{
    if (peer_idle(peer))
        return VMMC_OK;
    /* The copy engine always finishes what it took (or fails it) and wakes
     * the endpoint when it does, so this terminates without a timeout. */
    return vmmc_wait_until(peer->ep, peer_idle, peer, -1);
}
