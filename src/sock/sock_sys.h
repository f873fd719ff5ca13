/* Raw system calls for the sockets layer.
 *
 * When libvmmc-preload.so interposes the libc socket calls (socket, recv,
 * poll, close, ...), a call the layer makes through libc would come back to
 * the preload and so to the layer. The layer therefore reaches the kernel
 * through these wrappers, which issue the system call directly. Same
 * convention as libc: -1 with errno set on failure. */
#ifndef VMMC_SOCK_SYS_H
#define VMMC_SOCK_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static inline int sys_socket(int domain, int type, int proto)
{
    return (int)syscall(SYS_socket, domain, type, proto);
}
static inline int sys_connect(int fd, const struct sockaddr *a, socklen_t l)
{
    return (int)syscall(SYS_connect, fd, a, l);
}
static inline int sys_bind(int fd, const struct sockaddr *a, socklen_t l)
{
    return (int)syscall(SYS_bind, fd, a, l);
}
static inline int sys_listen(int fd, int backlog)
{
    return (int)syscall(SYS_listen, fd, backlog);
}
static inline int sys_accept4(int fd, struct sockaddr *a, socklen_t *l, int flags)
{
    return (int)syscall(SYS_accept4, fd, a, l, flags);
}
static inline ssize_t sys_recvfrom(int fd, void *b, size_t n, int flags, struct sockaddr *a,
                                   socklen_t *l)
{
    return syscall(SYS_recvfrom, fd, b, n, flags, a, l);
}
static inline ssize_t sys_sendto(int fd, const void *b, size_t n, int flags,
                                 const struct sockaddr *a, socklen_t l)
{
    return syscall(SYS_sendto, fd, b, n, flags, a, l);
}
static inline ssize_t sys_recvmsg(int fd, struct msghdr *m, int flags)
{
    return syscall(SYS_recvmsg, fd, m, flags);
}
static inline ssize_t sys_sendmsg(int fd, const struct msghdr *m, int flags)
{
    return syscall(SYS_sendmsg, fd, m, flags);
}
static inline ssize_t sys_read(int fd, void *b, size_t n)
{
    return syscall(SYS_read, fd, b, n);
}
static inline ssize_t sys_write(int fd, const void *b, size_t n)
{
    return syscall(SYS_write, fd, b, n);
}
static inline ssize_t sys_readv(int fd, const struct iovec *iov, int n)
{
    return syscall(SYS_readv, fd, iov, n);
}
static inline ssize_t sys_writev(int fd, const struct iovec *iov, int n)
{
    return syscall(SYS_writev, fd, iov, n);
}
static inline ssize_t sys_pread(int fd, void *b, size_t n, off_t off)
{
    return syscall(SYS_pread64, fd, b, n, off);
}
static inline ssize_t sys_sendfile(int out, int in, off_t *off, size_t n)
{
    return syscall(SYS_sendfile, out, in, off, n);
}
static inline int sys_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}
static inline int sys_shutdown(int fd, int how)
{
    return (int)syscall(SYS_shutdown, fd, how);
}
static inline int sys_dup(int fd)
{
    return (int)syscall(SYS_dup, fd);
}
static inline int sys_dup3(int o, int n, int flags)
{
    return (int)syscall(SYS_dup3, o, n, flags);
}
static inline int sys_fcntl(int fd, int cmd, long arg)
{
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}
static inline int sys_ioctl(int fd, unsigned long req, void *arg)
{
    return (int)syscall(SYS_ioctl, fd, req, arg);
}
static inline int sys_getsockopt(int fd, int lvl, int name, void *v, socklen_t *l)
{
    return (int)syscall(SYS_getsockopt, fd, lvl, name, v, l);
}
static inline int sys_setsockopt(int fd, int lvl, int name, const void *v, socklen_t l)
{
    return (int)syscall(SYS_setsockopt, fd, lvl, name, v, l);
}
static inline int sys_getsockname(int fd, struct sockaddr *a, socklen_t *l)
{
    return (int)syscall(SYS_getsockname, fd, a, l);
}
static inline int sys_getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
    return (int)syscall(SYS_getpeername, fd, a, l);
}
/* poll() with a millisecond timeout (-1: forever), through ppoll. */
static inline int sys_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    struct timespec ts, *tp = NULL;
    if (timeout_ms >= 0) {
        ts.tv_sec = timeout_ms / 1000;
        ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
        tp = &ts;
    }
    return (int)syscall(SYS_ppoll, fds, n, tp, NULL, (size_t)8);
}
static inline int sys_ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
                            const sigset_t *mask)
{
    return (int)syscall(SYS_ppoll, fds, n, ts, mask, (size_t)8);
}
static inline int sys_epoll_ctl(int ep, int op, int fd, void *ev)
{
    return (int)syscall(SYS_epoll_ctl, ep, op, fd, ev);
}
static inline int sys_epoll_pwait(int ep, void *evs, int max, int timeout_ms,
                                  const sigset_t *mask)
{
    return (int)syscall(SYS_epoll_pwait, ep, evs, max, timeout_ms, mask, (size_t)8);
}

#endif /* VMMC_SOCK_SYS_H */
