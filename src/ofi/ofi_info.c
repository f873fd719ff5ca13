/* fi_getinfo for the provider "vmmc": one fi_info (FI_EP_RDM) with the
 * provider's exact limits, checked against the application's hints the way
 * libfabric's own utility code checks them (prov/util/src/util_attr.c:
 * ofi_check_info, ofi_alter_info), and vofi_check_info(), with which the
 * domain and the endpoint refuse an fi_info this provider could not have
 * produced.
 *
 * What a hint means (fi_getinfo(3)): a capability, order, operation flag
 * or size the application asks for that the provider lacks is a refusal
 * (-FI_ENODATA, with an FI_INFO line naming the field: FI_LOG_LEVEL=info);
 * a field left 0 gets the provider's value. The provider needs no mode bit
 * (mode 0: FI_CONTEXT and the others are accepted and unused), no local
 * registration, and works with either kind of memory-region key and either
 * RMA addressing: what it reports in mr_mode is what the application
 * accepts of FI_MR_PROV_KEY | FI_MR_VIRT_ADDR (both with no hints),
 * FI_MR_BASIC for pre-1.5 callers unless they ask for FI_MR_SCALABLE.
 *
 * Addresses are opaque (FI_FORMAT_UNSPEC, at most VOFI_MAX_EP_ADDR bytes):
 * there is no host name or port to resolve, so node/service are ignored
 * with FI_SOURCE and refused without it (a destination must come from
 * fi_getname, e.g. as hints->dest_addr, as fi_pingpong does). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ofi/ofi.h"

/* Every bit its own field: 64 tag bits, the top one included (Open MPI's
 * mtl ofi counts the leading bits it may use). */
#define VOFI_TAG_FORMAT 0xAAAAAAAAAAAAAAAAull

#define VOFI_TX_CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND)
#define VOFI_RX_CAPS                                                                       \
    (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | \
     FI_MULTI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_RMA_EVENT)
#define VOFI_DOM_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define VOFI_CAPS (VOFI_TX_CAPS | VOFI_RX_CAPS | VOFI_DOM_CAPS)

/* libfabric's split (include/ofi.h): primary capabilities are reported
 * only when asked for (or with no hints); secondary ones may be reported
 * unasked. */
#define PRIMARY_CAPS                                                                          \
    (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | FI_READ | FI_WRITE | FI_SEND |  \
     FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_COLLECTIVE | FI_NAMED_RX_CTX | FI_HMEM | \
     FI_DIRECTED_RECV | FI_VARIABLE_MSG | FI_LOCAL_COMM | FI_REMOTE_COMM)
#define MSG_DIR_CAPS (FI_SEND | FI_RECV)
#define RMA_DIR_CAPS (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
/* Capabilities of the other direction, ignored in tx_attr / rx_attr. */
#define TX_IGNORED                                                                            \
    (FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RECV | FI_DIRECTED_RECV | FI_VARIABLE_MSG |        \
     FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR)
#define RX_IGNORED (FI_READ | FI_WRITE | FI_SEND | FI_FENCE | FI_MULTICAST | FI_NAMED_RX_CTX)

/* Operation flags the endpoint honours as defaults. With
 * FI_DELIVERY_COMPLETE a send completes once its data is in the target's
 * memory (a vmmc_fence() to that peer: nothing to wait for on one host),
 * RMA writes always do; FI_COMMIT_COMPLETE (persistent memory) is not
 * offered. */
#define VOFI_TX_OP_FLAGS                                                                  \
    (FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE)
#define VOFI_RX_OP_FLAGS (FI_COMPLETION | FI_MULTI_RECV)
/* Messages (tagged or not) from one endpoint to another are matched in the
 * order they were sent; nothing else is ordered. */
#define VOFI_MSG_ORDER FI_ORDER_SAS

#define VOFI_MR_MODES (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR)

/* Domain limits. */
#define VOFI_MR_CNT ((1u << 24) - 1) /* key index: 24 bits */
#define VOFI_MR_IOV_LIMIT 1
#define VOFI_CNTR_CNT 1024 /* advisory, as cq_cnt and ep_cnt: not enforced at open */
#define VOFI_CQ_CNT 1024
#define VOFI_EP_CNT 256
#define VOFI_ERR_DATA 160 /* vofi_cq_t.err_str */

#define REFUSE(...)                                 \
    do {                                            \
        vofi_info("fi_info refused: " __VA_ARGS__); \
        return -FI_ENODATA;                         \
    } while (0)

static uint64_t caps_of(uint64_t info_caps, uint64_t hint, uint64_t attr)
{
    uint64_t c = hint ? (hint & PRIMARY_CAPS) : (info_caps & attr & PRIMARY_CAPS);
    c |= attr & ~PRIMARY_CAPS;
    if ((c & (FI_MSG | FI_TAGGED)) && !(c & MSG_DIR_CAPS))
        c |= attr & MSG_DIR_CAPS;
    if ((c & (FI_RMA | FI_ATOMIC)) && !(c & RMA_DIR_CAPS))
        c |= attr & RMA_DIR_CAPS;
    /* Secondary capabilities that mean nothing without their primary. */
    if (!(c & (FI_MSG | FI_TAGGED)))
        c &= ~(FI_MULTI_RECV | FI_DIRECTED_RECV);
    if (!(c & (FI_RMA | FI_ATOMIC)))
        c &= ~FI_RMA_EVENT;
    return c & attr;
}

/* The mr_mode to report, or -1 when the application's cannot be met. */
static int64_t mr_mode_for(uint32_t version, const struct fi_info *hints)
{
    int have = hints && hints->domain_attr;
    int m = have ? hints->domain_attr->mr_mode : 0;
    if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
        if (m == FI_MR_UNSPEC || m == FI_MR_BASIC)
            return FI_MR_BASIC;
        return m == FI_MR_SCALABLE ? FI_MR_SCALABLE : -1;
    }
    if (m & FI_MR_BASIC)
        return (m & ~FI_MR_BASIC) ? -1 : FI_MR_BASIC;
    if (m & FI_MR_SCALABLE)
        return (m & ~FI_MR_SCALABLE) ? -1 : FI_MR_SCALABLE;
    return have ? (m & VOFI_MR_MODES) : VOFI_MR_MODES;
}

static int data_progress_default(void)
{
    return vofi_set.progress_thread ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
}

static int check_progress(const char *what, int p, int data)
{
    if (p != FI_PROGRESS_UNSPEC && p != FI_PROGRESS_AUTO && p != FI_PROGRESS_MANUAL)
        REFUSE("unknown %s progress %d", what, p);
    if (data && p == FI_PROGRESS_AUTO && vofi_set.progress_manual)
        REFUSE("FI_PROGRESS_AUTO asked for, and VMMC_OFI_PROGRESS=manual forbids it");
    return 0;
}

static int check_domain(uint32_t version, const struct fi_info *h)
{
    const struct fi_domain_attr *d = h->domain_attr;
    if (d->name && strcmp(d->name, VOFI_DOMAIN_NAME))
        REFUSE("domain %s asked for, this provider's is %s", d->name, VOFI_DOMAIN_NAME);
    switch (d->threading) {
    case FI_THREAD_UNSPEC:
    case FI_THREAD_SAFE:
    case FI_THREAD_FID:
    case FI_THREAD_DOMAIN:
    case FI_THREAD_COMPLETION:
    case FI_THREAD_ENDPOINT:
        break; /* every call is thread-safe: any model is met */
    default:
        REFUSE("unknown threading model %d", (int)d->threading);
    }
    if (check_progress("control", d->control_progress, 0) ||
        check_progress("data", d->data_progress, 1))
        return -FI_ENODATA;
    if (d->resource_mgmt != FI_RM_UNSPEC && d->resource_mgmt != FI_RM_ENABLED &&
        d->resource_mgmt != FI_RM_DISABLED)
        REFUSE("unknown resource management %d", (int)d->resource_mgmt);
    if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP && d->av_type != FI_AV_TABLE)
        REFUSE("unknown AV type %d", (int)d->av_type);
    if (mr_mode_for(version, h) < 0)
        REFUSE("mr_mode 0x%x: FI_MR_BASIC and FI_MR_SCALABLE go alone", d->mr_mode);
    if (d->mr_key_size > VOFI_MR_KEY_SIZE)
        REFUSE("mr_key_size %zu > %d", d->mr_key_size, VOFI_MR_KEY_SIZE);
    if (d->cq_data_size > VOFI_CQ_DATA_SIZE)
        REFUSE("cq_data_size %zu > %d", d->cq_data_size, VOFI_CQ_DATA_SIZE);
    if (d->max_ep_tx_ctx > 1 || d->max_ep_rx_ctx > 1)
        REFUSE("more than one tx or rx context per endpoint");
    if (d->max_ep_stx_ctx || d->max_ep_srx_ctx)
        REFUSE("shared contexts");
    if (d->auth_key_size)
        REFUSE("authorization keys");
    /* The fields below exist from API 1.5 on (libfabric checks them then). */
    if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
        return 0;
    if (d->cntr_cnt > VOFI_CNTR_CNT)
        REFUSE("cntr_cnt %zu > %d", d->cntr_cnt, VOFI_CNTR_CNT);
    if (d->mr_iov_limit > VOFI_MR_IOV_LIMIT)
        REFUSE("mr_iov_limit %zu > %d", d->mr_iov_limit, VOFI_MR_IOV_LIMIT);
    if (d->caps & ~(uint64_t)VOFI_DOM_CAPS)
        REFUSE("domain caps 0x%llx not supported",
               (unsigned long long)(d->caps & ~(uint64_t)VOFI_DOM_CAPS));
    if (d->max_err_data > VOFI_ERR_DATA)
        REFUSE("max_err_data %zu > %d", d->max_err_data, VOFI_ERR_DATA);
    if (d->mr_cnt > VOFI_MR_CNT)
        REFUSE("mr_cnt %zu > %u", d->mr_cnt, VOFI_MR_CNT);
    return 0;
}

static int check_ep(const struct fi_info *h)
{
    const struct fi_ep_attr *e = h->ep_attr;
    if (e->protocol != FI_PROTO_UNSPEC)
        REFUSE("protocol %u: the provider has no registered protocol id", e->protocol);
    if (e->protocol_version > 1)
        REFUSE("protocol_version %u > 1", e->protocol_version);
    if (e->max_msg_size > VOFI_MAX_MSG)
        REFUSE("max_msg_size %zu > %zu", e->max_msg_size, VOFI_MAX_MSG);
    if (e->tx_ctx_cnt > 1 || e->rx_ctx_cnt > 1)
        REFUSE("tx_ctx_cnt %zu / rx_ctx_cnt %zu: one context each, none shared", e->tx_ctx_cnt,
               e->rx_ctx_cnt);
    if ((h->caps & (FI_RMA | FI_ATOMIC)) &&
        (e->max_order_raw_size || e->max_order_war_size || e->max_order_waw_size))
        REFUSE("ordered RMA data (max_order_*_size): RMA operations are not ordered");
    if (e->auth_key_size)
        REFUSE("authorization keys");
    return 0;
}

static int check_tx(const struct fi_tx_attr *t)
{
    if ((t->caps & ~(uint64_t)TX_IGNORED) & ~(uint64_t)VOFI_TX_CAPS)
        REFUSE("tx caps 0x%llx not supported",
               (unsigned long long)((t->caps & ~(uint64_t)TX_IGNORED) & ~(uint64_t)VOFI_TX_CAPS));
    if (t->op_flags & ~(uint64_t)VOFI_TX_OP_FLAGS)
        REFUSE("tx op_flags 0x%llx not supported",
               (unsigned long long)(t->op_flags & ~(uint64_t)VOFI_TX_OP_FLAGS));
    if (t->msg_order & ~(uint64_t)VOFI_MSG_ORDER)
        REFUSE("tx msg_order 0x%llx: only FI_ORDER_SAS",
               (unsigned long long)t->msg_order);
    if (t->comp_order)
        REFUSE("tx comp_order 0x%llx: completions are not ordered",
               (unsigned long long)t->comp_order);
    if (t->inject_size > vofi_set.inject)
        REFUSE("inject_size %zu > %llu (VMMC_OFI_INJECT)", t->inject_size,
               (unsigned long long)vofi_set.inject);
    if (t->size > VOFI_TX_SIZE)
        REFUSE("tx size %zu > %d", t->size, VOFI_TX_SIZE);
    if (t->iov_limit > VOFI_IOV_LIMIT)
        REFUSE("tx iov_limit %zu > %d", t->iov_limit, VOFI_IOV_LIMIT);
    if (t->rma_iov_limit > VOFI_RMA_IOV_LIMIT)
        REFUSE("rma_iov_limit %zu > %d", t->rma_iov_limit, VOFI_RMA_IOV_LIMIT);
    return 0;
}

static int check_rx(const struct fi_rx_attr *r)
{
    if ((r->caps & ~(uint64_t)RX_IGNORED) & ~(uint64_t)VOFI_RX_CAPS)
        REFUSE("rx caps 0x%llx not supported",
               (unsigned long long)((r->caps & ~(uint64_t)RX_IGNORED) & ~(uint64_t)VOFI_RX_CAPS));
    if (r->op_flags & ~(uint64_t)VOFI_RX_OP_FLAGS)
        REFUSE("rx op_flags 0x%llx not supported",
               (unsigned long long)(r->op_flags & ~(uint64_t)VOFI_RX_OP_FLAGS));
    if (r->msg_order & ~(uint64_t)VOFI_MSG_ORDER)
        REFUSE("rx msg_order 0x%llx: only FI_ORDER_SAS", (unsigned long long)r->msg_order);
    if (r->comp_order)
        REFUSE("rx comp_order 0x%llx: completions are not ordered",
               (unsigned long long)r->comp_order);
    if (r->total_buffered_recv > vofi_set.unexp_max)
        REFUSE("total_buffered_recv %zu > %llu (VMMC_OFI_UNEXPECTED)", r->total_buffered_recv,
               (unsigned long long)vofi_set.unexp_max);
    if (r->size > VOFI_RX_SIZE)
        REFUSE("rx size %zu > %d", r->size, VOFI_RX_SIZE);
    if (r->iov_limit > VOFI_IOV_LIMIT)
        REFUSE("rx iov_limit %zu > %d", r->iov_limit, VOFI_IOV_LIMIT);
    return 0;
}

/* Can the provider meet @h (hints, or an fi_info handed back)? */
static int check(uint32_t version, const struct fi_info *h)
{
    if (h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM)
        REFUSE("endpoint type %d: only FI_EP_RDM", (int)h->ep_attr->type);
    if (h->caps & ~(uint64_t)VOFI_CAPS)
        REFUSE("caps 0x%llx not supported",
               (unsigned long long)(h->caps & ~(uint64_t)VOFI_CAPS));
    if (h->addr_format != FI_FORMAT_UNSPEC)
        REFUSE("address format %u: addresses are opaque (FI_FORMAT_UNSPEC)", h->addr_format);
    if (h->src_addr || h->src_addrlen)
        REFUSE("a source address: an endpoint's address is made when it opens");
    if (h->dest_addr && (!h->dest_addrlen || h->dest_addrlen > VOFI_MAX_EP_ADDR))
        REFUSE("dest_addrlen %zu: an address has 1 to %d bytes", h->dest_addrlen,
               VOFI_MAX_EP_ADDR);
    if (!h->dest_addr && h->dest_addrlen)
        REFUSE("dest_addrlen %zu without dest_addr", h->dest_addrlen);
    if (h->fabric_attr) {
        const struct fi_fabric_attr *f = h->fabric_attr;
        if (f->name && strcmp(f->name, VOFI_FABRIC_NAME))
            REFUSE("fabric %s asked for, this provider's is %s", f->name, VOFI_FABRIC_NAME);
        if (f->prov_name && !strcasestr(f->prov_name, VOFI_NAME))
            REFUSE("provider %s asked for", f->prov_name);
        if (f->prov_version > VOFI_PROV_VERSION)
            REFUSE("provider version %u.%u asked for, this is %u.%u", FI_MAJOR(f->prov_version),
                   FI_MINOR(f->prov_version), FI_MAJOR(VOFI_PROV_VERSION),
                   FI_MINOR(VOFI_PROV_VERSION));
    }
    if (h->domain_attr && check_domain(version, h))
        return -FI_ENODATA;
    if (h->ep_attr && check_ep(h))
        return -FI_ENODATA;
    if (h->tx_attr && check_tx(h->tx_attr))
        return -FI_ENODATA;
    if (h->rx_attr && check_rx(h->rx_attr))
        return -FI_ENODATA;
    return 0;
}

/* Fill @fi (from fi_allocinfo) for hints @h (may be NULL), checked. */
static int fill(uint32_t version, const struct fi_info *h, struct fi_info *fi)
{
    const struct fi_domain_attr *hd = h ? h->domain_attr : NULL;
    const struct fi_ep_attr *he = h ? h->ep_attr : NULL;
    const struct fi_tx_attr *ht = h ? h->tx_attr : NULL;
    const struct fi_rx_attr *hr = h ? h->rx_attr : NULL;

    fi->caps = caps_of(VOFI_CAPS, h ? h->caps : 0, VOFI_CAPS);
    fi->mode = 0;
    fi->addr_format = FI_FORMAT_UNSPEC;
    if (h) {
        fi->handle = h->handle;
        if (h->dest_addr) {
            fi->dest_addr = malloc(h->dest_addrlen);
            if (!fi->dest_addr)
                return -FI_ENOMEM;
            memcpy(fi->dest_addr, h->dest_addr, h->dest_addrlen);
            fi->dest_addrlen = h->dest_addrlen;
        }
    }

    struct fi_tx_attr *t = fi->tx_attr;
    t->caps = caps_of(fi->caps, ht ? ht->caps : 0, VOFI_TX_CAPS & fi->caps);
    t->mode = 0;
    t->op_flags = ht ? ht->op_flags : 0;
    t->msg_order = VOFI_MSG_ORDER;
    t->comp_order = FI_ORDER_NONE;
    t->inject_size = ht && ht->inject_size ? ht->inject_size : vofi_set.inject;
    t->size = ht && ht->size ? ht->size : VOFI_TX_SIZE;
    t->iov_limit = ht && ht->iov_limit ? ht->iov_limit : VOFI_IOV_LIMIT;
    t->rma_iov_limit = ht && ht->rma_iov_limit ? ht->rma_iov_limit : VOFI_RMA_IOV_LIMIT;

    struct fi_rx_attr *r = fi->rx_attr;
    r->caps = caps_of(fi->caps, hr ? hr->caps : 0, VOFI_RX_CAPS & fi->caps);
    r->mode = 0;
    r->op_flags = hr ? hr->op_flags : 0;
    r->msg_order = VOFI_MSG_ORDER;
    r->comp_order = FI_ORDER_NONE;
    r->total_buffered_recv = vofi_set.unexp_max;
    r->size = hr && hr->size ? hr->size : VOFI_RX_SIZE;
    r->iov_limit = hr && hr->iov_limit ? hr->iov_limit : VOFI_IOV_LIMIT;

    struct fi_ep_attr *e = fi->ep_attr;
    e->type = FI_EP_RDM;
    e->protocol = FI_PROTO_UNSPEC;
    e->protocol_version = 1;
    e->max_msg_size = VOFI_MAX_MSG;
    e->msg_prefix_size = 0;
    e->max_order_raw_size = e->max_order_war_size = e->max_order_waw_size = 0;
    /* Matching takes any mask, so the fields the application asked for
     * are the provider's too (fi_endpoint(3): at least the size asked). */
    e->mem_tag_format = he && he->mem_tag_format ? he->mem_tag_format : VOFI_TAG_FORMAT;
    e->tx_ctx_cnt = 1;
    e->rx_ctx_cnt = 1;

    struct fi_domain_attr *d = fi->domain_attr;
    d->name = strdup(VOFI_DOMAIN_NAME);
    if (!d->name)
        return -FI_ENOMEM;
    d->threading = hd && hd->threading ? hd->threading : FI_THREAD_SAFE;
    d->control_progress =
        hd && hd->control_progress ? hd->control_progress : FI_PROGRESS_MANUAL;
    d->data_progress = hd && hd->data_progress ? hd->data_progress
                                               : (enum fi_progress)data_progress_default();
    d->resource_mgmt = FI_RM_ENABLED;
    d->av_type = hd && hd->av_type ? hd->av_type : FI_AV_MAP;
    d->mr_mode = (int)mr_mode_for(version, h);
    d->mr_key_size = VOFI_MR_KEY_SIZE;
    d->cq_data_size = VOFI_CQ_DATA_SIZE;
    d->cq_cnt = VOFI_CQ_CNT;
    d->ep_cnt = VOFI_EP_CNT;
    d->tx_ctx_cnt = VOFI_EP_CNT;
    d->rx_ctx_cnt = VOFI_EP_CNT;
    d->max_ep_tx_ctx = 1;
    d->max_ep_rx_ctx = 1;
    d->max_ep_stx_ctx = 0;
    d->max_ep_srx_ctx = 0;
    d->cntr_cnt = VOFI_CNTR_CNT;
    d->mr_iov_limit = VOFI_MR_IOV_LIMIT;
    d->caps = caps_of(fi->caps, hd ? hd->caps : 0, VOFI_DOM_CAPS);
    d->mode = 0;
    d->max_err_data = VOFI_ERR_DATA;
    d->mr_cnt = VOFI_MR_CNT;

    struct fi_fabric_attr *f = fi->fabric_attr;
    f->name = strdup(VOFI_FABRIC_NAME);
    if (!f->name)
        return -FI_ENOMEM;
    f->prov_version = VOFI_PROV_VERSION; /* prov_name: libfabric sets it */
    return 0;
}

int vofi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                 const struct fi_info *hints, struct fi_info **info)
{
    if (!info)
        return -FI_EINVAL;
    *info = NULL;
    int rc = vofi_settings_init();
    if (rc)
        return rc;
    if (node && !(flags & FI_SOURCE))
        REFUSE("node %s: vmmc addresses are opaque, there is no host to resolve (exchange "
               "fi_getname out of band; fabtests: -E)", node);
    (void)service; /* with FI_SOURCE or without node, there is nothing to bind or resolve */
    if (hints && check(version, hints))
        return -FI_ENODATA;
    struct fi_info *fi = fi_allocinfo();
    if (!fi)
        return -FI_ENOMEM;
    rc = fill(version, hints, fi);
    if (rc) {
        fi_freeinfo(fi);
        return rc;
    }
    *info = fi;
    return 0;
}

int vofi_check_info(const struct fi_info *info)
{
    if (!info)
        return -FI_EINVAL;
    uint32_t version = info->fabric_attr && info->fabric_attr->api_version
                           ? info->fabric_attr->api_version
                           : VOFI_FI_VERSION;
    if (info->fabric_attr && !info->fabric_attr->prov_name)
        REFUSE("an fi_info without a provider name was not made by fi_getinfo");
    return check(version, info) ? -FI_ENODATA : 0;
}
