/* libc's own entry points for libvmmc-preload.so (see preload.h).
 *
 * Each is resolved with dlsym(RTLD_NEXT) the first time it is needed and
 * kept in an atomic slot: two threads that race resolve the same address,
 * and nothing here needs a constructor to have run (a program's own
 * constructors, or libc's, may call read() or close() before ours). */
#include "preload/preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

static const char *const names[R_COUNT] = {
    [R_socket] = "socket", [R_connect] = "connect", [R_bind] = "bind",
    [R_listen] = "listen", [R_accept] = "accept", [R_accept4] = "accept4",
    [R_close] = "close", [R_shutdown] = "shutdown", [R_dup] = "dup", [R_dup2] = "dup2",
    [R_dup3] = "dup3", [R_fcntl] = "fcntl", [R_fcntl64] = "fcntl64", [R_ioctl] = "ioctl",
    [R_getsockopt] = "getsockopt", [R_setsockopt] = "setsockopt", [R_read] = "read",
    [R_write] = "write", [R_readv] = "readv", [R_writev] = "writev", [R_recv] = "recv",
    [R_recvfrom] = "recvfrom", [R_recvmsg] = "recvmsg", [R_send] = "send",
    [R_sendto] = "sendto", [R_sendmsg] = "sendmsg", [R_sendfile] = "sendfile",
    [R_sendfile64] = "sendfile64", [R___read_chk] = "__read_chk",
    [R___recv_chk] = "__recv_chk", [R___recvfrom_chk] = "__recvfrom_chk",
    [R_poll] = "poll", [R_ppoll] = "ppoll", [R_select] = "select", [R_pselect] = "pselect",
    [R___poll_chk] = "__poll_chk", [R___ppoll_chk] = "__ppoll_chk",
    [R_epoll_create] = "epoll_create", [R_epoll_create1] = "epoll_create1",
    [R_epoll_ctl] = "epoll_ctl", [R_epoll_wait] = "epoll_wait",
    [R_epoll_pwait] = "epoll_pwait", [R_epoll_pwait2] = "epoll_pwait2", [R_fork] = "fork",
    [R_execve] = "execve", [R_execv] = "execv", [R_execvp] = "execvp",
    [R_execvpe] = "execvpe", [R_fexecve] = "fexecve", [R_posix_spawn] = "posix_spawn",
    [R_posix_spawnp] = "posix_spawnp", [R_system] = "system", [R_popen] = "popen",
    [R___chk_fail] = "__chk_fail", [R_recvmmsg] = "recvmmsg", [R_sendmmsg] = "sendmmsg",
    [R_close_range] = "close_range", [R_splice] = "splice",
};

static _Atomic(void *) slots[R_COUNT];

void *pl_real(int id)
{
    void *p = atomic_load_explicit(&slots[id], memory_order_acquire);
    if (__builtin_expect(p != NULL, 1))
        return p;
    p = dlsym(RTLD_NEXT, names[id]);
    if (p)
        atomic_store_explicit(&slots[id], p, memory_order_release);
    return p;
}

int pl_fail(int err)
{
    errno = err;
    return -1;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_hooks(void)
{
    vmmc_sock_set_mode_hook(pl_ep_mode_hook, NULL);
}

void pl_init(void)
{
    pthread_once(&init_once, init_hooks);
}

__attribute__((constructor)) static void pl_ctor(void)
{
    pl_init();
}
