/* Deliberate update: the send path.
 *
 * The short path is: check the proxy state, check the bounds, memcpy into the
 * mapped region. No system call, no lock, no atomic read-modify-write, no
 * allocation. Everything else (process_vm_writev, redirection, udp, the copy
 * engine, notifications) is decided at import time through px->put, or is
 * out of line. */
#include <string.h>

#include "core/core.h"

/* The flags the short path takes; VMMC_SEND_FENCE goes the long way. */
#define SEND_FLAGS (VMMC_SEND_NOTIFY | VMMC_SEND_NONBLOCK | VMMC_SEND_HEAD_LAST)
#define SEND_FLAGS_ALL (SEND_FLAGS | VMMC_SEND_FENCE)

/* VMMC_SEND_HEAD_LAST: what it needs (checked before a byte moves). */
static VMMC_COLD int head_last_error(const vmmc_proxy_t *px, size_t off, size_t len)
{
    if (len < 16)
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_SEND_HEAD_LAST needs at least 16 bytes, not %zu",
                          len);
    if (off % 8 || (px->base && (uintptr_t)px->base % 8))
        return vmmc_error(VMMC_ERR_INVALID,
                          "VMMC_SEND_HEAD_LAST needs an 8-byte aligned place (offset %zu of '%s')",
                          off, px->name);
    return vmmc_error(VMMC_ERR_INVALID,
                      "VMMC_SEND_HEAD_LAST: '%s' is redirectable, where bytes land as they arrive",
                      px->name);
}

static inline int head_last_ok(const vmmc_proxy_t *px, size_t off, size_t len)
{
    return len >= 16 && off % 8 == 0 && (uintptr_t)px->base % 8 == 0 &&
           !(px->flags & VMMC_EXPORT_REDIRECTABLE);
}

/* Every byte but the first 16, then word 0, then word 1 with release. */
static __attribute__((noinline)) int put_head_last_mapped(vmmc_proxy_t *px, size_t off, const void *src,
                                          size_t len, unsigned flags, uint64_t imm)
{
    vmmc_store_head_last(px->base + off, src, len);
    if (!(flags & VMMC_SEND_NOTIFY))
        return VMMC_OK;
    return px->notify(&px->view, off, len, imm, flags & VMMC_SEND_NONBLOCK);
}

static VMMC_COLD int send_check_failed(const vmmc_proxy_t *px, size_t off, const void *src,
                                       size_t len, unsigned flags)
{
    if (!px)
        return vmmc_error(VMMC_ERR_INVALID, "send: NULL proxy");
    if (atomic_load(&px->state) != PX_ACTIVE)
        return vmmc_proxy_state_error(px);
    if (flags & ~(unsigned)SEND_FLAGS_ALL)
        return vmmc_error(VMMC_ERR_INVALID, "send: unknown flags 0x%x", flags);
    if (!src && len)
        return vmmc_error(VMMC_ERR_INVALID, "send: NULL source for %zu bytes", len);
    return vmmc_error(VMMC_ERR_BOUNDS,
                      "send of %zu bytes at offset %zu is outside '%s' at rank %d (%zu bytes); "
                      "nothing was written",
                      len, off, px->name, px->rank, px->len);
}

static inline int send_checks(const vmmc_proxy_t *px, size_t off, const void *src, size_t len,
                              unsigned flags)
{
    if (VMMC_UNLIKELY(!px || atomic_load_explicit(&px->state, memory_order_relaxed) != PX_ACTIVE ||
                      off > px->len || len > px->len - off || (!src && len) ||
                      (flags & ~(unsigned)SEND_FLAGS_ALL)))
        return send_check_failed(px, off, src, len, flags);
    return VMMC_OK;
}

int vmmc_send_fence_first(vmmc_proxy_t *px, unsigned *flags)
{
    if (!(*flags & VMMC_SEND_FENCE))
        return VMMC_OK;
    *flags &= ~(unsigned)VMMC_SEND_FENCE;
    return vmmc_fence(px->ep, -1);
}

int vmmc_send_check(const vmmc_proxy_t *px, size_t off, const void *src, size_t len,
                    unsigned flags)
{
    return send_checks(px, off, src, len, flags);
}

/* A source for sends of length 0 that came with a NULL one: the short path
 * below copies from a source it need not test (memcpy's source must not be
 * NULL, even for 0 bytes). */
static const unsigned char no_bytes[1];

/* The send itself, after the checks; @src is never NULL. Inlined into each
 * caller so vmmc_send() is one function: no call, no spill on the 8-byte
 * path. */
static inline __attribute__((always_inline)) int send_now(vmmc_proxy_t *px, size_t off,
                                                          const void *src, size_t len,
                                                          unsigned flags, uint64_t imm)
{
    /* Keep order with asynchronous sends still in the copy engine. */
    if (VMMC_UNLIKELY(atomic_load_explicit(&px->peer->async_inflight, memory_order_acquire))) {
        int rc = vmmc_send_wait_async(px->peer);
        if (rc != VMMC_OK)
            return rc;
    }
    if (VMMC_UNLIKELY(flags & VMMC_SEND_HEAD_LAST)) {
        if (!head_last_ok(px, off, len))
            return head_last_error(px, off, len);
        if (px->base)
            return put_head_last_mapped(px, off, src, len, flags, imm);
        return px->put(&px->view, off, src, len, (int)flags, imm);
    }
    if (VMMC_LIKELY(px->base != NULL)) {
        memcpy(px->base + off, src, len);
        atomic_signal_fence(memory_order_release);
        if (VMMC_LIKELY(!(flags & VMMC_SEND_NOTIFY)))
            return VMMC_OK;
        return px->notify(&px->view, off, len, imm, flags & VMMC_SEND_NONBLOCK);
    }
    /* Length 0 is defined here, the same on every transport: a no-op that
     * completes (the mapped path above copies nothing); with
     * VMMC_SEND_NOTIFY the notification is still delivered, in order. */
    if (VMMC_UNLIKELY(len == 0) && !(flags & VMMC_SEND_NOTIFY))
        return VMMC_OK;
    return px->put(&px->view, off, src, len, (int)flags, imm);
}

/* What the short path leaves: every refused send, and a valid one of length
 * 0 with a NULL source (its one test, !src, stands for both). */
static VMMC_COLD int send_slow(vmmc_proxy_t *px, size_t off, const void *src, size_t len,
                               unsigned flags, uint64_t imm)
{
    int rc = send_checks(px, off, src, len, flags);
    if (rc != VMMC_OK || (rc = vmmc_send_fence_first(px, &flags)) != VMMC_OK)
        return rc;
    return send_now(px, off, src ? src : no_bytes, len, flags, imm);
}

/* send_checks() with the NULL-source test folded into one: passes only
 * sends that send_checks() passes, with a source that is not NULL. */
static inline int send_fast_ok(const vmmc_proxy_t *px, size_t off, const void *src, size_t len,
                               unsigned flags)
{
    return px && atomic_load_explicit(&px->state, memory_order_relaxed) == PX_ACTIVE &&
           off <= px->len && len <= px->len - off && src && !(flags & ~(unsigned)SEND_FLAGS);
}

int vmmc_send(vmmc_proxy_t *px, size_t off, const void *src, size_t len, unsigned flags)
{
    if (VMMC_UNLIKELY(!send_fast_ok(px, off, src, len, flags)))
        return send_slow(px, off, src, len, flags, 0);
    return send_now(px, off, src, len, flags, 0);
}

int vmmc_send_imm(vmmc_proxy_t *px, size_t off, const void *src, size_t len, unsigned flags,
                  uint64_t imm)
{
    if (VMMC_UNLIKELY(!send_fast_ok(px, off, src, len, flags)))
        return send_slow(px, off, src, len, flags, imm);
    return send_now(px, off, src, len, flags, imm);
}

int vmmc_send_async(vmmc_proxy_t *px, size_t off, const void *src, size_t len, unsigned flags,
                    vmmc_request_t *req)
{
    if (VMMC_UNLIKELY(!req))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_send_async: NULL request");
    vmmc_req_int_t *r = (vmmc_req_int_t *)req;
    int rc = send_checks(px, off, src, len, flags);
    if (VMMC_UNLIKELY(rc != VMMC_OK)) {
        r->type = REQ_NONE;
        return rc;
    }
    if (flags & VMMC_SEND_HEAD_LAST) {
        r->type = REQ_NONE;
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_SEND_HEAD_LAST is for synchronous sends");
    }
    if ((rc = vmmc_send_fence_first(px, &flags)) != VMMC_OK) {
        r->type = REQ_NONE;
        return rc;
    }
    r->type = REQ_SEND;
    if (len <= vmmc_core_cfg.async_inline_max) {
        rc = send_now(px, off, src ? src : no_bytes, len, flags, 0);
        atomic_store_explicit(&r->status, rc, memory_order_relaxed);
        return rc;
    }
    r->px = px;
    r->off = off;
    r->src = src;
    r->len = len;
    r->flags = flags;
    r->imm = 0;
    atomic_store_explicit(&r->status, VMMC_INPROGRESS, memory_order_relaxed);
    rc = vmmc_dma_post(px, r);
    return rc == VMMC_OK ? VMMC_INPROGRESS : rc;
}

int vmmc_fetch_check(vmmc_proxy_t *px, size_t off, void *dst, size_t len)
{
    int rc = send_checks(px, off, dst, len, 0);
    if (rc != VMMC_OK)
        return rc == VMMC_ERR_BOUNDS ? vmmc_error(VMMC_ERR_BOUNDS,
                                                  "fetch of %zu bytes at offset %zu is outside '%s' "
                                                  "(%zu bytes)",
                                                  len, off, px->name, px->len)
                                     : rc;
    /* A dead peer is reported as such even before its proxies are marked. */
    if (VMMC_UNLIKELY(atomic_load_explicit(&px->peer->state, memory_order_acquire) == PEER_DEAD))
        return vmmc_peer_error(px->peer);
    if (!(px->flags & VMMC_EXPORT_READ))
        return vmmc_error(VMMC_ERR_PERMISSION,
                          "rank %d's export '%s' does not allow reads (VMMC_EXPORT_READ)", px->rank,
                          px->name);
    if (len && !px->get)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "the transport to rank %d cannot read", px->rank);
    return VMMC_OK;
}

int vmmc_fetch_now(vmmc_proxy_t *px, size_t off, void *dst, size_t len)
{
    if (atomic_load_explicit(&px->peer->async_inflight, memory_order_acquire)) {
        int rc = vmmc_send_wait_async(px->peer);
        if (rc != VMMC_OK)
            return rc;
    }
    if (len == 0) /* defined here for every transport: completes at once */
        return VMMC_OK;
    return px->get(&px->view, off, dst, len);
}

int vmmc_fetch(vmmc_proxy_t *px, size_t off, void *dst, size_t len)
{
    int rc = vmmc_fetch_check(px, off, dst, len);
    if (rc != VMMC_OK)
        return rc;
    return vmmc_fetch_now(px, off, dst, len);
}

int vmmc_fetch_async(vmmc_proxy_t *px, size_t off, void *dst, size_t len, vmmc_request_t *req)
{
    if (VMMC_UNLIKELY(!req))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_fetch_async: NULL request");
    vmmc_req_int_t *r = (vmmc_req_int_t *)req;
    r->type = REQ_NONE;
    int rc = vmmc_fetch_check(px, off, dst, len);
    if (rc != VMMC_OK)
        return rc;
    r->type = REQ_FETCH;
    if (px->base || len <= vmmc_core_cfg.async_inline_max) {
        rc = vmmc_fetch_now(px, off, dst, len);
        atomic_store_explicit(&r->status, rc, memory_order_relaxed);
        return rc;
    }
    r->px = px;
    r->off = off;
    r->src = dst;
    r->len = len;
    r->flags = 0;
    r->imm = 0;
    atomic_store_explicit(&r->status, VMMC_INPROGRESS, memory_order_relaxed);
    rc = vmmc_dma_post(px, r);
    return rc == VMMC_OK ? VMMC_INPROGRESS : rc;
}
