/* fi_ops_tagged and fi_ops_msg: argument checks, the completion rule, then
 * the matching (ofi_match.c) and the wire (ofi_proto.c). Tagged and
 * untagged messages travel alike and never match each other. */
#include <string.h>

#include "ofi/ofi.h"

/* FI_COMPLETION in the flags of a posted operation means "write a CQ
 * entry": always, unless the CQ was bound with FI_SELECTIVE_COMPLETION and
 * the operation did not ask for one; never for FI_INJECT. */
static uint64_t want_cq(uint64_t flags, uint64_t bind_flags)
{
    if ((flags & FI_INJECT) ||
        ((bind_flags & FI_SELECTIVE_COMPLETION) && !(flags & FI_COMPLETION)))
        return flags & ~(uint64_t)FI_COMPLETION;
    return flags | FI_COMPLETION;
}

ssize_t vofi_send_common(struct fid_ep *fep, const struct iovec *iov, size_t count,
                         fi_addr_t dest, uint64_t tag, uint64_t data, void *context,
                         uint64_t flags)
{
    vofi_ep_t *ep = container_of(fep, vofi_ep_t, fid);
    if (count > VOFI_IOV_LIMIT || (count && !iov))
        return -FI_EINVAL;
    size_t len = vofi_iov_len(iov, count);
    if (len > VOFI_MAX_MSG || ((flags & FI_INJECT) && len > vofi_set.inject))
        return -FI_EMSGSIZE;
    pthread_mutex_lock(&ep->lock);
    ssize_t r;
    if (!ep->enabled) {
        r = -FI_EOPBADSTATE;
        goto out;
    }
    int peer = vofi_ep_peer(ep, dest);
    if (peer < 0) {
        r = peer;
        goto out;
    }
    flags = want_cq(flags, ep->tx_cq_flags);
    r = vofi_proto_send(ep, iov, count, peer, tag, data, flags, context);
    if (r == -FI_EAGAIN) {
        /* Credits come back with progress: try once more before saying so. */
        vofi_ep_progress_locked(ep);
        r = vofi_proto_send(ep, iov, count, peer, tag, data, flags, context);
    }
out:
    pthread_mutex_unlock(&ep->lock);
    return r;
}

ssize_t vofi_recv_common(struct fid_ep *fep, const struct iovec *iov, size_t count,
                         fi_addr_t src, uint64_t tag, uint64_t ignore, void *context,
                         uint64_t flags)
{
    vofi_ep_t *ep = container_of(fep, vofi_ep_t, fid);
    if (count > VOFI_IOV_LIMIT || (count && !iov))
        return -FI_EINVAL;
    pthread_mutex_lock(&ep->lock);
    flags = want_cq(flags, ep->rx_cq_flags);
    ssize_t r = vofi_post_recv(ep, iov, count, src, tag, ignore, context, flags);
    pthread_mutex_unlock(&ep->lock);
    return r;
}

static inline struct iovec one(void *buf, size_t len)
{
    return (struct iovec){.iov_base = buf, .iov_len = len};
}

static inline uint64_t txf(struct fid_ep *fep)
{
    return container_of(fep, vofi_ep_t, fid)->tx_op_flags;
}

static inline uint64_t rxf(struct fid_ep *fep)
{
    return container_of(fep, vofi_ep_t, fid)->rx_op_flags;
}

/* ---- tagged --------------------------------------------------------------- */

static ssize_t t_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                      uint64_t tag, uint64_t ignore, void *context)
{
    struct iovec v = one(buf, len);
    return vofi_recv_common(ep, &v, 1, src, tag, ignore, context, rxf(ep) | FI_TAGGED);
}

static ssize_t t_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
    return vofi_recv_common(ep, iov, count, src, tag, ignore, context, rxf(ep) | FI_TAGGED);
}

static ssize_t t_recvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
    if (!msg)
        return -FI_EINVAL;
    return vofi_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->ignore,
                            msg->context, flags | FI_TAGGED);
}

static ssize_t t_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                      fi_addr_t dest, uint64_t tag, void *context)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, tag, 0, context, txf(ep) | FI_TAGGED);
}

static ssize_t t_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t dest, uint64_t tag, void *context)
{
    return vofi_send_common(ep, iov, count, dest, tag, 0, context, txf(ep) | FI_TAGGED);
}

static ssize_t t_sendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
    if (!msg)
        return -FI_EINVAL;
    return vofi_send_common(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->tag, msg->data,
                            msg->context, flags | FI_TAGGED);
}

static ssize_t t_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
                        uint64_t tag)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, tag, 0, NULL, FI_TAGGED | FI_INJECT);
}

static ssize_t t_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                          uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, tag, data, context,
                            txf(ep) | FI_TAGGED | FI_REMOTE_CQ_DATA);
}

static ssize_t t_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                            fi_addr_t dest, uint64_t tag)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, tag, data, NULL,
                            FI_TAGGED | FI_INJECT | FI_REMOTE_CQ_DATA);
}

struct fi_ops_tagged vofi_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = t_recv,
    .recvv = t_recvv,
    .recvmsg = t_recvmsg,
    .send = t_send,
    .sendv = t_sendv,
    .sendmsg = t_sendmsg,
    .inject = t_inject,
    .senddata = t_senddata,
    .injectdata = t_injectdata,
};
