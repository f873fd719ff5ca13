/* The socket calls of libvmmc-preload.so: making, naming, connecting,
 * closing and duplicating sockets, their flags and options. A TCP socket
 * (IPv4 or IPv6) is made by vmmc_sock_socket() and so becomes a vmmc
 * socket; every other call on it goes to vmmc_sock_*; every other
 * descriptor goes to libc unchanged. */
#include "preload/preload.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* What the sockets layer takes: TCP over IPv4 or IPv6. */
static int is_tcp(int domain, int type, int protocol)
{
    return (domain == AF_INET || domain == AF_INET6) &&
           (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
           (protocol == 0 || protocol == IPPROTO_TCP);
}

PL_EXPORT int socket(int domain, int type, int protocol)
{
    if (!is_tcp(domain, type, protocol))
        return REAL(socket)(domain, type, protocol);
    pl_init();
    return vmmc_sock_socket(domain, type, protocol);
}

PL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_connect(fd, addr, len);
    return REAL(connect)(fd, addr, len);
}

PL_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_bind(fd, addr, len);
    return REAL(bind)(fd, addr, len);
}

PL_EXPORT int listen(int fd, int backlog)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_listen(fd, backlog);
    return REAL(listen)(fd, backlog);
}

PL_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_accept(fd, addr, len, 0);
    return REAL(accept)(fd, addr, len);
}

PL_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_accept(fd, addr, len, flags);
    return REAL(accept4)(fd, addr, len, flags);
}

PL_EXPORT int shutdown(int fd, int how)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_shutdown(fd, how);
    return REAL(shutdown)(fd, how);
}

PL_EXPORT int close(int fd)
{
    if (vmmc_sock_is(fd)) {
        pl_ep_fd_closing(fd);
        return vmmc_sock_close(fd);
    }
    if (__builtin_expect(pl_ep_known(fd), 0))
        pl_ep_fd_closing(fd);
    return REAL(close)(fd);
}

PL_EXPORT int dup(int fd)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_dup(fd);
    int r = REAL(dup)(fd);
    if (r >= 0 && pl_ep_known(fd))
        pl_ep_fd_dup(fd, r);
    return r;
}

/* dup2/dup3: when either descriptor is a vmmc socket the layer does it
 * (it forgets a socket that @p newfd named, then duplicates); an epoll
 * instance or a socket that @p newfd named leaves the epoll state first. */
static int dup_common(int oldfd, int newfd, int flags, int is_dup2)
{
    if (is_dup2 && oldfd == newfd)   /* dup2 of a descriptor onto itself: a check */
        return REAL(fcntl)(oldfd, F_GETFD) < 0 ? -1 : newfd;
    if (REAL(fcntl)(oldfd, F_GETFD) < 0)
        return -1;                   /* EBADF before anything is replaced */
    int vnew = vmmc_sock_is(newfd);
    if (vnew || pl_ep_known(newfd))
        pl_ep_fd_closing(newfd);
    int r;
    if (vnew || vmmc_sock_is(oldfd))
        r = vmmc_sock_dup3(oldfd, newfd, flags);
    else
        r = is_dup2 ? REAL(dup2)(oldfd, newfd) : REAL(dup3)(oldfd, newfd, flags);
    if (r >= 0 && pl_ep_known(oldfd))
        pl_ep_fd_dup(oldfd, r);
    return r;
}

PL_EXPORT int dup2(int oldfd, int newfd)
{
    return dup_common(oldfd, newfd, 0, 1);
}

PL_EXPORT int dup3(int oldfd, int newfd, int flags)
{
    if (oldfd == newfd || (flags & ~O_CLOEXEC))
        return REAL(dup3)(oldfd, newfd, flags);    /* the kernel's EINVAL */
    return dup_common(oldfd, newfd, flags, 0);
}

/* fcntl and fcntl64: one int or pointer argument, as the kernel's. */
static int fcntl_common(int fd, int cmd, long arg, int is64)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_fcntl(fd, cmd, arg);
    int r;
    if (is64 && pl_real(R_fcntl64))
        r = REAL(fcntl64)(fd, cmd, arg);
    else
        r = REAL(fcntl)(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && pl_ep_known(fd))
        pl_ep_fd_dup(fd, r);
    return r;
}

PL_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return fcntl_common(fd, cmd, arg, 0);
}

PL_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return fcntl_common(fd, cmd, arg, 1);
}

PL_EXPORT int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (vmmc_sock_is(fd))
        return vmmc_sock_ioctl(fd, req, arg);
    return REAL(ioctl)(fd, req, arg);
}

PL_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_getsockopt(fd, level, name, val, len);
    return REAL(getsockopt)(fd, level, name, val, len);
}

PL_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    if (vmmc_sock_is(fd))
        return vmmc_sock_setsockopt(fd, level, name, val, len);
    return REAL(setsockopt)(fd, level, name, val, len);
}
