/* fork and exec for libvmmc-preload.so. A vmmc connection cannot cross
 * either (the peer's memory is not inherited): the sockets layer reverts
 * every upgraded connection to its TCP connection before fork() (its own
 * pthread_atfork handler), and before an exec this library calls
 * vmmc_sock_before_exec(), which reverts those whose descriptors survive
 * the exec. vfork() becomes fork(): a vfork child shares the parent's
 * memory, so nothing it did to the layer's state could be undone. */
#include "preload/preload.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern char **environ;

PL_EXPORT pid_t fork(void)
{
    pid_t p = REAL(fork)();
    if (p >= 0)
        pl_ep_forked(p == 0);
    return p;
}

PL_EXPORT pid_t vfork(void)
{
    return fork();
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    vmmc_sock_before_exec();
    return REAL(execve)(path, argv, envp);
}

PL_EXPORT int execv(const char *path, char *const argv[])
{
    vmmc_sock_before_exec();
    return REAL(execv)(path, argv);
}

PL_EXPORT int execvp(const char *file, char *const argv[])
{
    vmmc_sock_before_exec();
    return REAL(execvp)(file, argv);
}

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    vmmc_sock_before_exec();
    return REAL(execvpe)(file, argv, envp);
}

PL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    vmmc_sock_before_exec();
    return REAL(fexecve)(fd, argv, envp);
}

/* The list forms: gather the arguments, then the vector form. */
#define GATHER(first, ap, argv, extra)                                                  \
    size_t n_ = 1;                                                                  \
    va_start(ap, first);                                                            \
    while (va_arg(ap, char *))                                                      \
        n_++;                                                                       \
    va_end(ap);                                                                     \
    char *argv[n_ + 1];                                                             \
    argv[0] = (char *)(first);                                                      \
    va_start(ap, first);                                                            \
    for (size_t i_ = 1; i_ <= n_; i_++)                                             \
        argv[i_] = i_ < n_ ? va_arg(ap, char *) : (va_arg(ap, char *), (char *)NULL); \
    extra;                                                                          \
    va_end(ap)

PL_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execv(path, argv);
}

PL_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execvp(file, argv);
}

PL_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char **envp = NULL;
    GATHER(arg, ap, argv, envp = va_arg(ap, char **));
    return execve(path, argv, envp);
}

PL_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[],
                          char *const envp[])
{
    vmmc_sock_before_exec();
    return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

PL_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[],
                           char *const envp[])
{
    vmmc_sock_before_exec();
    return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

/* system() and popen() start a shell through glibc's internal spawn, which
 * passes none of the calls above: the shell inherits every descriptor
 * without FD_CLOEXEC (popen's own pipe aside). */
PL_EXPORT int system(const char *cmd)
{
    if (cmd)
        vmmc_sock_before_exec();
    return REAL(system)(cmd);
}

PL_EXPORT FILE *popen(const char *cmd, const char *mode)
{
    vmmc_sock_before_exec();
    return REAL(popen)(cmd, mode);
}
