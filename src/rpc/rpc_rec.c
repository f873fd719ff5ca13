/* ONC RPC record marking on a vmmc socket (RFC 5531 §11): a record is one or
 * more fragments, each behind a 4-byte mark (bit 31: last fragment, bits
 * 0-30: its length). We send every record as one fragment with one socket
 * call, and read a record mark by mark, each fragment's bytes straight into
 * the record's buffer: no stream buffer in between. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc/rpc_int.h"
#include "vmmc/sock.h"

bool_t rpc_xdr_void(XDR *x, ...)
{
    (void)x;
    return TRUE;
}

int rpc_buf_reserve(rpc_buf_t *b, size_t need, size_t keep)
{
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 512;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = malloc(cap);
    if (!p) {
        errno = ENOMEM;
        return rpc_fail("cannot allocate a buffer of %zu bytes", cap);
    }
    if (keep)
        memcpy(p, b->p, keep);
    free(b->p);
    b->p = p;
    b->cap = cap;
    return 0;
}

void rpc_buf_free(rpc_buf_t *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

uint64_t rpc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t rpc_deadline(uint64_t ns)
{
    uint64_t now = rpc_now_ns();
    return ns >= RPC_NEVER - now ? RPC_NEVER : now + ns;
}

int rpc_wait_fd(int fd, short events, uint64_t dl)
{
    for (;;) {
        int ms = -1;
        if (dl != RPC_NEVER) {
            uint64_t now = rpc_now_ns();
            if (now >= dl)
                return 0;
            uint64_t left = (dl - now + 999999) / 1000000;
            ms = left > 3600000 ? 3600000 : (int)left;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int n = vmmc_sock_poll(&p, 1, ms);
        if (n > 0) {
            if (p.revents & POLLNVAL) {
                errno = EBADF;
                return rpc_fail("fd %d is not open", fd);
            }
            return 1; /* errors and hang-ups are for the call that follows */
        }
        if (n < 0 && errno != EINTR)
            return rpc_fail("poll on fd %d: %s", fd, strerror(errno));
    }
}

int rpc_send_all(int fd, struct iovec *iov, int iovcnt, uint64_t dl)
{
    while (iovcnt > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
        ssize_t n = vmmc_sock_sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return rpc_fail("send on fd %d: %s", fd, strerror(errno));
            int w = rpc_wait_fd(fd, POLLOUT, dl);
            if (w < 0)
                return -1;
            if (w == 0) {
                errno = ETIMEDOUT;
                return rpc_fail("send on fd %d: the peer took no bytes in time", fd);
            }
            continue;
        }
        size_t left = (size_t)n;
        while (iovcnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

void rpc_rd_next(rpc_rd_t *rd)
{
    memset(rd, 0, sizeof *rd);
}

/* One non-blocking read: bytes, or 0 with errno EAGAIN, or -1. */
static ssize_t rd_some(int fd, void *p, size_t n, int *eof)
{
    for (;;) {
        ssize_t r = vmmc_sock_recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r == 0) {
            *eof = 1;
            errno = ECONNRESET;
            return rpc_fail("fd %d: the peer closed the connection", fd);
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            errno = EAGAIN;
            return 0;
        }
        int e = errno;
        *eof = 0;
        rpc_fail("recv on fd %d: %s", fd, strerror(e));
        errno = e == ECONNRESET || e == EPIPE || e == ENOTCONN ? ECONNRESET : e;
        return -1;
    }
}

int rpc_rd_pump(int fd, rpc_rd_t *rd, rpc_buf_t *b, size_t maxrec, int *eof)
{
    *eof = 0;
    for (;;) {
        if (!rd->in_frag) {
            ssize_t n = rd_some(fd, rd->mark + rd->got, 4 - rd->got, eof);
            if (n <= 0)
                return n < 0 ? -1 : 0;
            rd->got += (unsigned)n;
            if (rd->got < 4)
                continue;
            uint32_t m = ((uint32_t)rd->mark[0] << 24) | ((uint32_t)rd->mark[1] << 16) |
                         ((uint32_t)rd->mark[2] << 8) | rd->mark[3];
            rd->got = 0;
            rd->last = (m & 0x80000000u) != 0;
            rd->frag = m & 0x7fffffffu;
            rd->frags++;
            if (rd->frag == 0 && !rd->last) {
                errno = EPROTO;
                return rpc_fail("fd %d: record mark 0x%08x: an empty fragment that is not "
                                "the last", fd, m);
            }
            if (rd->frag > maxrec - rd->len) {
                errno = EMSGSIZE;
                return rpc_fail("fd %d: a record of more than %zu bytes (a fragment of %u "
                                "after %zu) exceeds VMMC_RPC_MAXREC (%zu)",
                                fd, rd->len + rd->frag, rd->frag, rd->len, maxrec);
            }
            rd->in_frag = 1;
        }
        while (rd->frag > 0) {
            /* grow with the bytes that come, not with what a mark announces */
            size_t want = rd->len + rd->frag;
            size_t cap_step = rd->len + (b->cap > 65536 ? b->cap : 65536);
            if (want > b->cap && rpc_buf_reserve(b, want < cap_step ? want : cap_step, rd->len))
                return -1;
            size_t room = b->cap - rd->len;
            ssize_t n = rd_some(fd, b->p + rd->len, room < rd->frag ? room : rd->frag, eof);
            if (n <= 0)
                return n < 0 ? -1 : 0;
            rd->len += (size_t)n;
            rd->frag -= (uint32_t)n;
        }
        rd->in_frag = 0;
        if (rd->last)
            return 1;
    }
}
