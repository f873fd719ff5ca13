/* The process context of the sockets layer: one open-world endpoint and the
 * sock thread.
 *
 * Made on first use (sock_ctx_get, or sock_ctx_watch for a listener's probe
 * socket): vmmc_ep_open() needs no job, since a preloaded program is not
 * started by `vmmc run`; the endpoint listens (vmmc_listen) so that the
 * server side of a connection is reached by the client that connects to it.
 * Which transport a peer gets is the core's choice from its address (shm on
 * this host, udp across hosts; the udp transport publishes the host's first
 * non-loopback IPv4 address unless VMMC_UDP_ADDR says otherwise).
 *
 * The sock thread polls the watched descriptors and an eventfd that wakes it
 * when the set changes, and runs the callbacks. It blocks every signal, so
 * that signals go to the application's threads, sleeps in poll() with no
 * lock held, and runs a callback with no lock held either. An entry being
 * run is marked; sock_ctx_unwatch() of it waits until the run is over
 * (unless it is the callback itself that unwatches).
 *
 * fork(): the prepare handler moves every upgraded connection back to TCP
 * (vmmc_sock_revert_all()); the child forgets the context (the core marks the
 * inherited endpoint dead; its memory and the parent's thread are not the
 * child's to touch) and makes a fresh one on first use. The probe sockets of
 * inherited listeners stay with the parent's thread, which answers for
 * both, since the probe table is shared (sock_probe.c). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "sock/sock.h"
#include "sock/sock_sys.h"
#include "sock/sock_up.h"
#include "util/log.h"

typedef struct watch {
    int fd;
    short events;
    int paused;          /* POLLNVAL seen: left out of the poll set */
    sock_watch_fn fn;
    void *arg;
    uint64_t id;
} watch_t;

struct sock_ctx {
    vmmc_ep_t *ep;
    int evfd;                 /* vmmc_event_fd() */
    int wake;                 /* eventfd: the watch set changed */
    pthread_t thr;
    pthread_mutex_t lock;     /* the watch set, running */
    pthread_cond_t done;      /* a callback finished */
    watch_t *w;
    int nw, capw;
    uint64_t next_id;
    uint64_t running;         /* id of the entry whose callback runs, 0: none */
    struct pollfd *pf;        /* the sock thread's poll set and its entries' ids */
    uint64_t *ids;
    int cap;
};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static sock_ctx_t *_Atomic the_ctx;
static sock_ctx_t *forgotten; /* a fork child's copy of its parent's: kept, never used */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* ------------------------------------------------------------------------ */

int sock_errno_of(int status)
{
    switch (status) {
    case VMMC_ERR_NOMEM: return ENOMEM;
    case VMMC_ERR_TIMEOUT: return ETIMEDOUT;
    case VMMC_ERR_BUSY: return EBUSY;
    case VMMC_ERR_PERMISSION: return EACCES;
    case VMMC_ERR_UNSUPPORTED: return EOPNOTSUPP;
    case VMMC_ERR_PROTOCOL: return EPROTO;
    case VMMC_ERR_PEER_DEAD: return ECONNRESET;
    case VMMC_ERR_PEER_UNREACHABLE: return EHOSTUNREACH;
    case VMMC_ERR_ENDPOINT: return EBADFD;
    case VMMC_ERR_SYSTEM: return EIO;
    default: return EINVAL;
    }
}

static void wake_thread(sock_ctx_t *ctx)
{
    uint64_t one = 1;
    (void)sys_write(ctx->wake, &one, sizeof one); /* EAGAIN: already due */
}

/* ------------------------------------------------------------------------ */
/* the sock thread */

static watch_t *find(sock_ctx_t *ctx, uint64_t id)
{
    for (int i = 0; i < ctx->nw; i++)
        if (ctx->w[i].id == id)
            return &ctx->w[i];
    return NULL;
}

static void *sock_thread(void *p)
{
    sock_ctx_t *ctx = p;

    for (;;) {
        struct pollfd *pf = ctx->pf;
        uint64_t *ids = ctx->ids;
        int cap = ctx->cap;
        pthread_mutex_lock(&ctx->lock);
        if (ctx->nw + 1 > cap) {
            int ncap = ctx->nw + 16;
            struct pollfd *npf = realloc(pf, (size_t)ncap * sizeof *npf);
            uint64_t *nids = npf ? realloc(ids, (size_t)ncap * sizeof *nids) : NULL;
            if (npf)
                pf = ctx->pf = npf;
            if (nids)
                ids = ctx->ids = nids;
            if (!npf || !nids) {
                /* Keep polling what fits; try again at the next change. */
                pthread_mutex_unlock(&ctx->lock);
                if (!pf) {
                    struct pollfd one = {.fd = ctx->wake, .events = POLLIN};
                    (void)sys_poll(&one, 1, 100);
                    continue;
                }
                pthread_mutex_lock(&ctx->lock);
            } else {
                cap = ctx->cap = ncap;
            }
        }
        int n = 0;
        pf[n++] = (struct pollfd){.fd = ctx->wake, .events = POLLIN};
        for (int i = 0; i < ctx->nw && n < cap; i++) {
            if (ctx->w[i].paused)
                continue;
            pf[n] = (struct pollfd){.fd = ctx->w[i].fd, .events = ctx->w[i].events};
            ids[n] = ctx->w[i].id;
            n++;
        }
        pthread_mutex_unlock(&ctx->lock);

        int r = sys_poll(pf, (nfds_t)n, -1);
        if (r < 0)
            continue; /* EINTR cannot happen (signals blocked); ENOMEM: again */
        if (pf[0].revents & POLLIN) {
            uint64_t v;
            (void)sys_read(ctx->wake, &v, sizeof v);
        }
        for (int i = 1; i < n; i++) {
            if (!pf[i].revents)
                continue;
            pthread_mutex_lock(&ctx->lock);
            watch_t *w = find(ctx, ids[i]);
            if (!w || w->fd != pf[i].fd) {
                /* unwatched meanwhile: it must not run; moved to another
                 * descriptor (sock_ctx_move): the number polled may be
                 * closed by now, and the move woke us, so the next poll,
                 * on the new number, reports what is still there */
                pthread_mutex_unlock(&ctx->lock);
                continue;
            }
            sock_watch_fn fn = w->fn;
            void *arg = w->arg;
            ctx->running = w->id;
            pthread_mutex_unlock(&ctx->lock);

            fn(pf[i].fd, pf[i].revents, arg);

            pthread_mutex_lock(&ctx->lock);
            ctx->running = 0;
            if (pf[i].revents & POLLNVAL) {
                /* Closed without unwatch: polling it again would spin. */
                watch_t *still = find(ctx, ids[i]);
                if (still && still->fd == pf[i].fd) { /* not moved meanwhile */
                    still->paused = 1;
                    vmmc_warn("sock: fd %d was closed while watched", pf[i].fd);
                }
            }
            pthread_cond_broadcast(&ctx->done);
            pthread_mutex_unlock(&ctx->lock);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* fork */

static void atfork_prepare(void)
{
    /* Only a process with a context can have upgraded connections. */
    if (atomic_load(&the_ctx))
        (void)vmmc_sock_revert_all();
}

static void atfork_child(void)
{
    sock_ctx_t *ctx = atomic_load(&the_ctx);
    if (ctx) {
        /* The parent's: its endpoint is dead here (the core saw to it), its
         * thread is not here, its locks may be held by threads that are not
         * here. Drop the child's copy of the wake descriptor only. */
        sys_close(ctx->wake);
        forgotten = ctx;
        atomic_store(&the_ctx, NULL);
    }
    pthread_mutex_init(&ctx_lock, NULL);
}

static void register_atfork(void)
{
    /* Registered after the core's own handlers (the endpoint is open by
     * now), so prepare runs before the core takes its endpoint locks. */
    pthread_atfork(atfork_prepare, NULL, atfork_child);
}

/* ------------------------------------------------------------------------ */

static sock_ctx_t *ctx_make(void)
{
    sock_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        vmmc_error(VMMC_ERR_NOMEM, "sock: no memory for the context");
        errno = ENOMEM;
        return NULL;
    }
    ctx->wake = -1;
    ctx->next_id = 1;
    int rc = vmmc_ep_open(NULL, &ctx->ep);
    if (rc != VMMC_OK)
        goto fail;
    rc = vmmc_listen(ctx->ep, NULL, NULL);
    if (rc != VMMC_OK)
        goto fail;
    ctx->evfd = vmmc_event_fd(ctx->ep);
    if (ctx->evfd < 0) {
        rc = ctx->evfd;
        goto fail;
    }
    ctx->wake = (int)syscall(SYS_eventfd2, 0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ctx->wake < 0) {
        rc = vmmc_error_sys("sock: eventfd");
        goto fail;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_cond_init(&ctx->done, NULL);

    /* The thread inherits a mask that blocks every signal. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&ctx->thr, NULL, sock_thread, ctx);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        errno = e;
        rc = vmmc_error_sys("sock: cannot start the sock thread");
        pthread_cond_destroy(&ctx->done);
        pthread_mutex_destroy(&ctx->lock);
        goto fail;
    }
    pthread_detach(ctx->thr);
    pthread_once(&atfork_once, register_atfork);
    return ctx;

fail:
    if (ctx->wake >= 0)
        sys_close(ctx->wake);
    if (ctx->ep)
        vmmc_ep_close(ctx->ep);
    free(ctx);
    errno = sock_errno_of(rc);
    return NULL;
}

sock_ctx_t *sock_ctx_get(void)
{
    sock_ctx_t *ctx = atomic_load(&the_ctx);
    if (ctx)
        return ctx;
    pthread_mutex_lock(&ctx_lock);
    ctx = atomic_load(&the_ctx);
    if (!ctx) {
        ctx = ctx_make();
        if (ctx)
            atomic_store(&the_ctx, ctx);
    }
    int e = errno;
    pthread_mutex_unlock(&ctx_lock);
    errno = e;
    return ctx;
}

sock_ctx_t *sock_ctx_peek(void)
{
    return atomic_load(&the_ctx);
}

vmmc_ep_t *sock_ctx_ep(sock_ctx_t *ctx)
{
    return ctx->ep;
}

int sock_ctx_event_fd(sock_ctx_t *ctx)
{
    return ctx->evfd;
}

void sock_ctx_drain(sock_ctx_t *ctx)
{
    while (vmmc_progress(ctx->ep) > 0)
        ;
}

int sock_ctx_connect(sock_ctx_t *ctx, const void *addr, size_t len, int *peer)
{
    int rc = vmmc_connect(ctx->ep, addr, len, peer);
    if (rc != VMMC_OK) {
        errno = sock_errno_of(rc);
        return -1;
    }
    return 0;
}

int sock_ctx_watch(int fd, short events, sock_watch_fn fn, void *arg)
{
    if (fd < 0 || !fn) {
        vmmc_error(VMMC_ERR_INVALID, "sock: watch of fd %d without a callback", fd);
        errno = EINVAL;
        return -1;
    }
    sock_ctx_t *ctx = sock_ctx_get();
    if (!ctx)
        return -1;
    pthread_mutex_lock(&ctx->lock);
    for (int i = 0; i < ctx->nw; i++) {
        if (ctx->w[i].fd == fd && ctx->w[i].arg == arg) {
            /* Watched already: new events and callback. */
            ctx->w[i].events = events;
            ctx->w[i].fn = fn;
            ctx->w[i].paused = 0;
            pthread_mutex_unlock(&ctx->lock);
            wake_thread(ctx);
            return 0;
        }
    }
    if (ctx->nw == ctx->capw) {
        int ncap = ctx->capw ? 2 * ctx->capw : 16;
        watch_t *nw = realloc(ctx->w, (size_t)ncap * sizeof *nw);
        if (!nw) {
            pthread_mutex_unlock(&ctx->lock);
            vmmc_error(VMMC_ERR_NOMEM, "sock: no memory to watch fd %d", fd);
            errno = ENOMEM;
            return -1;
        }
        ctx->w = nw;
        ctx->capw = ncap;
    }
    ctx->w[ctx->nw++] = (watch_t){.fd = fd, .events = events, .fn = fn, .arg = arg,
                                  .id = ctx->next_id++};
    pthread_mutex_unlock(&ctx->lock);
    wake_thread(ctx);
    return 0;
}

void sock_ctx_unwatch(int fd, void *arg)
{
    sock_ctx_t *ctx = atomic_load(&the_ctx);
    if (!ctx)
        return;
    (void)fd; /* the watch is @p arg's: it may poll another dup by now */
    int self = pthread_equal(pthread_self(), ctx->thr);
    pthread_mutex_lock(&ctx->lock);
    for (int i = 0; i < ctx->nw; i++) {
        if (ctx->w[i].arg != arg)
            continue;
        uint64_t id = ctx->w[i].id;
        ctx->w[i] = ctx->w[--ctx->nw];
        if (!self)
            while (ctx->running == id)
                pthread_cond_wait(&ctx->done, &ctx->lock);
        break;
    }
    pthread_mutex_unlock(&ctx->lock);
    /* Wake the thread so it stops polling the descriptor, which the caller
     * may close (and the number be reused) at once. */
    wake_thread(ctx);
}

void sock_ctx_move(void *arg, int fd)
{
    sock_ctx_t *ctx = atomic_load(&the_ctx);
    if (!ctx || fd < 0)
        return;
    int moved = 0;
    pthread_mutex_lock(&ctx->lock);
    for (int i = 0; i < ctx->nw; i++) {
        if (ctx->w[i].arg == arg && ctx->w[i].fd != fd) {
            ctx->w[i].fd = fd;
            ctx->w[i].paused = 0; /* a POLLNVAL of the old number paused it */
            moved = 1;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    /* The thread stops polling the old number, which the caller closes. */
    if (moved)
        wake_thread(ctx);
}
