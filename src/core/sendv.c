/* Gather sends (vmmc_sendv) and remote completion (vmmc_fence).
 *
 * A gather send is one send of the pieces' total length: bounds are checked
 * on the total before a byte moves, and one notification follows all of
 * them. Into a mapped region the pieces are copied one after another; a
 * transport with a gather put takes the pieces as they are (shm: one
 * process_vm_writev); otherwise (udp, redirectable exports) the core stages
 * them into one buffer and makes one put, so the receiver still sees one
 * message (a single non-empty piece is put from where it is). */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/core.h"

#define SENDV_FLAGS (VMMC_SEND_NOTIFY | VMMC_SEND_NONBLOCK | VMMC_SEND_FENCE)
#define SENDV_STACK 4096 /* staged on the stack up to this many bytes */

_Static_assert(sizeof(vmmc_iov_t) == sizeof(struct iovec), "vmmc_iov_t is an iovec");

static VMMC_COLD int sendv_refused(const vmmc_proxy_t *px, size_t off, const vmmc_iov_t *iov,
                                   int iovcnt, unsigned flags, size_t total, int overflow)
{
    if (!px)
        return vmmc_error(VMMC_ERR_INVALID, "sendv: NULL proxy");
    if (atomic_load(&px->state) != PX_ACTIVE)
        return vmmc_proxy_state_error(px);
    if (flags & VMMC_SEND_HEAD_LAST)
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_SEND_HEAD_LAST is for vmmc_send, not vmmc_sendv");
    if (flags & ~(unsigned)SENDV_FLAGS)
        return vmmc_error(VMMC_ERR_INVALID, "sendv: unknown flags 0x%x", flags);
    if (iovcnt < 0 || iovcnt > VMMC_IOV_MAX || (iovcnt && !iov))
        return vmmc_error(VMMC_ERR_INVALID, "sendv: %d pieces at %p (0..%d)", iovcnt,
                          (const void *)iov, VMMC_IOV_MAX);
    for (int i = 0; i < iovcnt; i++)
        if (!iov[i].base && iov[i].len)
            return vmmc_error(VMMC_ERR_INVALID, "sendv: piece %d is NULL for %zu bytes", i,
                              iov[i].len);
    if (overflow)
        return vmmc_error(VMMC_ERR_BOUNDS, "sendv: the pieces' lengths overflow");
    return vmmc_error(VMMC_ERR_BOUNDS,
                      "sendv of %zu bytes at offset %zu is outside '%s' at rank %d (%zu bytes); "
                      "nothing was written",
                      total, off, px->name, px->rank, px->len);
}

int vmmc_sendv(vmmc_proxy_t *px, size_t off, const vmmc_iov_t *iov, int iovcnt, unsigned flags,
               uint64_t imm)
{
    size_t total = 0;
    int overflow = 0, bad = !px || iovcnt < 0 || iovcnt > VMMC_IOV_MAX || (iovcnt && !iov) ||
                            (flags & ~(unsigned)SENDV_FLAGS);
    for (int i = 0; !bad && i < iovcnt; i++) {
        if (!iov[i].base && iov[i].len)
            bad = 1;
        if (iov[i].len > SIZE_MAX - total)
            overflow = bad = 1;
        else
            total += iov[i].len;
    }
    if (VMMC_UNLIKELY(bad || atomic_load_explicit(&px->state, memory_order_relaxed) != PX_ACTIVE ||
                      off > px->len || total > px->len - off))
        return sendv_refused(px, off, iov, iovcnt, flags, total, overflow);
    if (VMMC_UNLIKELY(flags & VMMC_SEND_FENCE)) {
        int rc = vmmc_send_fence_first(px, &flags);
        if (rc != VMMC_OK)
            return rc;
    }
    if (VMMC_UNLIKELY(atomic_load_explicit(&px->peer->async_inflight, memory_order_acquire))) {
        int rc = vmmc_send_wait_async(px->peer);
        if (rc != VMMC_OK)
            return rc;
    }
    if (px->base) {
        char *d = px->base + off;
        for (int i = 0; i < iovcnt; i++) {
            memcpy(d, iov[i].base, iov[i].len);
            d += iov[i].len;
        }
        atomic_signal_fence(memory_order_release);
        if (!(flags & VMMC_SEND_NOTIFY))
            return VMMC_OK;
        return px->notify(&px->view, off, total, imm, flags & VMMC_SEND_NONBLOCK);
    }
    if (total == 0 && !(flags & VMMC_SEND_NOTIFY))
        return VMMC_OK;
    const vmmc_tl_ops_t *tl = px->peer->tl;
    if (tl && tl->putv && !(px->flags & VMMC_EXPORT_REDIRECTABLE))
        return tl->putv(&px->view, off, (const struct iovec *)(const void *)iov, iovcnt, (int)flags, imm);
    /* One piece needs no staging: put it from where it is. */
    int one = -1;
    for (int i = 0; i < iovcnt; i++)
        if (iov[i].len)
            one = one == -1 ? i : -2;
    if (one >= 0)
        return px->put(&px->view, off, iov[one].base, total, (int)flags, imm);
    char stack[SENDV_STACK];
    char *buf = total <= sizeof stack ? stack : malloc(total);
    if (!buf)
        return vmmc_error(VMMC_ERR_NOMEM, "sendv: no memory to stage %zu bytes", total);
    char *d = buf;
    for (int i = 0; i < iovcnt; i++) {
        memcpy(d, iov[i].base, iov[i].len);
        d += iov[i].len;
    }
    int rc = px->put(&px->view, off, buf, total, (int)flags, imm);
    if (buf != stack)
        free(buf);
    return rc;
}

/* One peer: its asynchronous operations finished, then its transport's
 * puts applied at the receiver. */
static int fence_peer(vmmc_ep_t *ep, vmmc_peer_t *p)
{
    if (atomic_load_explicit(&p->async_inflight, memory_order_acquire)) {
        int rc = vmmc_send_wait_async(p);
        if (rc != VMMC_OK)
            return rc;
    }
    int state = atomic_load_explicit(&p->state, memory_order_acquire);
    if (state == PEER_DEAD)
        return vmmc_peer_error(p);
    if (state != PEER_UP || !p->tl || !p->tl->flush_peer)
        return VMMC_OK; /* nothing was sent, or puts land before they return */
    return p->tl->flush_peer(ep, &p->view);
}

int vmmc_fence(vmmc_ep_t *ep, int peer)
{
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_fence: NULL endpoint");
    int n = vmmc_peer_count_int(ep);
    if (peer < -1 || peer >= n)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_fence: no peer %d (0..%d, or -1 for all)", peer,
                          n - 1);
    if (peer >= 0) {
        int rc;
        vmmc_peer_t *p = vmmc_peer_get(ep, peer, &rc);
        return p ? fence_peer(ep, p) : rc;
    }
    int first = VMMC_OK;
    for (int r = 0; r < n; r++) {
        vmmc_peer_t *p = vmmc_peer_at(ep, r);
        if (!p)
            continue; /* never used: nothing to complete */
        int rc = fence_peer(ep, p);
        if (rc != VMMC_OK && first == VMMC_OK)
            first = rc;
    }
    return first;
}
