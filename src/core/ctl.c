/* The control thread: one per endpoint, blocked in epoll on the bootstrap
 * connection and the transports' control channels. It serves import
 * requests, revocations and death notices, so an application that computes
 * and never calls the library still answers its peers. */
#include "core/ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/export.h"

typedef struct watch {
    int fd;
    int dead;
    vmmc_watch_fn fn;
    void *arg;
    struct watch *next; /* all watches, for lookup and deferred free */
} watch_t;

typedef struct ctl_state {
    pthread_mutex_t lock;
    watch_t *all;
} ctl_state_t;

static ctl_state_t *ctl_of(vmmc_ep_t *ep);

void vmmc_ctl_init(vmmc_ep_t *ep, vmmc_ctl_msg_t *m, uint32_t type)
{
    memset(m, 0, sizeof *m);
    m->magic = VMMC_CTL_MAGIC;
    m->type = type;
    m->src_rank = ep->rank; /* informative: receivers know the sender by its connection */
    m->pid = (int32_t)ep->pid;
}

/* Made by vmmc_ctl_start(), freed by vmmc_ctl_stop(). */
static ctl_state_t *ctl_of(vmmc_ep_t *ep)
{
    return ep->ctl;
}

int vmmc_ctl_watch(vmmc_ep_t *ep, int fd, vmmc_watch_fn fn, void *arg)
{
    ctl_state_t *st = ctl_of(ep);
    watch_t *w = calloc(1, sizeof *w);
    if (!st || !w) {
        free(w);
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for a control watch");
    }
    w->fd = fd;
    w->fn = fn;
    w->arg = arg;
    pthread_mutex_lock(&st->lock);
    w->next = st->all;
    st->all = w;
    pthread_mutex_unlock(&st->lock);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = w};
    if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        w->dead = 1;
        return vmmc_error_sys("epoll_ctl(ADD) for control fd %d", fd);
    }
    return VMMC_OK;
}

/* Stop watching @fd. The watch is freed after the current event batch. */
void vmmc_ctl_unwatch(vmmc_ep_t *ep, int fd)
{
    ctl_state_t *st = ctl_of(ep);
    if (!st)
        return;
    pthread_mutex_lock(&st->lock);
    for (watch_t *w = st->all; w; w = w->next) {
        if (w->fd == fd && !w->dead) {
            w->dead = 1;
            epoll_ctl(ep->epfd, EPOLL_CTL_DEL, fd, NULL);
        }
    }
    pthread_mutex_unlock(&st->lock);
}

static void reap_watches(ctl_state_t *st, int all)
{
    pthread_mutex_lock(&st->lock);
    for (watch_t **pw = &st->all; *pw;) {
        watch_t *w = *pw;
        if (w->dead || all) {
            *pw = w->next;
            free(w);
        } else {
            pw = &w->next;
        }
    }
    pthread_mutex_unlock(&st->lock);
}

static void boot_event(void *arg, vmmc_boot_event_t ev, int64_t a, int64_t b)
{
    vmmc_ep_t *ep = arg;
    switch (ev) {
    case VMMC_BOOT_EV_BARRIER:
        /* The bootstrap completes a barrier without the ranks that died, and
         * sends their DEAD first: a completion after a death is a failure. */
        pthread_mutex_lock(&ep->lock);
        if ((uint64_t)a > ep->barrier_done)
            ep->barrier_done = (uint64_t)a;
        if (ep->boot_dead_rank < 0)
            ep->barrier_ok = ep->barrier_done;
        pthread_cond_broadcast(&ep->cond);
        pthread_mutex_unlock(&ep->lock);
        vmmc_ep_wake_waiters(ep);
        break;
    case VMMC_BOOT_EV_DEAD:
        vmmc_peer_mark_dead(ep, (int)a, (int)b, NULL);
        pthread_mutex_lock(&ep->lock);
        if (ep->boot_dead_rank < 0)
            ep->boot_dead_rank = (int)a;
        pthread_cond_broadcast(&ep->cond);
        pthread_mutex_unlock(&ep->lock);
        vmmc_ep_wake(ep);
        break;
    case VMMC_BOOT_EV_CLOSED: {
        /* The TCP rendezvous lives in rank 0's process and lets the others
         * leave before rank 0 does: losing it means rank 0 is gone, which
         * the transports would learn only at their peer timeout. */
        int host = vmmc_boot_host_rank(&ep->boot);
        if (host >= 0 && host != ep->rank) {
            /* Recorded before the death is visible: a thread that sees the
             * rank dead and enters a barrier must find it named there. */
            pthread_mutex_lock(&ep->lock);
            if (ep->boot_dead_rank < 0)
                ep->boot_dead_rank = host;
            pthread_mutex_unlock(&ep->lock);
            vmmc_peer_mark_dead(ep, host, -1, "the bootstrap rendezvous it served closed");
        }
        pthread_mutex_lock(&ep->lock);
        ep->launcher_closed = 1;
        pthread_cond_broadcast(&ep->cond);
        pthread_mutex_unlock(&ep->lock);
        vmmc_ep_wake(ep);
        break;
    }
    }
}

static void boot_ready(vmmc_ep_t *ep, int fd, uint32_t events, void *arg)
{
    int rc = vmmc_boot_dispatch(&ep->boot, boot_event, ep);
    if (rc != VMMC_OK || (events & (EPOLLHUP | EPOLLERR))) {
        vmmc_ctl_unwatch(ep, fd);
        if (!ep->closing)
            boot_event(ep, VMMC_BOOT_EV_CLOSED, 0, 0);
    }
}

static void *ctl_main(void *arg)
{
    vmmc_ep_t *ep = arg;
    ctl_state_t *st = ctl_of(ep);
    struct epoll_event evs[32];
    for (;;) {
        int n = epoll_wait(ep->epfd, evs, 32, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            vmmc_log(VMMC_LOG_ERROR, "control thread: epoll_wait failed: %m");
            break;
        }
        int stop = 0;
        for (int i = 0; i < n; i++) {
            watch_t *w = evs[i].data.ptr;
            if (!w) {
                stop = 1;
                continue;
            }
            if (!w->dead)
                w->fn(ep, w->fd, evs[i].events, w->arg);
        }
        reap_watches(st, 0);
        if (stop)
            break;
    }
    return NULL;
}

int vmmc_ctl_start(vmmc_ep_t *ep)
{
    ep->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ep->epfd < 0)
        return vmmc_error_sys("epoll_create1");
    ep->ctl_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ep->ctl_wake_fd < 0)
        return vmmc_error_sys("eventfd for the control thread");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->ctl_wake_fd, &ev) != 0)
        return vmmc_error_sys("epoll_ctl(ADD) wake fd");
    ctl_state_t *st = calloc(1, sizeof *st);
    if (!st)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the control thread");
    pthread_mutex_init(&st->lock, NULL);
    ep->ctl = st;
    return VMMC_OK;
}

int vmmc_ctl_run(vmmc_ep_t *ep)
{
    if (ep->boot.fd >= 0) {
        int rc = vmmc_ctl_watch(ep, ep->boot.fd, boot_ready, NULL);
        if (rc != VMMC_OK)
            return rc;
    }
    int e = pthread_create(&ep->ctl_thread, NULL, ctl_main, ep);
    if (e) {
        errno = e;
        return vmmc_error_sys("pthread_create (control thread)");
    }
    ep->ctl_running = 1;
    return VMMC_OK;
}

void vmmc_ctl_stop(vmmc_ep_t *ep)
{
    if (ep->ctl_running) {
        uint64_t one = 1;
        ssize_t w = write(ep->ctl_wake_fd, &one, sizeof one);
        (void)w;
        pthread_join(ep->ctl_thread, NULL);
        ep->ctl_running = 0;
    }
    ctl_state_t *st = ctl_of(ep);
    if (st) {
        reap_watches(st, 1);
        ep->ctl = NULL;
        pthread_mutex_destroy(&st->lock);
        free(st);
    }
    if (ep->epfd >= 0)
        close(ep->epfd);
    if (ep->ctl_wake_fd >= 0)
        close(ep->ctl_wake_fd);
    ep->epfd = ep->ctl_wake_fd = -1;
}

void vmmc_ctl_recv(vmmc_ep_t *ep, int peer_rank, const vmmc_ctl_msg_t *m, size_t len,
                   const int *fds, int nfds)
{
    int used = 0;
    if (len != sizeof *m || m->magic != VMMC_CTL_MAGIC ||
        memchr(m->name, 0, sizeof m->name) == NULL || memchr(m->text, 0, sizeof m->text) == NULL) {
        VMMC_COUNT(ep, CNT_CTL_BAD, 1);
        vmmc_debug("dropped malformed control message from rank %d", peer_rank);
    } else {
        switch (m->type) {
        case CTL_IMPORT_REQ:
            vmmc_export_serve_import(ep, peer_rank, m);
            break;
        case CTL_IMPORT_REP:
            used = vmmc_import_complete(ep, peer_rank, m, fds, nfds);
            break;
        case CTL_REVOKE:
            vmmc_import_revoked(ep, peer_rank, m);
            break;
        case CTL_UNIMPORT:
            /* An export keeps each importing rank once (a peer repeating
             * imports cannot grow it); one over a network transport leaves
             * with its last import (export.c, release). */
            vmmc_export_unimported(ep, peer_rank, m);
            break;
        case CTL_REVOKE_ACK:
            vmmc_export_revoke_acked(ep, peer_rank, m);
            break;
        case CTL_ATOMIC_REQ:
            vmmc_atomic_serve(ep, peer_rank, m);
            break;
        case CTL_ATOMIC_REP:
            vmmc_atomic_replied(ep, peer_rank, m);
            break;
        default:
            VMMC_COUNT(ep, CNT_CTL_BAD, 1);
            break;
        }
    }
    if (!used)
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
}

/* fork() (fork.c): hold the watch list across fork, so the child's copy is
 * consistent; in the child, close its copies of every watched descriptor
 * (transports' control sockets, the launcher connection, timers). A watch is
 * marked dead before its descriptor is closed, so every live one is open. */
void vmmc_ctl_fork_prepare(vmmc_ep_t *ep)
{
    ctl_state_t *st = ctl_of(ep);
    if (st)
        pthread_mutex_lock(&st->lock);
}

void vmmc_ctl_fork_parent(vmmc_ep_t *ep)
{
    ctl_state_t *st = ctl_of(ep);
    if (st)
        pthread_mutex_unlock(&st->lock);
}

void vmmc_ctl_fork_child(vmmc_ep_t *ep)
{
    ctl_state_t *st = ctl_of(ep); /* the only thread now */
    if (!st)
        return;
    for (watch_t *w = st->all; w; w = w->next) {
        if (!w->dead) {
            close(w->fd);
            w->dead = 1;
        }
    }
    pthread_mutex_unlock(&st->lock);
}
