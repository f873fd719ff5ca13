/* The fabric object of the provider "vmmc" (fi_fabric(3)) and fi_trywait.
 *
 * A fabric holds nothing but a count of what was opened from it (domains,
 * EQs): fi_close refuses with -FI_EBUSY while any is open. Passive
 * endpoints and wait sets do not exist here (FI_EP_RDM only; every wait
 * object is an fd).
 *
 * fi_trywait(fabric, fids, n) answers "may the caller now sleep on these
 * objects' fds?": each CQ and counter first progresses the endpoints bound
 * to it (as a read would, each under its own lock), so that work already
 * waiting in an endpoint is turned into completions; then anything to read
 * is -FI_EAGAIN, and otherwise the objects' fds are quiet (their eventfds
 * drained) and will become readable when something arrives: 0. */
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"

static int fabric_close(struct fid *fid)
{
    vofi_fabric_t *fab = (vofi_fabric_t *)(void *)fid;
    int n = atomic_load(&fab->ref);
    if (n) {
        vofi_warn("fi_close(fabric): %d domain(s) or EQ(s) still open", n);
        return -FI_EBUSY;
    }
    free(fab);
    return 0;
}

static int fabric_control(struct fid *fid, int command, void *arg)
{
    (void)fid, (void)command, (void)arg;
    return -FI_ENOSYS;
}

static struct fi_ops fabric_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = fabric_close,
    .bind = vofi_no_bind,
    .control = fabric_control,
    .ops_open = vofi_no_ops_open,
};

static int fabric_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
                             struct fid_pep **pep, void *context)
{
    (void)fabric, (void)info, (void)pep, (void)context;
    vofi_info("fi_passive_ep: the provider has only FI_EP_RDM endpoints");
    return -FI_ENOSYS;
}

static int fabric_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
                            struct fid_wait **waitset)
{
    (void)fabric, (void)attr, (void)waitset;
    vofi_info("fi_wait_open: no wait sets; CQs, counters and EQs have fd wait objects");
    return -FI_ENOSYS;
}

static struct fi_ops_fabric fabric_ops = {
    .size = sizeof(struct fi_ops_fabric),
    .domain = vofi_domain_open,
    .passive_ep = fabric_passive_ep,
    .eq_open = vofi_eq_open,
    .wait_open = fabric_wait_open,
    .trywait = vofi_trywait,
};

int vofi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    if (!attr || !fabric)
        return -FI_EINVAL;
    if (attr->name && strcmp(attr->name, VOFI_FABRIC_NAME)) {
        vofi_warn("fi_fabric: fabric %s is not this provider's (%s)", attr->name,
                  VOFI_FABRIC_NAME);
        return -FI_ENODATA;
    }
    int rc = vofi_settings_init();
    if (rc)
        return rc;
    vofi_fabric_t *fab = calloc(1, sizeof *fab);
    if (!fab)
        return -FI_ENOMEM;
    fab->fid.fid.fclass = FI_CLASS_FABRIC;
    fab->fid.fid.context = context;
    fab->fid.fid.ops = &fabric_fi_ops;
    fab->fid.ops = &fabric_ops;
    atomic_init(&fab->ref, 0);
    *fabric = &fab->fid;
    return 0;
}

/* Progress each distinct endpoint of @eps once (each takes its own lock),
 * as before a sleep: the core's progress included, which empties the
 * endpoints' event fds of signals for work this pass handles. */
static void progress_eps(vofi_ep_t **eps, int n)
{
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = eps[k] == eps[i];
        if (!seen)
            vofi_ep_progress_wait(eps[i]);
    }
}

/* 1: @cq has something to read after its endpoints made progress. */
static int cq_busy(vofi_cq_t *cq)
{
    vofi_ep_t *eps[VOFI_MAX_CNTR_EPS];
    pthread_mutex_lock(&cq->lock);
    int n = cq->neps;
    memcpy(eps, cq->eps, (size_t)n * sizeof eps[0]);
    pthread_mutex_unlock(&cq->lock);
    progress_eps(eps, n);
    return vofi_cq_ready(cq);
}

static int cntr_busy(vofi_cntr_t *c)
{
    vofi_ep_t *eps[VOFI_MAX_CNTR_EPS];
    pthread_mutex_lock(&c->lock);
    int n = c->neps;
    memcpy(eps, c->eps, (size_t)n * sizeof eps[0]);
    pthread_mutex_unlock(&c->lock);
    progress_eps(eps, n);
    return vofi_cntr_ready(c);
}

int vofi_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
    if (!fabric || count < 0 || (count && !fids))
        return -FI_EINVAL;
    for (int i = 0; i < count; i++) {
        struct fid *f = fids[i];
        if (!f)
            return -FI_EINVAL;
        switch (f->fclass) {
        case FI_CLASS_CQ:
            if (cq_busy((vofi_cq_t *)(void *)f))
                return -FI_EAGAIN;
            break;
        case FI_CLASS_CNTR:
            if (cntr_busy((vofi_cntr_t *)(void *)f))
                return -FI_EAGAIN;
            break;
        case FI_CLASS_EQ: {
            /* A peek with no buffer: 0 if an event waits, -FI_EAVAIL if
             * an error does, -FI_EAGAIN if none. */
            ssize_t r = fi_eq_read((struct fid_eq *)(void *)f, NULL, NULL, 0, FI_PEEK);
            if (r != -FI_EAGAIN)
                return -FI_EAGAIN;
            break;
        }
        default:
            vofi_warn("fi_trywait: fid class %zu has no wait object of this provider",
                      f->fclass);
            return -FI_EINVAL;
        }
    }
    return 0;
}
