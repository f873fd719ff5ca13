/* Bootstrap wire protocol helpers (see boot_wire.h). Compiled into the
 * library and into the `vmmc` tool, so it uses libc only. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/boot_wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int64_t vmmc_bw_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int vmmc_bw_left_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - vmmc_bw_now_ms();
    if (left < 0)
        return 0;
    return left > 1000000000 ? 1000000000 : (int)left;
}

static void out_reserve(vmmc_bw_out_t *o, size_t more)
{
    if (o->err)
        return;
    if (o->len + more <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + more)
        cap *= 2;
    uint8_t *p = realloc(o->p, cap);
    if (!p) {
        o->err = -ENOMEM;
        return;
    }
    o->p = p;
    o->cap = cap;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void vmmc_bw_out_init(vmmc_bw_out_t *o, uint16_t type)
{
    memset(o, 0, sizeof *o);
    out_reserve(o, VMMC_BW_HDR);
    if (o->err)
        return;
    put_le(o->p, 0, 4);
    put_le(o->p + 4, type, 2);
    put_le(o->p + 6, VMMC_BW_VERSION, 2);
    o->len = VMMC_BW_HDR;
}

void vmmc_bw_put_u32(vmmc_bw_out_t *o, uint32_t v)
{
    out_reserve(o, 4);
    if (o->err)
        return;
    put_le(o->p + o->len, v, 4);
    o->len += 4;
}

void vmmc_bw_put_u64(vmmc_bw_out_t *o, uint64_t v)
{
    out_reserve(o, 8);
    if (o->err)
        return;
    put_le(o->p + o->len, v, 8);
    o->len += 8;
}

void vmmc_bw_put_str(vmmc_bw_out_t *o, const char *s, size_t n)
{
    if (n > VMMC_BW_MAX_BODY) {
        o->err = -EMSGSIZE;
        return;
    }
    vmmc_bw_put_u32(o, (uint32_t)n);
    out_reserve(o, n);
    if (o->err)
        return;
    if (n)
        memcpy(o->p + o->len, s, n);
    o->len += n;
}

int vmmc_bw_out_finish(vmmc_bw_out_t *o)
{
    if (o->err)
        return o->err;
    if (o->len - VMMC_BW_HDR > VMMC_BW_MAX_BODY)
        return o->err = -EMSGSIZE;
    put_le(o->p, o->len - VMMC_BW_HDR, 4);
    return 0;
}

void vmmc_bw_out_free(vmmc_bw_out_t *o)
{
    free(o->p);
    memset(o, 0, sizeof *o);
}

uint32_t vmmc_bw_get_u32(vmmc_bw_in_t *in)
{
    if (in->err || in->len - in->off < 4) {
        in->err = 1;
        return 0;
    }
    uint32_t v = (uint32_t)get_le(in->p + in->off, 4);
    in->off += 4;
    return v;
}

uint64_t vmmc_bw_get_u64(vmmc_bw_in_t *in)
{
    if (in->err || in->len - in->off < 8) {
        in->err = 1;
        return 0;
    }
    uint64_t v = get_le(in->p + in->off, 8);
    in->off += 8;
    return v;
}

uint32_t vmmc_bw_get_str(vmmc_bw_in_t *in, const char **s, uint32_t max)
{
    uint32_t n = vmmc_bw_get_u32(in);
    if (in->err || n > max || in->len - in->off < n) {
        in->err = 1;
        *s = "";
        return 0;
    }
    *s = (const char *)in->p + in->off;
    in->off += n;
    return n;
}

int vmmc_bw_write_all(int fd, const void *buf, size_t len, int timeout_ms)
{
    const uint8_t *p = buf;
    int64_t deadline = timeout_ms < 0 ? -1 : vmmc_bw_now_ms() + timeout_ms;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int left = vmmc_bw_left_ms(deadline);
        if (left == 0)
            return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (poll(&pf, 1, left) < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

long vmmc_bw_rx_fill(vmmc_bw_rx_t *rx, int fd)
{
    if (rx->cap - rx->len < 4096) {
        size_t cap = rx->cap ? rx->cap * 2 : 8192;
        if (cap > VMMC_BW_MAX_BODY + VMMC_BW_HDR + 8192)
            cap = VMMC_BW_MAX_BODY + VMMC_BW_HDR + 8192;
        if (cap <= rx->len)
            return -EPROTO; /* a peer that sends more than one maximal message unread */
        uint8_t *b = realloc(rx->buf, cap);
        if (!b)
            return -ENOMEM;
        rx->buf = b;
        rx->cap = cap;
    }
    for (;;) {
        ssize_t n = recv(fd, rx->buf + rx->len, rx->cap - rx->len, MSG_DONTWAIT);
        if (n > 0) {
            rx->len += (size_t)n;
            return n;
        }
        if (n == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno == EWOULDBLOCK)
            return -EAGAIN;
        return -errno;
    }
}

int vmmc_bw_rx_next(vmmc_bw_rx_t *rx, uint16_t *type, const uint8_t **body, uint32_t *len)
{
    if (rx->len < VMMC_BW_HDR)
        return 0;
    uint32_t n = (uint32_t)get_le(rx->buf, 4);
    uint16_t t = (uint16_t)get_le(rx->buf + 4, 2);
    uint16_t v = (uint16_t)get_le(rx->buf + 6, 2);
    if (n > VMMC_BW_MAX_BODY || v != VMMC_BW_VERSION || t < VMMC_BW_HELLO || t > VMMC_BW_ERROR)
        return -EPROTO;
    if (rx->len - VMMC_BW_HDR < n)
        return 0;
    *type = t;
    *body = rx->buf + VMMC_BW_HDR;
    *len = n;
    rx->consumed = VMMC_BW_HDR + n;
    return 1;
}

void vmmc_bw_rx_consume(vmmc_bw_rx_t *rx)
{
    if (!rx->consumed)
        return;
    memmove(rx->buf, rx->buf + rx->consumed, rx->len - rx->consumed);
    rx->len -= rx->consumed;
    rx->consumed = 0;
}

void vmmc_bw_rx_free(vmmc_bw_rx_t *rx)
{
    free(rx->buf);
    memset(rx, 0, sizeof *rx);
}
