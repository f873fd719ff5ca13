/* The operations of an endpoint's RMA and atomics in flight: the record
 * pool, and the progress that turns vmmc completions (the endpoint's
 * operations, and the notifications of remote writes into it) into fi
 * completions and counts. See ofi_rma_priv.h. */
#include <string.h>

#include "ofi/ofi_rma_priv.h"

/* ------------------------------------------------------------------------ */
/* operation records */

vofi_rop_t *vofi_rop_get(vofi_ep_t *ep, size_t n)
{
    vofi_rma_t *rma = ep->rma;
    if (!rma || n == 0 || rma->nfree < n)
        return NULL;
    rma->nfree -= n;
    vofi_rop_t *p = rma->free;
    rma->free = p->next_free;
    memset(p, 0, sizeof *p);
    p->parent = p;
    p->left = (uint32_t)n;
    p->resv = (uint32_t)(n - 1);
    ep->rma_live++;
    return p;
}

vofi_rop_t *vofi_rop_next(vofi_ep_t *ep, vofi_rop_t *p)
{
    vofi_rma_t *rma = ep->rma;
    if (p->resv == 0)
        return NULL; /* more than reserved: a caller's bug */
    p->resv--;
    vofi_rop_t *r = rma->free;
    rma->free = r->next_free;
    memset(r, 0, sizeof *r);
    r->parent = p;
    return r;
}

static void rop_free(vofi_rma_t *rma, vofi_rop_t *r)
{
    r->next_free = rma->free;
    rma->free = r;
    rma->nfree++;
}

static void rop_finish(vofi_ep_t *ep, vofi_rop_t *p)
{
    if (p->vst == VMMC_OK)
        vofi_complete_tx(ep, p->flags, p->context, p->cntr);
    else
        vofi_fail_tx(ep, p->flags, p->context, p->err, p->vst, p->cntr);
    ep->rma_live--;
    rop_free(ep->rma, p);
}

/* The first failure of an operation decides its error completion. */
static void rop_status(vofi_rop_t *p, vofi_rop_t *e, int vst)
{
    if (vst == VMMC_OK || p->vst != VMMC_OK)
        return;
    p->vst = vst;
    p->err = vofi_rma_err(vst);
    if (vst == VMMC_ERR_STALE && e->rp)
        e->rp->stale = 1; /* the target withdrew the region: ask again next time */
}

/* One vmmc operation of @p e's parent is over; 1 when the parent is. */
static int rop_done(vofi_rma_t *rma, vofi_rop_t *e, int vst)
{
    vofi_rop_t *p = e->parent;
    rop_status(p, e, vst);
    if (e != p)
        rop_free(rma, e);
    return --p->left == 0;
}

void vofi_rop_abort(vofi_ep_t *ep, vofi_rop_t *p, vofi_rop_t *e, size_t unposted, int vst)
{
    vofi_rma_t *rma = ep->rma;
    rma->nfree += p->resv;
    p->resv = 0;
    rop_status(p, e ? e : p, vst);
    if (e && e != p)
        rop_free(rma, e);
    p->left -= (uint32_t)unposted;
    if (p->left == 0)
        rop_finish(ep, p);
}

void vofi_rop_cancel(vofi_ep_t *ep, vofi_rop_t *p)
{
    vofi_rma_t *rma = ep->rma;
    rma->nfree += p->resv;
    ep->rma_live--;
    rop_free(rma, p);
}

/* ------------------------------------------------------------------------ */
/* progress */

/* A remote write landed in region @p key: its counters. */
static void counted(vofi_ep_t *ep, uint64_t key)
{
    if (ep->cntr_rwrite)
        vofi_cntr_inc(ep->cntr_rwrite);
    vofi_mr_t *mr = vofi_mr_get(ep->dom, key);
    if (mr) {
        if (mr->rcntr)
            vofi_cntr_inc(mr->rcntr);
        vofi_mr_put(mr);
    }
}

/* A write with data landed here: a receive completion with the data, and
 * the remote-write counters. */
static void notified(vofi_ep_t *ep, const vmmc_completion_t *c)
{
    uint64_t key = (uint64_t)(uintptr_t)c->context;
    vofi_cqe_t e = {0};
    e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
    e.len = c->length;
    e.data = c->value;
    e.buf = c->export_ ? (char *)vmmc_export_addr(c->export_) + c->offset : NULL;
    e.src = vofi_ep_addr_of(ep, c->peer);
    if (ep->rx_cq)
        vofi_cq_write(ep->rx_cq, &e);
    counted(ep, key);
}

#define BATCH 32

int vofi_rma_busy(vofi_ep_t *ep)
{
    vofi_rma_t *rma = ep->rma;
    return ep->rma_live > 0 || (rma && atomic_load_explicit(&rma->nexp, memory_order_relaxed) > 0);
}

int vofi_rma_progress(vofi_ep_t *ep)
{
    vofi_rma_t *rma = ep->rma;
    if (!rma)
        return 0;
    vmmc_completion_t c[BATCH];
    int events = 0;
    if (atomic_load_explicit(&rma->nexp, memory_order_relaxed) > 0) {
        int n = vmmc_cq_poll(rma->ncq, c, BATCH);
        for (int i = 0; i < n; i++)
            if (c[i].op == VMMC_OP_NOTIFY)
                notified(ep, &c[i]);
        events += n > 0 ? n : 0;
    }
    if (rma->ecq && atomic_load_explicit(&rma->nexp, memory_order_relaxed) > 0) {
        int n = vmmc_cq_poll(rma->ecq, c, BATCH);
        for (int i = 0; i < n; i++)
            if (c[i].op == VMMC_OP_NOTIFY)
                counted(ep, (uint64_t)(uintptr_t)c[i].context);
        events += n > 0 ? n : 0;
    }
    if (ep->rma_live == 0)
        return events;
    int n = vmmc_cq_poll(ep->vcq, c, BATCH);
    if (n <= 0)
        return events;
    vofi_rop_t *done[BATCH];
    int ndone = 0;
    for (int i = 0; i < n; i++) {
        vofi_rop_t *e = c[i].context;
        if (c[i].status == VMMC_OK && e->result) {
            if (e->esize == 4) {
                uint32_t v = (uint32_t)c[i].value;
                memcpy(e->result, &v, 4);
            } else {
                memcpy(e->result, &c[i].value, 8);
            }
        }
        if (c[i].status != VMMC_OK)
            vofi_info("RMA: operation to peer %d failed: %s", c[i].peer,
                      c[i].error ? c[i].error : vmmc_strerror(c[i].status));
        vofi_rop_t *p = e->parent;
        if (rop_done(rma, e, c[i].status))
            done[ndone++] = p;
    }
    /* A write's vmmc completion says its source may be reused; over udp it
     * may still travel. A fi completion says it arrived, so fence each
     * peer written to once per batch (shm: nothing to wait for). */
    int fenced[BATCH], frc[BATCH], nf = 0;
    for (int i = 0; i < ndone; i++) {
        vofi_rop_t *p = done[i];
        if (p->fence && p->vst == VMMC_OK) {
            int k = 0;
            while (k < nf && fenced[k] != p->peer)
                k++;
            if (k == nf) {
                fenced[nf] = p->peer;
                frc[nf++] = vmmc_fence(ep->vep, p->peer);
            }
            if (frc[k] != VMMC_OK) {
                p->vst = frc[k];
                p->err = vofi_rma_err(frc[k]);
            }
        }
        rop_finish(ep, p);
    }
    return events + n;
}
