/* Waiting for symmetric memory to change, and the doorbell that wakes a
 * waiting PE.
 *
 * A waiter spins VMMC_SHMEM_SPIN, then sleeps in bounded sleeps
 * (VMMC_SHMEM_SLEEP, 1 ms) until its condition holds, spinning again
 * after each sleep that a ring ended: a plain put rings no
 * bell, so it must still be seen. Where every PE is on this host the sleep
 * is a futex on the doorbell word of this PE's heap header (a MAP_SHARED
 * word, so no FUTEX_PRIVATE_FLAG), and a ringer on this host bumps the
 * doorbell and wakes it. When some PE is on another host, a ringer there
 * cannot reach the futex: the waiter sleeps in vmmc_wait() instead, which
 * vmmc_signal() from any PE, and a peer's write or atomic landing here,
 * wake; ringers on this host signal too. A progress hook reports the
 * sleeper's condition, so vmmc_wait returns as soon as it holds. Not the
 * endpoint's event fd: with it armed, every vmmc_progress of the spin would
 * hand the udp socket back to the link thread and wake that thread on this
 * core, which then answers the peers' gets and atomics in the spinner's
 * place, a context switch each.
 *
 * No wake-up is lost: the waiter reads the doorbell, arms it (`armed`),
 * announces itself in `sleepers`, checks its condition once more, and
 * sleeps only while the doorbell still holds the value it read; the ringer
 * makes its update visible (full fence), then reads `sleepers`, and only
 * when someone sleeps takes the arm (an exchange) and, if it was armed,
 * bumps the doorbell and wakes. So a stream of atomics to a sleeping PE
 * makes one system call per sleep, not one per operation: the ringers
 * after the first find it disarmed, and the update they made is seen by
 * the woken waiter's next check (it arms again before that check, so a
 * ring that finds it disarmed happened before the arm in the exchange's
 * order, and its update before the check). */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shmem/shmem_core.h"
#include "util/clock.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void shm_exit_check(void)
{
    shm_hdr_t *h = shm_g.heap ? shm_hdr() : NULL;
    if (!h)
        return;
    uint64_t w = atomic_load_explicit(&h->exit_word, memory_order_acquire);
    if (__builtin_expect((w & SHM_EXIT_REQ) != 0, 0)) {
        /* Another PE ended the job: leave with its status, running no
         * atexit handler (they would wait for PEs that are going away). */
        _exit((int)(uint32_t)w);
    }
}

static void progress_or_die(int (*ready)(void *arg), void *arg)
{
    int rc = vmmc_progress(shm_g.ep);
    if (rc < 0 && !ready(arg))
        shm_fatal_vmmc("shmem", "waiting for symmetric memory", rc);
}

static void sleep_futex(shm_hdr_t *h, uint32_t seq)
{
    struct timespec ts = {(time_t)(shm_cfg.sleep_ns / 1000000000ull),
                          (long)(shm_cfg.sleep_ns % 1000000000ull)};
    (void)syscall(SYS_futex, &h->doorbell, FUTEX_WAIT, seq, &ts, NULL, 0);
}

/* The conditions of the PEs' threads asleep in vmmc_wait (some PE on
 * another host), which the progress hook reports. */
typedef struct sleeper {
    int (*ready)(void *arg);
    void *arg;
    uint64_t served; /* atomics_served() when it went to sleep */
    struct sleeper *next;
} sleeper_t;

static pthread_mutex_t sleepers_lock = PTHREAD_MUTEX_INITIALIZER;
static sleeper_t *sleepers;
static _Atomic int nsleepers;

/* The endpoint's counters "atomics_served" (how many peers' atomics this
 * endpoint executed) and "udp.delivered_frags" (datagrams the udp link
 * delivered: peers' writes, reads and atomics, and answers), read with
 * vmmc_counter_get. Their indexes are looked up by name, and again when
 * the name at the index changed (the transports' counters follow the
 * core's, those of each transport open on the endpoint in turn). A waiter
 * that serves a stream of peers' requests (fetch-adds or gets while this
 * PE waits in a barrier) keeps spinning (spin_phase), so that it answers
 * them inline. */
typedef struct counter_ref {
    const char *name;
    _Atomic int idx;       /* -1: not known (yet) */
    _Atomic unsigned miss; /* reads since a lookup found nothing */
} counter_ref_t;

static counter_ref_t c_served = {"atomics_served", -1, 0};
static counter_ref_t c_frags = {"udp.delivered_frags", -1, 0};

static uint64_t counter(counter_ref_t *c)
{
    const char *name = NULL;
    uint64_t v = 0;
    int i = atomic_load_explicit(&c->idx, memory_order_relaxed);
    if (i >= 0 && vmmc_counter_get(shm_g.ep, i, &name, &v) == VMMC_OK && name &&
        !strcmp(name, c->name))
        return v;
    /* Not there (no udp link, say): look again now and then only. */
    if (i < 0 && atomic_fetch_add_explicit(&c->miss, 1, memory_order_relaxed) % 1024)
        return 0;
    for (i = 0; i < 1024; i++) {
        if (vmmc_counter_get(shm_g.ep, i, &name, &v) != VMMC_OK)
            break;
        if (name && !strcmp(name, c->name)) {
            atomic_store_explicit(&c->idx, i, memory_order_relaxed);
            return v;
        }
    }
    atomic_store_explicit(&c->idx, -1, memory_order_relaxed);
    atomic_store_explicit(&c->miss, 1, memory_order_relaxed);
    return 0;
}

static uint64_t atomics_served(void)
{
    return counter(&c_served);
}

/* Requests (and anything else) that peers on other hosts sent here. */
static uint64_t activity(void)
{
    return counter(&c_served) + counter(&c_frags);
}

/* Progress hook (and its arm): 1 when a sleeper's condition holds, or a
 * peer's atomic was executed here since it went to sleep (the woken waiter
 * then spins and answers the next ones inline, shm_wait), so that
 * vmmc_wait returns (or does not sleep). */
static int sleeper_ready(void *unused)
{
    (void)unused;
    if (!atomic_load_explicit(&nsleepers, memory_order_acquire))
        return 0;
    int any = 0;
    uint64_t served = atomics_served();
    pthread_mutex_lock(&sleepers_lock);
    for (sleeper_t *s = sleepers; s && !any; s = s->next)
        any = s->served != served || s->ready(s->arg);
    pthread_mutex_unlock(&sleepers_lock);
    return any;
}

static int hooked;

void shm_wait_init(void)
{
    if (!shm_g.any_remote || hooked)
        return;
    int st = vmmc_progress_hook_add(shm_g.ep, sleeper_ready, sleeper_ready, NULL);
    if (st != VMMC_OK)
        shm_fatal_vmmc("shmem_init", "the progress hook of waits", st);
    hooked = 1;
}

void shm_wait_fini(void)
{
    if (hooked && shm_g.ep)
        (void)vmmc_progress_hook_remove(shm_g.ep, sleeper_ready, NULL);
    hooked = 0;
}

/* One sleep of at most @ms in vmmc_wait, which returns early once @ready
 * holds (the hook), at a peer's write or atomic, or at a signal. */
static int sleep_remote(int (*ready)(void *arg), void *arg, int ms)
{
    sleeper_t me = {ready, arg, atomics_served(), NULL};
    pthread_mutex_lock(&sleepers_lock);
    me.next = sleepers;
    sleepers = &me;
    pthread_mutex_unlock(&sleepers_lock);
    atomic_fetch_add_explicit(&nsleepers, 1, memory_order_seq_cst);
    int rc = vmmc_wait(shm_g.ep, ms);
    atomic_fetch_sub_explicit(&nsleepers, 1, memory_order_relaxed);
    pthread_mutex_lock(&sleepers_lock);
    for (sleeper_t **pp = &sleepers; *pp; pp = &(*pp)->next)
        if (*pp == &me) {
            *pp = me.next;
            break;
        }
    pthread_mutex_unlock(&sleepers_lock);
    return rc;
}

/* Spin until @ready or VMMC_SHMEM_SPIN has passed: 1 if ready. With PEs on
 * other hosts, VMMC_SHMEM_SPIN after the last peer's request this thread
 * saw served here (activity()): a stream of them (fetch-adds, gets, locks)
 * is answered inline, where a waiter that slept between two of them had
 * the next one wait for the link thread to be woken (~10-50 us, against a
 * ~4 us round trip; an atomic also woke the waiter only to sleep again).
 * Bounded all the same: it ends VMMC_SHMEM_SPIN after the peers stop. */
static int spin_phase(int (*ready)(void *arg), void *arg)
{
    uint64_t start = vmmc_now_ns();
    int remote = shm_g.any_remote;
    uint64_t served = remote ? activity() : 0;
    for (unsigned i = 1;; i++) {
        if (ready(arg))
            return 1;
        if (remote) {
            /* Peers on other hosts reach this PE through the udp link:
             * receive inline while spinning (their puts land, their gets
             * and atomics are answered at once) rather than leave it to
             * the link thread, which shares this core with the spinner and
             * would run only when the scheduler preempts it; yield now and
             * then for that thread's timers. */
            (void)vmmc_progress(shm_g.ep);
            if ((i & 63) == 0)
                sched_yield();
        } else {
            cpu_relax();
        }
        if ((i & 255) == 0) {
            shm_exit_check();
            uint64_t now = vmmc_now_ns();
            if (remote) {
                uint64_t s = activity();
                if (s != served) {
                    served = s;
                    start = now;
                }
            }
            if (now - start >= shm_cfg.spin_ns)
                return 0;
        }
    }
}

void shm_wait(int (*ready)(void *arg), void *arg)
{
    if (ready(arg))
        return;
    shm_hdr_t *h = shm_hdr();
    int ms = (int)(shm_cfg.sleep_ns / 1000000ull);
    if (ms < 1)
        ms = 1;
    int spin = 1;
    for (;;) {
        /* Spin first, and again after every wake-up by a ring: a PE that is
         * rung is likely to be rung again soon (a stream of atomics, the
         * next barrier), and a sleeper that slept again at once would make
         * each of those rings a system call. Sleeps that time out do not
         * spin again. */
        if (spin && spin_phase(ready, arg))
            return;
        uint32_t seq = atomic_load_explicit(&h->doorbell, memory_order_acquire);
        atomic_store_explicit(&h->armed, 1, memory_order_seq_cst);
        atomic_fetch_add_explicit(&h->sleepers, 1, memory_order_seq_cst);
        if (ready(arg)) {
            atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_relaxed);
            return;
        }
        if (shm_g.any_remote) {
            uint64_t act = activity();
            int rc = sleep_remote(ready, arg, ms);
            atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_relaxed);
            /* a PE that died after its last write to us is no error */
            if (rc < 0 && !ready(arg))
                shm_fatal_vmmc("shmem", "waiting for symmetric memory", rc);
            /* Spin again after a sleep during which peers' requests were
             * served (by the link thread: a get wakes nobody): more are
             * likely to come, and answering them here spares the link
             * thread's wake-ups. */
            spin = rc > 0 || atomic_load_explicit(&h->doorbell, memory_order_relaxed) != seq ||
                   activity() != act;
        } else {
            sleep_futex(h, seq);
            atomic_fetch_sub_explicit(&h->sleepers, 1, memory_order_relaxed);
            progress_or_die(ready, arg);
            spin = atomic_load_explicit(&h->doorbell, memory_order_relaxed) != seq;
        }
        shm_exit_check();
        if (ready(arg))
            return;
    }
}

void shm_ring(int pe)
{
    char *base = shm_g.pe[pe].heap;
    if (!base) {
        /* another host: its waiters sleep in vmmc_wait */
        int st = vmmc_signal(shm_g.ep, pe);
        if (st != VMMC_OK)
            shm_fatal_vmmc("shmem", "waking a PE", st);
        return;
    }
    shm_hdr_t *h = (shm_hdr_t *)(void *)base;
    atomic_thread_fence(memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(&h->sleepers, memory_order_relaxed) == 0, 1))
        return;
    if (!atomic_exchange_explicit(&h->armed, 0, memory_order_seq_cst))
        return; /* an earlier ring of this sleep woke it already */
    atomic_fetch_add_explicit(&h->doorbell, 1, memory_order_seq_cst);
    if (shm_g.any_remote)
        (void)vmmc_signal(shm_g.ep, pe);
    else
        (void)syscall(SYS_futex, &h->doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ---- the exit watcher: with PEs on several hosts, a PE that computes
 * and never waits must still end when another calls shmem_global_exit. */

static pthread_t watcher;
static int watching;
static _Atomic int watch_stop;

static void *watch(void *arg)
{
    (void)arg;
    struct timespec ts = {(time_t)(shm_cfg.exit_poll_ns / 1000000000ull),
                          (long)(shm_cfg.exit_poll_ns % 1000000000ull)};
    while (!atomic_load(&watch_stop)) {
        nanosleep(&ts, NULL);
        shm_exit_check();
    }
    return NULL;
}

void shm_exit_watch_start(void)
{
    if (!shm_g.any_remote || watching)
        return;
    atomic_store(&watch_stop, 0);
    if (pthread_create(&watcher, NULL, watch, NULL) == 0)
        watching = 1;
    else
        fprintf(stderr, "shmem: shmem_init: no thread to watch for shmem_global_exit (%d)\n",
                errno);
}

void shm_exit_watch_stop(void)
{
    if (!watching)
        return;
    atomic_store(&watch_stop, 1);
    pthread_join(watcher, NULL);
    watching = 0;
}
