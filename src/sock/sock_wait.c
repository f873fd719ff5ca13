/* sock_wait: sleep until the TCP side or the context's event fd has
 * something, without losing a wake-up.
 *
 * A peer that publishes bytes or room calls vmmc_signal(), which makes the
 * context's event fd readable (the endpoint keeps its sleeping word raised
 * once vmmc_event_fd() was asked for, so every signal writes it). The event
 * fd stays readable until a progress pass resets it, so the waiter first
 * drains it (sock_ctx_drain), then announces itself and re-checks its
 * condition (@p recheck), then sleeps: a signal sent after the re-check finds
 * the fd reset and makes it readable again.
 *
 * Several threads may wait on one context. One waiter's drain can reset the
 * fd after another's re-check and so consume that one's wake-up; while more
 * than one thread waits, each therefore sleeps in slices of at most
 * SLICE_MS and re-checks between them (a latency bound on a rare race, not a
 * spin).
 *
 * Signals: the kernel restarts a blocking recv()/send() after a handler
 * installed with SA_RESTART and fails it with EINTR otherwise. The poll
 * that sleeps here is always interrupted, so on EINTR the waiter looks at
 * the handlers: if any installed handler lacks SA_RESTART, the call fails
 * with EINTR (the kernel's answer for that handler); otherwise it goes on
 * waiting. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "sock/sock.h"
#include "sock/sock_sys.h"

enum { SLICE_MS = 20 };

static _Atomic int waiters;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Does some installed handler lack SA_RESTART? (Then a signal fails the
 * blocking call.) */
static int interrupting_handler(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) != 0)
            continue;
        int handled = (sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != NULL
                                                 : (sa.sa_handler != SIG_DFL &&
                                                    sa.sa_handler != SIG_IGN);
        if (handled && !(sa.sa_flags & SA_RESTART))
            return 1;
    }
    return 0;
}

int sock_wait(sock_ctx_t *ctx, int fd, int timeout_ms, int (*recheck)(void *), void *arg)
{
    uint64_t deadline = timeout_ms >= 0 ? now_ms() + (uint64_t)timeout_ms : 0;
    int efd = ctx ? sock_ctx_event_fd(ctx) : -1;
    atomic_fetch_add(&waiters, 1);
    int rc;
    for (;;) {
        if (ctx)
            sock_ctx_drain(ctx);
        if (recheck && recheck(arg)) {
            rc = 1;
            break;
        }
        int left = -1;
        if (timeout_ms >= 0) {
            uint64_t now = now_ms();
            if (now >= deadline) {
                rc = 0;
                break;
            }
            left = (int)(deadline - now);
        }
        int slice = left;
        if (atomic_load(&waiters) > 1 && (slice < 0 || slice > SLICE_MS))
            slice = SLICE_MS;
        struct pollfd p[2];
        nfds_t n = 0;
        if (fd >= 0)
            p[n++] = (struct pollfd){.fd = fd, .events = POLLIN | POLLRDHUP};
        if (efd >= 0)
            p[n++] = (struct pollfd){.fd = efd, .events = POLLIN};
        int r = sys_poll(p, n, slice);
        if (r > 0) {
            rc = 1;
            break;
        }
        if (r == 0) {
            if (slice == left) {
                rc = 0;
                break;
            }
            continue; /* a slice: re-check */
        }
        if (errno == EINTR) {
            if (interrupting_handler()) {
                rc = -1;
                break;
            }
            continue;
        }
        rc = -1;
        break;
    }
    int e = errno;
    atomic_fetch_sub(&waiters, 1);
    errno = e;
    return rc;
}
