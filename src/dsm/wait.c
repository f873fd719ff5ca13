/* How the rank waits for the protocol.
 *
 * An application thread that waits (for a fault's answer, a lock, the
 * barrier, a reply of the manager) sleeps on dsm.cond; the service thread
 * handles the answer and wakes it. Every 100 ms the sleeper looks whether a
 * rank died (the core fails sends to a dead rank, but a rank that only
 * waits for an answer from it would otherwise wait for ever).
 *
 * vmmc's wait spins a while (VMMC_SPIN) after activity before it sleeps:
 * on a core of its own that saves a wake-up per message, but a spin that
 * shares its core with the rank it waits for (two ranks bound to one core,
 * or a machine loaded beyond its cores) keeps that rank from answering for
 * a whole time slice. So while an application thread of this rank waits in
 * the DSM (nothing of the rank computes), every pass of the spin ends with
 * a yield (a progress hook, VMMC_DSM_SPIN_YIELD; by default only if another
 * rank may run on this rank's processors, cpus.c): another thread that can
 * run on the core runs first, and on an idle core sched_yield() returns at
 * once. Only during the first VMMC_DSM_YIELD_WINDOW of a wait: a thread
 * that yielded to other work waits for that work's slice when its message
 * comes, while one that sleeps is woken at once, so a long wait (a barrier
 * while the other rank computes) spins and sleeps as vmmc does. While the
 * application computes, the spin stays as it is: yielding then would hand
 * the core to the computation for a whole slice and leave the next request
 * waiting. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsm/dsm_int.h"

/* The progress hook: every progress pass of the rank (the service thread's
 * spin, any vmmc wait) yields during the first VMMC_DSM_YIELD_WINDOW of a
 * wait of an application thread in the DSM. */
static int yield_hook(void *arg)
{
    (void)arg;
    if (!__atomic_load_n(&dsm.waiters, __ATOMIC_RELAXED) || pthread_mutex_trylock(&dsm.lock))
        return 0;
    /* (under the lock: a thread that left its wait is never counted) */
    int waiting = dsm.waiters > 0 && dsm_now_ns() - dsm.wait_since < dsm_cfg.yield_window;
    if (waiting)
        atomic_fetch_add_explicit(&dsm.st_spin_yields, 1, memory_order_relaxed);
    dsm_unlock();
    if (waiting)
        sched_yield();
    return 0;
}

int dsm_spin_yield_mode(void)
{
    const char *v = dsm_cfg.spin_yield;
    if (!v || !*v || !strcmp(v, "auto"))
        return 2;
    if (!strcmp(v, "y") || !strcmp(v, "yes") || !strcmp(v, "1") || !strcmp(v, "true"))
        return 1;
    if (!strcmp(v, "n") || !strcmp(v, "no") || !strcmp(v, "0") || !strcmp(v, "false"))
        return 0;
    return -1;
}

static int hooked;

int dsm_wait_hook(int add)
{
    if (!add) {
        if (hooked)
            vmmc_progress_hook_remove(dsm.ep, yield_hook, NULL);
        hooked = 0;
        return VMMC_OK;
    }
    /* Waiters poll only where every rank is reached through shared
     * memory: over udp the link's thread hands its socket to a polling
     * thread and takes it back at each wait, which cost more than the
     * wake-up saved (vmmc bench dsm --transport udp: barrier 15 -> 18 us,
     * read fault 22 -> 28 us). */
    dsm.wait_poll = dsm_cfg.wait_poll > 0 && dsm.spin_gated;
    for (int r = 0; r < dsm.n && dsm.wait_poll; r++)
        if (r != dsm.me && vmmc_peer_local(dsm.ep, r) != 1)
            dsm.wait_poll = 0;
    int mode = dsm_spin_yield_mode(), shared = 0;
    if (mode == 2) {
        int st = dsm_cpus_shared(&shared);
        if (st)
            return st;
    }
    if (mode == 1 || shared) {
        int st = vmmc_progress_hook_add(dsm.ep, yield_hook, NULL, NULL);
        if (st)
            return dsm_error_vmmc(st, "vmmc_dsm_init: adding a progress hook");
        hooked = 1;
    }
    return VMMC_OK;
}

/* The service thread spins after a message only while an application
 * thread of the rank waits in the DSM (VMMC_DSM_SERVICE_SPIN=waiting): the
 * processor is then free, and the answer is taken at once. When none
 * waits, the application computes, maybe on the same processor; a spinning
 * service thread is awake, so nobody wakes it, and a request that comes
 * while the scheduler runs the computation waits for the end of its time
 * slice (about 1.2 ms in the busy-owner benchmark), where a sleeping one
 * is woken and runs at once. The first waiter wakes a sleeping service
 * thread (dsm_wait_locked), so it spins while the answer travels; once the
 * answer has woken the waiters, the gate closes until one of them has run,
 * so the service thread sleeps and leaves the processor to it. (With
 * VMMC_DSM_SERVICE_SPIN=always, a sched_yield() after the wake does that,
 * VMMC_DSM_YIELD; but the yielded thread stays runnable, and a request that
 * comes while the woken thread computes waits for its time slice.) */
int dsm_spin_gate(void *arg)
{
    (void)arg;
    return __atomic_load_n(&dsm.waiters, __ATOMIC_RELAXED) > 0 &&
           !__atomic_load_n(&dsm.woken, __ATOMIC_RELAXED);
}

/* A waiter is woken only once the lock is dropped: broadcast under the
 * lock, it wakes, finds the lock taken and sleeps again on it, two more
 * context switches per answer when the handler and the waiter share a
 * core (a rank bound to one cpu). So dsm_wake() only notes the change
 * and dsm_unlock() broadcasts after the unlock; a waiter that checked its
 * condition before the change is already in the condition's wait set, so
 * the later broadcast still reaches it. */
void dsm_wake(void)
{
    dsm.wake_pending = 1;
}

void dsm_unlock(void)
{
    int wake = dsm.wake_pending;
    dsm.wake_pending = 0;
    if (wake) {
        /* (seen by a waiter that dropped the lock to wake the service thread or to poll) */
        __atomic_store_n(&dsm.wake_gen, dsm.wake_gen + 1, __ATOMIC_RELAXED);
        if (dsm.waiters)
            __atomic_store_n(&dsm.woken, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&dsm.lock);
    if (wake)
        pthread_cond_broadcast(&dsm.cond);
}

/* A waiter for a minipage (a fault, unless VMMC_DSM_FAULT_POLL=n), a lock,
 * the barrier or the manager first drives the rank's progress itself
 * (vmmc_service_borrow), for at most VMMC_DSM_WAIT_POLL, while the service
 * thread sleeps on: the answer's handler then runs in the waiting thread,
 * which returns as soon as it has run, where otherwise the waiter wakes
 * the service thread, the service thread spins, runs the handler and wakes
 * the waiter (barrier 5.2 -> 1.2 us). It is done when anything was
 * broadcast (the caller looks again). On a
 * processor that other ranks may need (the spin yield hook is installed),
 * it yields at every pass during the yield window, as the spin does. */
static int poll_done(void *arg)
{
    const uint64_t *gen = arg;
    if (dsm.early_want) { /* (only the waiting thread sets it) */
        pthread_mutex_lock(&dsm.lock);
        dsm_open_early();
        dsm_unlock();
    }
    if (__atomic_load_n(&dsm.wake_gen, __ATOMIC_RELAXED) != gen[0] ||
        __atomic_load_n(&dsm.broken, __ATOMIC_RELAXED))
        return 1;
    if (hooked && dsm_now_ns() - gen[1] < dsm_cfg.yield_window) {
        atomic_fetch_add_explicit(&dsm.st_spin_yields, 1, memory_order_relaxed);
        sched_yield();
    }
    return 0;
}

static int wait_polled(int access)
{
    uint64_t arg[2] = {dsm.wake_gen, dsm_now_ns()};
    pthread_mutex_unlock(&dsm.lock);
    int got = vmmc_service_borrow(dsm.ep, poll_done, arg, dsm_cfg.wait_poll);
    pthread_mutex_lock(&dsm.lock);
    if (got) {
        atomic_fetch_add_explicit(&dsm.st_polled_waits, 1, memory_order_relaxed);
        if (access)
            atomic_fetch_add_explicit(&dsm.st_polled_faults, 1, memory_order_relaxed);
    }
    return got || dsm.wake_gen != arg[0];
}

int dsm_wait_locked(int poll)
{
    dsm_sched_skip_thread(1); /* an application thread: handlers it runs keep its scheduling */
    if (dsm.broken)
        return dsm_error(VMMC_ERR_PEER_DEAD, "%s", dsm.broken_why);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    /* (atomic: the hook looks at it without the lock first) */
    if (dsm.wake_pending) { /* a change this thread made: other waiters must see it */
        dsm.wake_pending = 0;
        __atomic_store_n(&dsm.wake_gen, dsm.wake_gen + 1, __ATOMIC_RELAXED);
        pthread_cond_broadcast(&dsm.cond);
    }
    if (poll && dsm.wait_poll && wait_polled(poll == DSM_WAIT_ACCESS))
        return dsm.broken ? dsm_error(VMMC_ERR_PEER_DEAD, "%s", dsm.broken_why) : VMMC_OK;
    /* (VMMC_DSM_THREADS=funneled opens a faulting page early only in a
     * polled wait, poll_done: in a fault that sleeps here, across udp,
     * opening it first made the fault 1.1-1.2x slower, docs/dsm.md) */
    dsm.early_want = 0;
    if (__atomic_fetch_add(&dsm.waiters, 1, __ATOMIC_RELAXED) == 0) {
        dsm.wait_since = dsm_now_ns();
        if (dsm.spin_gated) {
            /* A sleeping service thread wakes and spins for the answer. Not
             * under the lock: woken, it may take this thread's processor at
             * once, and it must be able to handle the answer then. A change
             * meanwhile is seen in wake_gen, and the caller looks again. */
            uint64_t gen = dsm.wake_gen;
            pthread_mutex_unlock(&dsm.lock);
            vmmc_signal(dsm.ep, dsm.me);
            pthread_mutex_lock(&dsm.lock);
            if (dsm.wake_gen != gen || dsm.broken) {
                __atomic_fetch_sub(&dsm.waiters, 1, __ATOMIC_RELAXED);
                __atomic_store_n(&dsm.woken, 0, __ATOMIC_RELAXED);
                return dsm.broken ? dsm_error(VMMC_ERR_PEER_DEAD, "%s", dsm.broken_why) : VMMC_OK;
            }
        }
    }
    int rc = pthread_cond_timedwait(&dsm.cond, &dsm.lock, &ts);
    __atomic_fetch_sub(&dsm.waiters, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&dsm.woken, 0, __ATOMIC_RELAXED); /* a woken thread runs */
    if (rc == ETIMEDOUT) {
        atomic_fetch_add_explicit(&dsm.st_wait_timeouts, 1, memory_order_relaxed);
        for (int r = 0; r < dsm.n && !dsm.broken; r++)
            if (r != dsm.me && vmmc_peer_alive(dsm.ep, r) == 0)
                dsm_break("rank %d died (or left the job) while this rank waited for the DSM", r);
    }
    if (dsm.broken)
        return dsm_error(VMMC_ERR_PEER_DEAD, "%s", dsm.broken_why);
    return VMMC_OK;
}
