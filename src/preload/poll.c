/* poll, ppoll, select and pselect for libvmmc-preload.so. A set without
 * vmmc sockets goes to libc; a mixed set goes to vmmc_sock_poll(), which
 * takes any descriptors. select's fd_sets are translated to pollfds in a
 * per-thread scratch array (kept between calls: no malloc once it is big
 * enough) and back, with the kernel's rules: which poll bits make a
 * descriptor readable, writable or exceptional, EBADF for a descriptor
 * that is not open, the remaining time written back to the timeval. A
 * signal mask (ppoll, pselect) is applied by the kernel's own ppoll while
 * the call sleeps, so a signal cannot slip in between. */
#include "preload/preload.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* scratch */

static __thread struct pollfd *scratch[2];
static __thread size_t scratch_n[2];

static struct pollfd *scratch_get(int which, size_t n)
{
    if (n <= scratch_n[which])
        return scratch[which];
    size_t want = scratch_n[which] ? scratch_n[which] : 64;
    while (want < n)
        want *= 2;
    struct pollfd *p = realloc(scratch[which], want * sizeof *p);
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    scratch[which] = p;
    scratch_n[which] = want;
    return p;
}

struct pollfd *pl_scratch_pollfd(size_t n)
{
    return scratch_get(0, n);
}

/* ------------------------------------------------------------------------ */
/* time */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ns -> ms for a poll timeout, rounded up (a wait is never shorter than
 * asked); -1 stays -1. */
static int ns_to_ms(int64_t ns)
{
    if (ns < 0)
        return -1;
    int64_t ms = (ns + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* glibc declares poll's and ppoll's array write-only (the kernel's
 * revents), so the compiler takes the caller's entries for unset when a
 * definition of poll reads them (-Wmaybe-uninitialized in some builds); the
 * events and descriptors are the caller's input all the same: read them
 * through a pointer the declaration does not cover. */
#define INPUT(fds)                       \
    ({                                   \
        uintptr_t u_ = (uintptr_t)(fds); \
        __asm__("" : "+r"(u_));          \
        (const struct pollfd *)u_;       \
    })

static int any_vmmc(const struct pollfd *fds, nfds_t n)
{
    for (nfds_t i = 0; i < n; i++)
        if (vmmc_sock_is(fds[i].fd))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* poll, ppoll */

PL_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    if (!any_vmmc(INPUT(fds), n))
        return REAL(poll)(fds, n, timeout);
    return vmmc_sock_poll(fds, n, timeout);
}

int pl_poll_mask(struct pollfd *fds, nfds_t n, int64_t timeout_ns, const sigset_t *mask)
{
    if (!mask)
        return vmmc_sock_poll(fds, n, ns_to_ms(timeout_ns));
    int64_t end = timeout_ns >= 0 ? now_ns() + timeout_ns : -1;
    for (;;) {
        int r = vmmc_sock_poll(fds, n, 0);
        if (r != 0)
            return r;
        int64_t left = -1;
        if (end >= 0) {
            left = end - now_ns();
            if (left <= 0)
                return 0;
        }
        /* Sleep in the kernel with the mask: upgraded sockets' own
         * descriptors (their TCP side: records, EOF) and the layer's event
         * descriptor; every other descriptor as asked. */
        struct pollfd *k = scratch_get(1, n + 1);
        if (!k)
            return -1;
        nfds_t m = 0;
        for (nfds_t i = 0; i < n; i++) {
            k[m] = fds[i];
            k[m].revents = 0;
            vmmc_sock_info_t info;
            if (vmmc_sock_is(fds[i].fd) && vmmc_sock_info(fds[i].fd, &info) == 0 &&
                info.mode == VMMC_SOCK_VMMC)
                k[m].events = POLLIN | POLLRDHUP;
            m++;
        }
        int efd = vmmc_sock_event_fd();
        if (efd >= 0)
            k[m++] = (struct pollfd){.fd = efd, .events = POLLIN};
        struct timespec ts, *tp = NULL;
        if (left >= 0) {
            ts.tv_sec = left / 1000000000;
            ts.tv_nsec = left % 1000000000;
            tp = &ts;
        }
        if (REAL(ppoll)(k, m, tp, mask) < 0)
            return -1;
        if (efd >= 0 && k[m - 1].revents) {
            /* the event descriptor stays readable until the layer drains it,
             * which vmmc_sock_poll does after a sleep it woke: a short one
             * here (signals the mask would let in wait for it, 1 ms at most) */
            r = vmmc_sock_poll(fds, n, 1);
            if (r != 0)
                return r;
        }
    }
}

static int64_t ts_to_ns(const struct timespec *ts)
{
    if (!ts)
        return -1;
    if (ts->tv_sec > INT64_MAX / 1000000000 - 1)
        return INT64_MAX;
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

PL_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
                    const sigset_t *mask)
{
    if (!any_vmmc(INPUT(fds), n))
        return REAL(ppoll)(fds, n, ts, mask);
    if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000))
        return pl_fail(EINVAL);
    return pl_poll_mask(fds, n, ts_to_ns(ts), mask);
}

static void chk_fail(void)
{
    void (*f)(void) = (void (*)(void))pl_real(R___chk_fail);
    if (f)
        f();
    abort();
}

PL_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
    if (fdslen / sizeof *fds < nfds)
        chk_fail();
    return poll(fds, nfds, timeout);
}

PL_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
                          const sigset_t *ss, size_t fdslen)
{
    if (fdslen / sizeof *fds < nfds)
        chk_fail();
    return ppoll(fds, nfds, ts, ss);
}

/* ------------------------------------------------------------------------ */
/* select, pselect */

/* The kernel's sets (fs/select.c): POLLIN_SET, POLLOUT_SET, POLLEX_SET. */
#define SEL_IN (POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR)
#define SEL_OUT (POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR)
#define SEL_EX (POLLPRI)

/* Bits of an fd_set by hand: the kernel takes sets larger than FD_SETSIZE
 * (a program may allocate them so), which FD_ISSET's checks refuse. */
#define NFDBITS_ (8 * (int)sizeof(unsigned long))
static int isset(int fd, const fd_set *s)
{
    return s && ((const unsigned long *)(const void *)s)[fd / NFDBITS_] >> (fd % NFDBITS_) & 1;
}
static void clr(int fd, fd_set *s)
{
    ((unsigned long *)(void *)s)[fd / NFDBITS_] &= ~(1UL << (fd % NFDBITS_));
}

/* The kernel clamps nfds to the descriptors the process can have. */
static int clamp_nfds(int nfds)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)nfds > rl.rlim_cur)
        return (int)rl.rlim_cur;
    return nfds;
}

static int sets_have_vmmc(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
    for (int fd = 0; fd < nfds; fd++)
        if ((isset(fd, r) || isset(fd, w) || isset(fd, e)) && vmmc_sock_is(fd))
            return 1;
    return 0;
}

/* select over a set with vmmc sockets in it; @p timeout_ns -1: forever. */
static int select_vmmc(int nfds, fd_set *r, fd_set *w, fd_set *e, int64_t timeout_ns,
                       const sigset_t *mask)
{
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; fd++)
        if (isset(fd, r) || isset(fd, w) || isset(fd, e))
            n++;
    struct pollfd *p = scratch_get(0, n);
    if (!p)
        return -1;
    n = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = 0;
        if (isset(fd, r))
            ev |= POLLIN;
        if (isset(fd, w))
            ev |= POLLOUT;
        if (isset(fd, e))
            ev |= POLLPRI;
        if (ev)
            p[n++] = (struct pollfd){.fd = fd, .events = ev};
    }
    int got = pl_poll_mask(p, n, timeout_ns, mask);
    if (got < 0)
        return -1;
    for (nfds_t i = 0; i < n; i++)
        if (p[i].revents & POLLNVAL)
            return pl_fail(EBADF);   /* the sets are left as they were */
    int count = 0;
    for (nfds_t i = 0; i < n; i++) {
        int fd = p[i].fd;
        short rev = p[i].revents;
        if (isset(fd, r)) {
            if (rev & SEL_IN)
                count++;
            else
                clr(fd, r);
        }
        if (isset(fd, w)) {
            if (rev & SEL_OUT)
                count++;
            else
                clr(fd, w);
        }
        if (isset(fd, e)) {
            if (rev & SEL_EX)
                count++;
            else
                clr(fd, e);
        }
    }
    return count;
}

PL_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    if (nfds <= 0 || !sets_have_vmmc(nfds = clamp_nfds(nfds), r, w, e))
        return REAL(select)(nfds, r, w, e, tv);
    if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0))
        return pl_fail(EINVAL);
    int64_t t = -1, start = 0;
    if (tv) {
        /* the kernel folds usec >= 1s into seconds */
        t = (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000;
        start = now_ns();
    }
    int rc = select_vmmc(nfds, r, w, e, t, NULL);
    if (tv) {   /* Linux writes back the time not slept */
        int64_t left = t - (now_ns() - start);
        if (left < 0)
            left = 0;
        tv->tv_sec = left / 1000000000;
        tv->tv_usec = (left % 1000000000) / 1000;
    }
    return rc;
}

PL_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
                      const sigset_t *mask)
{
    if (nfds <= 0 || !sets_have_vmmc(nfds = clamp_nfds(nfds), r, w, e))
        return REAL(pselect)(nfds, r, w, e, ts, mask);
    if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000))
        return pl_fail(EINVAL);
    return select_vmmc(nfds, r, w, e, ts_to_ns(ts), mask);
}
