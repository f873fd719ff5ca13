/* Matching, the MPI-FM way: a message's first packet runs the FM handler,
 * which looks for a posted receive here; found, the payload is received
 * straight into the user's buffer; not found, the message waits in the
 * unexpected queue (eager bytes copied, bounded by VMMC_OFI_UNEXPECTED; a
 * rendezvous only as its header) until a receive is posted.
 *
 * Queues are in arrival / posting order, so two messages from one sender
 * that both match a receive are matched in the order they were sent
 * (FM delivers a sender's messages in order), and two receives that both
 * match a message take it in the order they were posted. */
#include <stdlib.h>
#include <string.h>

#include "ofi/ofi.h"

struct node {
    struct node *next, *prev;
};

void vofi_queue_push(vofi_queue_t *q, void *e)
{
    struct node *n = e;
    n->next = NULL;
    n->prev = q->tail;
    if (q->tail)
        ((struct node *)q->tail)->next = n;
    else
        q->head = n;
    q->tail = n;
}

void vofi_queue_remove(vofi_queue_t *q, void *e)
{
    struct node *n = e;
    if (n->prev)
        n->prev->next = n->next;
    else
        q->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        q->tail = n->prev;
    n->next = n->prev = NULL;
}

size_t vofi_iov_len(const struct iovec *iov, size_t count)
{
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        n += iov[i].iov_len;
    return n;
}

void vofi_iov_copy_in(const struct iovec *iov, size_t count, size_t off, const void *src, size_t n)
{
    const char *s = src;
    for (size_t i = 0; i < count && n; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t k = iov[i].iov_len - off;
        if (k > n)
            k = n;
        memcpy((char *)iov[i].iov_base + off, s, k);
        s += k;
        n -= k;
        off = 0;
    }
}

static inline int tag_match(uint64_t want, uint64_t ignore, uint64_t tag)
{
    return ((want ^ tag) & ~ignore) == 0;
}

vofi_xfer_t *vofi_match_posted(vofi_ep_t *ep, int tagged, int peer, uint64_t tag)
{
    vofi_queue_t *q = tagged ? &ep->posted_tag : &ep->posted_msg;
    for (vofi_xfer_t *x = q->head; x; x = x->next) {
        if (x->peer >= 0 && x->peer != peer)
            continue;
        if (tagged && !tag_match(x->tag, x->ignore, tag))
            continue;
        if (!(x->flags & FI_MULTI_RECV)) {
            vofi_queue_remove(q, x);
            ep->rx_posted--;
        }
        return x;
    }
    return NULL;
}

static vofi_unexp_t *match_unexp(vofi_ep_t *ep, int tagged, int peer, uint64_t tag,
                                 uint64_t ignore, void *claimed_by)
{
    vofi_queue_t *q = tagged ? &ep->unexp_tag : &ep->unexp_msg;
    for (vofi_unexp_t *u = q->head; u; u = u->next) {
        if (claimed_by) {
            if (u->claim == claimed_by)
                return u;
            continue;
        }
        if (u->claim)
            continue; /* claimed by a peek: only its FI_CLAIM receive may take it */
        if (peer >= 0 && u->peer != peer)
            continue;
        if (tagged && !tag_match(tag, ignore, u->tag))
            continue;
        return u;
    }
    return NULL;
}

#define XFER_POOL_MAX 256

vofi_xfer_t *vofi_xfer_get(vofi_ep_t *ep)
{
    vofi_xfer_t *x = ep->xfer_pool;
    if (!x)
        return calloc(1, sizeof *x);
    ep->xfer_pool = x->next;
    ep->xfer_pooled--;
    memset(x, 0, sizeof *x);
    return x;
}

void vofi_xfer_put(vofi_ep_t *ep, vofi_xfer_t *x)
{
    if (ep->xfer_pooled >= XFER_POOL_MAX) {
        free(x);
        return;
    }
    x->next = ep->xfer_pool;
    ep->xfer_pool = x;
    ep->xfer_pooled++;
}

void vofi_xfer_pool_free(vofi_ep_t *ep)
{
    while (ep->xfer_pool) {
        vofi_xfer_t *x = ep->xfer_pool;
        ep->xfer_pool = x->next;
        free(x);
    }
    ep->xfer_pooled = 0;
}

static vofi_xfer_t *xfer_new(vofi_ep_t *ep, const struct iovec *iov, size_t count,
                             void *context, uint64_t flags)
{
    vofi_xfer_t *x = vofi_xfer_get(ep);
    if (!x)
        return NULL;
    if (count)
        memcpy(x->iov, iov, count * sizeof *iov);
    x->iov_count = count;
    x->len = vofi_iov_len(iov, count);
    x->context = context;
    x->flags = flags;
    return x;
}

/* FI_PEEK (with FI_CLAIM or FI_DISCARD): report the first matching
 * unexpected message without taking its data. */
static ssize_t peek(vofi_ep_t *ep, int peer, uint64_t tag, uint64_t ignore, void *context,
                    uint64_t flags)
{
    vofi_unexp_t *u = match_unexp(ep, 1, peer, tag, ignore, NULL);
    vofi_cqe_t e = {.op_context = context, .flags = FI_RECV | FI_TAGGED | FI_COMPLETION, .tag = tag};
    if (!u) {
        e.err = FI_ENOMSG;
        e.prov_errno = 0;
        vofi_fail_rx(ep, &e, NULL);
        return 0;
    }
    e.len = u->len;
    e.tag = u->tag;
    e.data = u->data;
    if (u->flags & VOFI_F_DATA)
        e.flags |= FI_REMOTE_CQ_DATA;
    e.src = (ep->caps & FI_SOURCE) ? vofi_ep_addr_of(ep, u->peer) : FI_ADDR_NOTAVAIL;
    if (flags & FI_DISCARD) {
        vofi_xfer_t *x = calloc(1, sizeof *x);
        if (!x)
            return -FI_ENOMEM;
        x->flags = FI_RECV | FI_TAGGED | FI_DISCARD;
        x->context = context;
        vofi_queue_remove(&ep->unexp_tag, u);
        vofi_proto_take(ep, x, u); /* frees u and x; tells a rendezvous sender */
    } else if (flags & FI_CLAIM) {
        u->claim = context;
    }
    vofi_complete_rx(ep, &e, NULL);
    return 0;
}

ssize_t vofi_post_recv(vofi_ep_t *ep, const struct iovec *iov, size_t count, fi_addr_t src,
                       uint64_t tag, uint64_t ignore, void *context, uint64_t flags)
{
    int tagged = (flags & FI_TAGGED) != 0;
    if (count > VOFI_IOV_LIMIT)
        return -FI_EINVAL;
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if ((flags & FI_MULTI_RECV) && (tagged || count != 1))
        return -FI_EINVAL; /* multi-receive buffers are for fi_recv, one piece */
    int peer = -1;
    if (src != FI_ADDR_UNSPEC && (ep->caps & FI_DIRECTED_RECV)) {
        peer = vofi_ep_peer(ep, src);
        if (peer < 0)
            return peer;
    }
    if (flags & FI_PEEK) {
        if (!tagged)
            return -FI_EINVAL;
        return peek(ep, peer, tag, ignore, context, flags);
    }
    if (ep->rx_posted >= VOFI_RX_SIZE)
        return -FI_EAGAIN;

    vofi_unexp_t *u = NULL;
    if (flags & FI_CLAIM) {
        if (!tagged)
            return -FI_EINVAL;
        u = match_unexp(ep, 1, -1, 0, 0, context);
        if (!u)
            return -FI_EINVAL; /* nothing was claimed with this context */
    } else if (!(flags & FI_MULTI_RECV)) {
        u = match_unexp(ep, tagged, peer, tag, ignore, NULL);
    }

    vofi_xfer_t *x = xfer_new(ep, iov, count, context, flags | FI_RECV | (tagged ? FI_TAGGED : FI_MSG));
    if (!x)
        return -FI_ENOMEM;
    x->tag = tag;
    x->ignore = ignore;
    x->peer = peer;
    x->addr = src;
    if (u) {
        vofi_queue_remove(tagged ? &ep->unexp_tag : &ep->unexp_msg, u);
        vofi_proto_take(ep, x, u);
        return 0;
    }
    vofi_queue_push(tagged ? &ep->posted_tag : &ep->posted_msg, x);
    ep->rx_posted++;
    if (flags & FI_MULTI_RECV) {
        /* Messages that arrived before the buffer: drain them into it. */
        while ((u = match_unexp(ep, 0, peer, 0, 0, NULL))) {
            vofi_queue_remove(&ep->unexp_msg, u);
            if (vofi_proto_take(ep, x, u))
                break; /* released by that message */
        }
    }
    return 0;
}

static vofi_xfer_t *find_ctx(vofi_queue_t *q, void *context)
{
    for (vofi_xfer_t *x = q->head; x; x = x->next)
        if (x->context == context)
            return x;
    return NULL;
}

ssize_t vofi_cancel(fid_t fid, void *context)
{
    vofi_ep_t *ep = container_of(fid, vofi_ep_t, fid.fid);
    pthread_mutex_lock(&ep->lock);
    vofi_queue_t *qs[2] = {&ep->posted_tag, &ep->posted_msg};
    for (int i = 0; i < 2; i++) {
        vofi_xfer_t *x = find_ctx(qs[i], context);
        if (!x)
            continue;
        vofi_queue_remove(qs[i], x);
        ep->rx_posted--;
        vofi_cqe_t e = {.op_context = context, .flags = x->flags & (FI_RECV | FI_TAGGED | FI_MSG),
                        .buf = x->iov_count ? x->iov[0].iov_base : NULL, .tag = x->tag,
                        .err = FI_ECANCELED, .src = FI_ADDR_NOTAVAIL};
        if (x->flags & FI_MULTI_RECV)
            e.flags |= FI_MULTI_RECV;
        vofi_fail_rx(ep, &e, ep->cntr_recv);
        free(x);
        break;
    }
    pthread_mutex_unlock(&ep->lock);
    return 0;
}
