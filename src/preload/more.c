/* The less common calls that would read or write an upgraded socket's TCP
 * side behind the sockets layer's back if they reached the kernel:
 * recvmmsg/sendmmsg (one message at a time through the layer), splice
 * (through a buffer), and close_range (the layer must forget the sockets it
 * closes). */
#include "preload/preload.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

PL_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
    if (!vmmc_sock_is(fd))
        return REAL(sendmmsg)(fd, v, n, flags);
    unsigned int i;
    for (i = 0; i < n; i++) {
        ssize_t r = vmmc_sock_sendmsg(fd, &v[i].msg_hdr, flags);
        if (r < 0)
            return i ? (int)i : -1;
        v[i].msg_len = (unsigned int)r;
    }
    return (int)i;
}

/* The timeout is not applied: the socket's own (SO_RCVTIMEO) is. */
PL_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
                       struct timespec *timeout)
{
    if (!vmmc_sock_is(fd))
        return REAL(recvmmsg)(fd, v, n, flags, timeout);
    unsigned int i;
    for (i = 0; i < n; i++) {
        int f = flags & ~MSG_WAITFORONE;
        if (i && (flags & MSG_WAITFORONE))
            f |= MSG_DONTWAIT;
        ssize_t r = vmmc_sock_recvmsg(fd, &v[i].msg_hdr, f);
        if (r < 0)
            return i ? (int)i : -1;
        v[i].msg_len = (unsigned int)r;
        if (r == 0) {   /* EOF: this one is the last */
            i++;
            break;
        }
    }
    return (int)i;
}

/* splice with a vmmc socket on one side, through a buffer, at most 64K per
 * call (splice may move less than asked), and never losing a byte: from a
 * socket, the bytes are peeked, written, and only what was written is
 * consumed; to a socket, what was read is all sent, waiting for room if it
 * must (a non-blocking socket then blocks in this call). */
static ssize_t splice_from_sock(int in, int out, loff_t *out_off, size_t n, int nb)
{
    char buf[65536];
    ssize_t r = vmmc_sock_recv(in, buf, n, MSG_PEEK | (nb ? MSG_DONTWAIT : 0));
    if (r <= 0)
        return r;
    ssize_t w = out_off ? pwrite(out, buf, (size_t)r, *out_off) : write(out, buf, (size_t)r);
    if (w <= 0)
        return w;
    ssize_t c = vmmc_sock_recv(in, buf, (size_t)w, MSG_DONTWAIT);   /* they are there */
    if (c != w)
        return pl_fail(EIO);   /* cannot be: only this call reads the socket now */
    if (out_off)
        *out_off += w;
    return w;
}

static ssize_t splice_to_sock(int in, loff_t *in_off, int out, size_t n)
{
    char buf[65536];
    ssize_t r = in_off ? pread(in, buf, n, *in_off) : read(in, buf, n);
    if (r <= 0)
        return r;
    size_t done = 0;
    while (done < (size_t)r) {
        ssize_t w = vmmc_sock_send(out, buf + done, (size_t)r - done, MSG_NOSIGNAL);
        if (w >= 0) {
            done += (size_t)w;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            struct pollfd p = {.fd = out, .events = POLLOUT};
            vmmc_sock_poll(&p, 1, -1);
            continue;
        }
        if (!done)
            return -1;   /* the peer is gone: the bytes could go nowhere */
        break;
    }
    if (in_off)
        *in_off += (loff_t)r;
    return (ssize_t)done;
}

PL_EXPORT ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off, size_t len,
                         unsigned int flags)
{
    int vin = vmmc_sock_is(in), vout = vmmc_sock_is(out);
    if (!vin && !vout)
        return REAL(splice)(in, in_off, out, out_off, len, flags);
    if ((vin && in_off) || (vout && out_off) || (vin && vout))
        return pl_fail(vin && vout ? EINVAL : ESPIPE);
    size_t n = len < 65536 ? len : 65536;
    if (vin)
        return splice_from_sock(in, out, out_off, n, (flags & SPLICE_F_NONBLOCK) != 0);
    return splice_to_sock(in, in_off, out, n);
}

PL_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
    if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last) {
        struct rlimit rl;
        unsigned int top = last;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            rl.rlim_cur - 1 < top)
            top = (unsigned int)(rl.rlim_cur - 1);
        for (unsigned int fd = first; fd <= top && fd <= (unsigned int)INT32_MAX; fd++)
            if (vmmc_sock_is((int)fd) || pl_ep_known((int)fd))
                close((int)fd);
    }
    if (!pl_real(R_close_range))
        return pl_fail(ENOSYS);
    return REAL(close_range)(first, last, flags);
}
