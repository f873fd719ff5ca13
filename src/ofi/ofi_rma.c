/* fi_ops_rma: reads and writes into peers' registered regions.
 *
 * A write of one piece is posted to the endpoint's vmmc completion queue
 * (vmmc_send_cq: the copy engine carries large ones while the caller goes
 * on); its fi completion waits until the peer confirmed delivery (a fence
 * per peer and progress batch; nothing to wait for on shm). Several pieces go
 * as one gather send (vmmc_sendv, synchronous), and FI_INJECT,
 * FI_DELIVERY_COMPLETE and FI_COMMIT_COMPLETE writes are synchronous too, so
 * the source is free when the call returns. A read posts one vmmc_fetch_cq
 * per piece. Writes with data notify the target (VMMC_SEND_NOTIFY with the
 * data as immediate), whose progress makes a receive completion of it.
 */
#include <string.h>

#include "ofi/ofi_rma_priv.h"

#define RMA_FLAGS                                                                         \
    (FI_COMPLETION | FI_INJECT | FI_FENCE | FI_REMOTE_CQ_DATA | FI_TRANSMIT_COMPLETE |     \
     FI_DELIVERY_COMPLETE | FI_COMMIT_COMPLETE | FI_INJECT_COMPLETE | FI_MORE)

static vofi_ep_t *ep_of(struct fid_ep *fep)
{
    return container_of(fep, vofi_ep_t, fid);
}

static int iov_total(const struct iovec *iov, size_t count, size_t *len)
{
    if (count > VOFI_IOV_LIMIT || (count && !iov)) {
        vofi_warn("RMA: %zu pieces (at most %d)", count, VOFI_IOV_LIMIT);
        return -FI_EINVAL;
    }
    size_t t = 0;
    for (size_t i = 0; i < count; i++) {
        if (!iov[i].iov_base && iov[i].iov_len) {
            vofi_warn("RMA: piece %zu is NULL with %zu bytes", i, iov[i].iov_len);
            return -FI_EINVAL;
        }
        if (t + iov[i].iov_len < t)
            return -FI_EINVAL;
        t += iov[i].iov_len;
    }
    *len = t;
    return 0;
}

/* A synchronous write (all pieces as one send), then, unless it is a bare
 * inject, the peer's confirmation that it landed. A vmmc status. */
static int write_now(vofi_ep_t *ep, vmmc_proxy_t *px, struct vofi_rproxy *rp, int peer, size_t off,
                     const struct iovec *iov, size_t count, size_t len, unsigned vf, uint64_t data,
                     int confirm)
{
    int vst;
    if (count <= 1) {
        vst = vmmc_send_imm(px, off, count ? iov[0].iov_base : NULL, len, vf, data);
    } else {
        vmmc_iov_t v[VOFI_IOV_LIMIT];
        for (size_t i = 0; i < count; i++) {
            v[i].base = iov[i].iov_base;
            v[i].len = iov[i].iov_len;
        }
        vst = vmmc_sendv(px, off, v, (int)count, vf, data);
    }
    if (vst == VMMC_OK && confirm)
        vst = vmmc_fence(ep->vep, peer);
    if (vst == VMMC_ERR_STALE)
        rp->stale = 1;
    return vst;
}

/* Every write. @p bare: fi_inject_write/fi_inject_writedata (no completion,
 * errors returned). */
static ssize_t rma_write(vofi_ep_t *ep, const struct iovec *iov, size_t count, fi_addr_t dest,
                         uint64_t addr, uint64_t key, uint64_t data, void *context, uint64_t flags,
                         int bare)
{
    size_t len;
    int rc = iov_total(iov, count, &len);
    if (rc)
        return rc;
    if (flags & ~RMA_FLAGS) {
        vofi_warn("fi_write: unsupported flags 0x%llx", (unsigned long long)(flags & ~RMA_FLAGS));
        return -FI_EBADFLAGS;
    }
    if ((flags & FI_INJECT) && len > vofi_set.inject) {
        vofi_warn("fi_inject_write: %zu bytes (inject size %llu)", len,
                  (unsigned long long)vofi_set.inject);
        return -FI_EINVAL;
    }
    pthread_mutex_lock(&ep->lock);
    uint64_t cflags = bare ? 0 : vofi_rma_cflags(ep, FI_RMA | FI_WRITE, flags);
    vofi_cntr_t *cntr = ep->cntr_write;
    int peer, late;
    struct vofi_rproxy *rp;
    size_t off;
    rc = vofi_rma_resolve(ep, dest, key, addr, len, VOFI_NEED_WRITE, &peer, &rp, &off, &late);
    if (rc) {
        if (late && !bare) {
            vofi_rma_fail_now(ep, cflags, context, cntr, -rc, late);
            rc = 0;
        }
        goto out;
    }
    /* A plain write to a target that counts them goes through its events
     * export, notified; a write with data through the region's own. */
    vmmc_proxy_t *px = rp->px;
    unsigned vf = (flags & FI_FENCE) ? VMMC_SEND_FENCE : 0;
    if (flags & FI_REMOTE_CQ_DATA) {
        vf |= VMMC_SEND_NOTIFY;
    } else if (rp->pxe) {
        px = rp->pxe;
        vf |= VMMC_SEND_NOTIFY;
        data = 0;
    }
    if ((flags & (FI_INJECT | FI_DELIVERY_COMPLETE | FI_COMMIT_COMPLETE)) || count > 1) {
        int vst = write_now(ep, px, rp, peer, off, iov, count, len, vf, data, !bare);
        if (bare) {
            if (vst != VMMC_OK)
                rc = -vofi_rma_err(vst);
            else if (cntr)
                vofi_cntr_inc(cntr);
        } else if (vst != VMMC_OK) {
            vofi_rma_fail_now(ep, cflags, context, cntr, vofi_rma_err(vst), vst);
        } else {
            vofi_complete_tx(ep, cflags, context, cntr);
        }
        goto out;
    }
    vofi_rop_t *r = vofi_rop_get(ep, 1);
    if (!r) {
        rc = -FI_EAGAIN;
        goto out;
    }
    r->rp = rp;
    r->fence = 1;
    r->peer = peer;
    r->context = context;
    r->flags = cflags;
    r->cntr = cntr;
    int vst = vmmc_send_cq(px, off, count ? iov[0].iov_base : NULL, len, vf, data, ep->vcq, r);
    if (vst == VMMC_ERR_AGAIN) {
        vofi_rop_cancel(ep, r);
        rc = -FI_EAGAIN;
    } else if (vst != VMMC_OK) {
        vofi_rop_abort(ep, r, r, 1, vst);
    }
out:
    pthread_mutex_unlock(&ep->lock);
    return rc;
}

static ssize_t rma_read(vofi_ep_t *ep, const struct iovec *iov, size_t count, fi_addr_t src,
                        uint64_t addr, uint64_t key, void *context, uint64_t flags)
{
    size_t len;
    int rc = iov_total(iov, count, &len);
    if (rc)
        return rc;
    if (flags & ~RMA_FLAGS) {
        vofi_warn("fi_read: unsupported flags 0x%llx", (unsigned long long)(flags & ~RMA_FLAGS));
        return -FI_EBADFLAGS;
    }
    if (flags & FI_INJECT) {
        vofi_warn("fi_readmsg: FI_INJECT does not apply to reads");
        return -FI_EINVAL;
    }
    pthread_mutex_lock(&ep->lock);
    uint64_t cflags = vofi_rma_cflags(ep, FI_RMA | FI_READ, flags);
    vofi_cntr_t *cntr = ep->cntr_read;
    int peer, late;
    struct vofi_rproxy *rp;
    size_t off;
    rc = vofi_rma_resolve(ep, src, key, addr, len, VOFI_NEED_READ, &peer, &rp, &off, &late);
    if (rc) {
        if (late) {
            vofi_rma_fail_now(ep, cflags, context, cntr, -rc, late);
            rc = 0;
        }
        goto out;
    }
    size_t n = count ? count : 1;
    vofi_rop_t *p = vofi_rop_get(ep, n);
    if (!p) {
        rc = -FI_EAGAIN;
        goto out;
    }
    p->peer = peer;
    p->context = context;
    p->flags = cflags;
    p->cntr = cntr;
    if (flags & FI_FENCE) {
        int vst = vmmc_fence(ep->vep, -1);
        if (vst != VMMC_OK) {
            vofi_rop_abort(ep, p, p, n, vst);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        vofi_rop_t *e = i ? vofi_rop_next(ep, p) : p;
        e->rp = rp;
        void *dst = count ? iov[i].iov_base : NULL;
        size_t l = count ? iov[i].iov_len : 0;
        int vst = vmmc_fetch_cq(rp->px, off, dst, l, ep->vcq, e);
        if (vst == VMMC_ERR_AGAIN && i == 0) {
            vofi_rop_cancel(ep, p);
            rc = -FI_EAGAIN;
            break;
        }
        if (vst != VMMC_OK) {
            vofi_rop_abort(ep, p, e, n - i, vst);
            break;
        }
        off += l;
    }
out:
    pthread_mutex_unlock(&ep->lock);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* the ops table */

static ssize_t vofi_read(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src,
                         uint64_t addr, uint64_t key, void *context)
{
    (void)desc;
    vofi_ep_t *ep = ep_of(fep);
    struct iovec v = {buf, len};
    return rma_read(ep, &v, 1, src, addr, key, context,
                    ep->tx_op_flags & ~(uint64_t)(FI_INJECT | FI_REMOTE_CQ_DATA));
}

static ssize_t vofi_readv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count,
                          fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
    (void)desc;
    vofi_ep_t *ep = ep_of(fep);
    return rma_read(ep, iov, count, src, addr, key, context,
                    ep->tx_op_flags & ~(uint64_t)(FI_INJECT | FI_REMOTE_CQ_DATA));
}

/* The one remote piece of a message, matching the local pieces' total. */
static int msg_remote(const struct fi_msg_rma *msg, const char *what)
{
    if (!msg || msg->rma_iov_count != VOFI_RMA_IOV_LIMIT || !msg->rma_iov) {
        vofi_warn("%s: one remote piece per message (rma_iov_limit %d)", what,
                  VOFI_RMA_IOV_LIMIT);
        return -FI_EINVAL;
    }
    size_t len;
    int rc = iov_total(msg->msg_iov, msg->iov_count, &len);
    if (rc)
        return rc;
    if (len != msg->rma_iov[0].len) {
        vofi_warn("%s: %zu local bytes for a remote piece of %zu", what, len,
                  msg->rma_iov[0].len);
        return -FI_EINVAL;
    }
    return 0;
}

static ssize_t vofi_readmsg(struct fid_ep *fep, const struct fi_msg_rma *msg, uint64_t flags)
{
    int rc = msg_remote(msg, "fi_readmsg");
    if (rc)
        return rc;
    return rma_read(ep_of(fep), msg->msg_iov, msg->iov_count, msg->addr, msg->rma_iov[0].addr,
                    msg->rma_iov[0].key, msg->context, flags);
}

static ssize_t vofi_write(struct fid_ep *fep, const void *buf, size_t len, void *desc,
                          fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
    (void)desc;
    vofi_ep_t *ep = ep_of(fep);
    struct iovec v = {(void *)buf, len};
    return rma_write(ep, &v, 1, dest, addr, key, 0, context,
                     ep->tx_op_flags & ~(uint64_t)(FI_REMOTE_CQ_DATA | FI_INJECT), 0);
}

static ssize_t vofi_writev(struct fid_ep *fep, const struct iovec *iov, void **desc,
                           size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                           void *context)
{
    (void)desc;
    vofi_ep_t *ep = ep_of(fep);
    return rma_write(ep, iov, count, dest, addr, key, 0, context,
                     ep->tx_op_flags & ~(uint64_t)(FI_REMOTE_CQ_DATA | FI_INJECT), 0);
}

static ssize_t vofi_writemsg(struct fid_ep *fep, const struct fi_msg_rma *msg, uint64_t flags)
{
    int rc = msg_remote(msg, "fi_writemsg");
    if (rc)
        return rc;
    return rma_write(ep_of(fep), msg->msg_iov, msg->iov_count, msg->addr, msg->rma_iov[0].addr,
                     msg->rma_iov[0].key, msg->data, msg->context, flags, 0);
}

static ssize_t vofi_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest,
                           uint64_t addr, uint64_t key)
{
    struct iovec v = {(void *)buf, len};
    return rma_write(ep_of(fep), &v, 1, dest, addr, key, 0, NULL, FI_INJECT, 1);
}

static ssize_t vofi_writedata(struct fid_ep *fep, const void *buf, size_t len, void *desc,
                              uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                              void *context)
{
    (void)desc;
    vofi_ep_t *ep = ep_of(fep);
    struct iovec v = {(void *)buf, len};
    return rma_write(ep, &v, 1, dest, addr, key, data, context,
                     (ep->tx_op_flags & ~(uint64_t)FI_INJECT) | FI_REMOTE_CQ_DATA, 0);
}

static ssize_t vofi_injectdata(struct fid_ep *fep, const void *buf, size_t len, uint64_t data,
                               fi_addr_t dest, uint64_t addr, uint64_t key)
{
    struct iovec v = {(void *)buf, len};
    return rma_write(ep_of(fep), &v, 1, dest, addr, key, data, NULL,
                     FI_INJECT | FI_REMOTE_CQ_DATA, 1);
}

struct fi_ops_rma vofi_rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = vofi_read,
    .readv = vofi_readv,
    .readmsg = vofi_readmsg,
    .write = vofi_write,
    .writev = vofi_writev,
    .writemsg = vofi_writemsg,
    .inject = vofi_inject,
    .writedata = vofi_writedata,
    .injectdata = vofi_injectdata,
};
