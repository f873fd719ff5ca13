/* Waiting: spin, then sleep; the event fd; the service thread.
 *
 * Every wake-up source has one owner, so no waiter sleeps through an event
 * that another thread consumed:
 *
 *  - The endpoint's eventfd (evfd) is written by peers (after their event is
 *    published, when the "sleeping" word says someone sleeps) and by local
 *    events (control thread, copy engine, deaths). It is read only by its
 *    owner (evfd_owner): the service thread while it runs; otherwise the
 *    first application thread that goes to sleep, for that one sleep; or,
 *    when vmmc_event_fd() is in use and nobody else holds it, the
 *    application's own vmmc_progress() for the duration of one read.
 *  - Every other sleeping application thread (a *follower*) sleeps on a
 *    futex word (wake_seq). It is woken by whoever makes its condition true:
 *    the thread that handled events (vmmc_progress with work, which also
 *    counts them in ep->work so that vmmc_wait() sees events that another
 *    thread handled), the thread that raised a local event (vmmc_ep_wake),
 *    and the owner when it gives the eventfd up (so a follower takes over).
 *  - vmmc_event_fd() hands out an epoll set holding app_evfd, and evfd while
 *    no service thread runs. app_evfd is signalled for local events and by
 *    a service thread or a waiter that handled events the application did
 *    not see. The application's vmmc_progress() resets both.
 *
 * Lost wake-ups are excluded the Dekker way: a sleeper announces itself
 * (sleepers, the sleeping word), fences, re-checks its condition, then
 * sleeps; a waker publishes its event, fences, then reads the announcements.
 * On the hot side (progress that handled events) the fence is paid by the
 * sleeper instead, with membarrier(PRIVATE_EXPEDITED), which makes every
 * thread of the process execute a full barrier. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/export.h"

int vmmc_wait_membar;
static pthread_once_t membar_once = PTHREAD_ONCE_INIT;

static void membar_init(void)
{
    long q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
        vmmc_wait_membar = 1;
}

/* The endpoint whose eventfd this thread owns right now (no self-wakes). */
static __thread vmmc_ep_t *tl_owner VMMC_TLS_FAST;
/* The endpoint this thread waits on (vmmc_wait*, or the service thread):
 * its progress calls are not the application's epoll loop. */
static __thread vmmc_ep_t *tl_waiting VMMC_TLS_FAST;

void vmmc_wait_fence_all(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (vmmc_wait_membar)
        syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

static void fd_signal(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w;
}

static uint64_t fd_drain(int fd)
{
    uint64_t v = 0;
    return read(fd, &v, sizeof v) == (ssize_t)sizeof v ? v : 0;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val, int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void wake_followers(vmmc_ep_t *ep)
{
    if (atomic_load(&ep->followers)) {
        atomic_fetch_add(&ep->wake_seq, 1);
        syscall(SYS_futex, (uint32_t *)&ep->wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
}

/* Tell the application's epoll loop to call vmmc_progress (once until it does). */
static void app_signal(vmmc_ep_t *ep)
{
    if (__atomic_load_n(&ep->evfd_mode, __ATOMIC_ACQUIRE) &&
        !atomic_exchange(&ep->app_signalled, 1))
        fd_signal(ep->app_evfd);
}

void vmmc_wait_init(vmmc_ep_t *ep)
{
    pthread_once(&membar_once, membar_init);
    ep->app_fd = ep->app_evfd = -1;
}

void vmmc_wait_fini(vmmc_ep_t *ep)
{
    if (ep->app_fd >= 0)
        close(ep->app_fd);
    if (ep->app_evfd >= 0)
        close(ep->app_evfd);
    ep->app_fd = ep->app_evfd = -1;
}

void vmmc_ep_wake(vmmc_ep_t *ep)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(ep->sleeping, memory_order_relaxed))
        fd_signal(ep->evfd);
    wake_followers(ep);
    app_signal(ep);
}

void vmmc_ep_wake_waiters(vmmc_ep_t *ep)
{
    atomic_thread_fence(memory_order_seq_cst);
    /* No progress is needed: the service thread, if it owns the eventfd,
     * sleeps on; an application thread that owns it must wake (an epoll
     * loop gets app_evfd). */
    if (atomic_load(&ep->owner_asleep))
        fd_signal(ep->evfd);
    wake_followers(ep);
    app_signal(ep);
}

void vmmc_wait_work_slow(vmmc_ep_t *ep)
{
    /* An application thread sleeping on the eventfd waits for something
     * that our handlers may have done; the service thread does not. */
    if (atomic_load(&ep->owner_asleep) && tl_owner != ep)
        fd_signal(ep->evfd);
    wake_followers(ep);
}

/* Give the eventfd up; a follower takes it over. */
static void owner_release(vmmc_ep_t *ep)
{
    tl_owner = NULL;
    atomic_store(&ep->evfd_owner, WAIT_OWN_NONE);
    atomic_thread_fence(memory_order_seq_cst);
    wake_followers(ep);
}

void vmmc_wait_app_reset(vmmc_ep_t *ep)
{
    if (tl_waiting == ep)
        return;
    /* Drain, then clear. A signal raised in between finds the flag still
     * set and writes nothing, but what it announces was published before
     * it, and the progress after this reset sees it (the exchange is a full
     * barrier); from the clear on, the next signal writes the fd again. The
     * other order lost wake-ups for good: a signal between the clear and the
     * drain wrote the fd, the drain ate that, and the flag stayed set over an
     * empty fd, so no later signal wrote it and the application slept on. */
    if (atomic_load(&ep->app_signalled)) {
        fd_drain(ep->app_evfd);
        (void)atomic_exchange(&ep->app_signalled, 0);
    }
    int o = WAIT_OWN_NONE;
    if (!atomic_load(&ep->service_run) &&
        atomic_compare_exchange_strong(&ep->evfd_owner, &o, WAIT_OWN_PROGRESS)) {
        fd_drain(ep->evfd);
        owner_release(ep);
    }
}

typedef struct waiter {
    vmmc_ep_t *ep;
    int (*done)(void *);
    void *arg;
    uint64_t deaths, work0;
    int n; /* events this thread handled */
} waiter_t;

static int ready(waiter_t *w)
{
    if (w->done)
        return w->done(w->arg);
    return w->n > 0 || atomic_load_explicit(&w->ep->work, memory_order_relaxed) != w->work0;
}

/* One sleep of at most @ms: on the eventfd if we can own it, else on the
 * futex. Returns after an event, a hand-over or the timeout. */
static void sleep_once(waiter_t *w, int ms)
{
    vmmc_ep_t *ep = w->ep;
    int o = WAIT_OWN_NONE;
    int own = !atomic_load(&ep->service_run) &&
              atomic_compare_exchange_strong(&ep->evfd_owner, &o, WAIT_OWN_WAITER);
    uint32_t seq = atomic_load(&ep->wake_seq);
    atomic_fetch_add(&ep->sleepers, 1);
    if (own) {
        tl_owner = ep;
        atomic_fetch_add(ep->sleeping, 1);
        atomic_store(&ep->owner_asleep, 1);
    } else {
        atomic_fetch_add(&ep->followers, 1);
    }
    vmmc_wait_fence_all();
    w->n += vmmc_progress_before_sleep(ep);
    int go = ready(w) || vmmc_hooks_armed(ep) || atomic_load(&ep->deaths) != w->deaths;
    /* The owner left meanwhile: do not sleep where nobody will wake us. */
    if (!own && !go && atomic_load(&ep->evfd_owner) == WAIT_OWN_NONE &&
        !atomic_load(&ep->service_run))
        go = 1;
    if (!go) {
        VMMC_COUNT(ep, CNT_SLEEPS, 1);
        if (own) {
            struct pollfd pf = {ep->evfd, POLLIN, 0};
            poll(&pf, 1, ms);
        } else {
            futex_wait(&ep->wake_seq, seq, ms);
        }
    }
    if (own) {
        uint64_t got = fd_drain(ep->evfd);
        atomic_store(&ep->owner_asleep, 0);
        atomic_fetch_sub(ep->sleeping, 1);
        atomic_fetch_sub(&ep->sleepers, 1);
        owner_release(ep);
        if (got)
            app_signal(ep); /* we consumed what the application's epoll waits for */
    } else {
        atomic_fetch_sub(&ep->followers, 1);
        atomic_fetch_sub(&ep->sleepers, 1);
    }
}

int vmmc_wait_until(vmmc_ep_t *ep, int (*done)(void *), void *arg, int timeout_ms)
{
    VMMC_FORK_CHECK(ep);
    uint64_t start = vmmc_now_ns();
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000ull;
    waiter_t w = {ep, done, arg, atomic_load(&ep->deaths), atomic_load(&ep->work), 0};
    vmmc_ep_t *outer = tl_waiting;
    tl_waiting = ep;
    int rc;
    for (;;) {
        w.n += vmmc_progress(ep);
        if (ready(&w)) {
            uint64_t all = atomic_load(&ep->work) - w.work0;
            rc = done ? VMMC_OK
                      : all > (uint64_t)w.n ? (all > INT_MAX ? INT_MAX : (int)all) : w.n;
            break;
        }
        if (atomic_load(&ep->deaths) != w.deaths && !done) {
            rc = vmmc_error(VMMC_ERR_PEER_DEAD, "a peer died while waiting");
            break;
        }
        uint64_t now = vmmc_now_ns();
        if (now >= deadline) {
            rc = done ? vmmc_error(VMMC_ERR_TIMEOUT, "wait timed out after %d ms", timeout_ms) : 0;
            break;
        }
        if (now - start < ep->spin_ns) {
            __builtin_ia32_pause();
            continue;
        }
        uint64_t left = deadline - now;
        int ms = deadline == UINT64_MAX || left > 1000000000ull ? 1000 : (int)(left / 1000000) + 1;
        sleep_once(&w, ms);
        start = vmmc_now_ns(); /* spin again briefly after a wake-up */
    }
    tl_waiting = outer;
    return rc;
}

int vmmc_wait(vmmc_ep_t *ep, int timeout_ms)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_wait: NULL endpoint");
    if (vmmc_in_progress(ep))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_wait called from inside a handler");
    if (timeout_ms < -1)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_wait: timeout %d ms (use -1 for none)", timeout_ms);
    if (timeout_ms == 0)
        return vmmc_progress(ep);
    return vmmc_wait_until(ep, NULL, NULL, timeout_ms);
}

int vmmc_event_fd(vmmc_ep_t *ep)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_event_fd: NULL endpoint");
    int rc = VMMC_OK;
    pthread_mutex_lock(&ep->lock);
    if (!ep->evfd_mode) {
        struct epoll_event ev = {.events = EPOLLIN};
        ep->app_evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ep->app_fd = epoll_create1(EPOLL_CLOEXEC);
        if (ep->app_evfd < 0 || ep->app_fd < 0 ||
            epoll_ctl(ep->app_fd, EPOLL_CTL_ADD, ep->app_evfd, &ev) != 0 ||
            (!ep->service_started && epoll_ctl(ep->app_fd, EPOLL_CTL_ADD, ep->evfd, &ev) != 0)) {
            rc = vmmc_error_sys("vmmc_event_fd: eventfd/epoll");
            vmmc_wait_fini(ep);
        } else {
            atomic_fetch_add(ep->sleeping, 1); /* peers always write evfd from now on */
            __atomic_store_n(&ep->evfd_mode, 1, __ATOMIC_RELEASE);
        }
    }
    if (rc == VMMC_OK)
        rc = ep->app_fd;
    pthread_mutex_unlock(&ep->lock);
    return rc;
}

/* ---- the service thread ---- */

static void service_unpark(vmmc_ep_t *ep);

/* Serve as the eventfd's owner until asked to stop: run progress (handlers,
 * hooks; it wakes sleeping application threads when it handled events),
 * spin VMMC_SPIN after activity (while the spin gate, if any, lets it),
 * then sleep on the eventfd. */
static void serve(vmmc_ep_t *ep)
{
    tl_owner = ep;
    tl_waiting = ep;
    uint64_t spin_from = vmmc_now_ns();
    while (atomic_load_explicit(&ep->service_run, memory_order_relaxed)) {
        if (vmmc_progress(ep) > 0) {
            app_signal(ep);
            spin_from = vmmc_now_ns();
            continue;
        }
        if (vmmc_now_ns() - spin_from < ep->spin_ns &&
            (!ep->spin_gate || ep->spin_gate(ep->spin_gate_arg))) {
            __builtin_ia32_pause();
            continue;
        }
        atomic_fetch_add(ep->sleeping, 1);
        atomic_thread_fence(memory_order_seq_cst);
        int n = vmmc_progress_before_sleep(ep);
        if (n == 0 && !vmmc_hooks_armed(ep) && atomic_load(&ep->service_run)) {
            VMMC_COUNT(ep, CNT_SLEEPS, 1);
            atomic_store(&ep->svc_state, SVC_ASLEEP);
            struct pollfd pf = {ep->evfd, POLLIN, 0};
            poll(&pf, 1, 1000);
            uint32_t s = SVC_ASLEEP;
            if (!atomic_compare_exchange_strong(&ep->svc_state, &s, SVC_RUN))
                service_unpark(ep);
        }
        fd_drain(ep->evfd);
        atomic_fetch_sub(ep->sleeping, 1);
        if (n > 0)
            app_signal(ep);
        spin_from = vmmc_now_ns();
    }
    owner_release(ep);
}

/* An application thread drives progress in the service thread's place
 * (vmmc_service_borrow): wait until it gives the role back. It is bounded
 * by the borrower's time limit, so the wait does not look at service_run:
 * the borrower gives back the `sleeping` announcement this thread made. */
static void service_unpark(vmmc_ep_t *ep)
{
    atomic_store(&ep->svc_parked, 1);
    atomic_thread_fence(memory_order_seq_cst);
    while (atomic_load(&ep->svc_state) == SVC_LENT)
        futex_wait(&ep->svc_state, SVC_LENT, 100);
    atomic_store(&ep->svc_parked, 0);
    atomic_store(&ep->svc_state, SVC_RUN);
}

int vmmc_service_borrow(vmmc_ep_t *ep, vmmc_progress_fn_t done, void *arg, uint64_t ns)
{
    if (!ep || !done || vmmc_in_progress(ep))
        return 0;
    uint32_t s = SVC_ASLEEP;
    if (!atomic_compare_exchange_strong(&ep->svc_state, &s, SVC_LENT))
        return 0; /* no service thread, or it is awake: it takes the events */
    /* Peers and local events write evfd only while `sleeping` says someone
     * sleeps on it: take the service thread's announcement away, so that
     * what comes now is taken here and nobody wakes it. */
    atomic_fetch_sub(ep->sleeping, 1);
    vmmc_ep_t *outer = tl_waiting;
    tl_waiting = ep;
    uint64_t t0 = vmmc_now_ns(), deaths = atomic_load(&ep->deaths);
    int got = 0;
    for (;;) {
        vmmc_progress(ep);
        if ((got = done(arg) != 0) || atomic_load(&ep->deaths) != deaths ||
            vmmc_now_ns() - t0 >= ns)
            break;
        __builtin_ia32_pause();
    }
    /* Give it back the Dekker way: announce the sleeper again, fence, then
     * take what came while nobody was announced (its sender wrote no evfd)
     * with one more pass; what a transport still has pending wakes the
     * service thread. */
    atomic_fetch_add(ep->sleeping, 1);
    atomic_thread_fence(memory_order_seq_cst);
    vmmc_progress_before_sleep(ep);
    tl_waiting = outer;
    if (vmmc_hooks_armed(ep))
        fd_signal(ep->evfd);
    atomic_store(&ep->svc_state, SVC_ASLEEP);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&ep->svc_parked))
        syscall(SYS_futex, (uint32_t *)&ep->svc_state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    VMMC_COUNT(ep, CNT_BORROWS, 1);
    return got;
}

static void *service_main(void *arg)
{
    vmmc_ep_t *ep = arg;
    while (atomic_load(&ep->service_run)) {
        int o = WAIT_OWN_NONE;
        if (atomic_compare_exchange_strong(&ep->evfd_owner, &o, WAIT_OWN_SERVICE)) {
            serve(ep);
            break;
        }
        /* An application thread owns the eventfd for its current sleep (it
         * started before us); take it when it gives it up. */
        uint32_t seq = atomic_load(&ep->wake_seq);
        atomic_fetch_add(&ep->followers, 1);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load(&ep->evfd_owner) != WAIT_OWN_NONE && atomic_load(&ep->service_run))
            futex_wait(&ep->wake_seq, seq, 100);
        atomic_fetch_sub(&ep->followers, 1);
    }
    return NULL;
}

int vmmc_service_start(vmmc_ep_t *ep)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_service_start: NULL endpoint");
    pthread_mutex_lock(&ep->lock);
    int rc = VMMC_OK;
    if (!ep->service_started) {
        atomic_store(&ep->service_run, 1);
        int e = pthread_create(&ep->service_thread, NULL, service_main, ep);
        if (e) {
            atomic_store(&ep->service_run, 0);
            errno = e;
            rc = vmmc_error_sys("pthread_create (service thread)");
        } else {
            ep->service_started = 1;
            /* The service thread reads evfd now: the application's epoll set
             * keeps only the signal the service thread gives it. */
            if (ep->evfd_mode)
                epoll_ctl(ep->app_fd, EPOLL_CTL_DEL, ep->evfd, NULL);
        }
    }
    pthread_mutex_unlock(&ep->lock);
    return rc;
}

int vmmc_service_spin_gate(vmmc_ep_t *ep, vmmc_progress_fn_t gate, void *arg)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_service_spin_gate: NULL endpoint");
    pthread_mutex_lock(&ep->lock);
    int started = ep->service_started;
    if (!started) {
        ep->spin_gate = gate;
        ep->spin_gate_arg = arg;
    }
    pthread_mutex_unlock(&ep->lock);
    return started ? vmmc_error(VMMC_ERR_BUSY, "vmmc_service_spin_gate: the service thread runs "
                                               "already (set the gate before vmmc_service_start)")
                   : VMMC_OK;
}

void vmmc_service_stop_internal(vmmc_ep_t *ep)
{
    pthread_mutex_lock(&ep->lock);
    int started = ep->service_started;
    ep->service_started = 0;
    atomic_store(&ep->service_run, 0);
    pthread_mutex_unlock(&ep->lock);
    if (!started)
        return;
    fd_signal(ep->evfd);
    atomic_fetch_add(&ep->wake_seq, 1);
    syscall(SYS_futex, (uint32_t *)&ep->wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    pthread_join(ep->service_thread, NULL);
    pthread_mutex_lock(&ep->lock);
    if (ep->evfd_mode) {
        struct epoll_event ev = {.events = EPOLLIN};
        epoll_ctl(ep->app_fd, EPOLL_CTL_ADD, ep->evfd, &ev);
        app_signal(ep);
    }
    pthread_mutex_unlock(&ep->lock);
}

int vmmc_service_stop(vmmc_ep_t *ep)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_service_stop: NULL endpoint");
    if (vmmc_in_progress(ep))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_service_stop called from a handler");
    vmmc_service_stop_internal(ep);
    return VMMC_OK;
}
