/* The endpoint (FI_EP_RDM): one vmmc endpoint of its own (vmmc_ep_open,
 * listening, so peers that send first are accepted), whose address packed
 * is the endpoint's name; FM channels for messages (ofi_proto.c), exports
 * and imports for RMA (ofi_rma.c). Every call holds ep->lock.
 *
 * Progress: manual by default (every CQ or counter read, and every send or
 * receive call, progresses the endpoint); with FI_PROGRESS_AUTO (or
 * VMMC_OFI_PROGRESS=auto) a thread sleeps in vmmc_wait() and progresses the
 * endpoint when something arrives, so a peer's rendezvous or RMA completes
 * while the application computes. */
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"

static int no_ctx(struct fid_ep *sep, int index, void *attr, struct fid_ep **ep, void *context)
{
    return -FI_ENOSYS;
}
static int no_setname(fid_t fid, void *addr, size_t addrlen) { return -FI_ENOSYS; }
static int no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen) { return -FI_ENOSYS; }
static int no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen)
{
    return -FI_ENOSYS;
}
static int no_listen(struct fid_pep *pep) { return -FI_ENOSYS; }
static int no_accept(struct fid_ep *ep, const void *param, size_t paramlen) { return -FI_ENOSYS; }
static int no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen)
{
    return -FI_ENOSYS;
}
static int no_shutdown(struct fid_ep *ep, uint64_t flags) { return -FI_ENOSYS; }
static int no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
                   void *context)
{
    return -FI_ENOSYS;
}

static int ep_close(struct fid *fid);
static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
static int ep_control(struct fid *fid, int command, void *arg);

static struct fi_ops ep_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = ep_close,
    .bind = ep_bind,
    .control = ep_control,
    .ops_open = vofi_no_ops_open,
};

/* ---- peers ---------------------------------------------------------------- */

static void av_refresh(vofi_ep_t *ep)
{
    uint64_t g = atomic_load(&ep->av->gen);
    if (g == ep->av_gen)
        return;
    ep->av_gen = g; /* entries were removed: forget what we cached */
    for (size_t i = 0; i < ep->npeer_of; i++)
        ep->peer_of[i] = -1;
    for (size_t i = 0; i < ep->naddr_of; i++)
        ep->addr_of[i] = FI_ADDR_NOTAVAIL;
}

static int grow(void **arr, size_t *n, size_t want, size_t elem, int fill)
{
    if (want <= *n)
        return 0;
    size_t m = *n ? *n : 64;
    while (m < want)
        m *= 2;
    void *p = realloc(*arr, m * elem);
    if (!p)
        return -FI_ENOMEM;
    memset((char *)p + *n * elem, fill, (m - *n) * elem);
    *arr = p;
    *n = m;
    return 0;
}

int vofi_ep_peer(vofi_ep_t *ep, fi_addr_t a)
{
    if (!ep->av)
        return -FI_ENOAV;
    av_refresh(ep);
    if (a < ep->npeer_of && ep->peer_of[a] >= 0)
        return ep->peer_of[a];
    uint8_t packed[VOFI_MAX_EP_ADDR];
    int len = vofi_av_get(ep->av, a, packed);
    if (len < 0)
        return -FI_EINVAL;
    uint8_t vaddr[VMMC_ADDR_MAX];
    size_t vlen = sizeof vaddr;
    int r = vofi_addr_unpack(packed, (size_t)len, ep->vaddr, ep->vaddr_len, vaddr, &vlen);
    if (r)
        return r;
    /* A peer on another host that reached us first is known by its full
     * address, which the packed name only abbreviates: find it by name. */
    int peer = -1, np = vmmc_peer_count(ep->vep);
    for (int h = 0; h < np && peer < 0; h++) {
        uint8_t hv[VMMC_ADDR_MAX], hp[VOFI_MAX_EP_ADDR];
        size_t hvl = sizeof hv, hpl = sizeof hp;
        if (!vmmc_peer_addr(ep->vep, h, hv, &hvl) && !vofi_addr_pack(hv, hvl, hp, &hpl) &&
            hpl == (size_t)len && !memcmp(hp, packed, hpl))
            peer = h;
    }
    int st = peer >= 0 ? 0 : vmmc_connect(ep->vep, vaddr, vlen, &peer);
    if (st) {
        vofi_warn("fi_addr %llu: %s", (unsigned long long)a, vmmc_last_error());
        return vofi_err(st);
    }
    if (grow((void **)&ep->peer_of, &ep->npeer_of, (size_t)a + 1, sizeof(int), 0xff) ||
        grow((void **)&ep->addr_of, &ep->naddr_of, (size_t)peer + 1, sizeof(fi_addr_t), 0xff))
        return -FI_ENOMEM;
    ep->peer_of[a] = peer;
    ep->addr_of[peer] = a;
    return peer;
}

fi_addr_t vofi_ep_addr_of(vofi_ep_t *ep, int peer)
{
    if (!ep->av || peer < 0)
        return FI_ADDR_NOTAVAIL;
    av_refresh(ep);
    if ((size_t)peer < ep->naddr_of && ep->addr_of[peer] != FI_ADDR_NOTAVAIL)
        return ep->addr_of[peer];
    /* A peer that reached us first: look its address up in the AV. */
    uint8_t vaddr[VMMC_ADDR_MAX], packed[VOFI_MAX_EP_ADDR];
    size_t vlen = sizeof vaddr, plen = sizeof packed;
    if (vmmc_peer_addr(ep->vep, peer, vaddr, &vlen) ||
        vofi_addr_pack(vaddr, vlen, packed, &plen))
        return FI_ADDR_NOTAVAIL;
    fi_addr_t a = vofi_av_find(ep->av, packed, plen);
    if (a != FI_ADDR_NOTAVAIL &&
        !grow((void **)&ep->addr_of, &ep->naddr_of, (size_t)peer + 1, sizeof(fi_addr_t), 0xff))
        ep->addr_of[peer] = a;
    return a;
}

/* ---- completions -------------------------------------------------------- */

void vofi_complete_tx(vofi_ep_t *ep, uint64_t flags, void *context, vofi_cntr_t *cntr)
{
    if ((flags & FI_COMPLETION) && ep->tx_cq) {
        vofi_cqe_t e = {.op_context = context, .flags = flags & ~(uint64_t)FI_COMPLETION,
                        .src = FI_ADDR_NOTAVAIL};
        vofi_cq_write(ep->tx_cq, &e);
    }
    if (cntr)
        vofi_cntr_inc(cntr);
}

void vofi_fail_tx(vofi_ep_t *ep, uint64_t flags, void *context, int err, int vst,
                  vofi_cntr_t *cntr)
{
    if (ep->tx_cq) {
        vofi_cqe_t e = {.op_context = context, .flags = flags & ~(uint64_t)FI_COMPLETION,
                        .err = err, .prov_errno = vst, .src = FI_ADDR_NOTAVAIL};
        vofi_cq_write_err(ep->tx_cq, &e);
    }
    if (cntr)
        vofi_cntr_err(cntr);
}

void vofi_complete_rx(vofi_ep_t *ep, const vofi_cqe_t *e, vofi_cntr_t *cntr)
{
    if ((e->flags & FI_COMPLETION) && ep->rx_cq) {
        vofi_cqe_t c = *e;
        c.flags &= ~(uint64_t)FI_COMPLETION;
        vofi_cq_write(ep->rx_cq, &c);
    }
    if (cntr)
        vofi_cntr_inc(cntr);
}

void vofi_fail_rx(vofi_ep_t *ep, const vofi_cqe_t *e, vofi_cntr_t *cntr)
{
    if (ep->rx_cq) {
        vofi_cqe_t c = *e;
        c.flags &= ~(uint64_t)FI_COMPLETION;
        vofi_cq_write_err(ep->rx_cq, &c);
    }
    if (cntr)
        vofi_cntr_err(cntr);
}

/* ---- progress ------------------------------------------------------------ */

/* One pass; @full: the core's progress too, whatever the pass count. */
static int ep_pass(vofi_ep_t *ep, int full)
{
    if (!ep->enabled)
        return 0;
    int n = 0;
    /* The core's own progress runs notification handlers (RMA writes with
     * data) and reads the udp link's socket: a system call. FM drives the
     * core itself when its rings are not mapped, and the udp link's thread
     * lands a rendezvous meanwhile, so a polling loop runs it every pass
     * only while RMA is in flight, one pass in 16 while a rendezvous is,
     * and one in 256 otherwise. It is also what empties the endpoint's
     * event fd (vmmc_event_fd), so a caller about to sleep on that fd runs
     * it every time: a signal already handled must not leave it readable.
     * It runs before the rings are read, so a signal it takes is for
     * something the reads below see. */
    unsigned every = vofi_rma_busy(ep) ? 1 : ep->rdv_rx.head ? 16 : 256;
    if (++ep->passes % every == 0 || full) {
        n = vmmc_progress(ep->vep);
        if (n < 0)
            n = 0;
    }
    n += vofi_proto_progress(ep);
    n += vofi_rma_progress(ep);
    return n;
}

int vofi_ep_progress_locked(vofi_ep_t *ep)
{
    return ep_pass(ep, 0);
}

int vofi_ep_progress(vofi_ep_t *ep)
{
    pthread_mutex_lock(&ep->lock);
    int n = ep_pass(ep, 0);
    pthread_mutex_unlock(&ep->lock);
    return n;
}

int vofi_ep_progress_wait(vofi_ep_t *ep)
{
    pthread_mutex_lock(&ep->lock);
    int n = ep_pass(ep, 1);
    pthread_mutex_unlock(&ep->lock);
    return n;
}

int vofi_ep_wait_fd(vofi_ep_t *ep)
{
    return vmmc_event_fd(ep->vep);
}

static void *progress_thread(void *arg)
{
    vofi_ep_t *ep = arg;
    while (!atomic_load(&ep->stop)) {
        if (vofi_ep_progress(ep) > 0)
            continue;
        vmmc_wait(ep->vep, 100);
    }
    return NULL;
}

/* ---- the endpoint object ------------------------------------------------- */

static int ep_enable(vofi_ep_t *ep)
{
    if (ep->enabled)
        return 0;
    if (!ep->av)
        return -FI_ENOAV;
    int r = vofi_proto_open(ep);
    if (r)
        return r;
    r = vofi_rma_open(ep);
    if (r) {
        vofi_proto_close(ep);
        return r;
    }
    ep->enabled = 1;
    if (ep->dom->data_progress == FI_PROGRESS_AUTO || vofi_set.progress_thread) {
        if (pthread_create(&ep->thread, NULL, progress_thread, ep) == 0)
            ep->thread_on = 1;
        else
            vofi_warn("cannot start the progress thread: progress is manual");
    }
    return 0;
}

static int ep_control(struct fid *fid, int command, void *arg)
{
    vofi_ep_t *ep = container_of(fid, vofi_ep_t, fid.fid);
    int r = 0;
    pthread_mutex_lock(&ep->lock);
    switch (command) {
    case FI_ENABLE:
        r = ep_enable(ep);
        break;
    case FI_GETOPSFLAG: {
        uint64_t *f = arg;
        if (!f)
            r = -FI_EINVAL;
        else if (*f & FI_TRANSMIT)
            *f = ep->tx_op_flags;
        else if (*f & FI_RECV)
            *f = ep->rx_op_flags;
        else
            r = -FI_EINVAL;
        break;
    }
    case FI_SETOPSFLAG: {
        uint64_t *f = arg;
        if (!f)
            r = -FI_EINVAL;
        else if (*f & FI_TRANSMIT)
            ep->tx_op_flags = *f & ~(uint64_t)FI_TRANSMIT;
        else if (*f & FI_RECV)
            ep->rx_op_flags = *f & ~(uint64_t)FI_RECV;
        else
            r = -FI_EINVAL;
        break;
    }
    default:
        r = -FI_ENOSYS;
    }
    pthread_mutex_unlock(&ep->lock);
    return r;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    vofi_ep_t *ep = container_of(fid, vofi_ep_t, fid.fid);
    int r = 0;
    pthread_mutex_lock(&ep->lock);
    if (ep->enabled && bfid->fclass != FI_CLASS_EQ) {
        pthread_mutex_unlock(&ep->lock);
        return -FI_EOPBADSTATE;
    }
    switch (bfid->fclass) {
    case FI_CLASS_AV: {
        vofi_av_t *av = container_of(bfid, vofi_av_t, fid.fid);
        if (ep->av) {
            r = -FI_EINVAL;
            break;
        }
        if (av->dom != ep->dom) {
            r = -FI_EINVAL;
            break;
        }
        ep->av = av;
        ep->av_gen = atomic_load(&av->gen);
        atomic_fetch_add(&av->ref, 1);
        break;
    }
    case FI_CLASS_CQ: {
        vofi_cq_t *cq = container_of(bfid, vofi_cq_t, fid.fid);
        if (flags & ~(uint64_t)(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) {
            r = -FI_EBADFLAGS;
            break;
        }
        if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq)) {
            r = -FI_EINVAL;
            break;
        }
        if (ep->nbinds == 8) {
            r = -FI_ENOSPC;
            break;
        }
        if ((r = vofi_cq_bind_ep(cq, ep)))
            break;
        ep->binds[ep->nbinds++] = bfid;
        if (flags & FI_TRANSMIT) {
            ep->tx_cq = cq;
            ep->tx_cq_flags = flags;
            atomic_fetch_add(&cq->ref, 1);
        }
        if (flags & FI_RECV) {
            ep->rx_cq = cq;
            ep->rx_cq_flags = flags;
            atomic_fetch_add(&cq->ref, 1);
        }
        break;
    }
    case FI_CLASS_CNTR: {
        vofi_cntr_t *c = container_of(bfid, vofi_cntr_t, fid.fid);
        struct {
            uint64_t flag;
            vofi_cntr_t **slot;
        } map[] = {{FI_SEND, &ep->cntr_send},   {FI_RECV, &ep->cntr_recv},
                   {FI_READ, &ep->cntr_read},   {FI_WRITE, &ep->cntr_write},
                   {FI_REMOTE_READ, &ep->cntr_rread}, {FI_REMOTE_WRITE, &ep->cntr_rwrite}};
        uint64_t known = 0;
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            known |= map[i].flag;
        if (!flags || (flags & ~known)) {
            r = -FI_EBADFLAGS;
            break;
        }
        if (ep->nbinds == 8) {
            r = -FI_ENOSPC;
            break;
        }
        if ((r = vofi_cntr_bind_ep(c, ep)))
            break;
        ep->binds[ep->nbinds++] = bfid;
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if ((flags & map[i].flag) && !*map[i].slot) {
                *map[i].slot = c;
                atomic_fetch_add(&c->ref, 1);
            }
        break;
    }
    case FI_CLASS_EQ:
        break; /* no connection or AV events on an RDM endpoint */
    default:
        r = -FI_EINVAL;
    }
    pthread_mutex_unlock(&ep->lock);
    return r;
}

static int ep_close(struct fid *fid)
{
    vofi_ep_t *ep = container_of(fid, vofi_ep_t, fid.fid);
    if (ep->thread_on) {
        atomic_store(&ep->stop, 1);
        vmmc_signal(ep->vep, 0);
        pthread_join(ep->thread, NULL);
    }
    pthread_mutex_lock(&ep->lock);
    vofi_info("endpoint closed: %llu eager into posted buffers, %llu rendezvous matched on "
              "arrival, %llu unexpected, %llu passes over the unexpected bound, %llu malformed or "
              "stale messages dropped",
              (unsigned long long)ep->counters[VOFI_C_EAGER],
              (unsigned long long)ep->counters[VOFI_C_RTS],
              (unsigned long long)ep->counters[VOFI_C_UNEXP],
              (unsigned long long)ep->counters[VOFI_C_OVER],
              (unsigned long long)ep->counters[VOFI_C_PROTOCOL]);
    if (ep->enabled) {
        vofi_rma_close(ep);
        vofi_proto_close(ep);
    }
    /* Each bind call is undone once; each slot held a reference. */
    for (int i = 0; i < ep->nbinds; i++) {
        if (ep->binds[i]->fclass == FI_CLASS_CQ)
            vofi_cq_unbind_ep(container_of(ep->binds[i], vofi_cq_t, fid.fid), ep);
        else
            vofi_cntr_unbind_ep(container_of(ep->binds[i], vofi_cntr_t, fid.fid), ep);
    }
    vofi_cq_t *cqs[2] = {ep->tx_cq, ep->rx_cq};
    for (int i = 0; i < 2; i++)
        if (cqs[i])
            atomic_fetch_sub(&cqs[i]->ref, 1);
    vofi_cntr_t *cs[6] = {ep->cntr_send, ep->cntr_recv, ep->cntr_read,
                          ep->cntr_write, ep->cntr_rread, ep->cntr_rwrite};
    for (int i = 0; i < 6; i++)
        if (cs[i])
            atomic_fetch_sub(&cs[i]->ref, 1);
    if (ep->av)
        atomic_fetch_sub(&ep->av->ref, 1);
    vofi_xfer_pool_free(ep);
    vmmc_ep_close(ep->vep);
    pthread_mutex_unlock(&ep->lock);
    pthread_mutex_destroy(&ep->lock);
    atomic_fetch_sub(&ep->dom->ref, 1);
    free(ep->peer_of);
    free(ep->addr_of);
    fi_freeinfo(ep->info);
    free(ep);
    return 0;
}

/* ---- fi_ops_ep, fi_ops_cm ------------------------------------------------ */

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
    vofi_ep_t *ep = container_of(fid, vofi_ep_t, fid.fid);
    if (level != FI_OPT_ENDPOINT)
        return -FI_ENOPROTOOPT;
    if (optname != FI_OPT_MIN_MULTI_RECV)
        return -FI_ENOPROTOOPT;
    if (!optval || !optlen || *optlen < sizeof(size_t))
        return -FI_ETOOSMALL;
    *(size_t *)optval = ep->min_multi_recv;
    *optlen = sizeof(size_t);
    return 0;
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
    vofi_ep_t *ep = container_of(fid, vofi_ep_t, fid.fid);
    if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
        return -FI_ENOPROTOOPT;
    if (!optval || optlen != sizeof(size_t))
        return -FI_EINVAL;
    pthread_mutex_lock(&ep->lock);
    ep->min_multi_recv = *(const size_t *)optval;
    pthread_mutex_unlock(&ep->lock);
    return 0;
}

static ssize_t ep_rx_size_left(struct fid_ep *fep)
{
    vofi_ep_t *ep = container_of(fep, vofi_ep_t, fid);
    return ep->enabled ? (ssize_t)(VOFI_RX_SIZE - ep->rx_posted) : -FI_EOPBADSTATE;
}

static ssize_t ep_tx_size_left(struct fid_ep *fep)
{
    vofi_ep_t *ep = container_of(fep, vofi_ep_t, fid);
    return ep->enabled ? (ssize_t)(VOFI_TX_SIZE - ep->tx_live) : -FI_EOPBADSTATE;
}

static struct fi_ops_ep ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = vofi_cancel,
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = (void *)no_ctx,
    .rx_ctx = (void *)no_ctx,
    .rx_size_left = ep_rx_size_left,
    .tx_size_left = ep_tx_size_left,
};

static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
    vofi_ep_t *ep = container_of(fid, vofi_ep_t, fid.fid);
    if (!addrlen)
        return -FI_EINVAL;
    size_t cap = *addrlen;
    *addrlen = ep->name_len;
    if (!addr || cap < ep->name_len)
        return -FI_ETOOSMALL;
    memcpy(addr, ep->name, ep->name_len);
    return 0;
}

static struct fi_ops_cm ep_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = no_setname,
    .getname = ep_getname,
    .getpeer = no_getpeer,
    .connect = no_connect,
    .listen = no_listen,
    .accept = no_accept,
    .reject = no_reject,
    .shutdown = no_shutdown,
    .join = no_join,
};

int vofi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **out,
                  void *context)
{
    vofi_domain_t *dom = container_of(domain, vofi_domain_t, fid);
    if (!info || !info->ep_attr || info->ep_attr->type != FI_EP_RDM || !out)
        return -FI_EINVAL;
    int r = vofi_check_info(info);
    if (r)
        return r;
    vofi_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep)
        return -FI_ENOMEM;
    ep->info = fi_dupinfo(info);
    if (!ep->info) {
        free(ep);
        return -FI_ENOMEM;
    }
    ep->dom = dom;
    ep->caps = info->caps ? info->caps : dom->info->caps;
    ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
    ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
    ep->min_multi_recv = 64;
    pthread_mutex_init(&ep->lock, NULL);
    int st = vmmc_ep_open(NULL, &ep->vep);
    if (st) {
        vofi_warn("vmmc_ep_open: %s", vmmc_last_error());
        r = vofi_err(st);
        goto fail;
    }
    if ((st = vmmc_listen(ep->vep, NULL, NULL))) {
        vofi_warn("vmmc_listen: %s", vmmc_last_error());
        r = vofi_err(st);
        goto fail_ep;
    }
    ep->vaddr_len = sizeof ep->vaddr;
    if ((st = vmmc_ep_addr(ep->vep, ep->vaddr, &ep->vaddr_len))) {
        r = vofi_err(st);
        goto fail_ep;
    }
    ep->name_len = sizeof ep->name;
    if ((r = vofi_addr_pack(ep->vaddr, ep->vaddr_len, ep->name, &ep->name_len)))
        goto fail_ep;
    ep->fid.fid.fclass = FI_CLASS_EP;
    ep->fid.fid.context = context;
    ep->fid.fid.ops = &ep_fi_ops;
    ep->fid.ops = &ep_ops;
    ep->fid.cm = &ep_cm_ops;
    ep->fid.msg = &vofi_msg_ops;
    ep->fid.tagged = &vofi_tagged_ops;
    ep->fid.rma = &vofi_rma_ops;
    ep->fid.atomic = &vofi_atomic_ops;
    atomic_fetch_add(&dom->ref, 1);
    *out = &ep->fid;
    return 0;
fail_ep:
    vmmc_ep_close(ep->vep);
fail:
    pthread_mutex_destroy(&ep->lock);
    fi_freeinfo(ep->info);
    free(ep);
    return r;
}
