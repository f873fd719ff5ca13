/* The epoll emulation's instances (see epoll.h): the table of epoll
 * descriptors that hold vmmc sockets, epoll_create/epoll_ctl, the mode hook
 * that re-files a socket that upgrades or goes back, and what close, dup and
 * fork do to them. An instance is known here only from the first vmmc
 * socket added to it: one that never holds one costs nothing. */
#include "preload/epoll.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* the table: descriptor -> instance, in chunks made on demand */

#define CHUNK 1024
#define NCHUNKS 1024   /* descriptors up to 1M */

static _Atomic(pl_ep_t *) *chunks[NCHUNKS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pl_ep_t *g_list;

static _Atomic(pl_ep_t *) *slot(int fd, int make)
{
    if (fd < 0 || fd >= CHUNK * NCHUNKS)
        return NULL;
    _Atomic(pl_ep_t *) *c = chunks[fd / CHUNK];
    if (!c) {
        if (!make)
            return NULL;
        c = calloc(CHUNK, sizeof *c);   /* under g_lock; never freed */
        if (!c)
            return NULL;
        chunks[fd / CHUNK] = c;
    }
    return &c[fd % CHUNK];
}

int pl_ep_known(int fd)
{
    if (fd < 0 || fd >= CHUNK * NCHUNKS)
        return 0;
    _Atomic(pl_ep_t *) *c = __atomic_load_n(&chunks[fd / CHUNK], __ATOMIC_ACQUIRE);
    return c && atomic_load_explicit(&c[fd % CHUNK], memory_order_acquire) != NULL;
}

pl_ep_t *pl_ep_ref(int epfd)
{
    if (!pl_ep_known(epfd))
        return NULL;
    pthread_mutex_lock(&g_lock);
    _Atomic(pl_ep_t *) *s = slot(epfd, 0);
    pl_ep_t *ep = s ? atomic_load(s) : NULL;
    if (ep)
        ep->refs++;
    pthread_mutex_unlock(&g_lock);
    return ep;
}

static void ep_free(pl_ep_t *ep)
{
    for (int i = 0; i < ep->by_fd_n; i++)
        free(ep->by_fd[i]);
    free(ep->by_fd);
    free(ep->up);
    REAL(close)(ep->kick);
    pthread_mutex_destroy(&ep->lock);
    free(ep);
}

/* under g_lock */
static void ep_put_locked(pl_ep_t *ep)
{
    if (--ep->refs > 0)
        return;
    for (pl_ep_t **p = &g_list; *p; p = &(*p)->next)
        if (*p == ep) {
            *p = ep->next;
            break;
        }
    ep_free(ep);
}

void pl_ep_put(pl_ep_t *ep)
{
    pthread_mutex_lock(&g_lock);
    ep_put_locked(ep);
    pthread_mutex_unlock(&g_lock);
}

void pl_ep_kick(pl_ep_t *ep)
{
    uint64_t one = 1;
    ssize_t r = REAL(write)(ep->kick, &one, sizeof one);
    (void)r;   /* EAGAIN: the counter is full, so it is readable anyway */
}

/* Is @p fd an epoll instance? (once per instance, when it is first met) */
static int is_epoll(int fd)
{
    char path[64], link[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return 0;
    link[n] = 0;
    return strcmp(link, "anon_inode:[eventpoll]") == 0;
}

/* Start keeping state for @p epfd; returns it with a reference for the
 * caller, or NULL (errno) if it is not an epoll instance or on failure. */
static pl_ep_t *ep_create(int epfd)
{
    if (!is_epoll(epfd))
        return NULL;
    pl_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep)
        return NULL;
    pthread_mutex_init(&ep->lock, NULL);
    ep->fd = epfd;
    ep->evfd = -1;
    uint32_t t = 0;
    if (getrandom(&t, sizeof t, GRND_NONBLOCK) != sizeof t)
        t = (uint32_t)(uintptr_t)ep ^ (uint32_t)getpid() * 2654435761u;
    ep->tag = (uint64_t)(t | 0x80000000u) << 32;
    ep->kick = (int)syscall(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ep->kick < 0) {
        free(ep);
        return NULL;
    }
    struct epoll_event kev = {.events = EPOLLIN | EPOLLET, .data.u64 = ep->tag | K_KICK};
    if (REAL(epoll_ctl)(epfd, EPOLL_CTL_ADD, ep->kick, &kev) < 0) {
        int e = errno;
        REAL(close)(ep->kick);
        free(ep);
        errno = e;
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    _Atomic(pl_ep_t *) *s = slot(epfd, 1);
    pl_ep_t *old = s ? atomic_load(s) : NULL;
    if (!s || old) {   /* no memory, or another thread made it first */
        if (old)
            old->refs++;
        pthread_mutex_unlock(&g_lock);
        REAL(epoll_ctl)(epfd, EPOLL_CTL_DEL, ep->kick, NULL);
        REAL(close)(ep->kick);
        free(ep);
        if (!old)
            errno = ENOMEM;
        return old;
    }
    ep->refs = 2;   /* the descriptor, the caller */
    ep->nfds = 1;
    ep->next = g_list;
    g_list = ep;
    atomic_store_explicit(s, ep, memory_order_release);
    pthread_mutex_unlock(&g_lock);
    return ep;
}

/* EAGAIN counts per descriptor, in chunks made when a vmmc socket is first
 * filed in an instance (the read and write wrappers only count there). */
typedef struct {
    _Atomic uint32_t in, out;
} eag_t;
static _Atomic(eag_t *) eag_chunks[NCHUNKS];

static eag_t *eag_of(int fd, int make)
{
    if (fd < 0 || fd >= CHUNK * NCHUNKS)
        return NULL;
    eag_t *c = atomic_load_explicit(&eag_chunks[fd / CHUNK], memory_order_acquire);
    if (!c && make) {
        eag_t *n = calloc(CHUNK, sizeof *n);
        if (!n)
            return NULL;
        if (atomic_compare_exchange_strong(&eag_chunks[fd / CHUNK], &c, n))
            c = n;
        else
            free(n);   /* another thread made it: c holds it */
    }
    return c ? &c[fd % CHUNK] : NULL;
}

void pl_ep_eagain(int fd, uint32_t bits)
{
    eag_t *e = eag_of(fd, 0);
    if (!e)
        return;
    if (bits & EPOLLIN)
        atomic_fetch_add_explicit(&e->in, 1, memory_order_release);
    if (bits & EPOLLOUT)
        atomic_fetch_add_explicit(&e->out, 1, memory_order_release);
}

uint32_t pl_ep_eagain_count(int fd, int out)
{
    eag_t *e = eag_of(fd, 0);
    if (!e)
        return 0;
    return atomic_load_explicit(out ? &e->out : &e->in, memory_order_acquire);
}

/* ------------------------------------------------------------------------ */
/* entries (under the instance's lock) */

static uint64_t gen_next(void)
{
    static _Atomic uint64_t g;
    return atomic_fetch_add(&g, 1) + 1;
}

static pl_ent_t *ent_find(pl_ep_t *ep, int fd)
{
    return fd >= 0 && fd < ep->by_fd_n ? ep->by_fd[fd] : NULL;
}

static int ent_insert(pl_ep_t *ep, pl_ent_t *e)
{
    if (e->fd >= ep->by_fd_n) {
        int n = ep->by_fd_n ? ep->by_fd_n : 64;
        while (n <= e->fd)
            n *= 2;
        pl_ent_t **p = realloc(ep->by_fd, (size_t)n * sizeof *p);
        if (!p)
            return pl_fail(ENOMEM);
        memset(p + ep->by_fd_n, 0, (size_t)(n - ep->by_fd_n) * sizeof *p);
        ep->by_fd = p;
        ep->by_fd_n = n;
    }
    ep->by_fd[e->fd] = e;
    return 0;
}

static int up_add(pl_ep_t *ep, pl_ent_t *e)
{
    if (ep->nup == ep->up_cap) {
        int n = ep->up_cap ? 2 * ep->up_cap : 16;
        pl_ent_t **p = realloc(ep->up, (size_t)n * sizeof *p);
        if (!p)
            return pl_fail(ENOMEM);
        ep->up = p;
        ep->up_cap = n;
    }
    e->up_idx = ep->nup;
    ep->up[ep->nup++] = e;
    return 0;
}

static void up_remove(pl_ep_t *ep, pl_ent_t *e)
{
    if (e->up_idx < 0)
        return;
    pl_ent_t *last = ep->up[--ep->nup];
    ep->up[e->up_idx] = last;
    last->up_idx = e->up_idx;
    e->up_idx = -1;
    if (ep->nup == 0 && ep->evfd >= 0) {   /* nothing left to wake for */
        REAL(epoll_ctl)(ep->fd, EPOLL_CTL_DEL, ep->evfd, NULL);
        ep->evfd = -1;
    }
}

/* File @p e as the application asked (kernel mode). */
static int file_app(pl_ep_t *ep, pl_ent_t *e, int op)
{
    struct epoll_event ev = e->ev;
    if (REAL(epoll_ctl)(ep->fd, op, e->fd, &ev) < 0)
        return -1;
    e->filed = FILED_APP;
    e->gen = gen_next();
    return 0;
}

/* File @p e with its cookie (upgraded), the event fd once per instance. */
static int file_cookie(pl_ep_t *ep, pl_ent_t *e)
{
    int efd = vmmc_sock_event_fd();
    if (efd >= 0 && ep->evfd != efd) {
        struct epoll_event eev = {.events = EPOLLIN | EPOLLET, .data.u64 = ep->tag | K_EVFD};
        if (REAL(epoll_ctl)(ep->fd, EPOLL_CTL_ADD, efd, &eev) < 0 && errno != EEXIST)
            return -1;
        ep->evfd = efd;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                             .data.u64 = ep->tag | (uint32_t)e->fd};
    if (REAL(epoll_ctl)(ep->fd, EPOLL_CTL_ADD, e->fd, &ev) < 0)
        return -1;
    if (up_add(ep, e) < 0) {
        REAL(epoll_ctl)(ep->fd, EPOLL_CTL_DEL, e->fd, NULL);
        return -1;
    }
    e->filed = FILED_COOKIE;
    e->gen = gen_next();
    e->woken = 1;   /* report what is ready now, as an ADD does */
    e->last = 0;
    pl_ep_kick(ep);
    return 0;
}

/* Take @p e out of the kernel's instance, whatever it is filed as. */
static void unfile(pl_ep_t *ep, pl_ent_t *e)
{
    if (e->filed != FILED_NONE)
        REAL(epoll_ctl)(ep->fd, EPOLL_CTL_DEL, e->fd, NULL);
    if (e->filed == FILED_COOKIE)
        up_remove(ep, e);
    e->filed = FILED_NONE;
}

static void ent_remove(pl_ep_t *ep, pl_ent_t *e, int kernel)
{
    if (kernel)
        unfile(ep, e);
    else if (e->filed == FILED_COOKIE)
        up_remove(ep, e);
    ep->by_fd[e->fd] = NULL;
    free(e);
}

/* Has the kernel's instance disabled the EPOLLONESHOT entry of @p fd (it
 * fired and was not re-armed)? Read from /proc/self/fdinfo: a disabled
 * entry keeps none of its event bits. Once per upgrade of such an entry. */
static int oneshot_fired(int epfd, int fd)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", epfd);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int fired = 0;
    while (fgets(buf, sizeof buf, f)) {
        int tfd;
        unsigned ev;
        if (sscanf(buf, "tfd: %d events: %x", &tfd, &ev) == 2 && tfd == fd) {
            fired = (ev & ~(unsigned)(EPOLLONESHOT | EPOLLET | EPOLLWAKEUP | EPOLLEXCLUSIVE)) == 0;
            break;
        }
    }
    fclose(f);
    return fired;
}

/* Re-file @p e for the socket's new mode (under the instance's lock). */
static void refile(pl_ep_t *ep, pl_ent_t *e, int upgraded)
{
    if (upgraded && e->filed != FILED_COOKIE) {
        if (e->filed == FILED_APP && (e->ev.events & EPOLLONESHOT) &&
            oneshot_fired(ep->fd, e->fd))
            e->disabled = 1;
        unfile(ep, e);
        if (file_cookie(ep, e) < 0)   /* cannot happen short of ENOMEM: keep the app's */
            file_app(ep, e, EPOLL_CTL_ADD);
    } else if (!upgraded && e->filed == FILED_COOKIE) {
        unfile(ep, e);
        if (!e->disabled)
            file_app(ep, e, EPOLL_CTL_ADD);   /* the kernel reports what is ready */
        e->gen = gen_next();
    }
}

void pl_ep_mode_hook(int fd, int upgraded, void *arg)
{
    pthread_mutex_lock(&g_lock);
    for (pl_ep_t *ep = g_list; ep; ep = ep->next) {
        pthread_mutex_lock(&ep->lock);
        pl_ent_t *e = ep->fd >= 0 ? ent_find(ep, fd) : NULL;
        if (e)
            refile(ep, e, upgraded);
        pthread_mutex_unlock(&ep->lock);
    }
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------ */
/* close, dup, fork */

/* Another live descriptor naming @p ep, or -1 (under g_lock). */
static int other_fd(pl_ep_t *ep, int not)
{
    for (int c = 0; c < NCHUNKS; c++) {
        if (!chunks[c])
            continue;
        for (int i = 0; i < CHUNK; i++)
            if (c * CHUNK + i != not && atomic_load(&chunks[c][i]) == ep)
                return c * CHUNK + i;
    }
    return -1;
}

void pl_ep_fd_closing(int fd)
{
    pthread_mutex_lock(&g_lock);
    _Atomic(pl_ep_t *) *s = slot(fd, 0);
    pl_ep_t *gone = s ? atomic_exchange(s, NULL) : NULL;
    if (gone) {
        pthread_mutex_lock(&gone->lock);
        if (--gone->nfds == 0)
            gone->fd = -1;   /* no descriptor left: nothing to re-file */
        else if (gone->fd == fd)
            gone->fd = other_fd(gone, fd);
        pthread_mutex_unlock(&gone->lock);
        ep_put_locked(gone);
    }
    /* a vmmc socket leaving the instances that hold it: a cookie entry goes
     * now (the kernel would keep it while a dup of the socket lives on,
     * reporting a descriptor that no longer exists); one the kernel files
     * with the application's data is left to the kernel, as without vmmc */
    for (pl_ep_t *ep = g_list; ep; ep = ep->next) {
        pthread_mutex_lock(&ep->lock);
        pl_ent_t *e = ent_find(ep, fd);
        if (e)
            ent_remove(ep, e, e->filed == FILED_COOKIE);
        pthread_mutex_unlock(&ep->lock);
    }
    pthread_mutex_unlock(&g_lock);
}

void pl_ep_fd_dup(int oldfd, int newfd)
{
    pthread_mutex_lock(&g_lock);
    _Atomic(pl_ep_t *) *so = slot(oldfd, 0), *sn = slot(newfd, 1);
    pl_ep_t *ep = so ? atomic_load(so) : NULL;
    if (ep && sn) {
        pl_ep_t *old = atomic_exchange(sn, ep);
        if (old) {
            old->nfds--;
            ep_put_locked(old);
        }
        ep->refs++;
        ep->nfds++;
    }
    pthread_mutex_unlock(&g_lock);
}

void pl_ep_forked(int child)
{
    if (child) {
        /* the child has one thread: a lock another thread of the parent
         * held at the fork would never be released here */
        pthread_mutex_init(&g_lock, NULL);
        for (pl_ep_t *ep = g_list; ep; ep = ep->next)
            pthread_mutex_init(&ep->lock, NULL);
    }
    pthread_mutex_lock(&g_lock);
    for (pl_ep_t *ep = g_list; ep; ep = ep->next)
        atomic_store(&ep->shared, 1);
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------ */
/* epoll_create, epoll_ctl */

/* A new instance's number may be one a stale entry still names (an
 * instance closed behind this library's back, by close_range say). */
static int fresh(int fd)
{
    if (fd >= 0 && pl_ep_known(fd))
        pl_ep_fd_closing(fd);
    return fd;
}

PL_EXPORT int epoll_create(int size)
{
    return fresh(REAL(epoll_create)(size));   /* the kernel's EINVAL for size <= 0 */
}

PL_EXPORT int epoll_create1(int flags)
{
    return fresh(REAL(epoll_create1)(flags));
}

#define EXCLUSIVE_OK (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
                      EPOLLEXCLUSIVE)

/* epoll_ctl on a vmmc socket, the instance locked. */
static int ctl_locked(pl_ep_t *ep, int op, int fd, struct epoll_event *ev)
{
    pl_ent_t *e = ent_find(ep, fd);
    if (op != EPOLL_CTL_DEL && !ev)
        return pl_fail(EFAULT);
    switch (op) {
    case EPOLL_CTL_ADD: {
        if (e)
            return pl_fail(EEXIST);
        if ((ev->events & EPOLLEXCLUSIVE) && (ev->events & ~(uint32_t)EXCLUSIVE_OK))
            return pl_fail(EINVAL);
        vmmc_sock_info_t info;
        int up = vmmc_sock_info(fd, &info) == 0 && info.mode == VMMC_SOCK_VMMC;
        if (!eag_of(fd, 1))
            return pl_fail(ENOMEM);
        e = calloc(1, sizeof *e);
        if (!e)
            return pl_fail(ENOMEM);
        e->fd = fd;
        e->ev = *ev;
        e->up_idx = -1;
        if (ent_insert(ep, e) < 0) {
            free(e);
            return -1;
        }
        if ((up ? file_cookie(ep, e) : file_app(ep, e, EPOLL_CTL_ADD)) < 0) {
            int err = errno;
            ep->by_fd[fd] = NULL;
            free(e);
            return pl_fail(err);
        }
        return 0;
    }
    case EPOLL_CTL_MOD:
        if (!e)
            return REAL(epoll_ctl)(ep->fd, op, fd, ev);   /* the kernel's answer */
        if ((e->ev.events & EPOLLEXCLUSIVE) || (ev->events & EPOLLEXCLUSIVE))
            return pl_fail(EINVAL);
        e->ev = *ev;
        e->disabled = 0;
        e->woken = 1;
        e->last = 0;
        if (e->filed == FILED_COOKIE) {
            pl_ep_kick(ep);   /* a waiter re-evaluates with the new events */
            return 0;
        }
        return file_app(ep, e, e->filed == FILED_APP ? EPOLL_CTL_MOD : EPOLL_CTL_ADD);
    case EPOLL_CTL_DEL:
        if (!e)
            return REAL(epoll_ctl)(ep->fd, op, fd, ev);
        ent_remove(ep, e, 1);
        return 0;
    default:
        return pl_fail(EINVAL);
    }
}

PL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    if (!vmmc_sock_is(fd)) {
        if (__builtin_expect(pl_ep_known(epfd), 0)) {
            /* a number a vmmc socket had, now something else: forget it */
            pl_ep_t *ep = pl_ep_ref(epfd);
            if (ep) {
                pthread_mutex_lock(&ep->lock);
                pl_ent_t *e = ent_find(ep, fd);
                if (e)
                    ent_remove(ep, e, 0);
                pthread_mutex_unlock(&ep->lock);
                pl_ep_put(ep);
            }
        }
        return REAL(epoll_ctl)(epfd, op, fd, ev);
    }
    if (epfd == fd)
        return REAL(epoll_ctl)(epfd, op, fd, ev);
    pl_init();
    pl_ep_t *ep = pl_ep_ref(epfd);
    if (!ep && !(ep = ep_create(epfd)))
        return REAL(epoll_ctl)(epfd, op, fd, ev);   /* not an epoll: the kernel's error */
    pthread_mutex_lock(&ep->lock);
    int saved = ep->fd;
    ep->fd = epfd;   /* the descriptor the caller holds is surely live */
    int r = ctl_locked(ep, op, fd, ev);
    ep->fd = saved >= 0 ? saved : epfd;
    pthread_mutex_unlock(&ep->lock);
    pl_ep_put(ep);
    return r;
}
