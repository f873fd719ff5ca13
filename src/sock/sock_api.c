/* The public calls of vmmc/sock.h that make, connect, close and describe
 * sockets (the send/recv family is sock_io.c, readiness sock_poll.c).
 *
 * Every call dispatches on the socket's mode. A descriptor the table does
 * not know goes to the kernel unchanged, so the kernel's own errno comes
 * back (EBADF for a closed descriptor, ENOTSOCK for a file). Calls the
 * layer does not change (bind, getsockopt, getsockname, ...) are the
 * kernel's on the socket's own descriptor, which is a real TCP socket in
 * every mode. */
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "sock/sock.h"
#include "sock/sock_api.h"
#include "sock/sock_sys.h"

int sock_fail(int err, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vmmc_error(VMMC_ERR_SYSTEM, "%s", msg);
    errno = err;
    return -1;
}

int sock_sysfail(const char *fmt, ...)
{
    int e = errno;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vmmc_error(VMMC_ERR_SYSTEM, "%s: %s", msg, strerror(e));
    errno = e;
    return -1;
}

sock_t *sock_lookup(int fd, const char *call)
{
    sock_t *s = sock_get(fd);
    if (!s)
        SOCK_FAIL(EBADF, "%s: descriptor %d is not a vmmc socket", call, fd);
    return s;
}

int sock_timeout(sock_t *s, int flags, int for_send)
{
    if ((flags & MSG_DONTWAIT) || atomic_load_explicit(&s->nonblock, memory_order_relaxed))
        return 0;
    return for_send ? s->sndtimeo_ms : s->rcvtimeo_ms;
}

static void note_addrs(sock_t *s)
{
    s->peer_len = sizeof s->peer;
    if (sys_getpeername(s->fd, (struct sockaddr *)&s->peer, &s->peer_len) < 0)
        s->peer_len = 0;
    s->local_len = sizeof s->local;
    if (sys_getsockname(s->fd, (struct sockaddr *)&s->local, &s->local_len) < 0)
        s->local_len = 0;
}

/* ------------------------------------------------------------------------ */
/* making sockets */

int vmmc_sock_socket(int domain, int type, int protocol)
{
    if (domain != AF_INET && domain != AF_INET6)
        return SOCK_FAIL(EAFNOSUPPORT, "vmmc_sock_socket: domain %d is not AF_INET or AF_INET6",
                         domain);
    if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM)
        return SOCK_FAIL((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC | 0xf)) ? EINVAL : EPROTONOSUPPORT,
                         "vmmc_sock_socket: type %#x is not SOCK_STREAM (with SOCK_NONBLOCK, "
                         "SOCK_CLOEXEC)",
                         (unsigned)type);
    if (protocol != 0 && protocol != IPPROTO_TCP)
        return SOCK_FAIL(EPROTONOSUPPORT, "vmmc_sock_socket: protocol %d is not TCP", protocol);
    int fd = sys_socket(domain, type, protocol);
    if (fd < 0)
        return SOCK_SYSFAIL("vmmc_sock_socket: socket()");
    sock_t *s = sock_fd_new(fd, domain);
    if (!s) {
        int e = errno;
        sys_close(fd);
        errno = e;
        return -1;
    }
    sock_put(s);
    return fd;
}

int vmmc_sock_adopt(int fd)
{
    if (vmmc_sock_is(fd))
        return 0;
    int v[3];
    socklen_t l = sizeof v[0];
    if (sys_getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v[0], &l) < 0)
        return SOCK_SYSFAIL("vmmc_sock_adopt: descriptor %d", fd);
    l = sizeof v[1];
    if (sys_getsockopt(fd, SOL_SOCKET, SO_TYPE, &v[1], &l) < 0)
        return SOCK_SYSFAIL("vmmc_sock_adopt: descriptor %d", fd);
    l = sizeof v[2];
    if (sys_getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v[2], &l) < 0)
        return SOCK_SYSFAIL("vmmc_sock_adopt: descriptor %d", fd);
    if ((v[0] != AF_INET && v[0] != AF_INET6) || v[1] != SOCK_STREAM || v[2] != IPPROTO_TCP)
        return SOCK_FAIL(EPROTONOSUPPORT,
                         "vmmc_sock_adopt: descriptor %d is not a TCP socket (domain %d, type "
                         "%d, protocol %d)",
                         fd, v[0], v[1], v[2]);
    int listening = 0;
    l = sizeof listening;
    if (sys_getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) < 0)
        listening = 0;
    sock_t *s = sock_fd_new(fd, v[0]);
    if (!s)
        return -1;
    /* A connected socket stays on the kernel: which side of the connection
     * it is cannot be known here, and both must agree to upgrade. */
    note_addrs(s);
    if (listening) {
        sock_set_mode(s, VMMC_SOCK_LISTENING);
        if (sock_cfg()->upgrade)
            (void)sock_probe_listen(s);
    }
    sock_put(s);
    return 0;
}

int vmmc_sock_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (sys_bind(fd, addr, len) < 0)
        return SOCK_SYSFAIL("vmmc_sock_bind: descriptor %d", fd);
    return 0;
}

/* Is @p fd bound to a port of its own yet (not listened on: listen binds one)? */
static int bound_to_port(int fd)
{
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    if (sys_getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return 0;
    if (a.ss_family == AF_INET)
        return ((struct sockaddr_in *)&a)->sin_port != 0;
    if (a.ss_family == AF_INET6)
        return ((struct sockaddr_in6 *)&a)->sin6_port != 0;
    return 0;
}

int vmmc_sock_listen(int fd, int backlog)
{
    sock_t *s = sock_get(fd);
    /* A bound socket's probe port opens before the kernel's listen: a client
     * that retries connect() until the listener is up probes as soon as its
     * connect succeeds, and a probe refused for want of the UDP port would
     * keep its connection on TCP for good. */
    int early = 0;
    if (s && sock_cfg()->upgrade && atomic_load(&s->mode) != VMMC_SOCK_LISTENING && !s->lst &&
        bound_to_port(fd)) {
        (void)sock_probe_listen(s);
        early = s->lst != NULL;
    }
    if (sys_listen(fd, backlog) < 0) {
        int e = errno;
        if (early)
            sock_probe_unlisten(s);
        if (s)
            sock_put(s);
        errno = e;
        return SOCK_SYSFAIL("vmmc_sock_listen: descriptor %d", fd);
    }
    if (!s)
        return 0; /* not ours: the kernel's listen, nothing more */
    pthread_mutex_lock(&s->lock);
    int first = atomic_load(&s->mode) != VMMC_SOCK_LISTENING;
    if (first)
        note_addrs(s);
    pthread_mutex_unlock(&s->lock);
    if (first) {
        sock_set_mode(s, VMMC_SOCK_LISTENING);
        if (sock_cfg()->upgrade)
            (void)sock_probe_listen(s); /* failing only means it never upgrades */
    }
    sock_put(s);
    return 0;
}

int vmmc_sock_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
        return SOCK_FAIL(EINVAL, "vmmc_sock_accept: flags %#x (only SOCK_NONBLOCK, SOCK_CLOEXEC)",
                         (unsigned)flags);
    int nfd = sys_accept4(fd, addr, len, flags);
    if (nfd < 0)
        return SOCK_SYSFAIL("vmmc_sock_accept: descriptor %d", fd);
    sock_t *l = sock_get(fd);
    if (!l)
        return nfd; /* a listener that is not ours: a plain kernel socket */
    sock_t *s = sock_fd_new(nfd, l->domain);
    if (!s) {
        int e = errno;
        sys_close(nfd);
        sock_put(l);
        errno = e;
        return -1;
    }
    s->accepted = 1;
    note_addrs(s);
    if (sock_cfg()->upgrade && l->lst)
        sock_set_mode(s, VMMC_SOCK_PENDING);
    sock_put(s);
    sock_put(l);
    return nfd;
}

/* ------------------------------------------------------------------------ */
/* connect and the client's upgrade */

int sock_connect_done(sock_t *s)
{
    struct pollfd p = {.fd = s->fd, .events = POLLOUT};
    int r = sys_poll(&p, 1, 0);
    if (r < 0)
        return -1;
    if (r == 0)
        return 0;
    /* Failed: leave SO_ERROR to the kernel (the application's next call
     * there reports it, as without vmmc). */
    if (p.revents & (POLLERR | POLLHUP)) {
        pthread_mutex_lock(&s->lock);
        s->connecting = 0;
        pthread_mutex_unlock(&s->lock);
        sock_set_mode(s, VMMC_SOCK_KERNEL);
        errno = ECONNREFUSED;
        return -1;
    }
    return 1;
}

/* The connection is established: upgrade once (one thread does it; the
 * others wait for the mode to settle). */
static int client_up(sock_t *s, int timeout_ms)
{
    pthread_mutex_lock(&s->lock);
    int decided = atomic_load(&s->mode) != VMMC_SOCK_PENDING;
    int mine = !decided && s->connecting != 2;
    if (mine)
        s->connecting = 2;
    pthread_mutex_unlock(&s->lock);
    if (decided)
        return 0;
    if (!mine) {
        /* another thread runs the probe (bounded by its timeout) */
        struct timespec d = {0, 1000000};
        for (int waited = 0; atomic_load(&s->mode) == VMMC_SOCK_PENDING; waited++) {
            if (timeout_ms >= 0 && waited >= timeout_ms) {
                errno = EAGAIN;
                return -1;
            }
            nanosleep(&d, NULL);
        }
        return 0;
    }
    note_addrs(s);
    int r = sock_up_client(s);
    pthread_mutex_lock(&s->lock);
    s->connecting = 0;
    pthread_mutex_unlock(&s->lock);
    if (atomic_load(&s->mode) == VMMC_SOCK_PENDING)
        sock_set_mode(s, VMMC_SOCK_KERNEL);
    return r;
}

int sock_settle(sock_t *s, int why, int timeout_ms)
{
    if (!s->accepted) {
        if (!s->connecting) {
            /* a client in PENDING only while another thread upgrades it */
            return client_up(s, timeout_ms);
        }
        if (s->connecting == 1) {
            int r = sock_connect_done(s);
            if (r < 0)
                return 0; /* failed: mode KERNEL, the kernel reports it */
            if (r == 0) {
                if (timeout_ms == 0) {
                    errno = EAGAIN;
                    return -1;
                }
                struct pollfd p = {.fd = s->fd, .events = POLLOUT};
                if (sys_poll(&p, 1, timeout_ms) < 0)
                    return -1;
                r = sock_connect_done(s);
                if (r < 0)
                    return 0;
                if (r == 0) {
                    errno = EAGAIN;
                    return -1;
                }
            }
        }
        return client_up(s, timeout_ms);
    }
    return sock_up_server(s, why, timeout_ms);
}

int vmmc_sock_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    sock_t *s = sock_get(fd);
    if (!s) {
        if (sys_connect(fd, addr, len) < 0)
            return SOCK_SYSFAIL("vmmc_sock_connect: descriptor %d", fd);
        return 0;
    }
    int r = sys_connect(fd, addr, len);
    int e = errno;
    int up = sock_cfg()->upgrade && !s->accepted &&
             atomic_load(&s->mode) != VMMC_SOCK_LISTENING;
    if (r == 0 || (r < 0 && e == EISCONN)) {
        /* established now (a blocking connect, or the end of a non-blocking
         * one that a later call has not seen yet) */
        pthread_mutex_lock(&s->lock);
        int fresh = atomic_load(&s->mode) == VMMC_SOCK_KERNEL && s->peer_len == 0;
        if (up && fresh)
            atomic_store(&s->mode, VMMC_SOCK_PENDING);
        else if (!(up && s->connecting == 1 && atomic_load(&s->mode) == VMMC_SOCK_PENDING))
            up = 0;
        pthread_mutex_unlock(&s->lock);
        if (up)
            (void)client_up(s, -1);
        else if (r == 0)
            note_addrs(s);
        sock_put(s);
        if (r < 0) {
            errno = e;
            return SOCK_SYSFAIL("vmmc_sock_connect: descriptor %d", fd);
        }
        return 0;
    }
    if (e == EINPROGRESS || e == EINTR) {
        /* the kernel goes on connecting: the upgrade waits for the first
         * call that sees it done */
        pthread_mutex_lock(&s->lock);
        if (up && atomic_load(&s->mode) == VMMC_SOCK_KERNEL && s->connecting == 0) {
            s->connecting = 1;
            atomic_store(&s->mode, VMMC_SOCK_PENDING);
        }
        pthread_mutex_unlock(&s->lock);
    } else if (e != EALREADY && s->connecting == 1) {
        pthread_mutex_lock(&s->lock);
        s->connecting = 0;
        pthread_mutex_unlock(&s->lock);
        sock_set_mode(s, VMMC_SOCK_KERNEL);
    }
    sock_put(s);
    errno = e;
    return SOCK_SYSFAIL("vmmc_sock_connect: descriptor %d", fd);
}

/* ------------------------------------------------------------------------ */
/* closing */

/* The last descriptor of @p s goes: close what the mode holds. */
static void sock_last_close(sock_t *s)
{
    int mode = atomic_load(&s->mode);
    if (mode == VMMC_SOCK_PENDING && s->accepted)
        (void)sock_up_server(s, SOCK_UP_WRITE, 0);
    mode = atomic_load(&s->mode);
    if (mode == VMMC_SOCK_VMMC && s->conn) {
        pthread_mutex_lock(&s->tx_lock);
        pthread_mutex_lock(&s->rx_lock);
        sock_conn_t *c = s->conn;
        pthread_mutex_unlock(&s->rx_lock);
        pthread_mutex_unlock(&s->tx_lock);
        if (c)
            (void)sock_conn_close(c);
    } else if (mode == VMMC_SOCK_LISTENING && s->lst) {
        sock_probe_unlisten(s);
    }
}

int vmmc_sock_close(int fd)
{
    sock_t *s = sock_get(fd);
    if (s) {
        int last = sock_fd_drop(fd, s);
        if (last == 1)
            sock_last_close(s);
        sock_put(s);
    }
    if (sys_close(fd) < 0)
        return SOCK_SYSFAIL("vmmc_sock_close: descriptor %d", fd);
    return 0;
}

int vmmc_sock_shutdown(int fd, int how)
{
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
        return SOCK_FAIL(EINVAL, "vmmc_sock_shutdown: how %d is not SHUT_RD, SHUT_WR or SHUT_RDWR",
                         how);
    sock_t *s = sock_get(fd);
    if (s && atomic_load(&s->mode) == VMMC_SOCK_PENDING)
        (void)sock_settle(s, SOCK_UP_WRITE, sock_timeout(s, 0, 1));
    if (s && atomic_load(&s->mode) == VMMC_SOCK_VMMC && s->conn) {
        int r = sock_conn_shutdown(s->conn, how);
        if (r == 0 || atomic_load(&s->mode) == VMMC_SOCK_VMMC) {
            if (r == 0) {
                pthread_mutex_lock(&s->lock);
                s->shut_rd |= how != SHUT_WR;
                s->shut_wr |= how != SHUT_RD;
                pthread_mutex_unlock(&s->lock);
            }
            int e = errno;
            sock_put(s);
            if (r < 0) {
                errno = e;
                return SOCK_FAIL(e, "vmmc_sock_shutdown: descriptor %d: %s", fd, strerror(e));
            }
            return 0;
        }
        /* reverted meanwhile: the kernel's shutdown */
    }
    if (s)
        sock_put(s);
    if (sys_shutdown(fd, how) < 0)
        return SOCK_SYSFAIL("vmmc_sock_shutdown: descriptor %d", fd);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* descriptors: dup, dup3, fcntl, ioctl, options */

/* @p fd is about to be replaced (dup2/dup3 onto it): close its socket's
 * share in the table as close() would, without closing the descriptor
 * (the kernel's dup3 does that atomically). */
static void replace_fd(int fd)
{
    sock_t *t = sock_get(fd);
    if (!t)
        return;
    if (sock_fd_drop(fd, t) == 1)
        sock_last_close(t);
    sock_put(t);
}

int vmmc_sock_dup(int fd)
{
    int nfd = sys_dup(fd);
    if (nfd < 0)
        return SOCK_SYSFAIL("vmmc_sock_dup: descriptor %d", fd);
    sock_t *s = sock_get(fd);
    if (!s)
        return nfd;
    int r = sock_fd_add(s, nfd);
    sock_put(s);
    if (r < 0) {
        int e = errno;
        sys_close(nfd);
        errno = e;
        return -1;
    }
    return nfd;
}

int vmmc_sock_dup3(int oldfd, int newfd, int flags)
{
    if (flags & ~O_CLOEXEC)
        return SOCK_FAIL(EINVAL, "vmmc_sock_dup3: flags %#x (only O_CLOEXEC)", (unsigned)flags);
    if (oldfd == newfd)
        return SOCK_FAIL(EINVAL, "vmmc_sock_dup3: old and new descriptor are both %d", oldfd);
    sock_t *s = sock_get(oldfd);
    if (!s && sys_fcntl(oldfd, F_GETFD, 0) < 0)
        return SOCK_SYSFAIL("vmmc_sock_dup3: descriptor %d", oldfd);
    if (newfd >= 0)
        replace_fd(newfd);
    int r = sys_dup3(oldfd, newfd, flags);
    if (r < 0) {
        if (s)
            sock_put(s);
        return SOCK_SYSFAIL("vmmc_sock_dup3: %d onto %d", oldfd, newfd);
    }
    if (s) {
        int a = sock_fd_add(s, r);
        sock_put(s);
        if (a < 0) {
            int e = errno;
            sys_close(r);
            errno = e;
            return -1;
        }
    }
    return r;
}

int vmmc_sock_fcntl(int fd, int cmd, long arg)
{
    int r = sys_fcntl(fd, cmd, arg);
    if (r < 0)
        return SOCK_SYSFAIL("vmmc_sock_fcntl: descriptor %d, command %d", fd, cmd);
    if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC && cmd != F_SETFL)
        return r;
    sock_t *s = sock_get(fd);
    if (!s)
        return r;
    if (cmd == F_SETFL) {
        atomic_store(&s->nonblock, (arg & O_NONBLOCK) != 0);
    } else if (sock_fd_add(s, r) < 0) {
        int e = errno;
        sys_close(r);
        sock_put(s);
        errno = e;
        return -1;
    }
    sock_put(s);
    return r;
}

int vmmc_sock_ioctl(int fd, unsigned long req, void *arg)
{
    sock_t *s = sock_get(fd);
    if (s && req == FIONREAD) {
        if (atomic_load(&s->mode) == VMMC_SOCK_PENDING)
            (void)sock_settle(s, SOCK_UP_POLL, 0);
        if (atomic_load(&s->mode) == VMMC_SOCK_VMMC && s->conn) {
            size_t n = sock_conn_unread(s->conn);
            sock_put(s);
            if (!arg)
                return SOCK_FAIL(EFAULT, "vmmc_sock_ioctl: FIONREAD with a NULL argument");
            *(int *)arg = n > INT_MAX ? INT_MAX : (int)n;
            return 0;
        }
    }
    int r = sys_ioctl(fd, req, arg);
    if (r < 0) {
        if (s)
            sock_put(s);
        return SOCK_SYSFAIL("vmmc_sock_ioctl: descriptor %d, request %#lx", fd, req);
    }
    if (s && req == FIONBIO)
        atomic_store(&s->nonblock, *(const int *)arg != 0);
    if (s)
        sock_put(s);
    return r;
}

int vmmc_sock_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    if (sys_getsockopt(fd, level, name, val, len) < 0)
        return SOCK_SYSFAIL("vmmc_sock_getsockopt: descriptor %d, level %d, option %d", fd,
                            level, name);
    return 0;
}

/* SO_RCVTIMEO/SO_SNDTIMEO as a poll timeout: 0 s means none (-1), and any
 * other value at least 1 ms (rounded up, as the kernel's jiffies are). */
static int timeo_ms(const struct timeval *tv)
{
    if (tv->tv_sec == 0 && tv->tv_usec == 0)
        return -1;
    long long ms = (long long)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
    return ms > INT_MAX ? -1 : ms < 1 ? 1 : (int)ms;
}

static int is_timeo(int name)
{
#if defined(SO_RCVTIMEO_NEW) && defined(SO_SNDTIMEO_NEW)
    if (name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW)
        return 1; /* a 64-bit seconds and microseconds pair, as timeval here */
#endif
    return name == SO_RCVTIMEO || name == SO_SNDTIMEO;
}

int vmmc_sock_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    if (sys_setsockopt(fd, level, name, val, len) < 0)
        return SOCK_SYSFAIL("vmmc_sock_setsockopt: descriptor %d, level %d, option %d", fd,
                            level, name);
    if (level != SOL_SOCKET || !is_timeo(name))
        return 0;
    sock_t *s = sock_get(fd);
    if (!s)
        return 0;
    /* the kernel took it, so @p val is a timeval it could read */
    struct timeval tv;
    memcpy(&tv, val, sizeof tv);
    if (name == SO_RCVTIMEO
#ifdef SO_RCVTIMEO_NEW
        || name == SO_RCVTIMEO_NEW
#endif
    )
        s->rcvtimeo_ms = timeo_ms(&tv);
    else
        s->sndtimeo_ms = timeo_ms(&tv);
    sock_put(s);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* inspection, fork and exec */

int vmmc_sock_info(int fd, vmmc_sock_info_t *info)
{
    if (!info)
        return SOCK_FAIL(EINVAL, "vmmc_sock_info: NULL info");
    sock_t *s = sock_lookup(fd, "vmmc_sock_info");
    if (!s)
        return -1;
    memset(info, 0, sizeof *info);
    info->mode = (vmmc_sock_mode_t)atomic_load(&s->mode);
    strcpy(info->transport, "tcp");
    info->ring_size = (size_t)sock_cfg()->ring;
    /* One look at the conn, under the lock a retirement takes to clear it
     * (the retired conn itself stays allocated for a grace period). */
    pthread_mutex_lock(&s->lock);
    sock_conn_t *c = s->conn;
    pthread_mutex_unlock(&s->lock);
    if (info->mode == VMMC_SOCK_VMMC && c)
        sock_conn_info(c, info);
    else if (info->mode == VMMC_SOCK_VMMC)
        info->mode = VMMC_SOCK_KERNEL; /* retiring: the kernel's already */
    sock_put(s);
    return 0;
}

/* Revert the upgraded sockets that @p pick accepts. */
static int revert_some(int (*pick)(sock_t *))
{
    sock_t *one[64], **list = one;
    int n = sock_fd_upgraded(list, 64);
    if (n > 64) {
        for (int i = 0; i < 64; i++)
            sock_put(list[i]);
        list = malloc(sizeof *list * (size_t)(n + 64));
        if (!list)
            return SOCK_FAIL(ENOMEM, "vmmc_sock_revert_all: no memory for %d sockets", n);
        n = sock_fd_upgraded(list, n + 64);
    }
    int rc = 0, err = 0;
    for (int i = 0; i < n; i++) {
        sock_t *s = list[i];
        if ((!pick || pick(s)) && atomic_load(&s->mode) == VMMC_SOCK_VMMC && s->conn &&
            sock_conn_revert(s->conn) < 0) {
            rc = -1;
            err = errno;
        }
        sock_put(s);
    }
    if (list != one)
        free(list);
    if (rc < 0)
        errno = err;
    return rc;
}

int vmmc_sock_revert_all(void)
{
    return revert_some(NULL);
}

int vmmc_sock_before_exec(void)
{
    return revert_some(sock_fd_survives_exec);
}
