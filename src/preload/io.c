/* Reading and writing on vmmc sockets for libvmmc-preload.so: read/write,
 * readv/writev, the send and recv families, sendfile, and glibc's fortified
 * variants (which a program built with _FORTIFY_SOURCE calls instead of
 * read/recv/recvfrom, and which would otherwise reach the kernel without
 * passing here). A call that fails with EAGAIN tells the epoll emulation
 * (pl_ep_eagain): an edge-triggered waiter must hear of the next bytes. */
#include "preload/preload.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <unistd.h>

PL_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_recv(fd, buf, n, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLIN);
        return r;
    }
    return REAL(read)(fd, buf, n);
}

PL_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_send(fd, buf, n, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLOUT);
        return r;
    }
    return REAL(write)(fd, buf, n);
}

PL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_readv(fd, iov, iovcnt);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLIN);
        return r;
    }
    return REAL(readv)(fd, iov, iovcnt);
}

PL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_writev(fd, iov, iovcnt);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLOUT);
        return r;
    }
    return REAL(writev)(fd, iov, iovcnt);
}

PL_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_recv(fd, buf, n, flags);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLIN);
        return r;
    }
    return REAL(recv)(fd, buf, n, flags);
}

PL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
                           socklen_t *alen)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_recvfrom(fd, buf, n, flags, addr, alen);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLIN);
        return r;
    }
    return REAL(recvfrom)(fd, buf, n, flags, addr, alen);
}

PL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_recvmsg(fd, msg, flags);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLIN);
        return r;
    }
    return REAL(recvmsg)(fd, msg, flags);
}

PL_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_send(fd, buf, n, flags);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLOUT);
        return r;
    }
    return REAL(send)(fd, buf, n, flags);
}

PL_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
                         const struct sockaddr *addr, socklen_t alen)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_sendto(fd, buf, n, flags, addr, alen);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLOUT);
        return r;
    }
    return REAL(sendto)(fd, buf, n, flags, addr, alen);
}

PL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (vmmc_sock_is(fd)) {
        ssize_t r = vmmc_sock_sendmsg(fd, msg, flags);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(fd, EPOLLOUT);
        return r;
    }
    return REAL(sendmsg)(fd, msg, flags);
}

PL_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
    if (vmmc_sock_is(out_fd)) {
        ssize_t r = vmmc_sock_sendfile(out_fd, in_fd, offset, count);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            pl_ep_eagain(out_fd, EPOLLOUT);
        return r;
    }
    return REAL(sendfile)(out_fd, in_fd, offset, count);
}

/* off64_t and off_t are one type on the 64-bit targets vmmc builds for. */
_Static_assert(sizeof(off64_t) == sizeof(off_t), "off64_t is off_t");

PL_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
    if (vmmc_sock_is(out_fd))
        return sendfile(out_fd, in_fd, (off_t *)offset, count);
    return REAL(sendfile64)(out_fd, in_fd, offset, count);
}

/* The fortified variants check the buffer's size as glibc's do, then take
 * the same path as the plain call. */
static void chk_fail(void)
{
    void (*f)(void) = (void (*)(void))pl_real(R___chk_fail);
    if (f)
        f();
    abort();
}

PL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen)
{
    if (nbytes > buflen)
        chk_fail();
    return read(fd, buf, nbytes);
}

PL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
    if (len > buflen)
        chk_fail();
    return recv(fd, buf, len, flags);
}

PL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                                 struct sockaddr *addr, socklen_t *alen)
{
    if (len > buflen)
        chk_fail();
    return recvfrom(fd, buf, len, flags, addr, alen);
}
