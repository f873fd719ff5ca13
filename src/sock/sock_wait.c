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
 * Several threads may wait on one context, and one waiter's drain can reset
 * the fd after another's re-check, consuming that one's wake-up. So each
 * waiter registers an eventfd of its own (one per thread, made once) while
 * it waits, and a waiter whose drain found the event fd readable kicks
 * every other registered waiter through its eventfd: the kicked ones wake,
 * drain their own, and look again. A waiter registers before its first
 * re-check, so a wake-up meant for it that another thread consumes after
 * that re-check always kicks it. (sock_wait_drain() is that drain, for any
 * other code that drains the context, e.g. vmmc_sock_poll.)
 *
 * Every sleep also ends after GUARD_MS at most and looks again: a guard
 * against a wake-up lost some way not understood yet, so that it costs
 * latency, never a hang. The t_sock_revert_udp stall it was added for had
 * another cause (bytes stranded in the writer's local buffer, now flushed),
 * and it has not been seen to rescue anything since; it stays as a defence.
 *
 * Signals: the kernel restarts a blocking recv()/send() after a handler
 * installed with SA_RESTART and fails it with EINTR otherwise. The poll
 * that sleeps here is always interrupted, so on EINTR the waiter looks at
 * the handlers: if any installed handler of an asynchronous signal lacks
 * SA_RESTART, the call fails with EINTR (the kernel's answer for that
 * handler); otherwise it goes on waiting. (Which signal came is not known;
 * with handlers of both kinds installed, an SA_RESTART one also ends the
 * wait with EINTR, which callers of a blocking socket call must handle
 * anyway.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>

#include "sock/sock.h"
#include "sock/sock_sys.h"

/* The registered waiters' eventfds. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int *reg;
static int nreg, capreg;

static __thread int my_kick = -1;
static pthread_key_t kick_key;
static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

static void kick_close(void *p)
{
    int fd = (int)(intptr_t)p - 1;
    if (fd >= 0)
        sys_close(fd);
}

static void kick_init(void)
{
    (void)pthread_key_create(&kick_key, kick_close);
}

/* This thread's eventfd, or -1 (then it waits in slices instead). */
static int kick_fd(void)
{
    if (my_kick >= 0)
        return my_kick;
    pthread_once(&kick_once, kick_init);
    int fd = (int)syscall(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        return -1;
    my_kick = fd;
    (void)pthread_setspecific(kick_key, (void *)(intptr_t)(fd + 1));
    return fd;
}

static int reg_add(int fd)
{
    if (fd < 0)
        return -1;
    pthread_mutex_lock(&reg_lock);
    if (nreg == capreg) {
        int ncap = capreg ? 2 * capreg : 16;
        int *n = realloc(reg, (size_t)ncap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&reg_lock);
            return -1;
        }
        reg = n;
        capreg = ncap;
    }
    reg[nreg++] = fd;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

static void reg_del(int fd)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < nreg; i++)
        if (reg[i] == fd) {
            reg[i] = reg[--nreg];
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

void sock_wait_drain(sock_ctx_t *ctx)
{
    int efd = sock_ctx_event_fd(ctx);
    struct pollfd p = {.fd = efd, .events = POLLIN};
    if (efd < 0 || sys_poll(&p, 1, 0) != 1)
        return;
    sock_ctx_drain(ctx);
    /* what was consumed may have been meant for another waiter */
    uint64_t one = 1;
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < nreg; i++)
        if (reg[i] != my_kick)
            (void)sys_write(reg[i], &one, sizeof one);
    pthread_mutex_unlock(&reg_lock);
}

enum {
    SLICE_MS = 20,   /* a waiter without an eventfd of its own */
    GUARD_MS = 250   /* every waiter: look again at least this often */
};

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
        /* fault signals are raised by an instruction, never while a thread
         * sleeps in poll: their handlers (a sanitizer's, a JIT's) do not count */
        if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS ||
            sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS)
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
    int kick = ctx ? kick_fd() : -1;
    int registered = ctx && reg_add(kick) == 0;
    int rc;
    for (;;) {
        if (registered) {
            uint64_t v;
            (void)sys_read(kick, &v, sizeof v);
        }
        if (ctx)
            sock_wait_drain(ctx);
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
        if (ctx && !registered && (slice < 0 || slice > SLICE_MS))
            slice = SLICE_MS;
        /* a guard: a wake-up lost all the same costs a quarter second, not
         * a hang (see the top of this file) */
        if (ctx && (slice < 0 || slice > GUARD_MS))
            slice = GUARD_MS;
        struct pollfd p[3];
        nfds_t n = 0;
        if (fd >= 0)
            p[n++] = (struct pollfd){.fd = fd, .events = POLLIN | POLLRDHUP};
        if (efd >= 0)
            p[n++] = (struct pollfd){.fd = efd, .events = POLLIN};
        if (registered)
            p[n++] = (struct pollfd){.fd = kick, .events = POLLIN};
        int r = sys_poll(p, n, slice);
        if (r > 0) {
            if (registered && r == 1 && p[n - 1].revents)
                continue; /* only a kick: drain, look again */
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
    if (registered)
        reg_del(kick);
    errno = e;
    return rc;
}
