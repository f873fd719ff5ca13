/* The fabric transport's data path, as messages on the reliable datagram
 * endpoint (in order per peer: FI_ORDER_SAS):
 *   a put is F_WRITE messages of up to FAB_CHUNK bytes each (first, last,
 *   notify), applied by the receiver's progress thread through the core,
 *   which queues the notification after the last one is in place;
 *   a get is F_GET_REQ, answered by F_GET_REP pieces or F_GET_ERR;
 *   a fence or a barrier's flush is F_FLUSH, answered by F_FLUSH_ACK once
 *   everything sent before it was applied;
 *   atomics go to the target as the core's control message (the ops
 *   table's atomic is NULL), behind the writes sent before them.
 * A put returns once the provider holds a copy of the data (the source is
 * reusable); to this very process it returns once the data landed. */
#include "transport/fabric/fab_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

int vmmc_fab__ctl_send(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, const vmmc_ctl_msg_t *msg,
                       const int *fds, int nfds)
{
    (void)fds;
    if (nfds)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fabric cannot pass file descriptors");
    fab_ep_t *f = F(ep);
    if (!f)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric transport not open");
    fab_hdr_t h = {.kind = F_CTL};
    return vmmc_fab__send(f, peer->rank, &h, msg, sizeof *msg, 0);
}

int vmmc_fab__proxy_setup(vmmc_tl_proxy_t *px, const vmmc_ctl_msg_t *m, const int *fds, int nfds)
{
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    if (m->kind != PX_KIND_REMOTE)
        return vmmc_error(VMMC_ERR_PROTOCOL, "fabric: import reply of kind %u", m->kind);
    px->kind = PX_KIND_REMOTE;
    px->base = NULL;
    px->put = vmmc_fab__put;
    px->get = vmmc_fab__get;
    fab_ep_t *f = F(px->ep);
    /* Direct access granted (fab_mr.c), and our side has the RMA path
     * too: puts and gets go to the region itself (fab_rdma.c). Never for a
     * redirectable export: the receiver decides where each write goes. */
    if ((m->rkey_ok & 1) && f && f->rma && !(m->flags & VMMC_EXPORT_REDIRECTABLE)) {
        fab_rpx_t *r = malloc(sizeof *r);
        if (!r)
            return vmmc_error(VMMC_ERR_NOMEM, "fabric: out of memory for an import");
        r->key = m->rkey;
        r->base = f->virt_addr ? m->addr : 0;
        /* notifications as remote CQ data where both ends allow it */
        r->nslot = f->cq_data ? m->nslot : 0;
        fab_peer_t *p = r->nslot & FAB_NSLOT_VALID ? fab_peer_of(f, px->rank) : NULL;
        if (p) {
            /* A slot given now is live (a retired one is never given
             * again): if its number was retired for an earlier import, that
             * retirement is over. Grants and F_NSRETIRE come in order. */
            unsigned slot = r->nslot & (FAB_CQD_SLOTS - 1u);
            pthread_mutex_lock(&p->seqlock);
            p->ns_retired[slot / 64] &= ~(1ull << (slot % 64));
            pthread_mutex_unlock(&p->seqlock);
        }
        r->readable = (m->flags & VMMC_EXPORT_READ) != 0;
        px->tl_priv = r;
        px->put = vmmc_fab__rma_put;
        px->get = vmmc_fab__rma_get;
    }
    return VMMC_OK;
}

void vmmc_fab__proxy_release(vmmc_tl_proxy_t *px)
{
    free(px->tl_priv);
    px->tl_priv = NULL;
}

static int lock_peer(fab_peer_t *p, const vmmc_tl_proxy_t *px, int flags)
{
    if (!(flags & VMMC_SEND_NONBLOCK)) {
        pthread_mutex_lock(&p->txlock);
        return VMMC_OK;
    }
    if (pthread_mutex_trylock(&p->txlock) == 0)
        return VMMC_OK;
    return vmmc_error(VMMC_ERR_AGAIN, "fabric: another thread is writing to rank %d", px->rank);
}

/* One write of @total bytes gathered from @iov at @off: its pieces, in
 * order, with nobody else's between them (the receiver takes the write's
 * extent from its first and last piece). */
static int put_iov(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt,
                   size_t total, int flags, uint64_t imm)
{
    fab_ep_t *f = F(px->ep);
    int st = VMMC_OK;
    fab_peer_t *p = vmmc_fab__peer(f, px->rank, &st);
    if (!p)
        return st;
    fab_hdr_t h = {.kind = F_WRITE, .export_id = px->export_id, .gen = px->gen,
                   .token = {px->token[0], px->token[1]}, .imm = imm};
    if ((st = lock_peer(p, px, flags)) != VMMC_OK)
        return st;
    /* Pieces from the caller's buffer (VMMC_FABRIC_ZCOPY): at most FAB_ZC_MAX
     * under way, all completed before we return (the source is reusable).
     * Not for a non-blocking put (its completion may wait for the receiver
     * to take notifications), nor from our progress thread, which must not
     * wait for a peer. */
    fab_tx_t *zc[FAB_ZC_MAX];
    int nzc = 0, zc0 = 0;
    int zc_ok = vmmc_fab_cfg_zcopy && total >= vmmc_fab_cfg_zcopy && f->iov_limit >= 2 &&
                !(flags & VMMC_SEND_NONBLOCK) && !vmmc_fab__on_progress_thread(f);
    if (zc_ok)
        vmmc_fab__waiting(f, 1);
    int vi = 0;
    size_t vo = 0;
    size_t pos = 0;
    do {
        size_t n = total - pos < FAB_CHUNK ? total - pos : FAB_CHUNK;
        /* the pieces of this message, out of the caller's vector */
        struct iovec pv[VMMC_IOV_MAX + 1];
        int pn = 0;
        for (size_t need = n; need;) {
            size_t take = iov[vi].iov_len - vo < need ? iov[vi].iov_len - vo : need;
            if (take) {
                pv[pn].iov_base = (char *)iov[vi].iov_base + vo;
                pv[pn++].iov_len = take;
            }
            vo += take;
            need -= take;
            if (vo == iov[vi].iov_len) {
                vi++;
                vo = 0;
            }
        }
        h.flags = (uint8_t)((pos == 0 ? F_FIRST : 0) | (pos + n == total ? F_LAST : 0) |
                            (flags & VMMC_SEND_NOTIFY ? F_NOTIFY : 0) |
                            (flags & VMMC_SEND_HEAD_LAST ? F_HEADLAST : 0));
        h.off = off + pos;
        /* only the first piece may give up: a write is whole or absent */
        int nb = pos == 0 && (flags & VMMC_SEND_NONBLOCK);
        if (zc_ok && pn == 1 && n >= vmmc_fab_cfg_zcopy) {
            if (nzc - zc0 == FAB_ZC_MAX) { /* the oldest first */
                int w = vmmc_fab__wait_tx(f, zc[zc0++ % FAB_ZC_MAX], px->rank, NULL, NULL, 0);
                st = st != VMMC_OK ? st : w;
            }
            fab_tx_t *tx = NULL;
            if (st == VMMC_OK &&
                (st = vmmc_fab__send_zc(f, px->rank, &h, pv[0].iov_base, n, nb, &tx)) ==
                    VMMC_OK)
                zc[nzc++ % FAB_ZC_MAX] = tx;
        } else if (st == VMMC_OK) {
            st = vmmc_fab__sendv(f, px->rank, &h, pv, pn, n, nb);
        }
        pos += n;
    } while (st == VMMC_OK && pos < total);
    while (zc0 < nzc) {
        int w = vmmc_fab__wait_tx(f, zc[zc0++ % FAB_ZC_MAX], px->rank, NULL, NULL, 0);
        st = st != VMMC_OK ? st : w;
    }
    if (zc_ok)
        vmmc_fab__waiting(f, 0);
    pthread_mutex_unlock(&p->txlock);
    if (total && px->tl_priv)
        atomic_store_explicit(&p->msg_writes, 1, memory_order_release);
    if (st == VMMC_OK && (flags & VMMC_SEND_NOTIFY))
        VMMC_COUNT(px->ep, CNT_NOTIFY_SENT, 1);
    /* To ourselves: return once it landed, as shm and udp do. */
    if (st == VMMC_OK && px->rank == VMMC_TL_EP(px->ep)->rank && VMMC_TL_EP(px->ep)->in_job) {
        vmmc_tl_peer_t *tp = vmmc_tl_peer_at(px->ep, px->rank);
        if (tp)
            st = vmmc_fab__flush_peer(px->ep, tp);
    }
    return st;
}

int vmmc_fab__put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int flags,
                  uint64_t imm)
{
    if ((flags & VMMC_SEND_HEAD_LAST) && len > FAB_CHUNK) {
        /* More than one piece: the rest, then the head as a write of its own. */
        int st = vmmc_fab__put(px, off + 16, (const char *)src + 16, len - 16,
                               flags & VMMC_SEND_NONBLOCK, 0);
        if (st != VMMC_OK)
            return st;
        return vmmc_fab__put(px, off, src, 16, flags & ~VMMC_SEND_HEAD_LAST, imm);
    }
    struct iovec v = {(void *)src, len};
    return put_iov(px, off, &v, 1, len, flags, imm);
}

int vmmc_fab__putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt, int flags,
                   uint64_t imm)
{
    if (px->tl_priv)
        return vmmc_fab__rma_putv(px, off, iov, iovcnt, flags, imm);
    return vmmc_fab__putv_msg(px, off, iov, iovcnt, flags, imm);
}

int vmmc_fab__putv_msg(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt,
                       int flags, uint64_t imm)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    return put_iov(px, off, iov, iovcnt, total, flags & ~VMMC_SEND_HEAD_LAST, imm);
}

int vmmc_fab__get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len)
{
    fab_ep_t *f = F(px->ep);
    fab_wait_t w = {.peer = px->rank, .dst = dst, .len = len};
    fab_hdr_t h = {.kind = F_GET_REQ, .export_id = px->export_id, .gen = px->gen,
                   .token = {px->token[0], px->token[1]}, .off = off, .len = len};
    h.id = vmmc_fab__wait_add(f, &w);
    int st = vmmc_fab__send(f, px->rank, &h, NULL, 0, 0);
    if (st != VMMC_OK)
        w.status = st;
    int sent = st == VMMC_OK;
    st = vmmc_fab__wait_done(f, &w);
    if (st == VMMC_OK || st == VMMC_ERR_PEER_DEAD || !sent)
        return st;
    return vmmc_error(st, "fetch of %zu bytes at offset %zu from rank %d refused: %s", len, off,
                      px->rank, vmmc_strerror(st));
}

int vmmc_fab__flush_peer(vmmc_ep_t *ep, vmmc_tl_peer_t *peer)
{
    fab_ep_t *f = F(ep);
    if (!f || peer->tl != &vmmc_tl_fabric)
        return VMMC_OK;
    fab_wait_t w = {.peer = peer->rank};
    fab_hdr_t h = {.kind = F_FLUSH};
    h.id = vmmc_fab__wait_add(f, &w);
    int st = vmmc_fab__send(f, peer->rank, &h, NULL, 0, 0);
    if (st != VMMC_OK)
        w.status = st;
    st = vmmc_fab__wait_done(f, &w);
    if (st == VMMC_ERR_PEER_DEAD || st == VMMC_ERR_PEER_UNREACHABLE)
        return vmmc_error(st, "fence: rank %d is dead or unreachable (fabric)", peer->rank);
    return st;
}

/* Before a barrier: every put to every fabric peer applied. */
int vmmc_fab__flush(vmmc_ep_t *ep)
{
    fab_ep_t *f = F(ep);
    if (!f)
        return VMMC_OK;
    int n = vmmc_tl_peer_count(ep);
    for (int r = 0; r < n; r++) {
        vmmc_tl_peer_t *p = vmmc_tl_peer_at(ep, r);
        fab_peer_t *fp = fab_peer_of(f, r);
        if (!p || p->tl != &vmmc_tl_fabric || atomic_load(&p->state) != PEER_UP || !fp ||
            fp->fa == FI_ADDR_NOTAVAIL)
            continue;
        int st = vmmc_fab__flush_peer(ep, p);
        if (st != VMMC_OK)
            return st;
    }
    return VMMC_OK;
}

int vmmc_fab__signal(vmmc_ep_t *ep, vmmc_tl_peer_t *peer)
{
    fab_ep_t *f = F(ep);
    if (!f)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "fabric transport not open");
    fab_hdr_t h = {.kind = F_SIGNAL};
    return vmmc_fab__send(f, peer->rank, &h, NULL, 0, 0);
}
