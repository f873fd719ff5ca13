/**
 * @file sock.h
 * @brief Stream sockets over vmmc: TCP sockets that upgrade to vmmc.
 *
 * A vmmc socket is a kernel TCP socket (IPv4 or IPv6) whose connection vmmc
 * moves off the kernel when both ends run vmmc: after the TCP handshake the
 * two ends agree (a UDP probe to the listener's port, then a hello on the TCP
 * stream) and from then on bytes go through a pair of byte rings that each
 * side exports to the other and the other writes by deliberate update (the
 * shm transport on one host, udp between hosts). The TCP connection stays
 * open as the fallback and the liveness signal: a peer whose process dies
 * closes it, and its end reads 0 (or fails with ECONNRESET), never hangs. A
 * connection whose other end does not run vmmc, and every socket that is not
 * TCP, stays on the kernel untouched.
 *
 * The calls mirror the BSD socket calls of the same name and take and return
 * the socket's file descriptor (a real kernel descriptor, so fstat(), dup(),
 * getsockopt() and the like keep working on it). Unlike the rest of vmmc,
 * they follow the socket convention: -1 with errno set on failure (the
 * detailed text is also in vmmc_last_error()), because they stand in for the
 * kernel's calls (`vmmc preload` runs unmodified programs on them).
 *
 * @code
 *   int fd = vmmc_sock_socket(AF_INET, SOCK_STREAM, 0);
 *   vmmc_sock_connect(fd, (struct sockaddr *)&sin, sizeof sin);
 *   vmmc_sock_send(fd, req, n, 0);
 *   vmmc_sock_recv(fd, rep, sizeof rep, 0);
 *   vmmc_sock_close(fd);
 * @endcode
 *
 * Waiting on many sockets: vmmc_sock_poll() takes a mix of vmmc sockets and
 * any other descriptors. To wait in your own epoll/poll loop, put each
 * socket's fd and vmmc_sock_event_fd() in the set; when one fires, call
 * vmmc_sock_poll() with a zero timeout to learn which sockets are ready (the
 * kernel alone does not see bytes that came through vmmc).
 *
 * fork() and exec: connections cannot cross them on vmmc (peers' memory is
 * not inherited), so before fork(), and before exec for descriptors without
 * FD_CLOEXEC (vmmc_sock_before_exec()), each upgraded connection goes back
 * to its TCP connection, with no byte lost or repeated; parent and child then
 * share it as they would any TCP socket. Connections made after the fork
 * upgrade as usual.
 *
 * Threads: every call is thread-safe; calls on one socket from several
 * threads are serialised per direction as the kernel does.
 */
#ifndef VMMC_SOCK_H
#define VMMC_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "vmmc/vmmc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @name Sockets, as the BSD calls (-1 and errno on failure) @{ */

/** @brief socket(): a TCP socket vmmc may upgrade (AF_INET or AF_INET6,
 *  SOCK_STREAM with SOCK_NONBLOCK/SOCK_CLOEXEC, protocol 0 or IPPROTO_TCP);
 *  other kinds fail with EAFNOSUPPORT/EPROTONOSUPPORT. */
VMMC_API int vmmc_sock_socket(int domain, int type, int protocol);

/** @brief Take over a TCP socket made elsewhere (unconnected, listening, or
 *  connected but not yet used): from now on use the vmmc_sock_ calls on it.
 *  A socket that is not TCP fails with ENOTSOCK/EPROTONOSUPPORT. */
VMMC_API int vmmc_sock_adopt(int fd);

/** @brief Is @p fd a vmmc socket (made or adopted here and not closed)?
 *  Cheap (a table lookup): 1 or 0. */
VMMC_API int vmmc_sock_is(int fd);

VMMC_API int vmmc_sock_bind(int fd, const struct sockaddr *addr, socklen_t len);
/** @brief listen(): also answers the upgrade probes of vmmc clients for the
 *  address the socket listens on. */
VMMC_API int vmmc_sock_listen(int fd, int backlog);
/** @brief accept4() (flags 0, SOCK_NONBLOCK, SOCK_CLOEXEC). */
VMMC_API int vmmc_sock_accept(int fd, struct sockaddr *addr, socklen_t *len, int flags);
/** @brief connect(): upgrades when the listener runs vmmc (bounded by
 *  VMMC_SOCK_PROBE_TIMEOUT). A non-blocking socket returns EINPROGRESS as
 *  the kernel does; the upgrade then happens at the first call that finds
 *  the connection established. */
VMMC_API int vmmc_sock_connect(int fd, const struct sockaddr *addr, socklen_t len);

VMMC_API ssize_t vmmc_sock_recv(int fd, void *buf, size_t len, int flags);
VMMC_API ssize_t vmmc_sock_send(int fd, const void *buf, size_t len, int flags);
VMMC_API ssize_t vmmc_sock_recvfrom(int fd, void *buf, size_t len, int flags,
                                    struct sockaddr *addr, socklen_t *alen);
VMMC_API ssize_t vmmc_sock_sendto(int fd, const void *buf, size_t len, int flags,
                                  const struct sockaddr *addr, socklen_t alen);
VMMC_API ssize_t vmmc_sock_recvmsg(int fd, struct msghdr *msg, int flags);
VMMC_API ssize_t vmmc_sock_sendmsg(int fd, const struct msghdr *msg, int flags);
VMMC_API ssize_t vmmc_sock_readv(int fd, const struct iovec *iov, int iovcnt);
VMMC_API ssize_t vmmc_sock_writev(int fd, const struct iovec *iov, int iovcnt);
/** @brief sendfile() with a vmmc socket as @p out_fd (the file is read
 *  straight into the peer's ring). */
VMMC_API ssize_t vmmc_sock_sendfile(int out_fd, int in_fd, off_t *offset, size_t count);

VMMC_API int vmmc_sock_shutdown(int fd, int how);
/** @brief close(): the last descriptor of the socket closes the connection
 *  (unread bytes make it a reset, as TCP does). */
VMMC_API int vmmc_sock_close(int fd);

/** @brief dup(), dup2()/dup3() (flags 0 or O_CLOEXEC) and fcntl(): keep the
 *  table right (several descriptors, one socket; O_NONBLOCK). fcntl() takes
 *  one int or pointer argument as the kernel's does. */
VMMC_API int vmmc_sock_dup(int fd);
VMMC_API int vmmc_sock_dup3(int oldfd, int newfd, int flags);
VMMC_API int vmmc_sock_fcntl(int fd, int cmd, long arg);
/** @brief ioctl(): FIONREAD/SIOCINQ count bytes waiting on vmmc too; FIONBIO
 *  sets non-blocking; others go to the kernel. */
VMMC_API int vmmc_sock_ioctl(int fd, unsigned long req, void *arg);
VMMC_API int vmmc_sock_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
VMMC_API int vmmc_sock_setsockopt(int fd, int level, int name, const void *val, socklen_t len);
/** @} */

/** @name Readiness @{ */

/** @brief poll() over any descriptors, vmmc sockets among them (POLLIN,
 *  POLLOUT, POLLRDHUP, POLLHUP, POLLERR as the kernel reports them for TCP).
 *  Blocks without burning the CPU past VMMC_SOCK_SPIN; EINTR on a signal. */
VMMC_API int vmmc_sock_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms);

/** @brief The readiness of one socket now, as poll() would report it for
 *  @p events (never blocks; finishes an upgrade or a non-blocking connect
 *  that is due). -1 and errno if @p fd is not a vmmc socket. */
VMMC_API int vmmc_sock_ready(int fd, short events);

/** @brief A descriptor that becomes readable when a vmmc socket of this
 *  process may have changed state through vmmc (bytes, room, a close). Put it
 *  in your epoll/poll set together with the sockets' own descriptors (which
 *  the kernel makes readable for the TCP side: a probe, a hello, a peer that
 *  died); when it fires, call vmmc_sock_ready() or vmmc_sock_poll(). Do not
 *  read or close it. -1 before the first upgraded connection opens the
 *  process's endpoint (the socket's own fd alone is then enough). */
VMMC_API int vmmc_sock_event_fd(void);

/** @brief How long a blocking call spins on vmmc sockets before it sleeps
 *  (VMMC_SOCK_SPIN, in ns): an event loop that waits on vmmc sockets does
 *  best to spin as long before it blocks. */
VMMC_API uint64_t vmmc_sock_spin_ns(void);

/** @brief Called with the socket's fd whenever a socket changes how it moves
 *  bytes (upgraded to vmmc, or back to the kernel), from the thread that
 *  changed it: an event loop that keeps the kernel's readiness for
 *  kernel-mode sockets and vmmc_sock_ready() for upgraded ones re-files the
 *  descriptor here. One hook per process; NULL removes it. */
typedef void (*vmmc_sock_mode_fn)(int fd, int upgraded, void *arg);
VMMC_API void vmmc_sock_set_mode_hook(vmmc_sock_mode_fn fn, void *arg);
/** @} */

/** @name fork and exec @{ */

/** @brief Move every upgraded connection of the process back to its TCP
 *  connection (both directions, in order, nothing lost or repeated), waiting
 *  at most VMMC_SOCK_REVERT_TIMEOUT per peer. Called by the library itself
 *  before fork() (pthread_atfork); call it yourself before exec if you do not
 *  use vmmc_sock_before_exec(). Returns 0 or -1 (errno ETIMEDOUT when a peer
 *  did not answer: that connection is reset). */
VMMC_API int vmmc_sock_revert_all(void);
/** @brief Before exec: revert the connections whose descriptors survive exec
 *  (no FD_CLOEXEC); the others are closed by exec as usual. */
VMMC_API int vmmc_sock_before_exec(void);
/** @} */

/** @name Inspection @{ */

/** @brief How a socket moves bytes now. */
typedef enum vmmc_sock_mode {
    VMMC_SOCK_KERNEL = 0,    /**< plain kernel TCP (not connected, or the peer
                                  does not run vmmc, or reverted) */
    VMMC_SOCK_PENDING = 1,   /**< connected; the upgrade is being decided */
    VMMC_SOCK_VMMC = 2,      /**< upgraded: bytes go through vmmc */
    VMMC_SOCK_LISTENING = 3  /**< listening (and answering probes) */
} vmmc_sock_mode_t;

typedef struct vmmc_sock_info {
    vmmc_sock_mode_t mode;
    char transport[16];      /**< "shm", "udp" when upgraded, else "tcp" */
    uint64_t bytes_sent;     /**< through vmmc */
    uint64_t bytes_received; /**< through vmmc */
    size_t ring_size;        /**< bytes of each direction's ring */
} vmmc_sock_info_t;

/** @brief Fill @p info for @p fd: 0, or -1 with errno EBADF if @p fd is not a
 *  vmmc socket. */
VMMC_API int vmmc_sock_info(int fd, vmmc_sock_info_t *info);
/** @} */

#ifdef __cplusplus
}
#endif

#endif /* VMMC_SOCK_H */
