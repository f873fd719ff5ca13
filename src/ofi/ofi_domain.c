/* The domain object of the provider "vmmc" (fi_domain(3)).
 *
 * A domain keeps a copy of the fi_info it was opened with and the choices
 * in it that its objects follow: mr_mode (as bits; see ofi.h), threading
 * and data progress (FI_PROGRESS_AUTO, or VMMC_OFI_PROGRESS=auto: each
 * endpoint runs a progress thread). Everything opened from it (AVs, CQs,
 * counters, endpoints, MRs) holds dom->ref; fi_close refuses with
 * -FI_EBUSY until they are closed. An EQ may be bound (nothing in the
 * provider completes asynchronously, so nothing is ever written to it) and
 * is held until the domain closes. Scalable endpoints, shared contexts and
 * poll sets do not exist here (-FI_ENOSYS). */
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"

static int domain_close(struct fid *fid)
{
    vofi_domain_t *dom = (vofi_domain_t *)(void *)fid;
    int n = atomic_load(&dom->ref);
    if (n) {
        vofi_warn("fi_close(domain): %d object(s) opened from it are still open", n);
        return -FI_EBUSY;
    }
    if (dom->eq)
        vofi_eq_hold(dom->eq, -1);
    atomic_fetch_sub(&dom->fab->ref, 1);
    pthread_mutex_destroy(&dom->mr_lock);
    free(dom->mrs);
    fi_freeinfo(dom->info);
    free(dom);
    return 0;
}

static int domain_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    vofi_domain_t *dom = (vofi_domain_t *)(void *)fid;
    if (!bfid)
        return -FI_EINVAL;
    if (bfid->fclass != FI_CLASS_EQ) {
        vofi_warn("fi_domain_bind: only an EQ binds to a domain (fid class %zu)", bfid->fclass);
        return -FI_EINVAL;
    }
    if (flags & FI_REG_MR) {
        vofi_warn("fi_domain_bind: FI_REG_MR: registrations complete at once, never through "
                  "an EQ");
        return -FI_ENOSYS;
    }
    if (flags) {
        vofi_warn("fi_domain_bind: unknown flags 0x%llx", (unsigned long long)flags);
        return -FI_EBADFLAGS;
    }
    pthread_mutex_lock(&dom->mr_lock); /* the domain's one lock guards dom->eq too */
    int busy = dom->eq != NULL;
    if (!busy) {
        dom->eq = (struct fid_eq *)(void *)bfid;
        vofi_eq_hold(dom->eq, 1);
    }
    pthread_mutex_unlock(&dom->mr_lock);
    if (busy) {
        vofi_warn("fi_domain_bind: the domain is bound to an EQ already");
        return -FI_EBUSY;
    }
    return 0;
}

static int domain_control(struct fid *fid, int command, void *arg)
{
    (void)fid, (void)command, (void)arg;
    return -FI_ENOSYS;
}

static struct fi_ops domain_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = domain_close,
    .bind = domain_bind,
    .control = domain_control,
    .ops_open = vofi_no_ops_open,
};

static int domain_scalable_ep(struct fid_domain *domain, struct fi_info *info,
                              struct fid_ep **sep, void *context)
{
    (void)domain, (void)info, (void)sep, (void)context;
    vofi_info("fi_scalable_ep: not supported (one tx and one rx context per endpoint)");
    return -FI_ENOSYS;
}

static int domain_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
                            struct fid_poll **pollset)
{
    (void)domain, (void)attr, (void)pollset;
    vofi_info("fi_poll_open: no poll sets; CQs and counters have fd wait objects");
    return -FI_ENOSYS;
}

static int domain_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
                          struct fid_stx **stx, void *context)
{
    (void)domain, (void)attr, (void)stx, (void)context;
    vofi_info("fi_stx_context: no shared contexts");
    return -FI_ENOSYS;
}

static int domain_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
                          struct fid_ep **rx_ep, void *context)
{
    (void)domain, (void)attr, (void)rx_ep, (void)context;
    vofi_info("fi_srx_context: no shared contexts");
    return -FI_ENOSYS;
}

static struct fi_ops_domain domain_ops = {
    .size = sizeof(struct fi_ops_domain),
    .av_open = vofi_av_open,
    .cq_open = vofi_cq_open,
    .endpoint = vofi_endpoint,
    .scalable_ep = domain_scalable_ep,
    .cntr_open = vofi_cntr_open,
    .poll_open = domain_poll_open,
    .stx_ctx = domain_stx_ctx,
    .srx_ctx = domain_srx_ctx,
    .query_atomic = vofi_query_atomic,
};

static struct fi_ops_mr domain_mr_ops = {
    .size = sizeof(struct fi_ops_mr),
    .reg = vofi_mr_reg,
    .regv = vofi_mr_regv,
    .regattr = vofi_mr_regattr,
};

/* mr_mode as bits: FI_MR_BASIC (and, before API 1.5, "unspecified", which
 * fi_getinfo reports as FI_MR_BASIC) is provider keys at virtual addresses
 * in allocated memory; FI_MR_SCALABLE is none of them. */
static uint64_t mr_bits(int mode, uint32_t version)
{
    if (mode == FI_MR_BASIC || (mode == FI_MR_UNSPEC && FI_VERSION_LT(version, FI_VERSION(1, 5))))
        return FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
    if (mode == FI_MR_SCALABLE)
        return 0;
    return (uint64_t)mode;
}

int vofi_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
                     void *context)
{
    if (!fabric || !info || !domain)
        return -FI_EINVAL;
    if (fabric->fid.fclass != FI_CLASS_FABRIC || fabric->ops->domain != vofi_domain_open) {
        vofi_warn("fi_domain: the fabric is not this provider's");
        return -FI_EINVAL;
    }
    int rc = vofi_check_info(info);
    if (rc) {
        vofi_warn("fi_domain: the fi_info was not made by this provider's fi_getinfo or asks "
                  "for what it cannot do (FI_LOG_LEVEL=info says what)");
        return rc;
    }
    vofi_fabric_t *fab = (vofi_fabric_t *)(void *)fabric;
    vofi_domain_t *dom = calloc(1, sizeof *dom);
    if (!dom)
        return -FI_ENOMEM;
    dom->info = fi_dupinfo(info);
    if (!dom->info) {
        free(dom);
        return -FI_ENOMEM;
    }
    if (pthread_mutex_init(&dom->mr_lock, NULL)) {
        fi_freeinfo(dom->info);
        free(dom);
        return -FI_ENOMEM;
    }
    uint32_t version = fabric->api_version ? fabric->api_version : VOFI_FI_VERSION;
    const struct fi_domain_attr *d = info->domain_attr;
    dom->mr_mode = mr_bits(d ? d->mr_mode : FI_MR_UNSPEC, version);
    dom->threading = d && d->threading ? d->threading : FI_THREAD_SAFE;
    dom->data_progress = d && d->data_progress ? d->data_progress
                         : vofi_set.progress_thread ? FI_PROGRESS_AUTO
                                                    : FI_PROGRESS_MANUAL;
    atomic_init(&dom->ref, 0);
    dom->fab = fab;
    dom->fid.fid.fclass = FI_CLASS_DOMAIN;
    dom->fid.fid.context = context;
    dom->fid.fid.ops = &domain_fi_ops;
    dom->fid.ops = &domain_ops;
    dom->fid.mr = &domain_mr_ops;
    atomic_fetch_add(&fab->ref, 1);
    *domain = &dom->fid;
    return 0;
}
