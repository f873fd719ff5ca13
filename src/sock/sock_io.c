/* The send/recv family and sendfile: dispatch on the mode, timeouts,
 * SIGPIPE.
 *
 * KERNEL and LISTENING: the raw system call of the same name, so every
 * errno, signal and flag is the kernel's own. PENDING: run the upgrade step
 * the call calls for (a read may consume the hello, a write decides), then
 * dispatch again on the mode it settled in. VMMC: the conn's send/recv,
 * with one reader (rx_lock) and one writer (tx_lock) at a time, a timeout
 * from O_NONBLOCK / MSG_DONTWAIT / SO_RCVTIMEO / SO_SNDTIMEO, and SIGPIPE
 * raised here on EPIPE unless MSG_NOSIGNAL, as the kernel does. When a call
 * on the conn fails because the connection went back to the kernel
 * meanwhile (a revert), it is made again there. */
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "sock/sock.h"
#include "sock/sock_api.h"
#include "sock/sock_conn_priv.h"
#include "sock/sock_sys.h"

enum { IO_PLAIN, IO_ADDR, IO_MSG, IO_VEC };

/* One call's arguments, whatever its shape. */
typedef struct io_call {
    int kind;
    const char *name;
    void *buf;                   /* IO_PLAIN, IO_ADDR */
    size_t len;
    struct sockaddr *addr;       /* IO_ADDR (recvfrom/sendto) */
    socklen_t *alen, slen;
    struct msghdr *msg;          /* IO_MSG */
    const struct iovec *iov;     /* IO_VEC, and the view of every kind */
    int iovcnt;
    struct iovec one;
} io_call_t;

static ssize_t kernel_recv(int fd, io_call_t *c, int flags)
{
    switch (c->kind) {
    case IO_PLAIN:
    case IO_ADDR:
        return sys_recvfrom(fd, c->buf, c->len, flags, c->addr, c->alen);
    case IO_MSG:
        return sys_recvmsg(fd, c->msg, flags);
    default:
        return sys_readv(fd, c->iov, c->iovcnt);
    }
}

static ssize_t kernel_send(int fd, io_call_t *c, int flags)
{
    switch (c->kind) {
    case IO_PLAIN:
        return sys_sendto(fd, c->buf, c->len, flags, NULL, 0);
    case IO_ADDR:
        return sys_sendto(fd, c->buf, c->len, flags, c->addr, c->slen);
    case IO_MSG:
        return sys_sendmsg(fd, c->msg, flags);
    default:
        return sys_writev(fd, c->iov, c->iovcnt);
    }
}

/* The iovec view of the call; EINVAL as the kernel for a bad vector. */
static int io_view(io_call_t *c)
{
    if (c->kind == IO_PLAIN || c->kind == IO_ADDR) {
        c->one.iov_base = c->buf;
        c->one.iov_len = c->len;
        c->iov = &c->one;
        c->iovcnt = 1;
        return 0;
    }
    if (c->kind == IO_MSG) {
        c->iov = c->msg->msg_iov;
        c->iovcnt = (int)c->msg->msg_iovlen;
        if (c->msg->msg_iovlen > IOV_MAX)
            return SOCK_FAIL(EMSGSIZE, "%s: %zu iovecs (at most %d)", c->name,
                             (size_t)c->msg->msg_iovlen, IOV_MAX);
    }
    if (c->iovcnt < 0 || c->iovcnt > IOV_MAX)
        return SOCK_FAIL(EINVAL, "%s: %d iovecs (0 to %d)", c->name, c->iovcnt, IOV_MAX);
    if (c->iovcnt > 0 && !c->iov)
        return SOCK_FAIL(EFAULT, "%s: NULL iovec array", c->name);
    size_t total = 0;
    for (int i = 0; i < c->iovcnt; i++) {
        if (c->iov[i].iov_len > (size_t)SSIZE_MAX - total)
            return SOCK_FAIL(EINVAL, "%s: the iovecs add up to more than SSIZE_MAX", c->name);
        total += c->iov[i].iov_len;
    }
    return 0;
}

/* The kernel's answer, with a message when it fails. */
static ssize_t kernel_done(io_call_t *c, int fd, ssize_t r)
{
    if (r < 0 && errno != EAGAIN)
        SOCK_SYSFAIL("%s: descriptor %d", c->name, fd);
    else if (r < 0)
        vmmc_error(VMMC_ERR_AGAIN, "%s: descriptor %d: nothing now (EAGAIN)", c->name, fd);
    return r;
}

/* A PENDING socket: settle it for @p why. 0 when the mode is decided (the
 * caller dispatches again), -1/errno for the call to return. */
static int pending(sock_t *s, io_call_t *c, int why, int timeout_ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (sock_settle(s, why, timeout_ms) == 0 || atomic_load(&s->mode) != VMMC_SOCK_PENDING)
            return 0;
        int left = timeout_ms;
        if (timeout_ms > 0) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            long long ms = (t.tv_sec - t0.tv_sec) * 1000ll + (t.tv_nsec - t0.tv_nsec) / 1000000;
            left = ms >= timeout_ms ? 0 : timeout_ms - (int)ms;
        }
        if (errno != EAGAIN || left == 0) {
            int e = errno;
            return SOCK_FAIL(e, "%s: descriptor %d: %s", c->name, s->fd,
                             e == EAGAIN ? "nothing now (EAGAIN)" : strerror(e));
        }
        /* nothing came yet: sleep on the kernel until it does (a hello or
         * the first bytes), within the call's timeout */
        struct pollfd p = {.fd = s->fd, .events = why == SOCK_UP_WRITE ? POLLOUT : POLLIN};
        int r = sys_poll(&p, 1, left);
        if (r < 0)
            return SOCK_SYSFAIL("%s: descriptor %d", c->name, s->fd);
        if (r == 0)
            return SOCK_FAIL(EAGAIN, "%s: descriptor %d: nothing within the timeout (EAGAIN)",
                             c->name, s->fd);
    }
}

/* The start of each turn of io_recv and io_send, the same for both: the
 * kernel's socket is the kernel's call (IO_DONE, *@p r its answer); a
 * pending one is driven (IO_AGAIN: look at the mode again; IO_DONE with -1
 * if that fails); an upgraded one gets its iovec view and its timeout in
 * *@p timeout (IO_VMMC, or IO_DONE with -1 for a bad vector). */
enum { IO_VMMC, IO_AGAIN, IO_DONE };

static int io_turn(sock_t *s, int fd, io_call_t *c, int flags, int send, int *timeout,
                   ssize_t *r)
{
    int mode = atomic_load(&s->mode);
    if (mode == VMMC_SOCK_KERNEL || mode == VMMC_SOCK_LISTENING) {
        *r = kernel_done(c, fd, send ? kernel_send(fd, c, flags) : kernel_recv(fd, c, flags));
        return IO_DONE;
    }
    *timeout = sock_timeout(s, flags, send);
    if (mode == VMMC_SOCK_PENDING) {
        if (pending(s, c, send ? SOCK_UP_WRITE : SOCK_UP_READ, *timeout) < 0) {
            *r = -1;
            return IO_DONE;
        }
        return IO_AGAIN;
    }
    if (io_view(c) < 0) {
        *r = -1;
        return IO_DONE;
    }
    return IO_VMMC;
}

static ssize_t io_recv(int fd, io_call_t *c, int flags)
{
    sock_t *s = sock_get(fd);
    if (!s)
        return kernel_done(c, fd, kernel_recv(fd, c, flags));
    ssize_t r;
    for (;;) {
        int timeout, t = io_turn(s, fd, c, flags, 0, &timeout, &r);
        if (t == IO_DONE)
            break;
        if (t == IO_AGAIN)
            continue;
        if (flags & (MSG_OOB | MSG_ERRQUEUE)) {
            r = SOCK_FAIL(flags & MSG_OOB ? EINVAL : EAGAIN,
                          "%s: descriptor %d: no urgent data nor error queue on vmmc", c->name,
                          fd);
            break;
        }
        pthread_mutex_lock(&s->rx_lock);
        if (atomic_load(&s->mode) != VMMC_SOCK_VMMC || !s->conn) {
            pthread_mutex_unlock(&s->rx_lock);
            continue;
        }
        r = sock_conn_recv(s->conn, c->iov, c->iovcnt, flags & ~MSG_DONTWAIT, timeout);
        int e = errno;
        pthread_mutex_unlock(&s->rx_lock);
        if (r < 0 && atomic_load(&s->mode) != VMMC_SOCK_VMMC)
            continue; /* back on the kernel: ask it */
        if (r < 0) {
            SOCK_FAIL(e, "%s: descriptor %d: %s", c->name, fd, strerror(e));
            break;
        }
        /* a TCP peer's address is not given with its bytes */
        if (c->kind == IO_ADDR && c->alen)
            *c->alen = 0;
        if (c->kind == IO_MSG) {
            c->msg->msg_namelen = 0;
            c->msg->msg_controllen = 0;
            c->msg->msg_flags = 0;
        }
        break;
    }
    int e = errno;
    sock_put(s);
    errno = e;
    return r;
}

static ssize_t io_send(int fd, io_call_t *c, int flags)
{
    sock_t *s = sock_get(fd);
    if (!s)
        return kernel_done(c, fd, kernel_send(fd, c, flags));
    ssize_t r;
    for (;;) {
        int timeout, t = io_turn(s, fd, c, flags, 1, &timeout, &r);
        if (t == IO_DONE)
            break;
        if (t == IO_AGAIN)
            continue;
        if (flags & MSG_OOB) {
            r = SOCK_FAIL(EOPNOTSUPP, "%s: descriptor %d: no urgent data on vmmc", c->name, fd);
            break;
        }
        pthread_mutex_lock(&s->tx_lock);
        if (atomic_load(&s->mode) != VMMC_SOCK_VMMC || !s->conn) {
            pthread_mutex_unlock(&s->tx_lock);
            continue;
        }
        sock_conn_t *cn = s->conn;
        r = sock_conn_send(cn, c->iov, c->iovcnt, flags & ~MSG_DONTWAIT, timeout);
        int e = errno;
        int owed = sock_conn_tx_owed(cn); /* kept 2 s if retired meanwhile */
        pthread_mutex_unlock(&s->tx_lock);
        if (owed)
            sock_conn_tx_after(s);
        if (r < 0 && atomic_load(&s->mode) != VMMC_SOCK_VMMC)
            continue;
        if (r < 0) {
            SOCK_FAIL(e, "%s: descriptor %d: %s", c->name, fd, strerror(e));
            if (e == EPIPE && !(flags & MSG_NOSIGNAL))
                pthread_kill(pthread_self(), SIGPIPE); /* to this thread, as the kernel */
            errno = e;
        }
        break;
    }
    int e = errno;
    sock_put(s);
    errno = e;
    return r;
}

ssize_t vmmc_sock_recv(int fd, void *buf, size_t len, int flags)
{
    io_call_t c = {.kind = IO_PLAIN, .name = "vmmc_sock_recv", .buf = buf, .len = len};
    return io_recv(fd, &c, flags);
}

ssize_t vmmc_sock_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
                           socklen_t *alen)
{
    io_call_t c = {.kind = IO_ADDR, .name = "vmmc_sock_recvfrom", .buf = buf, .len = len,
                   .addr = addr, .alen = alen};
    return io_recv(fd, &c, flags);
}

ssize_t vmmc_sock_recvmsg(int fd, struct msghdr *msg, int flags)
{
    if (!msg)
        return SOCK_FAIL(EFAULT, "vmmc_sock_recvmsg: NULL msghdr");
    io_call_t c = {.kind = IO_MSG, .name = "vmmc_sock_recvmsg", .msg = msg};
    return io_recv(fd, &c, flags);
}

ssize_t vmmc_sock_readv(int fd, const struct iovec *iov, int iovcnt)
{
    io_call_t c = {.kind = IO_VEC, .name = "vmmc_sock_readv", .iov = iov, .iovcnt = iovcnt};
    return io_recv(fd, &c, 0);
}

ssize_t vmmc_sock_send(int fd, const void *buf, size_t len, int flags)
{
    io_call_t c = {.kind = IO_PLAIN, .name = "vmmc_sock_send", .buf = (void *)buf, .len = len};
    return io_send(fd, &c, flags);
}

ssize_t vmmc_sock_sendto(int fd, const void *buf, size_t len, int flags,
                         const struct sockaddr *addr, socklen_t alen)
{
    io_call_t c = {.kind = IO_ADDR, .name = "vmmc_sock_sendto", .buf = (void *)buf, .len = len,
                   .addr = (struct sockaddr *)addr, .slen = alen};
    return io_send(fd, &c, flags);
}

ssize_t vmmc_sock_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (!msg)
        return SOCK_FAIL(EFAULT, "vmmc_sock_sendmsg: NULL msghdr");
    io_call_t c = {.kind = IO_MSG, .name = "vmmc_sock_sendmsg", .msg = (struct msghdr *)msg};
    return io_send(fd, &c, flags);
}

ssize_t vmmc_sock_writev(int fd, const struct iovec *iov, int iovcnt)
{
    io_call_t c = {.kind = IO_VEC, .name = "vmmc_sock_writev", .iov = iov, .iovcnt = iovcnt};
    return io_send(fd, &c, 0);
}

ssize_t vmmc_sock_sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
    sock_t *s = sock_get(out_fd);
    io_call_t c = {.kind = IO_PLAIN, .name = "vmmc_sock_sendfile"};
    ssize_t r;
    for (;;) {
        int mode = s ? atomic_load(&s->mode) : VMMC_SOCK_KERNEL;
        if (mode == VMMC_SOCK_KERNEL || mode == VMMC_SOCK_LISTENING) {
            r = sys_sendfile(out_fd, in_fd, offset, count);
            if (r < 0)
                SOCK_SYSFAIL("vmmc_sock_sendfile: %d to %d", in_fd, out_fd);
            break;
        }
        int timeout = sock_timeout(s, 0, 1);
        if (mode == VMMC_SOCK_PENDING) {
            if (pending(s, &c, SOCK_UP_WRITE, timeout) < 0) {
                r = -1;
                break;
            }
            continue;
        }
        pthread_mutex_lock(&s->tx_lock);
        if (atomic_load(&s->mode) != VMMC_SOCK_VMMC || !s->conn) {
            pthread_mutex_unlock(&s->tx_lock);
            continue;
        }
        sock_conn_t *cn = s->conn;
        r = sock_conn_sendfile(cn, in_fd, offset, count, timeout);
        int e = errno;
        int owed = sock_conn_tx_owed(cn); /* kept 2 s if retired meanwhile */
        pthread_mutex_unlock(&s->tx_lock);
        if (owed)
            sock_conn_tx_after(s);
        if (r < 0 && atomic_load(&s->mode) != VMMC_SOCK_VMMC)
            continue;
        if (r < 0) {
            SOCK_FAIL(e, "vmmc_sock_sendfile: %d to %d: %s", in_fd, out_fd, strerror(e));
            if (e == EPIPE)
                pthread_kill(pthread_self(), SIGPIPE); /* sendfile has no MSG_NOSIGNAL */
            errno = e;
        }
        break;
    }
    if (s) {
        int e = errno;
        sock_put(s);
        errno = e;
    }
    return r;
}
