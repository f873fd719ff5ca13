/* RMA state of an endpoint: regions exported on demand (target side) and
 * peers' regions imported on first use (initiator side); the operations in
 * flight and their completions are in ofi_rma_cq.c. See ofi_rma_priv.h for
 * the design. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi_rma_priv.h"

/* ------------------------------------------------------------------------ */
/* errors and small helpers */

int vofi_rma_err(int vst)
{
    switch (vst) {
    case VMMC_OK:
        return 0;
    case VMMC_ERR_INVALID:
    case VMMC_ERR_BOUNDS:
    case VMMC_ERR_OVERFLOW:
        return FI_EINVAL;
    case VMMC_ERR_NOT_FOUND:
    case VMMC_ERR_PERMISSION:
    case VMMC_ERR_STALE:
        return FI_EACCES;
    case VMMC_ERR_UNSUPPORTED:
        return FI_EOPNOTSUPP;
    case VMMC_ERR_AGAIN:
    case VMMC_ERR_BUSY:
        return FI_EAGAIN;
    case VMMC_ERR_NOMEM:
        return FI_ENOMEM;
    case VMMC_ERR_TIMEOUT:
        return FI_ETIMEDOUT;
    default: /* peer dead or unreachable, endpoint closed, system, protocol */
        return FI_EIO;
    }
}

int vofi_rma_import_ms(void)
{
    if (vofi_set.import_ms == 0)
        return -1; /* vmmc's own VMMC_IMPORT_TIMEOUT */
    return vofi_set.import_ms > INT_MAX ? INT_MAX : (int)vofi_set.import_ms;
}

uint64_t vofi_rma_cflags(vofi_ep_t *ep, uint64_t what, uint64_t opflags)
{
    if (!(ep->tx_cq_flags & FI_SELECTIVE_COMPLETION) || (opflags & FI_COMPLETION))
        what |= FI_COMPLETION;
    return what;
}

void vofi_rma_fail_now(vofi_ep_t *ep, uint64_t cflags, void *context, vofi_cntr_t *cntr, int err,
                       int vst)
{
    vofi_fail_tx(ep, cflags, context, err, vst, cntr);
}

/* ------------------------------------------------------------------------ */
/* target side: regions exported when a peer first asks */

/* "ofi.mr.<16 hex>" (the region), "ofi.mr.<16 hex>.d" (its descriptor) or
 * "ofi.mr.<16 hex>.e" (the region, notifying each write). */
static int parse_name(const char *name, uint64_t *key)
{
    const char *p = name + strlen(VOFI_MR_PREFIX);
    uint64_t k = 0;
    for (int i = 0; i < 16; i++) {
        char c = p[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return -1;
        k = k << 4 | (uint64_t)v;
    }
    if (p[16] != '\0' && strcmp(p + 16, ".d") != 0 && strcmp(p + 16, ".e") != 0)
        return -1;
    *key = k;
    return 0;
}

static void mr_name(char *buf, size_t cap, uint64_t key, const char *suffix)
{
    snprintf(buf, cap, VOFI_MR_PREFIX "%016" PRIx64 "%s", key, suffix);
}

/* Called by vmmc (control or receive thread, no endpoint lock) when @p peer
 * first imports one of our names: export the region and its descriptor, or
 * refuse. The key is the only capability, as in every RMA fabric. */
static int mr_demand(vmmc_ep_t *vep, const char *name, int peer, void *arg)
{
    (void)peer;
    vofi_ep_t *ep = arg;
    vofi_rma_t *rma = ep->rma;
    uint64_t key;
    if (parse_name(name, &key) != 0)
        return VMMC_ERR_NOT_FOUND;
    vofi_domain_t *dom = ep->dom;
    int rc = VMMC_OK;
    pthread_mutex_lock(&dom->mr_lock);
    vofi_mr_t *mr = vofi_mr_find_locked(dom, key);
    if (!mr || !(mr->access & (FI_REMOTE_READ | FI_REMOTE_WRITE)) || mr->len == 0) {
        rc = mr ? VMMC_ERR_PERMISSION : VMMC_ERR_NOT_FOUND;
        goto out;
    }
    for (struct vofi_mr_exp *e = mr->exps; e; e = e->next)
        if (e->ep == ep)
            goto out; /* exported already: vmmc answers it */
    struct vofi_mr_exp *e = calloc(1, sizeof *e);
    if (!e) {
        rc = VMMC_ERR_NOMEM;
        goto out;
    }
    e->ep = ep;
    e->d.magic = VOFI_MRD_MAGIC;
    e->d.key = key;
    e->d.base = (dom->mr_mode & (FI_MR_VIRT_ADDR | FI_MR_BASIC)) ? (uint64_t)(uintptr_t)mr->addr
                                                                   : mr->offset;
    e->d.len = mr->len;
    e->d.access = mr->access & (FI_REMOTE_READ | FI_REMOTE_WRITE);
    char nm[64];
    mr_name(nm, sizeof nm, key, "");
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_CQ;
    p.name = nm;
    p.addr = mr->addr;
    p.length = mr->len;
    p.flags = (mr->access & FI_REMOTE_READ) ? VMMC_EXPORT_READ : 0;
    p.cq = rma->ncq;
    p.cq_context = (void *)(uintptr_t)key; /* the region may be gone when it is polled */
    rc = vmmc_export(vep, &p, &e->ex);
    if (rc != VMMC_OK) {
        vofi_warn("RMA: exporting region 0x%" PRIx64 ": %s", key, vmmc_last_error());
        free(e);
        goto out;
    }
    mr_name(nm, sizeof nm, key, ".d");
    vmmc_export_params_t pd = {0};
    pd.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    pd.name = nm;
    pd.addr = &e->d;
    pd.length = sizeof e->d;
    pd.flags = VMMC_EXPORT_READ;
    rc = vmmc_export(vep, &pd, &e->exd);
    if (rc != VMMC_OK) {
        vofi_warn("RMA: exporting the descriptor of region 0x%" PRIx64 ": %s", key,
                  vmmc_last_error());
        vmmc_unexport(e->ex);
        free(e);
        goto out;
    }
    /* Plain writes are notified only where something counts them. */
    if (rma->ecq && (ep->cntr_rwrite || mr->rcntr)) {
        mr_name(nm, sizeof nm, key, ".e");
        p.name = nm;
        p.cq = rma->ecq;
        rc = vmmc_export(vep, &p, &e->exe);
        if (rc != VMMC_OK) {
            vofi_warn("RMA: exporting region 0x%" PRIx64 " for events: %s", key,
                      vmmc_last_error());
            vmmc_unexport(e->ex);
            vmmc_unexport(e->exd);
            free(e);
            goto out;
        }
        e->d.flags |= VOFI_MRD_EVENTS;
    }
    e->next = mr->exps;
    mr->exps = e;
    atomic_fetch_add(&rma->nexp, 1);
out:
    pthread_mutex_unlock(&dom->mr_lock);
    return rc;
}

void vofi_rma_mr_unexport(struct vofi_mr_exp *list)
{
    while (list) {
        struct vofi_mr_exp *e = list;
        list = e->next;
        vmmc_unexport(e->ex);
        vmmc_unexport(e->exd);
        if (e->exe)
            vmmc_unexport(e->exe);
        atomic_fetch_sub(&((vofi_rma_t *)e->ep->rma)->nexp, 1);
        free(e);
    }
}

/* ------------------------------------------------------------------------ */
/* endpoint open and close */

int vofi_rma_open(vofi_ep_t *ep)
{
    vofi_rma_t *rma = calloc(1, sizeof *rma);
    if (!rma)
        return -FI_ENOMEM;
    rma->pool = calloc(VOFI_RMA_DEPTH, sizeof *rma->pool);
    if (!rma->pool) {
        free(rma);
        return -FI_ENOMEM;
    }
    for (size_t i = 0; i < VOFI_RMA_DEPTH; i++) {
        rma->pool[i].next_free = rma->free;
        rma->free = &rma->pool[i];
    }
    rma->nfree = VOFI_RMA_DEPTH;
    int rc = vmmc_cq_open(ep->vep, VOFI_RMA_DEPTH, &ep->vcq);
    if (rc == VMMC_OK)
        rc = vmmc_cq_open(ep->vep, VOFI_RMA_NDEPTH, &rma->ncq);
    if (rc == VMMC_OK && (ep->caps & FI_RMA_EVENT))
        rc = vmmc_cq_open(ep->vep, VOFI_RMA_NDEPTH, &rma->ecq);
    if (rc != VMMC_OK) {
        vofi_warn("RMA: opening completion queues: %s", vmmc_last_error());
        goto fail;
    }
    ep->rma = rma;
    rc = vmmc_export_on_demand(ep->vep, VOFI_MR_PREFIX, mr_demand, ep);
    if (rc != VMMC_OK) {
        vofi_warn("RMA: exports on demand: %s", vmmc_last_error());
        ep->rma = NULL;
        goto fail;
    }
    ep->rma_live = 0;
    return 0;
fail:
    if (rma->ecq)
        vmmc_cq_close(rma->ecq);
    if (rma->ncq)
        vmmc_cq_close(rma->ncq);
    if (ep->vcq)
        vmmc_cq_close(ep->vcq);
    ep->vcq = NULL;
    free(rma->pool);
    free(rma);
    return vofi_rma_err(rc) ? -vofi_rma_err(rc) : -FI_EIO;
}

void vofi_rma_close(vofi_ep_t *ep)
{
    vofi_rma_t *rma = ep->rma;
    if (!rma)
        return;
    vmmc_export_on_demand_remove(ep->vep, VOFI_MR_PREFIX);
    /* Take this endpoint's exports off every region, then withdraw them. */
    vofi_domain_t *dom = ep->dom;
    struct vofi_mr_exp *mine = NULL;
    pthread_mutex_lock(&dom->mr_lock);
    for (size_t i = 0; i < dom->mr_cap; i++) {
        vofi_mr_t *m = dom->mrs[i];
        if (!m)
            continue;
        for (struct vofi_mr_exp **pp = &m->exps; *pp;) {
            struct vofi_mr_exp *e = *pp;
            if (e->ep == ep) {
                *pp = e->next;
                e->next = mine;
                mine = e;
            } else {
                pp = &e->next;
            }
        }
    }
    pthread_mutex_unlock(&dom->mr_lock);
    vofi_rma_mr_unexport(mine);
    for (int b = 0; b < VOFI_RMA_BUCKETS; b++) {
        while (rma->bucket[b]) {
            struct vofi_rproxy *rp = rma->bucket[b];
            rma->bucket[b] = rp->next;
            if (rp->px)
                vmmc_unimport(rp->px);
            if (rp->pxe)
                vmmc_unimport(rp->pxe);
            free(rp);
        }
    }
    vmmc_cq_close(ep->vcq);
    vmmc_cq_close(rma->ncq);
    if (rma->ecq)
        vmmc_cq_close(rma->ecq);
    ep->vcq = NULL;
    ep->rma = NULL;
    free(rma->pool);
    free(rma);
}

/* ------------------------------------------------------------------------ */
/* initiator side: peers' regions */

static unsigned bucket_of(int peer, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)(unsigned)peer << 32)) * 0x9e3779b97f4a7c15ull;
    return (unsigned)(h >> 56) % VOFI_RMA_BUCKETS;
}

/* Import the region and read its descriptor: 0 or a vmmc status. */
static int rproxy_import(vofi_ep_t *ep, int peer, uint64_t key, struct vofi_rproxy *rp)
{
    char nm[64];
    int ms = vofi_rma_import_ms();
    mr_name(nm, sizeof nm, key, "");
    int rc = vmmc_import(ep->vep, peer, nm, ms, &rp->px);
    if (rc != VMMC_OK) {
        vofi_info("RMA: importing region 0x%" PRIx64 " of peer %d: %s", key, peer,
                  vmmc_last_error());
        rp->px = NULL;
        return rc;
    }
    vmmc_proxy_t *pd = NULL;
    mr_name(nm, sizeof nm, key, ".d");
    rc = vmmc_import(ep->vep, peer, nm, ms, &pd);
    if (rc == VMMC_OK && vmmc_proxy_length(pd) != sizeof rp->d)
        rc = VMMC_ERR_PROTOCOL;
    if (rc == VMMC_OK)
        rc = vmmc_fetch(pd, 0, &rp->d, sizeof rp->d);
    if (pd)
        vmmc_unimport(pd);
    if (rc == VMMC_OK && (rp->d.magic != VOFI_MRD_MAGIC || rp->d.key != key ||
                          rp->d.len != vmmc_proxy_length(rp->px) ||
                          rp->d.base + rp->d.len < rp->d.base))
        rc = VMMC_ERR_PROTOCOL;
    if (rc == VMMC_OK && (rp->d.flags & VOFI_MRD_EVENTS)) {
        mr_name(nm, sizeof nm, key, ".e");
        rc = vmmc_import(ep->vep, peer, nm, ms, &rp->pxe);
        if (rc == VMMC_OK && vmmc_proxy_length(rp->pxe) != rp->d.len)
            rc = VMMC_ERR_PROTOCOL;
        if (rc != VMMC_OK && rp->pxe) {
            vmmc_unimport(rp->pxe);
            rp->pxe = NULL;
        }
    }
    if (rc != VMMC_OK) {
        vofi_warn("RMA: the descriptor of region 0x%" PRIx64 " of peer %d: %s", key, peer,
                  rc == VMMC_ERR_PROTOCOL ? "malformed" : vmmc_last_error());
        vmmc_unimport(rp->px);
        rp->px = NULL;
    }
    return rc;
}

int vofi_rma_resolve(vofi_ep_t *ep, fi_addr_t a, uint64_t key, uint64_t addr, size_t len,
                     int need, int *peer, struct vofi_rproxy **rpp, size_t *off, int *late)
{
    vofi_rma_t *rma = ep->rma;
    *late = 0;
    if (!rma || !ep->enabled)
        return -FI_EOPBADSTATE;
    int p = vofi_ep_peer(ep, a);
    if (p < 0)
        return p;
    unsigned b = bucket_of(p, key);
    struct vofi_rproxy *rp = rma->bucket[b];
    while (rp && !(rp->peer == p && rp->key == key))
        rp = rp->next;
    if (rp && rp->stale) {
        if (rp->px)
            vmmc_unimport(rp->px);
        if (rp->pxe)
            vmmc_unimport(rp->pxe);
        rp->px = rp->pxe = NULL;
    }
    if (!rp || !rp->px) {
        struct vofi_rproxy fresh = {0};
        int rc = rproxy_import(ep, p, key, &fresh);
        if (rc != VMMC_OK) {
            *late = rc;
            return -vofi_rma_err(rc);
        }
        if (!rp) {
            rp = malloc(sizeof *rp);
            if (!rp) {
                vmmc_unimport(fresh.px);
                if (fresh.pxe)
                    vmmc_unimport(fresh.pxe);
                return -FI_ENOMEM;
            }
            fresh.next = rma->bucket[b];
            rma->bucket[b] = rp;
        } else {
            fresh.next = rp->next;
        }
        fresh.peer = p;
        fresh.key = key;
        *rp = fresh;
    }
    if (((need & VOFI_NEED_WRITE) && !(rp->d.access & FI_REMOTE_WRITE)) ||
        ((need & VOFI_NEED_READ) && !(rp->d.access & FI_REMOTE_READ))) {
        vofi_info("RMA: region 0x%" PRIx64 " of peer %d does not allow remote %s", key, p,
                  (need & VOFI_NEED_WRITE) && !(rp->d.access & FI_REMOTE_WRITE) ? "writes"
                                                                                : "reads");
        *late = VMMC_ERR_PERMISSION;
        return -FI_EACCES;
    }
    if (addr < rp->d.base || addr - rp->d.base > rp->d.len || len > rp->d.len - (addr - rp->d.base)) {
        vofi_warn("RMA: %zu bytes at 0x%" PRIx64 " are outside region 0x%" PRIx64
                  " of peer %d (0x%" PRIx64 ", %" PRIu64 " bytes)",
                  len, addr, key, p, rp->d.base, rp->d.len);
        return -FI_EINVAL;
    }
    *peer = p;
    *rpp = rp;
    *off = (size_t)(addr - rp->d.base);
    return 0;
}
