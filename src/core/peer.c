/* Peers: the handle table, connecting (lazily), listening, and death.
 *
 * Handles index a table of chunks of VMMC_PEER_CHUNK pointers: adding a
 * peer may add a chunk but never moves a published entry, so the send path
 * reads peers without a lock. A peer is born knowing only the address;
 * the first operation that needs it connects through the transport chosen
 * best for its address (tl.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/export.h"

vmmc_peer_t *vmmc_peer_get(vmmc_ep_t *ep, int h, int *status)
{
    int n = vmmc_peer_count_int(ep);
    if (VMMC_UNLIKELY(h < 0 || h >= n)) {
        *status = vmmc_error(VMMC_ERR_INVALID, "peer %d is not a handle of this endpoint (0..%d)", h,
                             n - 1);
        return NULL;
    }
    return vmmc_peer_at(ep, h);
}

/* Caller holds peers_lock. */
static int insert_locked(vmmc_ep_t *ep, const char *addr, size_t len, pid_t pid)
{
    int h = atomic_load_explicit(&ep->npeers, memory_order_relaxed);
    if (h >= VMMC_PEERS_MAX)
        return vmmc_error(VMMC_ERR_AGAIN, "this endpoint has %d peers already", h);
    vmmc_peer_t **chunk = ep->peer_chunks[h / VMMC_PEER_CHUNK];
    if (!chunk) {
        chunk = calloc(VMMC_PEER_CHUNK, sizeof *chunk);
        if (!chunk)
            return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the peer table");
        atomic_store_explicit(&ep->peer_chunks[h / VMMC_PEER_CHUNK], chunk, memory_order_release);
    }
    vmmc_peer_t *p = calloc(1, sizeof *p);
    char *a = malloc(len + 1);
    if (!p || !a) {
        free(p);
        free(a);
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for peer %d", h);
    }
    memcpy(a, addr, len);
    a[len] = 0;
    p->rank = h;
    p->ep = ep;
    p->dead_status = -1;
    p->addr = a;
    p->addr_len = (uint32_t)len;
    p->addr_hash = vmmc_addr_hash(addr, len);
    pthread_mutex_init(&p->lock, NULL);
    char v[96];
    if (!pid && vmmc_card_get(a, "pid", v, sizeof v))
        pid = (pid_t)strtol(v, NULL, 10);
    p->pid = pid;
    p->same_host = h == ep->rank ||
                   (vmmc_card_get(a, "host", v, sizeof v) && !strcmp(v, ep->host_id));
    p->tl = vmmc_tl_pick(ep, a, p->same_host); /* NULL: unreachable, reported at connect */
    __atomic_store_n(&chunk[h % VMMC_PEER_CHUNK], p, __ATOMIC_RELEASE);
    atomic_store_explicit(&ep->npeers, h + 1, memory_order_release);
    return h;
}

int vmmc_peer_insert(vmmc_ep_t *ep, const char *addr, size_t len, pid_t pid)
{
    pthread_mutex_lock(&ep->peers_lock);
    int h = insert_locked(ep, addr, len, pid);
    pthread_mutex_unlock(&ep->peers_lock);
    return h;
}

static int find_locked(vmmc_ep_t *ep, const char *addr, size_t len)
{
    uint64_t hash = vmmc_addr_hash(addr, len);
    int n = atomic_load_explicit(&ep->npeers, memory_order_relaxed);
    for (int h = 0; h < n; h++) {
        vmmc_peer_t *p = vmmc_peer_at(ep, h);
        if (p->addr_hash == hash && p->addr_len == len && !memcmp(p->addr, addr, len))
            return h;
    }
    return -1;
}

int vmmc_peer_find(vmmc_ep_t *ep, const char *addr, size_t len)
{
    pthread_mutex_lock(&ep->peers_lock);
    int h = find_locked(ep, addr, len);
    pthread_mutex_unlock(&ep->peers_lock);
    return h;
}

int vmmc_peer_accept(vmmc_ep_t *ep, const vmmc_tl_ops_t *via, const char *addr, size_t len,
                     pid_t pid, int *is_new)
{
    *is_new = 0;
    pthread_mutex_lock(&ep->peers_lock);
    int h = find_locked(ep, addr, len);
    if (h >= 0) {
        vmmc_peer_t *p = vmmc_peer_at(ep, h);
        if (pid && p->pid && p->pid != pid) {
            pthread_mutex_unlock(&ep->peers_lock);
            VMMC_COUNT(ep, CNT_CONNECT_REFUSED, 1);
            return vmmc_error(VMMC_ERR_PERMISSION,
                              "pid %d connected with the address of peer %d (pid %d)", (int)pid, h,
                              (int)p->pid);
        }
    } else if (!atomic_load(&ep->listening) || ep->closing) {
        pthread_mutex_unlock(&ep->peers_lock);
        VMMC_COUNT(ep, CNT_CONNECT_REFUSED, 1);
        return vmmc_error(VMMC_ERR_PERMISSION,
                          "refused a connection from an unknown endpoint: this one does not listen");
    } else {
        h = insert_locked(ep, addr, len, pid);
        *is_new = h >= 0;
        if (h >= 0) {
            /* Answered the way it came: a peer that reached us through a
             * transport (its choice, or the only one it could use) is not
             * switched to another (it would not take a reply there). */
            if (via)
                vmmc_peer_at(ep, h)->tl = via;
            VMMC_COUNT(ep, CNT_PEERS_ACCEPTED, 1);
        }
    }
    pthread_mutex_unlock(&ep->peers_lock);
    return h;
}

void vmmc_peer_announce(vmmc_ep_t *ep, int h)
{
    vmmc_accept_fn_t fn = __atomic_load_n(&ep->accept_fn, __ATOMIC_ACQUIRE);
    if (fn && !ep->closing)
        fn(ep, h, ep->accept_arg);
}

void vmmc_peer_table_free(vmmc_ep_t *ep)
{
    int n = atomic_load(&ep->npeers);
    for (int h = 0; h < n; h++) {
        vmmc_peer_t *p = vmmc_peer_at(ep, h);
        pthread_mutex_destroy(&p->lock);
        free(p->addr);
        free(p);
    }
    for (int c = 0; c < VMMC_PEER_CHUNKS; c++)
        free(ep->peer_chunks[c]);
    memset(ep->peer_chunks, 0, sizeof ep->peer_chunks);
    atomic_store(&ep->npeers, 0);
}

/* ---- public API ---- */

int vmmc_connect(vmmc_ep_t *ep, const void *addr, size_t len, int *peer)
{
    if (!ep || !peer)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_connect: NULL %s", !ep ? "endpoint" : "result");
    int rc = vmmc_addr_check(addr, len);
    if (rc != VMMC_OK)
        return rc;
    pthread_mutex_lock(&ep->peers_lock);
    int h = find_locked(ep, addr, len);
    if (h < 0)
        h = insert_locked(ep, addr, len, 0);
    pthread_mutex_unlock(&ep->peers_lock);
    if (h < 0)
        return h;
    *peer = h;
    return VMMC_OK;
}

int vmmc_listen(vmmc_ep_t *ep, vmmc_accept_fn_t fn, void *arg)
{
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_listen: NULL endpoint");
    pthread_mutex_lock(&ep->peers_lock);
    ep->accept_arg = arg;
    __atomic_store_n(&ep->accept_fn, fn, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ep->peers_lock);
    int rc = vmmc_tl_listen_all(ep);
    if (rc != VMMC_OK)
        return rc;
    atomic_store(&ep->listening, 1);
    return VMMC_OK;
}

int vmmc_peer_addr(vmmc_ep_t *ep, int h, void *addr, size_t *len)
{
    if (!ep || !len || (!addr && *len))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_peer_addr: NULL argument");
    int rc = VMMC_OK;
    vmmc_peer_t *p = vmmc_peer_get(ep, h, &rc);
    if (!p)
        return rc;
    size_t cap = *len;
    *len = p->addr_len;
    if (cap < p->addr_len)
        return vmmc_error(VMMC_ERR_TRUNCATED, "peer %d's address needs %u bytes, not %zu", h,
                          p->addr_len, cap);
    memcpy(addr, p->addr, p->addr_len);
    return VMMC_OK;
}

int vmmc_peer_count(const vmmc_ep_t *ep)
{
    return ep ? vmmc_peer_count_int(ep) : vmmc_error(VMMC_ERR_INVALID, "vmmc_peer_count: NULL endpoint");
}

/* ---- connecting and death ---- */

int vmmc_peer_connect(vmmc_ep_t *ep, vmmc_peer_t *p, int timeout_ms)
{
    int s = atomic_load_explicit(&p->state, memory_order_acquire);
    if (VMMC_LIKELY(s == PEER_UP))
        return VMMC_OK;
    if (s == PEER_DEAD)
        return vmmc_peer_error(p);
    if (!p->tl)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE,
                          "%s %d is on another host and no inter-host transport is available",
                          VMMC_PEER_WORD(ep, p->rank), p->rank);
    pthread_mutex_lock(&p->lock);
    int rc = VMMC_OK;
    s = atomic_load(&p->state);
    if (s == PEER_DEAD)
        rc = vmmc_peer_error(p);
    else if (s != PEER_UP) {
        rc = p->tl->peer_connect(ep, &p->view, timeout_ms);
        /* Up unless it died meanwhile: a transport's thread may have heard
         * its refusal or death before peer_connect returned. */
        if (rc == VMMC_OK && !atomic_compare_exchange_strong(&p->state, &s, PEER_UP))
            rc = vmmc_peer_error(p);
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int vmmc_peer_error(const vmmc_peer_t *p)
{
    if (atomic_load(&p->state) != PEER_DEAD)
        return VMMC_OK;
    return vmmc_error(VMMC_ERR_PEER_DEAD, "%s %d is dead: %s", VMMC_PEER_WORD(p->ep, p->rank),
                      p->rank, p->dead_why);
}

void vmmc_peer_mark_dead(vmmc_ep_t *ep, int rank, int wstatus, const char *why)
{
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    if (!p || rank == ep->rank)
        return;
    pthread_mutex_lock(&ep->lock);
    /* The reason is written before the state says DEAD: readers look at it
     * only after seeing DEAD (markers serialise on ep->lock). */
    int was = atomic_load(&p->state);
    if (was != PEER_DEAD) {
        p->dead_status = wstatus;
        if (why)
            snprintf(p->dead_why, sizeof p->dead_why, "%s", why);
        else if (wstatus >= 0 && WIFSIGNALED(wstatus))
            snprintf(p->dead_why, sizeof p->dead_why, "killed by signal %d (%s)", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
        else if (wstatus >= 0 && WIFEXITED(wstatus))
            snprintf(p->dead_why, sizeof p->dead_why, "exited with status %d", WEXITSTATUS(wstatus));
        else
            snprintf(p->dead_why, sizeof p->dead_why, "reported dead by the launcher");
        was = atomic_exchange(&p->state, PEER_DEAD);
    } else if (wstatus >= 0 && p->dead_status < 0) {
        /* The launcher's verdict is more precise than "connection closed". */
        p->dead_status = wstatus;
        if (WIFSIGNALED(wstatus))
            snprintf(p->dead_why, sizeof p->dead_why, "killed by signal %d (%s)", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
    }
    pthread_mutex_unlock(&ep->lock);
    if (was == PEER_DEAD)
        return;
    vmmc_debug("%s %d is dead: %s", VMMC_PEER_WORD(ep, rank), rank, p->dead_why);
    if (p->tl && p->tl->peer_dead)
        p->tl->peer_dead(ep, &p->view);
    vmmc_import_peer_dead(ep, rank);
    vmmc_export_peer_dead(ep, rank);
    /* A rank of the job that dies fails the job's waits (vmmc_wait); a peer
     * that connected or was connected to leaving is no error of a wait: the
     * next operation to it says so. */
    if (ep->in_job && rank < ep->size)
        atomic_fetch_add(&ep->deaths, 1);
    pthread_mutex_lock(&ep->lock);
    pthread_cond_broadcast(&ep->cond);
    pthread_mutex_unlock(&ep->lock);
    vmmc_ep_wake(ep);
}
