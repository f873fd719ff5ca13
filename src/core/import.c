/* Imports: asking a peer for a region by name and turning the answer into a
 * proxy with bounds and a put function chosen once, here. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/export.h"
#include "util/config.h"

/* How long an import with no limit of its own (timeout -1) waits for the
 * name to appear. */
static uint64_t import_timeout_ns;
static const vmmc_cfg_entry_t import_entries[] = {
    {"IMPORT_TIMEOUT", "30s", "how long vmmc_import() with timeout -1 waits for the export to "
     "appear before it fails with VMMC_ERR_TIMEOUT", VMMC_CFG_TIME, &import_timeout_ns,
     1000000ull, 86400000000000ull},
};
VMMC_CONFIG_TABLE(import_cfg, "core", import_entries);

static void proxy_release(vmmc_proxy_t *px)
{
    if (px->peer && px->peer->tl && px->peer->tl->proxy_release)
        px->peer->tl->proxy_release(&px->view);
    if (px->map_base)
        munmap(px->map_base, px->map_len);
    if (px->rctl)
        munmap(px->rctl, vmmc_redir_ctl_size());
    px->map_base = NULL;
    px->rctl = NULL;
    px->base = NULL;
}

int vmmc_import_start(vmmc_ep_t *ep, int rank, const char *name, int timeout_ms, vmmc_proxy_t **out)
{
    VMMC_FORK_CHECK(ep);
    if (!ep || !name || !out)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_import: NULL %s",
                          !ep ? "endpoint" : !name ? "name" : "result pointer");
    if (!name[0] || strlen(name) >= VMMC_NAME_MAX)
        return vmmc_error(VMMC_ERR_INVALID, "export name must be 1..%d bytes", VMMC_NAME_MAX - 1);
    if (timeout_ms < -1)
        return vmmc_error(VMMC_ERR_INVALID, "timeout %d ms: use -1 for VMMC_IMPORT_TIMEOUT",
                          timeout_ms);
    int rc;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &rc);
    if (!p)
        return rc;
    int cto = timeout_ms < 0 ? (int)(vmmc_core_cfg.connect_timeout_ns / 1000000) : timeout_ms;
    if ((rc = vmmc_peer_connect(ep, p, cto)) != VMMC_OK)
        return rc;
    /* On cache lines of its own: its first line is all a send reads. */
    void *mem = NULL;
    if (posix_memalign(&mem, 64, (sizeof(vmmc_proxy_t) + 63) / 64 * 64) != 0)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for a proxy");
    vmmc_proxy_t *px = memset(mem, 0, sizeof *px);
    px->ep = ep;
    px->rank = rank;
    px->peer = p;
    snprintf(px->name, sizeof px->name, "%s", name);
    px->deadline_ns = vmmc_now_ns() + (timeout_ms < 0 ? import_timeout_ns
                                                      : (uint64_t)timeout_ms * 1000000ull);
    atomic_store(&px->state, PX_PENDING);

    vmmc_ctl_msg_t m;
    vmmc_ctl_init(ep, &m, CTL_IMPORT_REQ);
    snprintf(m.name, sizeof m.name, "%s", name);
    pthread_mutex_lock(&ep->lock);
    px->req_id = m.id = ++ep->next_req_id;
    px->next = ep->proxies;
    ep->proxies = px;
    pthread_mutex_unlock(&ep->lock);
    rc = p->tl->ctl_send(ep, &p->view, &m, NULL, 0);
    if (rc != VMMC_OK) {
        pthread_mutex_lock(&ep->lock);
        px->status = rc;
        snprintf(px->errmsg, sizeof px->errmsg, "%s", vmmc_last_error());
        atomic_store(&px->state, PX_FAILED);
        pthread_mutex_unlock(&ep->lock);
    }
    *out = px;
    return VMMC_INPROGRESS;
}

/* Called with ep->lock held. */
static int test_locked(vmmc_proxy_t *px)
{
    switch (atomic_load(&px->state)) {
    case PX_ACTIVE:
        return VMMC_OK;
    case PX_PENDING:
        if (atomic_load(&px->peer->state) == PEER_DEAD) {
            atomic_store(&px->state, PX_DEAD);
            return vmmc_proxy_state_error(px);
        }
        if (vmmc_now_ns() >= px->deadline_ns) {
            px->status = VMMC_ERR_TIMEOUT;
            snprintf(px->errmsg, sizeof px->errmsg,
                     "rank %d did not export '%s' before the import's deadline", px->rank, px->name);
            atomic_store(&px->state, PX_FAILED);
            return vmmc_error(px->status, "%s", px->errmsg);
        }
        return VMMC_INPROGRESS;
    default:
        return vmmc_proxy_state_error(px);
    }
}

int vmmc_import_test(vmmc_proxy_t *px)
{
    VMMC_FORK_CHECK(px ? px->ep : NULL);
    if (!px)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_import_test: NULL proxy");
    if (atomic_load(&px->state) == PX_ACTIVE)
        return VMMC_OK;
    pthread_mutex_lock(&px->ep->lock);
    int rc = test_locked(px);
    pthread_mutex_unlock(&px->ep->lock);
    return rc;
}

int vmmc_import(vmmc_ep_t *ep, int rank, const char *name, int timeout_ms, vmmc_proxy_t **out)
{
    vmmc_proxy_t *px;
    int rc = vmmc_import_start(ep, rank, name, timeout_ms, &px);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&ep->lock);
    while ((rc = test_locked(px)) == VMMC_INPROGRESS) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        /* Wake at least every 100 ms to check the deadline. */
        uint64_t wake = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 100000000ull;
        if (px->deadline_ns < wake)
            wake = px->deadline_ns;
        ts.tv_sec = (time_t)(wake / 1000000000ull);
        ts.tv_nsec = (long)(wake % 1000000000ull);
        pthread_cond_timedwait(&ep->cond, &ep->lock, &ts);
    }
    pthread_mutex_unlock(&ep->lock);
    if (rc != VMMC_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", vmmc_last_error());
        vmmc_unimport(px);
        return vmmc_error(rc, "%s", msg);
    }
    *out = px;
    return VMMC_OK;
}

int vmmc_import_complete(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m, const int *fds, int nfds)
{
    pthread_mutex_lock(&ep->lock);
    vmmc_proxy_t *px = ep->proxies;
    while (px && !(px->req_id == m->id && px->rank == rank))
        px = px->next;
    if (!px || atomic_load(&px->state) != PX_PENDING) {
        pthread_mutex_unlock(&ep->lock);
        /* The importer gave up (deadline, unimport): tell the exporter. */
        int st;
        vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
        if (m->status == VMMC_OK && p && p->tl) {
            vmmc_ctl_msg_t u;
            vmmc_ctl_init(ep, &u, CTL_UNIMPORT);
            u.export_id = m->export_id;
            u.gen = m->gen;
            p->tl->ctl_send(ep, &p->view, &u, NULL, 0);
        }
        return 0;
    }
    int used = 0;
    if (m->status != VMMC_OK) {
        /* Only a status this library knows, so callers can act on it. */
        px->status = m->status < 0 && m->status >= VMMC_ERR_PEER_UNREACHABLE &&
                             strcmp(vmmc_strerror(m->status), vmmc_strerror(-12345)) != 0
                         ? m->status
                         : VMMC_ERR_PROTOCOL;
        snprintf(px->errmsg, sizeof px->errmsg, "%s", m->text);
        atomic_store(&px->state, PX_FAILED);
    } else if (m->length == 0) {
        px->status = VMMC_ERR_PROTOCOL;
        snprintf(px->errmsg, sizeof px->errmsg, "rank %d answered with an empty region", rank);
        atomic_store(&px->state, PX_FAILED);
    } else {
        px->len = m->length;
        px->flags = m->flags;
        px->export_id = m->export_id;
        px->gen = m->gen;
        px->token[0] = m->token[0];
        px->token[1] = m->token[1];
        px->map_flags = m->map_flags;
        int rc = px->peer->tl->proxy_setup(&px->view, m, fds, nfds);
        used = 1;
        if (rc != VMMC_OK) {
            px->status = rc;
            snprintf(px->errmsg, sizeof px->errmsg, "%s", vmmc_last_error());
            atomic_store(&px->state, PX_FAILED);
        } else {
            atomic_store_explicit(&px->state, PX_ACTIVE, memory_order_release);
        }
    }
    pthread_cond_broadcast(&ep->cond);
    pthread_mutex_unlock(&ep->lock);
    vmmc_ep_wake(ep);
    return used;
}

/* Copy-path operations of this process still under way on proxies of
 * (@rank, id, gen). Caller holds ep->lock. */
static int revoked_inflight(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m)
{
    int n = 0;
    for (int l = 0; l < 2; l++)
        for (vmmc_proxy_t *px = l ? ep->dead_proxies : ep->proxies; px; px = px->next)
            if (px->rank == rank && px->export_id == m->export_id && px->gen == m->gen)
                n += atomic_load(&px->inflight);
    return n;
}

/* The exporter withdrew an export of its caller's memfd, which it cannot
 * re-back: put private pages where the mapping was, so that nothing of this
 * process reaches the memfd any more (a pointer from vmmc_proxy_map() stays
 * valid and reaches a dead copy, as after a re-back; a store racing with
 * this lands before the call returns, hence before the acknowledgement). */
static void forget_caller_fd(vmmc_proxy_t *px)
{
    if (mmap(px->map_base, px->map_len, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED)
        return;
    vmmc_warn("revocation of '%s': cannot replace its mapping (%s); unmapping it", px->name,
              strerror(errno));
    munmap(px->map_base, px->map_len);
    px->map_base = NULL;
    px->base = NULL;
}

/* The exporter withdrew (id, gen): make the proxies stale, wait until no
 * copy-path write through them is under way, then acknowledge, so that the
 * exporter's vmmc_unexport returns only when nothing of ours can land. */
void vmmc_import_revoked(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m)
{
    pthread_mutex_lock(&ep->lock);
    for (vmmc_proxy_t *px = ep->proxies; px; px = px->next) {
        if (px->rank == rank && px->export_id == m->export_id && px->gen == m->gen &&
            atomic_load(&px->state) == PX_ACTIVE) {
            snprintf(px->errmsg, sizeof px->errmsg, "rank %d unexported '%s'", rank, px->name);
            atomic_store(&px->state, PX_STALE); /* seq_cst: see vmmc_proxy_enter() */
            if ((px->map_flags & CTL_MAP_CALLER_FD) && px->map_base)
                forget_caller_fd(px);
        }
    }
    /* A copy is one system call: this wait is short. */
    uint64_t t0 = vmmc_now_ns();
    while (revoked_inflight(ep, rank, m) > 0 && vmmc_now_ns() - t0 < 10000000000ull) {
        pthread_mutex_unlock(&ep->lock);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&ep->lock);
    }
    pthread_mutex_unlock(&ep->lock);
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    /* Only exporters whose importers write directly wait for it (udp
     * writes are applied by the exporter itself, under its lock; RMA writes
     * posted before the acknowledgement land before it). */
    if (p && p->tl && VMMC_TL_DIRECT(p->tl) && atomic_load(&p->state) != PEER_DEAD) {
        vmmc_ctl_msg_t a;
        vmmc_ctl_init(ep, &a, CTL_REVOKE_ACK);
        a.export_id = m->export_id;
        a.gen = m->gen;
        p->tl->ctl_send(ep, &p->view, &a, NULL, 0);
    }
}

void vmmc_import_peer_dead(vmmc_ep_t *ep, int rank)
{
    pthread_mutex_lock(&ep->lock);
    for (vmmc_proxy_t *px = ep->proxies; px; px = px->next) {
        int s = atomic_load(&px->state);
        if (px->rank == rank && (s == PX_ACTIVE || s == PX_PENDING))
            atomic_store(&px->state, PX_DEAD);
    }
    pthread_cond_broadcast(&ep->cond);
    pthread_mutex_unlock(&ep->lock);
}

int vmmc_unimport(vmmc_proxy_t *px)
{
    VMMC_FORK_CHECK(px ? px->ep : NULL);
    if (!px)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_unimport: NULL proxy");
    vmmc_ep_t *ep = px->ep;
    /* Asynchronous sends still in the copy engine must finish first. */
    if (px->peer)
        vmmc_send_wait_async(px->peer);
    pthread_mutex_lock(&ep->lock);
    vmmc_proxy_t **pp = &ep->proxies;
    while (*pp && *pp != px)
        pp = &(*pp)->next;
    if (!*pp) {
        pthread_mutex_unlock(&ep->lock);
        return vmmc_error(VMMC_ERR_STALE, "proxy for '%s' at rank %d was already unimported",
                          px->name, px->rank);
    }
    *pp = px->next;
    int was_active = atomic_load(&px->state) == PX_ACTIVE || atomic_load(&px->state) == PX_STALE;
    atomic_store(&px->state, PX_STALE);
    snprintf(px->errmsg, sizeof px->errmsg, "it was unimported");
    /* The handle stays (stale) until finalize, so later use is an error, not
     * a use of freed memory. */
    px->next = ep->dead_proxies;
    ep->dead_proxies = px;
    pthread_mutex_unlock(&ep->lock);
    if (was_active && px->peer && px->peer->tl && atomic_load(&px->peer->state) != PEER_DEAD) {
        vmmc_ctl_msg_t u;
        vmmc_ctl_init(ep, &u, CTL_UNIMPORT);
        u.export_id = px->export_id;
        u.gen = px->gen;
        px->peer->tl->ctl_send(ep, &px->peer->view, &u, NULL, 0);
    }
    proxy_release(px);
    return VMMC_OK;
}

void vmmc_import_all_destroy(vmmc_ep_t *ep)
{
    for (vmmc_proxy_t *px = ep->proxies, *n; px; px = n) {
        n = px->next;
        proxy_release(px);
        free(px);
    }
    ep->proxies = NULL;
    for (vmmc_proxy_t *px = ep->dead_proxies, *n; px; px = n) {
        n = px->next;
        free(px);
    }
    ep->dead_proxies = NULL;
}

int vmmc_proxy_state_error(const vmmc_proxy_t *px)
{
    switch (atomic_load(&px->state)) {
    case PX_PENDING:
        return vmmc_error(VMMC_ERR_AGAIN, "import of '%s' from rank %d is still pending", px->name,
                          px->rank);
    case PX_STALE:
        return vmmc_error(VMMC_ERR_STALE, "proxy for '%s' at rank %d is stale: %s", px->name,
                          px->rank, px->errmsg[0] ? px->errmsg : "unimported");
    case PX_FAILED:
        return vmmc_error(px->status, "%s", px->errmsg);
    case PX_DEAD:
        return vmmc_peer_error(px->peer);
    case PX_FORKED:
        return vmmc_fork_error(px->ep, "proxy");
    default:
        return vmmc_error(VMMC_ERR_INVALID, "proxy in unknown state");
    }
}

size_t vmmc_proxy_length(const vmmc_proxy_t *px)
{
    return px && atomic_load(&px->state) == PX_ACTIVE ? px->len : 0;
}

int vmmc_proxy_rank(const vmmc_proxy_t *px)
{
    return px ? px->rank : VMMC_ERR_INVALID;
}

unsigned vmmc_proxy_flags(const vmmc_proxy_t *px)
{
    return px ? px->flags : 0;
}

int vmmc_proxy_map(vmmc_proxy_t *px, void **ptr)
{
    VMMC_FORK_CHECK(px ? px->ep : NULL);
    if (!px || !ptr)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_proxy_map: NULL argument");
    if (atomic_load(&px->state) != PX_ACTIVE)
        return vmmc_proxy_state_error(px);
    if (px->kind == PX_KIND_REMOTE)
        return vmmc_error(VMMC_ERR_UNSUPPORTED,
                          "'%s' at rank %d cannot be mapped: rank %d is not on this host "
                          "(use vmmc_send/vmmc_fetch)", px->name, px->rank, px->rank);
    if (px->kind != PX_KIND_MAPPED || !px->map_base)
        return vmmc_error(VMMC_ERR_UNSUPPORTED,
                          "'%s' at rank %d cannot be mapped: a mapping grants whole pages with "
                          "read and write rights, so only an export of one whole vmmc_mem_alloc() "
                          "allocation with VMMC_EXPORT_READ (and only by the importers of one "
                          "export of it at a time) or of a caller's memfd can be mapped; use "
                          "vmmc_send/vmmc_fetch",
                          px->name, px->rank);
    if (px->flags & VMMC_EXPORT_REDIRECTABLE)
        return vmmc_error(VMMC_ERR_UNSUPPORTED,
                          "'%s' is redirectable: stores would bypass redirection", px->name);
    *ptr = (char *)px->map_base + (px->raddr & 4095);
    return VMMC_OK;
}
