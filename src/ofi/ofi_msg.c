/* fi_ops_msg: untagged messages, including multi-receive buffers
 * (FI_MULTI_RECV): see ofi_tagged.c for the common path. */
#include "ofi/ofi.h"

static inline struct iovec one(void *buf, size_t len)
{
    return (struct iovec){.iov_base = buf, .iov_len = len};
}

static inline vofi_ep_t *EP(struct fid_ep *fep)
{
    return container_of(fep, vofi_ep_t, fid);
}

static ssize_t m_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
                      void *context)
{
    struct iovec v = one(buf, len);
    return vofi_recv_common(ep, &v, 1, src, 0, 0, context, EP(ep)->rx_op_flags | FI_MSG);
}

static ssize_t m_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t src, void *context)
{
    return vofi_recv_common(ep, iov, count, src, 0, 0, context, EP(ep)->rx_op_flags | FI_MSG);
}

static ssize_t m_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    if (!msg)
        return -FI_EINVAL;
    return vofi_recv_common(ep, msg->msg_iov, msg->iov_count, msg->addr, 0, 0, msg->context,
                            (flags | FI_MSG) & ~(uint64_t)(FI_PEEK | FI_CLAIM | FI_DISCARD));
}

static ssize_t m_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                      fi_addr_t dest, void *context)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, 0, 0, context, EP(ep)->tx_op_flags | FI_MSG);
}

static ssize_t m_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t dest, void *context)
{
    return vofi_send_common(ep, iov, count, dest, 0, 0, context, EP(ep)->tx_op_flags | FI_MSG);
}

static ssize_t m_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    if (!msg)
        return -FI_EINVAL;
    return vofi_send_common(ep, msg->msg_iov, msg->iov_count, msg->addr, 0, msg->data,
                            msg->context, flags | FI_MSG);
}

static ssize_t m_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, 0, 0, NULL, FI_MSG | FI_INJECT);
}

static ssize_t m_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                          uint64_t data, fi_addr_t dest, void *context)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, 0, data, context,
                            EP(ep)->tx_op_flags | FI_MSG | FI_REMOTE_CQ_DATA);
}

static ssize_t m_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
                            fi_addr_t dest)
{
    struct iovec v = one((void *)buf, len);
    return vofi_send_common(ep, &v, 1, dest, 0, data, NULL,
                            FI_MSG | FI_INJECT | FI_REMOTE_CQ_DATA);
}

struct fi_ops_msg vofi_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = m_recv,
    .recvv = m_recvv,
    .recvmsg = m_recvmsg,
    .send = m_send,
    .sendv = m_sendv,
    .sendmsg = m_sendmsg,
    .inject = m_inject,
    .senddata = m_senddata,
    .injectdata = m_injectdata,
};
