/* Exports: naming a region, deciding who may import it, serving imports. */
#include "core/export.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Pending imports (name not exported yet) hang off the endpoint. */
static pending_import_t **pending_of(vmmc_ep_t *ep)
{
    return (pending_import_t **)&ep->pending_imports;
}

static int permitted(const vmmc_export_t *ex, int rank)
{
    if (ex->num_importers == 0)
        return 1;
    for (int i = 0; i < ex->num_importers; i++)
        if (ex->importers[i] == rank)
            return 1;
    return 0;
}

static void reply(vmmc_ep_t *ep, int rank, uint64_t id, vmmc_export_t *ex, int status,
                  const char *text)
{
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    if (!p || !p->tl)
        return;
    vmmc_ctl_msg_t m;
    vmmc_ctl_init(ep, &m, CTL_IMPORT_REP);
    m.id = id;
    m.status = status;
    if (text)
        snprintf(m.text, sizeof m.text, "%s", text);
    int fds[2], nfds = 0;
    if (ex && status == VMMC_OK) {
        snprintf(m.name, sizeof m.name, "%s", ex->name);
        m.export_id = ex->id;
        m.gen = ex->gen;
        m.flags = ex->flags;
        m.length = ex->len;
        m.addr = (uintptr_t)ex->addr;
        m.map_off = ex->memfd_off;
        if (ex->mkey) /* the secret this rank's keys are authenticated with */
            vmmc_mkey_grant_secret(ex, rank, m.token);
        else {
            m.token[0] = ex->token[0];
            m.token[1] = ex->token[1];
        }
        if (VMMC_TL_CAN_MAP(p->tl)) {
            m.kind = ex->memfd >= 0 ? PX_KIND_MAPPED : PX_KIND_PVW;
            if (ex->memfd >= 0)
                fds[nfds++] = ex->memfd;
            if (ex->own_fd)
                m.map_flags = CTL_MAP_CALLER_FD;
            if (ex->rctl_fd >= 0)
                fds[nfds++] = ex->rctl_fd;
        } else {
            m.kind = PX_KIND_REMOTE;
            if (p->tl->export_grant) /* direct access (the export's key), if it offers it */
                p->tl->export_grant(ep, &p->view, &m);
        }
        m.nfds = (uint32_t)nfds;
        /* Remember the importer (once), for revocation at unexport, and
         * how many imports it holds through a network transport. */
        int at = -1;
        for (int i = 0; i < ex->n_imported_by && at < 0; i++)
            if (ex->imported_by[i] == rank)
                at = i;
        if (at < 0 && ex->n_imported_by == ex->cap_imported_by) {
            int cap = ex->cap_imported_by ? ex->cap_imported_by * 2 : 4;
            int *n = realloc(ex->imported_by, sizeof(int) * (size_t)cap);
            if (n)
                ex->imported_by = n;
            int *c = n ? realloc(ex->import_n, sizeof(int) * (size_t)cap) : NULL;
            if (c) {
                ex->import_n = c;
                ex->cap_imported_by = cap;
            }
        }
        if (at < 0 && ex->n_imported_by < ex->cap_imported_by) {
            at = ex->n_imported_by++;
            ex->imported_by[at] = rank;
            ex->import_n[at] = 0;
        }
        if (at >= 0 && m.kind == PX_KIND_REMOTE && ex->import_n[at] < INT_MAX)
            ex->import_n[at]++;
        VMMC_COUNT(ep, CNT_IMPORTS, 1);
    }
    if (p->tl->ctl_send(ep, &p->view, &m, fds, nfds) != VMMC_OK)
        vmmc_debug("could not answer rank %d's import: %s", rank, vmmc_last_error());
}

void vmmc_export_refuse(vmmc_ep_t *ep, int rank, uint64_t id, int status, const char *text)
{
    reply(ep, rank, id, NULL, status, text);
}

static void answer(vmmc_ep_t *ep, int rank, uint64_t id, vmmc_export_t *ex)
{
    if (!permitted(ex, rank)) {
        char text[128];
        snprintf(text, sizeof text, "rank %d may not import '%s' from rank %d", rank, ex->name,
                 ep->rank);
        reply(ep, rank, id, NULL, VMMC_ERR_PERMISSION, text);
    } else {
        reply(ep, rank, id, ex, VMMC_OK, NULL);
    }
}

void vmmc_export_serve_import(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m)
{
    /* The reply needs the peer; creating it takes ep->lock, so do it first. */
    int st;
    if (!vmmc_peer_get(ep, rank, &st))
        return;
    pthread_mutex_lock(&ep->lock);
    vmmc_export_t *ex = NULL;
    for (uint32_t i = 0; i < ep->max_exports && !ex; i++)
        if (ep->exports[i] && !strcmp(ep->exports[i]->name, m->name))
            ex = ep->exports[i];
    if (ex) {
        answer(ep, rank, m->id, ex);
    } else if (!strncmp(m->name, VMMC_MKEY_PREFIX, strlen(VMMC_MKEY_PREFIX))) {
        /* A key's export exists before the key does: if it is gone, the
         * allocation was freed. */
        reply(ep, rank, m->id, NULL, VMMC_ERR_STALE,
              "the memory that key names was freed by its owner");
    } else {
        /* Not exported yet: answer when it is (the importer has a deadline).
         * Each peer may keep only so many requests waiting here, or a
         * hostile one could make us allocate without end. */
        int waiting = 0;
        for (pending_import_t *q = *pending_of(ep); q; q = q->next)
            waiting += q->rank == rank;
        if (waiting >= VMMC_PENDING_IMPORTS_MAX) {
            char text[128];
            snprintf(text, sizeof text, "rank %d already has %d imports waiting at rank %d", rank,
                     waiting, ep->rank);
            VMMC_COUNT(ep, CNT_CTL_BAD, 1);
            reply(ep, rank, m->id, NULL, VMMC_ERR_AGAIN, text);
            pthread_mutex_unlock(&ep->lock);
            return;
        }
        pending_import_t *pi = calloc(1, sizeof *pi);
        if (pi) {
            pi->rank = rank;
            pi->id = m->id;
            snprintf(pi->name, sizeof pi->name, "%s", m->name);
            pi->next = *pending_of(ep);
            *pending_of(ep) = pi;
            /* A layer may make the export now (vmmc_export_on_demand):
             * queued first, so its vmmc_export() answers the request as
             * any other, and the limit above bounds the calls. */
            struct vmmc_demand *d = vmmc_demand_match(ep, m->name);
            if (d) {
                pthread_mutex_unlock(&ep->lock);
                vmmc_demand_call(ep, d, rank, m->id, m->name);
                return;
            }
        } else {
            reply(ep, rank, m->id, NULL, VMMC_ERR_NOMEM, "exporter out of memory");
        }
    }
    pthread_mutex_unlock(&ep->lock);
}


/* @rank holds one import of @ex fewer through a network transport (an
 * unimport), or none (@all: it died). When none is left, it leaves the
 * importer list (nothing of it to revoke) and the transport may close what
 * it granted it (export_release). Caller holds ep->lock. */
static void release(vmmc_ep_t *ep, vmmc_export_t *ex, int rank, int all)
{
    for (int i = 0; i < ex->n_imported_by; i++) {
        if (ex->imported_by[i] != rank || ex->import_n[i] <= 0)
            continue;
        if (!all && --ex->import_n[i] > 0)
            return;
        ex->n_imported_by--;
        ex->imported_by[i] = ex->imported_by[ex->n_imported_by];
        ex->import_n[i] = ex->import_n[ex->n_imported_by];
        vmmc_peer_t *p = vmmc_peer_at(ep, rank);
        if (p && p->tl && p->tl->export_release)
            p->tl->export_release(ep, &p->view, ex->id, ex->gen);
        return;
    }
}

void vmmc_export_unimported(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m)
{
    pthread_mutex_lock(&ep->lock);
    vmmc_export_t *ex = vmmc_export_by_id(ep, m->export_id, m->gen);
    if (ex && !ex->dead)
        release(ep, ex, rank, 0);
    pthread_mutex_unlock(&ep->lock);
}

void vmmc_export_peer_dead(vmmc_ep_t *ep, int rank)
{
    pthread_mutex_lock(&ep->lock);
    for (uint32_t id = 0; id < ep->max_exports; id++)
        if (ep->exports[id] && !ep->exports[id]->dead)
            release(ep, ep->exports[id], rank, 1);
    for (pending_import_t **pp = pending_of(ep); *pp;) {
        pending_import_t *pi = *pp;
        if (pi->rank == rank) {
            *pp = pi->next;
            free(pi);
        } else {
            pp = &pi->next;
        }
    }
    pthread_mutex_unlock(&ep->lock);
}

vmmc_export_t *vmmc_export_by_id(vmmc_ep_t *ep, uint32_t id, uint32_t gen)
{
    if (id >= ep->max_exports)
        return NULL;
    vmmc_export_t *ex = ep->exports[id];
    return ex && ex->gen == gen ? ex : NULL;
}

/* Decide how importers reach @ex's memory; caller holds ep->mem_lock.
 *
 * A descriptor can only grant whole pages with read and write rights (x86
 * has no write-only pages), and the memfd of an allocation is all of it. So
 * importers get the descriptor (and may map) only when the export is one
 * whole vmmc_mem_alloc() allocation, from its start to its requested end,
 * that grants VMMC_EXPORT_READ, and no other export of that allocation holds
 * the descriptor already. Every other export is written and read through the
 * copy path (process_vm_writev/readv), which reaches exactly its bytes. An
 * export that starts inside an allocation must end inside it. */
static int share_memory(vmmc_ep_t *ep, vmmc_export_t *ex)
{
    if (ex->own_fd) /* the caller's memfd (export_fd.c), checked already */
        return VMMC_OK;
    vmmc_mem_t *m = vmmc_mem_at(ep, ex->addr);
    if (!m)
        return VMMC_OK;
    size_t off = (size_t)(ex->addr - m->base);
    if (off >= m->req || ex->len > m->req - off)
        return vmmc_error(VMMC_ERR_BOUNDS,
                          "export '%s' of %zu bytes at offset %zu runs past the end of its "
                          "vmmc_mem_alloc() allocation of %zu bytes",
                          ex->name, ex->len, off, m->req);
    if (off == 0 && ex->len == m->req && (ex->flags & VMMC_EXPORT_READ) && !m->fdex) {
        ex->memfd = m->fd;
        ex->memfd_off = 0;
        m->fdex = ex;
    }
    return VMMC_OK;
}

/* Undo share_memory() for an export that was not registered. */
static void unshare_memory(vmmc_ep_t *ep, vmmc_export_t *ex)
{
    if (ex->own_fd)
        return;
    vmmc_mem_t *m = ex->memfd >= 0 ? vmmc_mem_at(ep, ex->addr) : NULL;
    if (m && m->fdex == ex)
        m->fdex = NULL;
    ex->memfd = -1;
}

static int export_create(vmmc_ep_t *ep, const vmmc_export_params_t *pa, int mkey,
                         vmmc_export_t **out);

/* Free an export that never entered the table. */
static int export_discard(vmmc_export_t *ex, int rc)
{
    vmmc_redir_destroy(ex);
    if (ex->own_fd)
        close(ex->memfd);
    free(ex->importers);
    free(ex);
    return rc;
}

int vmmc_export(vmmc_ep_t *ep, const vmmc_export_params_t *pa, vmmc_export_t **out)
{
    VMMC_FORK_CHECK(ep);
    if (pa && pa->name && !strncmp(pa->name, VMMC_MKEY_PREFIX, strlen(VMMC_MKEY_PREFIX)))
        return vmmc_error(VMMC_ERR_INVALID, "export names starting with '" VMMC_MKEY_PREFIX
                          "' are reserved for memory keys");
    return export_create(ep, pa, 0, out);
}

int vmmc_export_mkey(vmmc_ep_t *ep, const vmmc_export_params_t *pa, vmmc_export_t **out)
{
    return export_create(ep, pa, 1, out);
}

static int export_create(vmmc_ep_t *ep, const vmmc_export_params_t *pa, int mkey,
                         vmmc_export_t **out)
{
    if (!ep || !pa || !out)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_export: NULL %s",
                          !ep ? "endpoint" : !pa ? "params" : "result pointer");
    if (!pa->name || !pa->name[0] || strlen(pa->name) >= VMMC_NAME_MAX)
        return vmmc_error(VMMC_ERR_INVALID, "export name must be 1..%d bytes", VMMC_NAME_MAX - 1);
    if (!pa->addr || pa->length == 0)
        return vmmc_error(VMMC_ERR_INVALID, "export '%s': %s", pa->name,
                          !pa->addr ? "NULL address" : "length is 0");
    if ((uintptr_t)pa->addr + pa->length < (uintptr_t)pa->addr)
        return vmmc_error(VMMC_ERR_INVALID, "export '%s': region wraps the address space", pa->name);
    if ((pa->field_mask & VMMC_EXPORT_PARAM_CQ) && !pa->cq)
        return vmmc_error(VMMC_ERR_INVALID, "export '%s': VMMC_EXPORT_PARAM_CQ with a NULL queue",
                          pa->name);
    unsigned flags = (pa->field_mask & VMMC_EXPORT_PARAM_FLAGS) ? pa->flags : 0;
    if (flags & ~(unsigned)(VMMC_EXPORT_READ | VMMC_EXPORT_REDIRECTABLE))
        return vmmc_error(VMMC_ERR_INVALID, "export '%s': unknown flags 0x%x", pa->name, flags);
    int nimp = 0, rc;
    if (pa->field_mask & VMMC_EXPORT_PARAM_IMPORTERS) {
        nimp = pa->num_importers;
        if (nimp < 0 || (nimp > 0 && !pa->importers))
            return vmmc_error(VMMC_ERR_INVALID, "export '%s': bad importer list", pa->name);
        for (int i = 0; i < nimp; i++)
            if (pa->importers[i] < 0 || pa->importers[i] >= vmmc_peer_count_int(ep))
                return vmmc_error(VMMC_ERR_INVALID, "export '%s': importer %d is not a peer handle "
                                  "(0..%d)", pa->name, pa->importers[i], vmmc_peer_count_int(ep) - 1);
    }
    int fd = -1;
    if ((pa->field_mask & VMMC_EXPORT_PARAM_FD) &&
        (rc = vmmc_export_fd_take(ep, pa, flags, &fd)) != VMMC_OK)
        return rc;
    vmmc_export_t *ex = calloc(1, sizeof *ex);
    if (!ex) {
        if (fd >= 0)
            close(fd);
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for export '%s'", pa->name);
    }
    ex->ep = ep;
    snprintf(ex->name, sizeof ex->name, "%s", pa->name);
    ex->addr = pa->addr;
    ex->len = pa->length;
    ex->flags = flags;
    ex->mkey = mkey;
    ex->memfd = ex->rctl_fd = -1;
    if (fd >= 0) {
        /* Importers map the caller's memfd; nothing can re-back it. */
        ex->memfd = fd;
        ex->memfd_off = (size_t)pa->fd_offset;
        ex->own_fd = 1;
        ex->no_reback = 1;
    }
    if (nimp) {
        ex->importers = malloc(sizeof(int) * (size_t)nimp);
        if (!ex->importers)
            return export_discard(ex, vmmc_error(VMMC_ERR_NOMEM, "out of memory for export '%s'",
                                                 pa->name));
        memcpy(ex->importers, pa->importers, sizeof(int) * (size_t)nimp);
        ex->num_importers = nimp;
    }
    if (pa->field_mask & VMMC_EXPORT_PARAM_HANDLER) {
        ex->handler = pa->handler;
        ex->handler_arg = pa->handler_arg;
    }
    if (pa->field_mask & VMMC_EXPORT_PARAM_CQ) {
        ex->cq = pa->cq;
        ex->cq_context = pa->cq_context;
    }
    if (getrandom(ex->token, sizeof ex->token, 0) != (ssize_t)sizeof ex->token) {
        ex->token[0] = (uint64_t)vmmc_now_ns() * 0x9E3779B97F4A7C15ull;
        ex->token[1] = ((uint64_t)getpid() << 32) ^ (uintptr_t)ex;
    }
    if ((flags & VMMC_EXPORT_REDIRECTABLE) && (rc = vmmc_redir_create(ex)) != VMMC_OK)
        return export_discard(ex, rc);

    pthread_mutex_lock(&ep->mem_lock);
    if ((rc = share_memory(ep, ex)) != VMMC_OK) {
        pthread_mutex_unlock(&ep->mem_lock);
        return export_discard(ex, rc);
    }
    pthread_mutex_lock(&ep->lock);
    uint32_t id = ep->max_exports;
    for (uint32_t i = 0; i < ep->max_exports; i++) {
        if (ep->exports[i] && !strcmp(ep->exports[i]->name, ex->name)) {
            unshare_memory(ep, ex);
            pthread_mutex_unlock(&ep->lock);
            pthread_mutex_unlock(&ep->mem_lock);
            return export_discard(ex, vmmc_error(VMMC_ERR_EXISTS, "'%s' is already exported by "
                                                 "rank %d", pa->name, ep->rank));
        }
        if (!ep->exports[i] && id == ep->max_exports)
            id = i;
    }
    if (id == ep->max_exports) {
        unshare_memory(ep, ex);
        pthread_mutex_unlock(&ep->lock);
        pthread_mutex_unlock(&ep->mem_lock);
        return export_discard(ex, vmmc_error(VMMC_ERR_AGAIN, "too many exports "
                                             "(VMMC_MAX_EXPORTS=%u)", ep->max_exports));
    }
    ex->id = id;
    ex->gen = ++ep->export_gen;
    if (mkey) /* the name a key holder derives from the key */
        snprintf(ex->name, sizeof ex->name, VMMC_MKEY_PREFIX "%u.%u", id, ex->gen);
    ep->exports[id] = ex;
    if (ex->cq)
        vmmc_cq_ref(ex->cq, 1);
    VMMC_COUNT(ep, CNT_EXPORTS, 1);
    /* Answer imports that were waiting for this name. */
    for (pending_import_t **pp = pending_of(ep); *pp;) {
        pending_import_t *pi = *pp;
        if (!strcmp(pi->name, ex->name)) {
            *pp = pi->next;
            answer(ep, pi->rank, pi->id, ex);
            free(pi);
        } else {
            pp = &pi->next;
        }
    }
    pthread_mutex_unlock(&ep->lock);
    pthread_mutex_unlock(&ep->mem_lock);
    *out = ex;
    return VMMC_OK;
}

/* Release what the export holds; the handle itself stays (dead) so that a
 * later call with it reports VMMC_ERR_STALE instead of touching freed memory. */
static void export_release(vmmc_export_t *ex)
{
    if (ex->cq) { /* out of the table already: progress no longer finds it */
        vmmc_cq_ref(ex->cq, -1);
        ex->cq = NULL;
    }
    vmmc_redir_destroy(ex);
    if (ex->own_fd && ex->memfd >= 0) { /* the library's duplicate of the caller's memfd */
        close(ex->memfd);
        ex->memfd = -1;
    }
    free(ex->imported_by);
    free(ex->import_n);
    free(ex->importers);
    ex->imported_by = ex->importers = NULL;
    ex->import_n = NULL;
    ex->n_imported_by = ex->num_importers = 0;
    ex->dead = 1;
}

void vmmc_export_revoke_acked(vmmc_ep_t *ep, int rank, const vmmc_ctl_msg_t *m)
{
    pthread_mutex_lock(&ep->lock);
    for (vmmc_export_t *ex = ep->dead_exports; ex; ex = ex->next_dead) {
        if (ex->id != m->export_id || ex->gen != m->gen || !ex->revoking)
            continue;
        for (int i = 0; i < ex->n_imported_by; i++) {
            if (ex->imported_by[i] == rank) {
                ex->imported_by[i] = ex->imported_by[--ex->n_imported_by];
                break;
            }
        }
        pthread_cond_broadcast(&ep->cond);
        break;
    }
    pthread_mutex_unlock(&ep->lock);
}

/* Wait (bounded by VMMC_CONNECT_TIMEOUT) until every importer that may
 * write through the copy path has acknowledged the revocation; a dead
 * importer is skipped. Caller holds ep->lock. */
static void wait_acks(vmmc_ep_t *ep, vmmc_export_t *ex)
{
    uint64_t deadline = vmmc_now_ns() + vmmc_core_cfg.connect_timeout_ns;
    while (ex->n_imported_by > 0) {
        for (int i = 0; i < ex->n_imported_by;) {
            vmmc_peer_t *p = vmmc_peer_at(ep, ex->imported_by[i]);
            if (!p || atomic_load(&p->state) == PEER_DEAD)
                ex->imported_by[i] = ex->imported_by[--ex->n_imported_by];
            else
                i++;
        }
        if (ex->n_imported_by == 0)
            break;
        uint64_t now = vmmc_now_ns();
        if (now >= deadline) {
            vmmc_warn("unexport of '%s': rank %d did not acknowledge the revocation in time; "
                      "writes it still makes through the copy path may land",
                      ex->name, ex->imported_by[0]);
            break;
        }
        uint64_t wake = now + 100000000ull < deadline ? now + 100000000ull : deadline;
        struct timespec ts = {(time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull)};
        pthread_cond_timedwait(&ep->cond, &ep->lock, &ts);
    }
    ex->n_imported_by = 0;
    ex->revoking = 0;
}

/* Withdrawing an export:
 *  1. it leaves the export table (notifications and udp writes for it are
 *     dropped from now on: they are resolved under ep->lock);
 *  2. every importer is told (CTL_REVOKE); importers on this host mark
 *     their proxies stale, wait until no copy-path write of theirs is under
 *     way and acknowledge, and we wait for those acknowledgements;
 *  3. if its importers were given the allocation's descriptor, the
 *     allocation moves to a fresh memfd (vmmc_mem_reback), so mappings and
 *     kept descriptors reach nothing of this process any more.
 * When this returns, no byte sent through vmmc reaches the memory again. */
int vmmc_unexport(vmmc_export_t *ex)
{
    VMMC_FORK_CHECK(ex ? ex->ep : NULL);
    if (!ex)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_unexport: NULL export");
    vmmc_ep_t *ep = ex->ep;
    /* Handlers must not see the export disappear under them. */
    int own = !vmmc_in_progress(ep);
    if (own)
        pthread_mutex_lock(&ep->progress_lock);
    pthread_mutex_lock(&ep->lock);
    if (ex->dead || ex->id >= ep->max_exports || ep->exports[ex->id] != ex) {
        pthread_mutex_unlock(&ep->lock);
        if (own)
            pthread_mutex_unlock(&ep->progress_lock);
        return vmmc_error(VMMC_ERR_STALE, "export '%s' was already unexported", ex->name);
    }
    ep->exports[ex->id] = NULL;
    ex->dead = 1;
    int nwait = 0;
    for (int i = 0; i < ex->n_imported_by; i++) {
        int st;
        vmmc_peer_t *p = vmmc_peer_get(ep, ex->imported_by[i], &st);
        if (!p || !p->tl || atomic_load(&p->state) == PEER_DEAD)
            continue;
        /* At finalize, peers over udp learn of it from the link closing, and
         * nothing of theirs lands here after the transport is closed. */
        if (ep->closing && !VMMC_TL_DIRECT(p->tl))
            continue;
        vmmc_ctl_msg_t m;
        vmmc_ctl_init(ep, &m, CTL_REVOKE);
        m.export_id = ex->id;
        m.gen = ex->gen;
        snprintf(m.name, sizeof m.name, "%s", ex->name);
        /* Peers reached through udp write only through us (under ep->lock,
         * which no longer finds the export): nothing to wait for. */
        if (p->tl->ctl_send(ep, &p->view, &m, NULL, 0) == VMMC_OK && VMMC_TL_DIRECT(p->tl))
            ex->imported_by[nwait++] = ex->imported_by[i];
    }
    ex->n_imported_by = nwait;
    ex->revoking = 1;
    ex->next_dead = ep->dead_exports;
    ep->dead_exports = ex;
    pthread_mutex_unlock(&ep->lock);
    if (own)
        pthread_mutex_unlock(&ep->progress_lock);

    pthread_mutex_lock(&ep->lock);
    wait_acks(ep, ex);
    pthread_mutex_unlock(&ep->lock);
    /* What transports granted directly (a fabric memory region) closes:
     * after the acknowledgements, so an importer's writes that raced with
     * the revocation land or fail without harm to the link. */
    vmmc_tl_export_end(ep, ex->id, ex->gen);

    int rc = VMMC_OK;
    if (ex->memfd >= 0 && !ex->own_fd) {
        pthread_mutex_lock(&ep->mem_lock);
        vmmc_mem_t *m = vmmc_mem_at(ep, ex->addr);
        if (m && m->fdex == ex) {
            if (!ex->no_reback)
                rc = vmmc_mem_reback(m);
            m->fdex = NULL;
        }
        pthread_mutex_unlock(&ep->mem_lock);
        ex->memfd = -1;
    }
    pthread_mutex_lock(&ep->lock);
    export_release(ex);
    pthread_mutex_unlock(&ep->lock);
    return rc;
}

void vmmc_export_all_revoke(vmmc_ep_t *ep)
{
    while (ep->exports) {
        vmmc_export_t *ex = NULL;
        pthread_mutex_lock(&ep->mem_lock);
        pthread_mutex_lock(&ep->lock);
        for (uint32_t i = 0; i < ep->max_exports && !ex; i++)
            ex = ep->exports[i];
        if (ex)
            ex->no_reback = 1; /* the memory goes with the endpoint */
        pthread_mutex_unlock(&ep->lock);
        pthread_mutex_unlock(&ep->mem_lock);
        if (!ex)
            break;
        vmmc_unexport(ex);
    }
}

void vmmc_export_all_destroy(vmmc_ep_t *ep)
{
    for (uint32_t i = 0; i < ep->max_exports; i++) {
        if (ep->exports[i]) {
            export_release(ep->exports[i]);
            free(ep->exports[i]);
            ep->exports[i] = NULL;
        }
    }
    for (vmmc_export_t *ex = ep->dead_exports, *n; ex; ex = n) {
        n = ex->next_dead;
        free(ex);
    }
    ep->dead_exports = NULL;
    for (pending_import_t *pi = *pending_of(ep), *n; pi; pi = n) {
        n = pi->next;
        free(pi);
    }
    *pending_of(ep) = NULL;
    vmmc_demand_destroy(ep);
}

void *vmmc_export_addr(const vmmc_export_t *ex)
{
    return ex && !ex->dead ? ex->addr : NULL;
}

size_t vmmc_export_length(const vmmc_export_t *ex)
{
    return ex && !ex->dead ? ex->len : 0;
}
