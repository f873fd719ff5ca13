/* One direction's byte ring in exported memory (see sock_conn_priv.h).
 *
 * The receive side owns the memory and only reads it; the peer writes it.
 * The send side imports the peer's ring: on this host it maps it
 * (vmmc_proxy_map) and writes with memcpy and release stores, no system call
 * and no core call; otherwise (udp, or a ring that cannot be mapped) with
 * vmmc_send/vmmc_sendv, whose sends to one peer land in the order issued, so
 * the data is in place before the tail that publishes it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "sock/sock_conn_priv.h"
#include "sock/sock_sys.h"
#include "util/log.h"

int sock_rx_open(sock_rx_ring_t *r, vmmc_ep_t *ep, uint64_t size, int peer)
{
    memset(r, 0, sizeof *r);
    uint64_t rnd[2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return vmmc_error_sys("sock: no random bytes for a ring name");
    snprintf(r->name, sizeof r->name, "sock.%016" PRIx64 "%016" PRIx64, rnd[0], rnd[1]);
    void *mem;
    int rc = vmmc_mem_alloc(ep, SOCK_HDR_SIZE + size, &mem);
    if (rc != VMMC_OK)
        return rc;
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    p.name = r->name;
    p.addr = mem;
    p.length = SOCK_HDR_SIZE + size;
    p.flags = VMMC_EXPORT_READ; /* lets shm map it, and the revert read back */
    if (peer >= 0) {
        p.field_mask |= VMMC_EXPORT_PARAM_IMPORTERS;
        p.importers = &peer;
        p.num_importers = 1;
    }
    rc = vmmc_export(ep, &p, &r->ex);
    if (rc != VMMC_OK) {
        vmmc_mem_free(ep, mem);
        return rc;
    }
    r->ep = ep;
    r->mem = mem;
    r->data = r->mem + SOCK_HDR_SIZE;
    r->size = size;
    return VMMC_OK;
}

void sock_rx_close(sock_rx_ring_t *r)
{
    if (r->ex)
        vmmc_unexport(r->ex);
    r->ex = NULL;
    if (r->mem)
        vmmc_mem_free(r->ep, r->mem);
    r->mem = r->data = NULL;
}

void sock_rx_read(const sock_rx_ring_t *r, uint64_t pos, void *dst, size_t len)
{
    size_t at = (size_t)(pos % r->size);
    size_t first = len < r->size - at ? len : (size_t)(r->size - at);
    memcpy(dst, r->data + at, first);
    if (len > first)
        memcpy((uint8_t *)dst + first, r->data, len - first);
}

void sock_rx_copy(const sock_rx_ring_t *r, uint64_t pos, size_t len, const struct iovec *iov,
                  int iovcnt, size_t skip)
{
    if (!iov)
        return;
    for (int i = 0; i < iovcnt && len; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t n = iov[i].iov_len - skip;
        if (n > len)
            n = len;
        sock_rx_read(r, pos, (uint8_t *)iov[i].iov_base + skip, n);
        pos += n;
        len -= n;
        skip = 0;
    }
}

int sock_tx_open(sock_tx_ring_t *t, vmmc_ep_t *ep, int peer, const char *name, uint64_t size,
                 int timeout_ms)
{
    memset(t, 0, sizeof *t);
    if (size < 1 || size > (1ull << 30))
        return vmmc_error(VMMC_ERR_PROTOCOL, "sock: the peer's ring size %" PRIu64
                                             " is out of range", size);
    int rc = vmmc_import(ep, peer, name, timeout_ms, &t->px);
    if (rc != VMMC_OK)
        return rc;
    size_t got = vmmc_proxy_length(t->px);
    if (got != SOCK_HDR_SIZE + size) {
        vmmc_unimport(t->px);
        t->px = NULL;
        return vmmc_error(VMMC_ERR_PROTOCOL,
                          "sock: the peer's ring %s is %zu bytes, not the %" PRIu64
                          " it announced",
                          name, got, SOCK_HDR_SIZE + size);
    }
    void *map = NULL;
    if (vmmc_proxy_map(t->px, &map) == VMMC_OK)
        t->map = map;
    t->ep = ep;
    t->peer = peer;
    t->size = size;
    return VMMC_OK;
}

void sock_tx_close(sock_tx_ring_t *t)
{
    if (t->px)
        vmmc_unimport(t->px);
    t->px = NULL;
    t->map = NULL;
}

/* Bytes of the ring from stream position @p pos up to its end. */
static size_t to_end(const sock_tx_ring_t *t, uint64_t pos)
{
    return (size_t)(t->size - pos % t->size);
}

/* Copy through the mapping. */
static void put_mapped(sock_tx_ring_t *t, uint64_t pos, const struct iovec *iov, int iovcnt,
                       size_t skip, size_t len)
{
    uint8_t *data = t->map + SOCK_HDR_SIZE;
    for (int i = 0; i < iovcnt && len; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        const uint8_t *src = (const uint8_t *)iov[i].iov_base + skip;
        size_t n = iov[i].iov_len - skip;
        if (n > len)
            n = len;
        skip = 0;
        len -= n;
        while (n) {
            size_t at = (size_t)(pos % t->size), k = to_end(t, pos);
            if (k > n)
                k = n;
            memcpy(data + at, src, k);
            src += k;
            pos += k;
            n -= k;
        }
    }
}

/* Send one contiguous stretch of the ring [pos, pos + len) (no wrap) from the
 * iovec, as one gather send of at most VMMC_IOV_MAX pieces at a time. */
static int put_sent(sock_tx_ring_t *t, uint64_t pos, const struct iovec *iov, int iovcnt,
                    size_t skip, size_t len)
{
    vmmc_iov_t v[VMMC_IOV_MAX];
    int nv = 0;
    size_t at = SOCK_HDR_SIZE + (size_t)(pos % t->size), batch = 0;
    for (int i = 0; i < iovcnt && len; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t n = iov[i].iov_len - skip;
        if (n > len)
            n = len;
        v[nv].base = (const uint8_t *)iov[i].iov_base + skip;
        v[nv].len = n;
        nv++;
        batch += n;
        len -= n;
        skip = 0;
        if (nv == VMMC_IOV_MAX || !len) {
            int rc = nv == 1 ? vmmc_send(t->px, at, v[0].base, v[0].len, 0)
                             : vmmc_sendv(t->px, at, v, nv, 0, 0);
            if (rc != VMMC_OK)
                return rc;
            at += batch;
            batch = 0;
            nv = 0;
        }
    }
    return VMMC_OK;
}

int sock_tx_put(sock_tx_ring_t *t, uint64_t pos, const struct iovec *iov, int iovcnt,
                size_t skip, size_t len)
{
    if (t->map) {
        put_mapped(t, pos, iov, iovcnt, skip, len);
        return VMMC_OK;
    }
    while (len) {
        size_t k = to_end(t, pos);
        if (k > len)
            k = len;
        int rc = put_sent(t, pos, iov, iovcnt, skip, k);
        if (rc != VMMC_OK)
            return rc;
        pos += k;
        skip += k;
        len -= k;
    }
    return VMMC_OK;
}

ssize_t sock_tx_put_file(sock_tx_ring_t *t, uint64_t pos, int fd, off_t off, size_t len)
{
    size_t done = 0;
    uint8_t bounce[16384];
    while (done < len) {
        size_t k = to_end(t, pos + done);
        if (k > len - done)
            k = len - done;
        ssize_t n;
        if (t->map) {
            /* straight into the peer's ring */
            n = sys_pread(fd, t->map + SOCK_HDR_SIZE + (pos + done) % t->size, k,
                          off + (off_t)done);
        } else {
            if (k > sizeof bounce)
                k = sizeof bounce;
            n = sys_pread(fd, bounce, k, off + (off_t)done);
            if (n > 0) {
                int rc = vmmc_send(t->px, SOCK_HDR_SIZE + (pos + done) % t->size, bounce,
                                   (size_t)n, 0);
                if (rc != VMMC_OK) {
                    errno = ECONNRESET;
                    return done ? (ssize_t)done : -1;
                }
            }
        }
        if (n < 0)
            return done ? (ssize_t)done : -1;
        if (n == 0)
            break;
        done += (size_t)n;
        if ((size_t)n < k)
            break;
    }
    return (ssize_t)done;
}

int sock_tx_word(sock_tx_ring_t *t, int off, uint64_t v)
{
    if (t->map) {
        __atomic_store_n((uint64_t *)(void *)(t->map + off), v, __ATOMIC_RELEASE);
        return VMMC_OK;
    }
    return vmmc_send(t->px, (size_t)off, &v, sizeof v, 0);
}

int sock_tx_fetch(sock_tx_ring_t *t, uint64_t pos, void *dst, size_t len)
{
    while (len) {
        size_t at = (size_t)(pos % t->size), k = to_end(t, pos);
        if (k > len)
            k = len;
        if (t->map) {
            memcpy(dst, t->map + SOCK_HDR_SIZE + at, k);
        } else {
            int rc = vmmc_fetch(t->px, SOCK_HDR_SIZE + at, dst, k);
            if (rc != VMMC_OK)
                return rc;
        }
        dst = (uint8_t *)dst + k;
        pos += k;
        len -= k;
    }
    return VMMC_OK;
}

int sock_tx_fence(sock_tx_ring_t *t)
{
    if (t->map) {
        atomic_thread_fence(memory_order_seq_cst);
        return VMMC_OK;
    }
    return vmmc_fence(t->ep, t->peer);
}
