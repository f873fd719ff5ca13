/* Waiting on an epoll instance that holds upgraded vmmc sockets (see
 * epoll.h). An instance without any takes the kernel's call as it is. With
 * some, each pass (1) computes the upgraded sockets' readiness with
 * vmmc_sock_ready() and reports it with the application's data, honouring
 * EPOLLET (a socket is reported again only after something happened on it,
 * or after it was not ready: found so here, or by a read or write of the
 * application that failed with EAGAIN), EPOLLONESHOT (disabled until EPOLL_CTL_MOD) and
 * the events asked; (2) takes the kernel's events, without sleeping if (1)
 * found some, dropping the cookies (which say what to look at again); and
 * goes on until something is reported or the time is up. Timeouts, the
 * signal mask and EINTR are the kernel's own: every sleep is the kernel's
 * epoll_pwait on the instance. */
#include "preload/epoll.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct snap {
    int fd;
    uint32_t events;
    int woken;
    uint64_t gen;
    uint32_t rev;
} snap_t;

static __thread snap_t *snaps;
static __thread int snaps_n;

static snap_t *snaps_get(int n)
{
    if (n <= snaps_n)
        return snaps;
    int want = snaps_n ? snaps_n : 64;
    while (want < n)
        want *= 2;
    snap_t *p = realloc(snaps, (size_t)want * sizeof *p);
    if (!p)
        return NULL;
    snaps = p;
    snaps_n = want;
    return p;
}

/* poll bits an epoll mask asks vmmc_sock_ready() for (the same values). */
#define POLLABLE (EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | \
                  EPOLLWRBAND | EPOLLRDHUP)

/* (1): report the upgraded sockets that are ready, at most @p max, each
 * once per call (@p stamp names the call). */
static int eval(pl_ep_t *ep, struct epoll_event *out, int max, uint64_t stamp)
{
    if (max <= 0)
        return 0;
    pthread_mutex_lock(&ep->lock);
    int all = atomic_exchange(&ep->wake_all, 0);
    snap_t *s = ep->nup ? snaps_get(ep->nup) : NULL;
    int m = 0;
    if (s) {
        for (int i = 0; i < ep->nup; i++) {
            pl_ent_t *e = ep->up[i];
            if (e->disabled || e->stamp == stamp)
                continue;
            s[m++] = (snap_t){.fd = e->fd, .events = e->ev.events, .woken = e->woken || all,
                              .gen = e->gen};
            e->woken = 0;
            /* a read or write that found nothing since: the application saw
             * that direction not ready, so its next readiness is an edge */
            uint32_t ein = pl_ep_eagain_count(e->fd, 0), eout = pl_ep_eagain_count(e->fd, 1);
            if (ein != e->eag_in)
                e->last &= ~(uint32_t)(EPOLLIN | EPOLLRDNORM);
            if (eout != e->eag_out)
                e->last &= ~(uint32_t)(EPOLLOUT | EPOLLWRNORM);
            e->eag_in = ein;
            e->eag_out = eout;
        }
    } else if (ep->nup) {
        atomic_store(&ep->wake_all, all);   /* no memory: try again next pass */
    }
    pthread_mutex_unlock(&ep->lock);
    if (!m)
        return 0;
    for (int i = 0; i < m; i++) {
        int r = vmmc_sock_ready(s[i].fd, (short)(s[i].events & POLLABLE));
        s[i].rev = r < 0 ? 0 : ((uint32_t)r & (s[i].events | EPOLLERR | EPOLLHUP));
    }
    int n = 0;
    pthread_mutex_lock(&ep->lock);
    for (int i = 0; i < m; i++) {
        pl_ent_t *e = s[i].fd < ep->by_fd_n ? ep->by_fd[s[i].fd] : NULL;
        if (!e || e->gen != s[i].gen || e->disabled || e->filed != FILED_COOKIE)
            continue;
        uint32_t report = s[i].rev;
        if (e->ev.events & EPOLLET) {
            if (!s[i].woken)
                report &= ~e->last;   /* reported before, nothing new since */
            if (report && n == max) {
                e->woken = 1;         /* no room: it stays due */
                continue;
            }
            e->last = s[i].rev;
        }
        if (!report || n == max)
            continue;
        out[n].events = report;
        out[n].data = e->ev.data;
        n++;
        e->stamp = stamp;
        if (e->ev.events & EPOLLONESHOT)
            e->disabled = 1;
    }
    pthread_mutex_unlock(&ep->lock);
    return n;
}

/* (2): drop the cookies among @p k kernel events, noting what they wake.
 * Returns the events left (moved to the front); *woke says a cookie came. */
static int filter(pl_ep_t *ep, struct epoll_event *evs, int k, int *woke)
{
    const uint64_t hi = 0xffffffff00000000ull;
    int j = 0, locked = 0;
    for (int i = 0; i < k; i++) {
        uint64_t u = evs[i].data.u64;
        if ((u & hi) != ep->tag) {
            evs[j++] = evs[i];
            continue;
        }
        *woke = 1;
        uint32_t low = (uint32_t)u;
        if (low == K_KICK) {
            uint64_t v;
            ssize_t r = REAL(read)(ep->kick, &v, sizeof v);
            (void)r;
            atomic_store(&ep->wake_all, 1);
        } else if (low == K_EVFD) {
            atomic_store(&ep->wake_all, 1);
        } else {
            if (!locked) {
                pthread_mutex_lock(&ep->lock);
                locked = 1;
            }
            pl_ent_t *e = (int)low < ep->by_fd_n ? ep->by_fd[low] : NULL;
            if (e)
                e->woken = 1;
        }
    }
    if (locked)
        pthread_mutex_unlock(&ep->lock);
    return j;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The kernel's wait, @p ns -1 forever; pwait2 takes the timespec. */
static int kwait(int epfd, struct epoll_event *evs, int max, int64_t ns, const sigset_t *mask,
                 int pwait2)
{
    if (pwait2) {
        struct timespec ts, *tp = NULL;
        if (ns >= 0) {
            ts.tv_sec = ns / 1000000000;
            ts.tv_nsec = ns % 1000000000;
            tp = &ts;
        }
        if (!pl_real(R_epoll_pwait2))
            return pl_fail(ENOSYS);
        return REAL(epoll_pwait2)(epfd, evs, max, tp, mask);
    }
    int ms = -1;
    if (ns >= 0) {
        int64_t m = (ns + 999999) / 1000000;
        ms = m > INT_MAX ? INT_MAX : (int)m;
    }
    return REAL(epoll_pwait)(epfd, evs, max, ms, mask);
}

/* A shared instance (fork) may hand our cookies to the other process: look
 * again this often while upgraded sockets are in it. */
#define SHARED_RECHECK_NS 10000000

static int wait_common(int epfd, struct epoll_event *evs, int max, int64_t timeout_ns,
                       const sigset_t *mask, int pwait2)
{
    pl_ep_t *ep = pl_ep_ref(epfd);
    if (!ep) {
        int r = kwait(epfd, evs, max, timeout_ns, mask, pwait2);
        if (r <= 0 || !pl_ep_known(epfd) || !(ep = pl_ep_ref(epfd)))
            return r;
        /* a socket was filed with a cookie while this slept */
        int woke = 0;
        r = filter(ep, evs, r, &woke);
        if (r > 0) {
            pl_ep_put(ep);
            return r;
        }
    }
    if (max <= 0 || !evs) {
        pl_ep_put(ep);
        return kwait(epfd, evs, max, 0, mask, pwait2);   /* the kernel's EINVAL/EFAULT */
    }
    static _Atomic uint64_t calls;
    uint64_t stamp = atomic_fetch_add(&calls, 1) + 1;
    int64_t end = timeout_ns >= 0 ? now_ns() + timeout_ns : -1;
    int rc;
    /* Upgraded sockets in the set: spin a while (VMMC_SOCK_SPIN) before the
     * kernel's sleep, as a blocking vmmc call does; a cross-core wake-up
     * costs tens of microseconds here, a byte through vmmc a fraction of
     * one. The kernel's own events are looked at every few rounds. */
    if (timeout_ns != 0 && ep->nup) {
        int64_t spin = (int64_t)vmmc_sock_spin_ns(), t0 = now_ns();
        if (end >= 0 && t0 + spin > end)
            spin = end - t0;
        for (unsigned i = 1; spin > 0; i++) {
            int n = eval(ep, evs, max, stamp);
            if (!n && (i & 7) == 0) {
                int k = kwait(epfd, evs, max, 0, mask, pwait2);
                if (k < 0) {
                    rc = -1;
                    goto out;
                }
                int woke = 0;
                n = filter(ep, evs, k, &woke);
                if (woke)
                    n += eval(ep, evs + n, max - n, stamp);
            }
            if (n > 0) {
                rc = n;
                goto out;
            }
            if (now_ns() - t0 >= spin)
                break;
            __builtin_ia32_pause();
        }
    }
    for (;;) {
        int n = eval(ep, evs, max, stamp);
        int64_t left = 0;
        if (!n && end >= 0) {
            left = end - now_ns();
            if (left < 0)
                left = 0;
        } else if (!n) {
            left = -1;
        }
        if (!n && atomic_load(&ep->shared) && ep->nup &&
            (left < 0 || left > SHARED_RECHECK_NS))
            left = SHARED_RECHECK_NS;
        int k = n < max ? kwait(epfd, evs + n, max - n, left, mask, pwait2) : 0;
        if (k < 0) {
            rc = n ? n : -1;
            break;
        }
        int woke = 0;
        n += filter(ep, evs + n, k, &woke);
        if (woke)
            n += eval(ep, evs + n, max - n, stamp);
        if (n > 0) {
            rc = n;
            break;
        }
        if (end >= 0 && now_ns() >= end) {
            rc = 0;
            break;
        }
    }
out:;
    int e = errno;
    pl_ep_put(ep);
    errno = e;
    return rc;
}

PL_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
    return wait_common(epfd, evs, max, timeout < 0 ? -1 : (int64_t)timeout * 1000000, NULL, 0);
}

PL_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
                          const sigset_t *mask)
{
    return wait_common(epfd, evs, max, timeout < 0 ? -1 : (int64_t)timeout * 1000000, mask, 0);
}

PL_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
                           const struct timespec *ts, const sigset_t *mask)
{
    int64_t ns = -1;
    if (ts) {
        if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)
            return pl_fail(EINVAL);
        ns = ts->tv_sec > INT64_MAX / 1000000000 - 1 ? INT64_MAX / 2
                                                     : ts->tv_sec * 1000000000 + ts->tv_nsec;
    }
    return wait_common(epfd, evs, max, ns, mask, 1);
}
