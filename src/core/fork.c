/* fork(): a child must not corrupt its parent's endpoints.
 *
 * After fork() the child holds copies of the parent's endpoint structures,
 * mappings and descriptors, and none of its threads (control thread, udp
 * receiver, copy engine, service thread). Whatever it did with them would
 * act on the parent's behalf: a send through a copied proxy writes the
 * parent's sequence numbers and notification slots, an acknowledgement from
 * the copied udp socket lies to a peer about what the parent received.
 *
 * So every endpoint of the process is on one list, and a pthread_atfork
 * child handler marks each one inherited: every call on it then fails with
 * VMMC_ERR_ENDPOINT (proxies are moved to a state the send path already
 * refuses, so the short path pays nothing), and vmmc_finalize() only drops
 * the child's copy. The handler closes the child's copies of the core's
 * descriptors, including every control socket the transports registered
 * with the control thread (the parent keeps its own, so no peer sees
 * anything); it sends nothing and touches no shared memory. Memory that
 * peers reach (vmmc_mem_alloc() regions, mapped imports, notification rings)
 * is mapped MADV_DONTFORK where it is created, so it is not even present in
 * the child. The child may open endpoints of its own (docs/core.md). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"

static pthread_mutex_t eps_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static vmmc_ep_t **eps;
static int neps, capeps;

static void close_copy(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Before fork: hold the list and each endpoint's lock, so the child's copy of
 * the proxy list is consistent (no thread is half-way through changing it).
 * No user callback runs under ep->lock (handlers run under progress_lock),
 * so a fork() from a handler cannot deadlock here: keep it that way. */
static void prepare(void)
{
    pthread_mutex_lock(&eps_lock);
    for (int i = 0; i < neps; i++) {
        pthread_mutex_lock(&eps[i]->lock);
        vmmc_ctl_fork_prepare(eps[i]);
    }
}

static void parent(void)
{
    for (int i = neps - 1; i >= 0; i--) {
        vmmc_ctl_fork_parent(eps[i]);
        pthread_mutex_unlock(&eps[i]->lock);
    }
    pthread_mutex_unlock(&eps_lock);
}

/* In the child, the only thread: async-signal-safe calls only. */
static void child(void)
{
    for (int i = 0; i < neps; i++) {
        vmmc_ep_t *ep = eps[i];
        atomic_store(&ep->forked, 1);
        for (vmmc_proxy_t *px = ep->proxies; px; px = px->next)
            atomic_store(&px->state, PX_FORKED);
        /* The copies would keep the parent's sockets, eventfds and epoll
         * set alive after the parent closes them (a peer would not see the
         * parent's control connection close when it dies); closing them
         * tells nobody, since the parent holds its own. */
        vmmc_ctl_fork_child(ep); /* every watched descriptor: control sockets, timers */
        close_copy(&ep->evfd);
        close_copy(&ep->epfd);
        close_copy(&ep->ctl_wake_fd);
        close_copy(&ep->app_fd);
        close_copy(&ep->app_evfd);
        close_copy(&ep->boot.fd);
        vmmc_counters_forked(ep);
        pthread_mutex_unlock(&ep->lock);
    }
    pthread_mutex_unlock(&eps_lock);
}

static void install(void)
{
    pthread_atfork(prepare, parent, child);
}

int vmmc_fork_track(vmmc_ep_t *ep)
{
    pthread_once(&atfork_once, install);
    pthread_mutex_lock(&eps_lock);
    if (neps == capeps) {
        int cap = capeps ? 2 * capeps : 8;
        vmmc_ep_t **n = realloc(eps, (size_t)cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&eps_lock);
            return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the list of endpoints");
        }
        eps = n;
        capeps = cap;
    }
    eps[neps++] = ep;
    pthread_mutex_unlock(&eps_lock);
    return VMMC_OK;
}

void vmmc_fork_untrack(vmmc_ep_t *ep)
{
    pthread_mutex_lock(&eps_lock);
    for (int i = 0; i < neps; i++) {
        if (eps[i] == ep) {
            memmove(&eps[i], &eps[i + 1], (size_t)(neps - i - 1) * sizeof *eps);
            neps--;
            break;
        }
    }
    pthread_mutex_unlock(&eps_lock);
}

int vmmc_fork_error(const vmmc_ep_t *ep, const char *what)
{
    return vmmc_error(VMMC_ERR_ENDPOINT, "%s: this endpoint belongs to process %d; a child of "
                      "fork() cannot use it (open an endpoint of its own)", what, (int)ep->pid);
}

void vmmc_fork_exclude(void *addr, size_t len)
{
    /* Best effort: without it a child merely keeps a mapping it cannot use
     * through the library. */
    if (addr && len)
        (void)madvise(addr, len, MADV_DONTFORK);
}
