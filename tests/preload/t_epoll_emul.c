/* The preload's epoll emulation (src/preload/epoll.c, epoll_wait.c) on its
 * own, against a scripted sockets layer: the vmmc_sock_* calls it uses are
 * defined here, over AF_UNIX socket pairs standing for the sockets' TCP
 * side, with the readiness and the mode set by the test and an eventfd as
 * the layer's event descriptor. Checks what the emulation reports for
 * upgraded sockets (level, edge, one-shot, MOD, DEL, close, re-filing both
 * ways, a one-shot the kernel had disabled, waking a sleeper, EINTR, dup
 * of the instance) next to a pipe the kernel reports. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmmc/sock.h"

/* ------------------------------------------------------------------------ */
/* the scripted layer */

#define MAXFD 1024
static struct {
    int is, mode;
    short ready;
} F[MAXFD];
static int evfd = -1;
static vmmc_sock_mode_fn hook;
static void *hook_arg;
static int ready_calls;

int vmmc_sock_is(int fd) { return fd >= 0 && fd < MAXFD && F[fd].is; }

int vmmc_sock_info(int fd, vmmc_sock_info_t *info)
{
    if (!vmmc_sock_is(fd)) {
        errno = EBADF;
        return -1;
    }
    memset(info, 0, sizeof *info);
    info->mode = (vmmc_sock_mode_t)F[fd].mode;
    return 0;
}

int vmmc_sock_ready(int fd, short events)
{
    if (!vmmc_sock_is(fd)) {
        errno = EBADF;
        return -1;
    }
    ready_calls++;
    if (F[fd].mode != VMMC_SOCK_VMMC) {
        struct pollfd p = {fd, events, 0};
        return poll(&p, 1, 0) > 0 ? p.revents : 0;
    }
    return F[fd].ready & (events | POLLERR | POLLHUP);
}

int vmmc_sock_event_fd(void) { return evfd; }
uint64_t vmmc_sock_spin_ns(void) { return 20000; } /* the emulation spins this long first */

void vmmc_sock_set_mode_hook(vmmc_sock_mode_fn fn, void *arg)
{
    hook = fn;
    hook_arg = arg;
}

/* The rest of the API is not used by the emulation. */

static void set_mode(int fd, int up)
{
    F[fd].mode = up ? VMMC_SOCK_VMMC : VMMC_SOCK_KERNEL;
    hook(fd, up, hook_arg);
}

static void arrive(int fd, short bits)
{
    F[fd].ready = bits;
    uint64_t one = 1;
    if (write(evfd, &one, sizeof one) != sizeof one)
        abort();
}

/* ------------------------------------------------------------------------ */

static int fails;
#define CHECK(c, ...)                                                  \
    do {                                                               \
        if (!(c)) {                                                    \
            fprintf(stderr, "line %d: FAIL: ", __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                              \
            fprintf(stderr, " (errno %d)\n", errno);                   \
            fails++;                                                   \
        }                                                              \
    } while (0)

/* epoll_wait with timeout 0; returns the count, events in @p ev. */
static int peek(int ep, struct epoll_event *ev, int max)
{
    return epoll_wait(ep, ev, max, 0);
}

/* Does the set report data @p d (with *bits)? */
static int has(struct epoll_event *ev, int n, uint64_t d, uint32_t *bits)
{
    for (int i = 0; i < n; i++)
        if (ev[i].data.u64 == d) {
            if (bits)
                *bits = ev[i].events;
            return 1;
        }
    return 0;
}

static int new_sock(int *other)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp))
        abort();
    F[sp[0]].is = 1;
    F[sp[0]].mode = VMMC_SOCK_KERNEL;
    F[sp[0]].ready = 0;
    *other = sp[1];
    return sp[0];
}

static void drop_sock(int fd, int other)
{
    close(fd);   /* the emulation's close hook is the wrapper's job: call it */
    F[fd].is = 0;
    close(other);
}

void pl_ep_fd_closing(int fd);
void pl_ep_fd_dup(int oldfd, int newfd);
void pl_ep_eagain(int fd, uint32_t bits);

typedef struct {
    int ep, n;
    struct epoll_event ev[4];
} sleeper_t;

static void *sleeper(void *arg)
{
    sleeper_t *s = arg;
    s->n = epoll_wait(s->ep, s->ev, 4, 20000);
    return NULL;
}

static void on_sig(int s) { (void)s; }

int main(void)
{
    evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int ep = epoll_create1(0);
    struct epoll_event ev[8];
    uint32_t bits = 0;
    int n;
    if (!hook) {   /* real.c's constructor registers it */
        fprintf(stderr, "the mode hook was not registered\n");
        return 1;
    }

    /* a pipe the kernel reports, in the same set throughout */
    int p[2];
    if (pipe(p))
        return 1;
    struct epoll_event pe = {.events = EPOLLIN, .data.u64 = 0x9999};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &pe) == 0, "add pipe");

    /* 1. level-triggered: kernel mode first, then upgraded */
    int o1, s1 = new_sock(&o1);
    struct epoll_event e1 = {.events = EPOLLIN | EPOLLOUT, .data.u64 = 0x1111};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s1, &e1) == 0, "add s1");
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x1111, &bits) && bits == EPOLLOUT,
          "kernel mode: writable only (%d, %#x)", n, bits);
    set_mode(s1, 1);
    CHECK(write(o1, "tcp", 3) == 3, "write tcp side");   /* a record, not data */
    n = peek(ep, ev, 8);
    CHECK(n == 0, "upgraded, nothing ready: nothing reported (%d: %#llx)", n,
          n ? (unsigned long long)ev[0].data.u64 : 0ull);
    arrive(s1, POLLIN | POLLOUT);
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x1111, &bits) && bits == (EPOLLIN | EPOLLOUT),
          "upgraded: IN|OUT with the app's data (%d, %#x)", n, bits);
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x1111, NULL), "level-triggered: again");
    F[s1].ready = POLLOUT;
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x1111, &bits) && bits == EPOLLOUT, "only OUT now (%#x)", bits);
    /* MOD to IN only: OUT no longer reported */
    e1.events = EPOLLIN;
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s1, &e1) == 0, "mod s1");
    n = peek(ep, ev, 8);
    CHECK(n == 0, "IN asked, only OUT ready: nothing (%d)", n);
    /* the pipe alongside */
    CHECK(write(p[1], "x", 1) == 1, "pipe write");
    arrive(s1, POLLIN);
    n = peek(ep, ev, 8);
    CHECK(n == 2 && has(ev, n, 0x9999, NULL) && has(ev, n, 0x1111, NULL), "pipe and s1 (%d)", n);
    char c;
    CHECK(read(p[0], &c, 1) == 1, "pipe read");
    /* max 1: one per call, nothing lost */
    CHECK(epoll_wait(ep, ev, 1, 0) == 1 && ev[0].data.u64 == 0x1111, "max 1");

    /* back to the kernel: the app's data again, the kernel's readiness */
    set_mode(s1, 0);
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x1111, &bits) && bits == EPOLLIN,
          "reverted: the kernel reports the tcp bytes (%d, %#x)", n, bits);
    char b[8];
    CHECK(read(s1, b, sizeof b) == 3, "drain tcp side");
    n = peek(ep, ev, 8);
    CHECK(n == 0, "reverted, drained: nothing (%d)", n);

    /* 2. edge-triggered */
    int o2, s2 = new_sock(&o2);
    set_mode(s2, 1);
    struct epoll_event e2 = {.events = EPOLLIN | EPOLLET, .data.u64 = 0x2222};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s2, &e2) == 0, "add s2 upgraded");
    n = peek(ep, ev, 8);
    CHECK(n == 0, "ET nothing ready (%d)", n);
    arrive(s2, POLLIN);
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x2222, NULL), "ET: the edge (%d)", n);
    n = peek(ep, ev, 8);
    CHECK(n == 0, "ET: not again without something new (%d)", n);
    arrive(s2, POLLIN);   /* more bytes: a new edge though still readable */
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x2222, NULL), "ET: new bytes, reported again (%d)", n);
    F[s2].ready = 0;      /* the app read everything (EAGAIN) */
    n = peek(ep, ev, 8);
    CHECK(n == 0, "ET drained (%d)", n);
    /* reported, then the app reads until EAGAIN (the read wrapper tells the
     * emulation), then bytes come that nothing signals: still an edge */
    arrive(s2, POLLIN);
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x2222, NULL), "ET: reported (%d)", n);
    pl_ep_eagain(s2, EPOLLIN);
    F[s2].ready = POLLIN;
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x2222, NULL), "ET: ready again after EAGAIN (%d)", n);
    n = peek(ep, ev, 8);
    CHECK(n == 0, "ET: once (%d)", n);
    F[s2].ready = 0;
    n = peek(ep, ev, 8);
    F[s2].ready = POLLIN; /* bytes, and the wake-up comes through the socket's TCP side */
    CHECK(write(o2, "r", 1) == 1, "tcp side");
    n = peek(ep, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x2222, NULL), "ET: woken through the tcp side (%d)", n);

    /* 3. one-shot */
    int o3, s3 = new_sock(&o3);
    set_mode(s3, 1);
    struct epoll_event e3 = {.events = EPOLLIN | EPOLLONESHOT, .data.u64 = 0x3333};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s3, &e3) == 0, "add s3");
    arrive(s3, POLLIN);
    n = peek(ep, ev, 8);
    CHECK(has(ev, n, 0x3333, NULL), "one-shot fires");
    arrive(s3, POLLIN);
    n = peek(ep, ev, 8);
    CHECK(!has(ev, n, 0x3333, NULL), "one-shot: disabled until MOD");
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s3, &e3) == 0, "re-arm");
    n = peek(ep, ev, 8);
    CHECK(has(ev, n, 0x3333, NULL), "re-armed: fires again");
    /* a one-shot that fired in the kernel stays disabled when it upgrades */
    set_mode(s3, 0);
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s3, &e3) == 0, "re-arm in kernel mode");
    CHECK(write(o3, "k", 1) == 1, "kernel bytes");
    n = peek(ep, ev, 8);
    CHECK(has(ev, n, 0x3333, NULL), "kernel one-shot fires");
    F[s3].ready = POLLIN;
    set_mode(s3, 1);
    arrive(s3, POLLIN);
    n = peek(ep, ev, 8);
    CHECK(!has(ev, n, 0x3333, NULL), "fired in the kernel: still disabled after the upgrade");
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s3, &e3) == 0, "re-arm");
    n = peek(ep, ev, 8);
    CHECK(has(ev, n, 0x3333, NULL), "re-armed after the upgrade");
    /* and one still armed in the kernel is armed after the upgrade */
    set_mode(s3, 0);
    CHECK(read(s3, b, sizeof b) == 1, "drain");
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s3, &e3) == 0, "re-arm in kernel mode");
    set_mode(s3, 1);
    n = peek(ep, ev, 8);
    CHECK(has(ev, n, 0x3333, NULL), "armed in the kernel: fires after the upgrade");

    /* 4. DEL, ENOENT, EEXIST, EXCLUSIVE rules */
    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s3, NULL) == 0, "del s3");
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s3, NULL) == -1 && errno == ENOENT, "del again: ENOENT");
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s3, &e3) == -1 && errno == ENOENT, "mod: ENOENT");
    arrive(s3, POLLIN);
    n = peek(ep, ev, 8);
    CHECK(!has(ev, n, 0x3333, NULL), "deleted: not reported");
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s2, &e2) == -1 && errno == EEXIST, "EEXIST");
    struct epoll_event ex = {.events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT, .data.u64 = 5};
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s3, &ex) == -1 && errno == EINVAL, "EXCLUSIVE|ONESHOT");
    ex.events = EPOLLIN | EPOLLEXCLUSIVE;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s3, &ex) == 0, "EXCLUSIVE add");
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, s3, &ex) == -1 && errno == EINVAL, "EXCLUSIVE mod");
    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, s3, NULL) == 0, "del");

    /* 5. close of an upgraded socket: gone from the set */
    arrive(s1, POLLIN);
    set_mode(s1, 1);
    n = peek(ep, ev, 8);
    CHECK(has(ev, n, 0x1111, NULL), "s1 upgraded again, ready");
    pl_ep_fd_closing(s1);
    drop_sock(s1, o1);
    n = peek(ep, ev, 8);
    CHECK(!has(ev, n, 0x1111, NULL), "closed: not reported");

    /* 6. a sleeper is woken by bytes through vmmc, and by a re-file */
    F[s2].ready = 0;
    while (peek(ep, ev, 8) > 0)
        ;
    sleeper_t sl = {.ep = ep};
    pthread_t t;
    pthread_create(&t, NULL, sleeper, &sl);
    usleep(50000);
    arrive(s2, POLLIN);
    pthread_join(t, NULL);
    CHECK(sl.n == 1 && sl.ev[0].data.u64 == 0x2222, "sleeper woken by bytes (%d)", sl.n);
    F[s2].ready = 0;
    while (peek(ep, ev, 8) > 0)
        ;
    int o4, s4 = new_sock(&o4);
    struct epoll_event e4 = {.events = EPOLLIN, .data.u64 = 0x4444};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, s4, &e4) == 0, "add s4");
    F[s4].ready = POLLIN;   /* bytes already there when it upgrades, no new signal */
    sl.n = -2;
    pthread_create(&t, NULL, sleeper, &sl);
    usleep(50000);
    F[s4].mode = VMMC_SOCK_VMMC;
    hook(s4, 1, hook_arg);
    pthread_join(t, NULL);
    CHECK(sl.n == 1 && sl.ev[0].data.u64 == 0x4444, "sleeper woken by the re-file (%d)", sl.n);

    /* 7. EINTR, and a timeout, with upgraded sockets in the set */
    F[s4].ready = 0;
    F[s2].ready = 0;
    while (peek(ep, ev, 8) > 0)
        ;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sa.sa_flags = SA_RESTART;   /* epoll_wait fails with EINTR all the same */
    sigaction(SIGALRM, &sa, NULL);
    alarm(1);
    errno = 0;
    n = epoll_wait(ep, ev, 8, 20000);
    CHECK(n == -1 && errno == EINTR, "EINTR (%d)", n);
    n = epoll_wait(ep, ev, 8, 30);
    CHECK(n == 0, "timeout (%d)", n);
    struct timespec ts = {0, 20000000};
    n = epoll_pwait2(ep, ev, 8, &ts, NULL);
    CHECK(n == 0 || (n == -1 && errno == ENOSYS), "pwait2 timeout (%d)", n);
    errno = 0;
    CHECK(epoll_wait(ep, ev, 0, 0) == -1 && errno == EINVAL, "maxevents 0: EINVAL");

    /* 8. a dup of the instance (the dup wrapper's call) outlives the original */
    int ep2 = dup(ep);
    pl_ep_fd_dup(ep, ep2);
    pl_ep_fd_closing(ep);   /* what the close wrapper does */
    close(ep);
    arrive(s2, POLLIN);
    n = peek(ep2, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x2222, NULL), "through the dup (%d)", n);
    pl_ep_fd_closing(ep2);
    close(ep2);
    /* a new instance at the same number starts clean */
    int ep3 = epoll_create1(0);
    struct epoll_event e5 = {.events = EPOLLIN, .data.u64 = 0x5555};
    CHECK(epoll_ctl(ep3, EPOLL_CTL_ADD, s2, &e5) == 0, "add s2 to a new instance");
    n = peek(ep3, ev, 8);
    CHECK(n == 1 && has(ev, n, 0x5555, NULL), "new instance (%d)", n);

    printf("%s (%d ready calls)\n", fails ? "FAILED" : "ok", ready_calls);
    return fails ? 1 : 0;
}
