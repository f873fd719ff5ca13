/* Readiness: vmmc_sock_ready, vmmc_sock_poll, vmmc_sock_event_fd.
 *
 * The kernel does not see bytes that came through vmmc, so poll over a mix
 * of descriptors is computed here: a pass asks each upgraded socket's conn
 * (sock_conn_ready, which also arms it: the peer then signals the context's
 * event fd when bytes or room come) and the kernel, in one non-blocking
 * poll, for every other descriptor. The first passes spin (VMMC_SOCK_SPIN);
 * then one real poll sleeps on the other descriptors, the TCP side of each
 * upgraded socket (a record, the peer's end) and the context's event fd,
 * and a new pass follows each wake-up. A pending socket is driven on the way
 * (a finished non-blocking connect upgrades; a hello that came is taken)
 * and then counts in the mode it settled in. Like the kernel's poll, a
 * signal ends the wait with EINTR whatever SA_RESTART says. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sock/sock.h"
#include "sock/sock_api.h"
#include "sock/sock_sys.h"

#define POLL_ALWAYS (POLLERR | POLLHUP | POLLNVAL)
#define POLL_GUARD_MS 250

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Drive a PENDING socket without blocking (beyond the client's probe, which
 * VMMC_SOCK_PROBE_TIMEOUT bounds) and say in which mode it is now. */
static int drive(sock_t *s)
{
    int mode = atomic_load(&s->mode);
    if (mode != VMMC_SOCK_PENDING)
        return mode;
    if (s->accepted) {
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        if (sys_poll(&p, 1, 0) == 1)
            (void)sock_up_server(s, SOCK_UP_POLL, 0);
    } else {
        (void)sock_settle(s, SOCK_UP_POLL, 0);
    }
    return atomic_load(&s->mode);
}

static short pending_ready(const struct pollfd *fd, short kernel);

/* The readiness of an upgraded socket for @p events. */
static short conn_ready(sock_t *s, short events)
{
    sock_conn_t *c = s->conn;
    if (!c)
        return 0;
    return (short)(sock_conn_ready(c, events) & (events | POLL_ALWAYS));
}

int vmmc_sock_ready(int fd, short events)
{
    sock_t *s = sock_lookup(fd, "vmmc_sock_ready");
    if (!s)
        return -1;
    int r;
    for (;;) {
        int mode = drive(s);
        if (mode == VMMC_SOCK_VMMC) {
            r = conn_ready(s, events);
            if (atomic_load(&s->mode) != VMMC_SOCK_VMMC)
                continue; /* reverted as it looked: ask the kernel */
            break;
        }
        struct pollfd p = {.fd = fd, .events = events};
        r = sys_poll(&p, 1, 0);
        if (r < 0) {
            SOCK_SYSFAIL("vmmc_sock_ready: descriptor %d", fd);
            break;
        }
        r = r ? p.revents : 0;
        if ((r & POLLIN) && mode == VMMC_SOCK_PENDING)
            r = pending_ready(&p, (short)r); /* a HELLO that came meanwhile */
        break;
    }
    int e = errno;
    sock_put(s);
    errno = e;
    return r;
}

int vmmc_sock_event_fd(void)
{
    sock_ctx_t *ctx = sock_ctx_peek();
    if (!ctx)
        return SOCK_FAIL(ENOENT, "vmmc_sock_event_fd: no upgraded connection has opened the "
                                 "process's endpoint yet");
    return sock_ctx_event_fd(ctx);
}

/* The kernel says @p fd is readable, and it was PENDING when the pass
 * drove it: the first bytes of a HELLO may have come between the two looks.
 * Drive it again: upgraded now, its readiness is the ring's (the HELLO is
 * not data: a read would wait for the first byte, and a program that reads
 * one connection at a time, as libtirpc's server does, would wait there
 * while its other connections' requests wait for it). Still PENDING (part of
 * a record, no probe yet), the kernel's answer stands: a read then settles
 * it within VMMC_SOCK_HELLO_TIMEOUT. */
static short pending_ready(const struct pollfd *fd, short kernel)
{
    sock_t *s = sock_get(fd->fd);
    if (!s)
        return kernel;
    short rev = kernel;
    if (atomic_load(&s->mode) == VMMC_SOCK_PENDING && drive(s) == VMMC_SOCK_VMMC) {
        rev = conn_ready(s, fd->events);
        if (atomic_load(&s->mode) != VMMC_SOCK_VMMC)
            rev = kernel; /* reverted as it looked */
    }
    sock_put(s);
    return rev;
}

/* One pass: fill every revents; @p k (n + 1 entries) receives the kernel's
 * share. Returns the number of ready entries, -1/errno. *@p nvmmc counts the
 * upgraded and pending sockets seen. */
static int pass(struct pollfd *fds, nfds_t n, struct pollfd *k, int *nvmmc)
{
    nfds_t nk = 0;
    int ready = 0;
    *nvmmc = 0;
    for (nfds_t i = 0; i < n; i++) {
        fds[i].revents = 0;
        k[i].fd = -1;
        k[i].events = 0;
        k[i].revents = 0;
        if (fds[i].fd < 0)
            continue;
        sock_t *s = sock_get(fds[i].fd);
        if (s && atomic_load(&s->mode) == VMMC_SOCK_PENDING)
            (*nvmmc)++; /* the kernel's readiness alone may be a hello: look again */
        int mode = s ? drive(s) : VMMC_SOCK_KERNEL;
        if (mode == VMMC_SOCK_VMMC) {
            fds[i].revents = conn_ready(s, fds[i].events);
            (*nvmmc)++;
            if (atomic_load(&s->mode) != VMMC_SOCK_VMMC) {
                fds[i].revents = 0; /* reverted as it looked: the kernel's then */
                mode = VMMC_SOCK_KERNEL;
            }
        }
        if (mode != VMMC_SOCK_VMMC) {
            k[i] = fds[i];
            nk++;
        }
        if (s)
            sock_put(s);
    }
    if (nk) {
        int r = sys_poll(k, n, 0);
        if (r < 0)
            return -1;
        for (nfds_t i = 0; i < n; i++) {
            if (k[i].fd < 0)
                continue;
            fds[i].revents = k[i].revents;
            if (k[i].revents & POLLIN)
                fds[i].revents = pending_ready(&fds[i], k[i].revents);
        }
    }
    for (nfds_t i = 0; i < n; i++)
        ready += fds[i].revents != 0;
    return ready;
}

/* The sleep set: the kernel descriptors as asked, the upgraded sockets'
 * TCP side for records and the peer's end, the event fd last. */
static nfds_t sleep_set(const struct pollfd *fds, nfds_t n, struct pollfd *k, sock_ctx_t *ctx)
{
    for (nfds_t i = 0; i < n; i++) {
        k[i] = fds[i];
        k[i].revents = 0;
        if (fds[i].fd < 0)
            continue;
        sock_t *s = sock_get(fds[i].fd);
        if (!s)
            continue;
        if (atomic_load(&s->mode) == VMMC_SOCK_VMMC)
            k[i].events = POLLIN | POLLRDHUP;
        sock_put(s);
    }
    if (!ctx)
        return n;
    k[n].fd = sock_ctx_event_fd(ctx);
    k[n].events = POLLIN;
    k[n].revents = 0;
    return n + 1;
}

int vmmc_sock_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
    if (nfds > 0 && !fds)
        return SOCK_FAIL(EFAULT, "vmmc_sock_poll: NULL descriptor array");
    if (nfds > (nfds_t)1 << 20)
        return SOCK_FAIL(EINVAL, "vmmc_sock_poll: %lu descriptors", (unsigned long)nfds);
    struct pollfd small[33], *k = small;
    if (nfds + 1 > sizeof small / sizeof small[0]) {
        k = malloc(sizeof *k * (nfds + 1));
        if (!k)
            return SOCK_FAIL(ENOMEM, "vmmc_sock_poll: no memory for %lu descriptors",
                             (unsigned long)nfds);
    }
    uint64_t start = now_ns(), spin = sock_cfg()->spin_ns;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000ull;
    int r, nvmmc;
    for (;;) {
        r = pass(fds, nfds, k, &nvmmc);
        if (r != 0 || timeout_ms == 0)
            break;
        uint64_t t = now_ns();
        if (t >= deadline)
            break;
        if (nvmmc && t - start < spin)
            continue;
        sock_ctx_t *ctx = nvmmc ? sock_ctx_peek() : NULL;
        nfds_t nk = sleep_set(fds, nfds, k, ctx);
        int wait = -1;
        if (deadline != UINT64_MAX) {
            uint64_t left = deadline - t;
            wait = (int)((left + 999999) / 1000000); /* never wake early */
        }
        /* The guard of sock_wait.c, here too: with upgraded sockets in the
         * set, a sleep ends after POLL_GUARD_MS at most and the pass looks
         * again, so that a wake-up lost all the same costs a quarter
         * second, not the caller's whole timeout. */
        if (nvmmc && (wait < 0 || wait > POLL_GUARD_MS))
            wait = POLL_GUARD_MS;
        if (!nvmmc) {
            /* only kernel descriptors left: their poll is the answer */
            r = sys_poll(k, nk, wait);
            if (r > 0)
                for (nfds_t i = 0; i < nfds; i++)
                    fds[i].revents = k[i].revents;
            break;
        }
        if (sys_poll(k, nk, wait) < 0) {
            r = -1;
            break;
        }
        if (ctx && nk > nfds && k[nfds].revents)
            sock_wait_drain(ctx);
    }
    if (r < 0) {
        if (errno == EINTR)
            vmmc_error(VMMC_ERR_SYSTEM, "vmmc_sock_poll: interrupted by a signal");
        else
            SOCK_SYSFAIL("vmmc_sock_poll");
    }
    int e = errno;
    if (k != small)
        free(k);
    errno = e;
    return r;
}
