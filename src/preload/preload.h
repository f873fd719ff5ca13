/* libvmmc-preload.so: the private contract of its files.
 *
 * The library interposes the libc calls of an unmodified program that touch
 * sockets, and hands the ones on vmmc sockets (TCP sockets made through it,
 * see vmmc/sock.h) to the vmmc_sock_ calls; every other descriptor goes to
 * libc unchanged. Files, one object each:
 *
 *   real.c      libc's own entry points, resolved lazily with
 *               dlsym(RTLD_NEXT) (thread-safe, usable before any
 *               constructor ran)
 *   sockcalls.c socket, connect, bind, listen, accept, close, shutdown, dup,
 *               fcntl, ioctl, socket options
 *   io.c        read/write, send/recv families, sendfile, fortified variants
 *   poll.c      poll, ppoll, select, pselect over mixed sets
 *   epoll.c     the epoll emulation: tables, epoll_create/ctl, mode hook
 *   epoll_wait.c  epoll_wait/epoll_pwait/epoll_pwait2
 *   proc.c      fork/vfork, the exec family, posix_spawn
 *   more.c      recvmmsg/sendmmsg, splice, close_range
 *
 * Every wrapper's path for a descriptor that is not a vmmc socket is one
 * vmmc_sock_is() check, then libc. The sockets layer reaches the kernel
 * through raw system calls, so nothing it does comes back here; libvmmc's
 * core calls read/poll/close on its own descriptors and takes the libc path.
 */
#ifndef VMMC_PRELOAD_PRELOAD_H
#define VMMC_PRELOAD_PRELOAD_H

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "vmmc/sock.h"

#define PL_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------ */
/* libc's entry points (real.c) */

enum pl_real_id {
    R_socket, R_connect, R_bind, R_listen, R_accept, R_accept4, R_close, R_shutdown,
    R_dup, R_dup2, R_dup3, R_fcntl, R_fcntl64, R_ioctl, R_getsockopt, R_setsockopt,
    R_read, R_write, R_readv, R_writev, R_recv, R_recvfrom, R_recvmsg, R_send, R_sendto,
    R_sendmsg, R_sendfile, R_sendfile64, R___read_chk, R___recv_chk, R___recvfrom_chk,
    R_poll, R_ppoll, R_select, R_pselect, R___poll_chk, R___ppoll_chk,
    R_epoll_create, R_epoll_create1, R_epoll_ctl, R_epoll_wait, R_epoll_pwait,
    R_epoll_pwait2, R_fork, R_execve, R_execv, R_execvp, R_execvpe, R_fexecve,
    R_posix_spawn, R_posix_spawnp, R_system, R_popen, R___chk_fail, R_recvmmsg, R_sendmmsg,
    R_close_range, R_splice,
    R_COUNT
};

/* The libc function @p id (never this library's), resolved on first use;
 * NULL if libc has none (a wrapper then fails with ENOSYS). */
void *pl_real(int id);

#define REAL(fn) ((__typeof__(&fn))pl_real(R_##fn))

/* Fail with @p err: -1 and errno. */
int pl_fail(int err);

/* Make sure the library's hooks are in place (the epoll mode hook); cheap
 * after the first call. */
void pl_init(void);

/* ------------------------------------------------------------------------ */
/* per-thread scratch (poll.c): room for @p n pollfds, kept between calls;
 * NULL (errno ENOMEM) only when it must grow and cannot. */
struct pollfd *pl_scratch_pollfd(size_t n);

/* poll() with a signal mask applied atomically while it sleeps (NULL: none)
 * and a timeout in ns (-1 forever). Shared by ppoll and pselect. */
int pl_poll_mask(struct pollfd *fds, nfds_t n, int64_t timeout_ns, const sigset_t *mask);

/* ------------------------------------------------------------------------ */
/* the epoll emulation (epoll.c, epoll_wait.c) */

/* Is @p fd an epoll instance the emulation keeps state for? (cheap) */
int pl_ep_known(int fd);
/* @p fd is being closed (or replaced by dup2): forget it as an epoll
 * instance, and as a member of any instance (vmmc sockets). */
void pl_ep_fd_closing(int fd);
/* @p newfd now names the same epoll instance as @p oldfd (dup). */
void pl_ep_fd_dup(int oldfd, int newfd);
/* After fork(), in both processes (@p child: in the child): instances are
 * now shared with the other process. */
void pl_ep_forked(int child);
/* A call on vmmc socket @p fd failed with EAGAIN for @p bits (EPOLLIN: a
 * read, EPOLLOUT: a write): an edge-triggered instance must report that
 * direction again when it is next ready, whether or not a wake-up says so. */
void pl_ep_eagain(int fd, uint32_t bits);
/* The mode hook (vmmc_sock_set_mode_hook). */
void pl_ep_mode_hook(int fd, int upgraded, void *arg);

/* ------------------------------------------------------------------------ */
/* prototypes glibc does not always declare */
int fcntl64(int fd, int cmd, ...);
ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count);
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *addr, socklen_t *alen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
                const sigset_t *ss, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

#endif
