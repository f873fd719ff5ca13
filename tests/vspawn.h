/* Start a process with extra environment, capture its stdout and stderr,
 * wait for it with a deadline (then SIGKILL and fail); run the test program
 * itself as the ranks of a job of the launcher. For tests that start
 * processes: what they start dies with them. */
#ifndef VMMC_TESTS_VSPAWN_H
#define VMMC_TESTS_VSPAWN_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vtest.h"

typedef struct spawn_result {
    int status;      /* wait status */
    char out[65536]; /* stdout, NUL-terminated (truncated if longer) */
    char err[65536]; /* stderr */
    size_t nout, nerr;
    pid_t pid;
} spawn_result_t;

/* Called after each chunk of stdout; may signal r->pid. */
typedef void (*spawn_watch_fn)(spawn_result_t *r, void *arg);

/* Processes started and not yet reaped: killed if the test fails. */
static pid_t spawn_live[64];

static inline void spawn_kill_all(void)
{
    for (size_t i = 0; i < sizeof spawn_live / sizeof spawn_live[0]; i++)
        if (spawn_live[i] > 0) {
            kill(spawn_live[i], SIGKILL);
            waitpid(spawn_live[i], NULL, 0);
            spawn_live[i] = 0;
        }
}

static inline void spawn_track(pid_t pid, pid_t clear)
{
    static int registered;
    if (!registered) {
        atexit(spawn_kill_all);
        registered = 1;
    }
    for (size_t i = 0; i < sizeof spawn_live / sizeof spawn_live[0]; i++)
        if (spawn_live[i] == clear) {
            spawn_live[i] = pid;
            return;
        }
}

static inline pid_t spawn_start(char *const argv[], char *const env[], int *outfd, int *errfd)
{
    int o[2], e[2];
    VT_CHECK(pipe(o) == 0 && pipe(e) == 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        /* Die with the test, whatever happens to it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(126);
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(o[0]);
        close(o[1]);
        close(e[0]);
        close(e[1]);
        for (int i = 0; env && env[i]; i++)
            putenv(env[i]);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(126);
    }
    spawn_track(pid, 0);
    close(o[1]);
    close(e[1]);
    *outfd = o[0];
    *errfd = e[0];
    return pid;
}

static inline void spawn_collect(spawn_result_t *r, int outfd, int errfd, double timeout_s,
                                 spawn_watch_fn watch, void *arg)
{
    double end = vt_now() + timeout_s;
    int fds[2] = {outfd, errfd};
    while (fds[0] >= 0 || fds[1] >= 0) {
        if (vt_now() > end) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            spawn_track(0, r->pid);
            VT_FAIL("process %d did not finish within %.0f s; stdout:\n%s\nstderr:\n%s", (int)r->pid,
                    timeout_s, r->out, r->err);
        }
        struct pollfd pf[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
        if (poll(pf, 2, 100) <= 0)
            continue;
        for (int k = 0; k < 2; k++) {
            if (fds[k] < 0 || !pf[k].revents)
                continue;
            char *buf = k ? r->err : r->out;
            size_t *n = k ? &r->nerr : &r->nout;
            char tmp[4096];
            ssize_t got = read(fds[k], tmp, sizeof tmp);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                close(fds[k]);
                fds[k] = -1;
                continue;
            }
            size_t room = sizeof r->out - 1 - *n;
            size_t take = (size_t)got < room ? (size_t)got : room;
            memcpy(buf + *n, tmp, take);
            *n += take;
            buf[*n] = 0;
            if (k == 0 && watch)
                watch(r, arg);
        }
    }
    for (;;) {
        pid_t w = waitpid(r->pid, &r->status, WNOHANG);
        if (w == r->pid) {
            spawn_track(0, r->pid);
            break;
        }
        VT_CHECK(w == 0);
        if (vt_now() > end) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            spawn_track(0, r->pid);
            VT_FAIL("process %d closed its output but did not exit", (int)r->pid);
        }
        usleep(10000);
    }
}

/* Run to completion; returns the result (static storage, one at a time). */
static inline spawn_result_t *spawn_run(char *const argv[], char *const env[], double timeout_s,
                                        spawn_watch_fn watch, void *arg)
{
    static spawn_result_t r;
    memset(&r, 0, sizeof r);
    int o, e;
    r.pid = spawn_start(argv, env, &o, &e);
    spawn_collect(&r, o, e, timeout_s, watch, arg);
    return &r;
}

/* A TCP port on 127.0.0.1 that was free a moment ago (for a rendezvous). */
static inline int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    VT_CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    VT_CHECK(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static inline int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

static inline int count_substr(const char *s, const char *sub)
{
    int n = 0;
    for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub))
        n++;
    return n;
}

/* This test program's path, to start it again (as a job's ranks). */
static inline const char *spawn_self(void)
{
    static char self[4096];
    if (!self[0]) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        VT_CHECK(n > 0 && (size_t)n < sizeof self - 1);
        self[n] = 0;
    }
    return self;
}

/* Run this program as a job of @np ranks, `VMMC run -n NP -- <self> ARGS`
 * (@args ends with NULL), and print what the job wrote once it ended. A job
 * still running after @timeout_s is killed and fails the test. The result
 * is spawn_run()'s (one at a time). */
static inline spawn_result_t *spawn_job(const char *vmmc, int np, const char *const args[],
                                        double timeout_s)
{
    char n[16];
    snprintf(n, sizeof n, "%d", np);
    char *argv[32] = {(char *)vmmc, "run", "-n", n, "--", (char *)spawn_self()};
    int k = 6;
    for (int i = 0; args && args[i]; i++) {
        VT_CHECK(k < 31);
        argv[k++] = (char *)args[i];
    }
    argv[k] = NULL;
    double t0 = vt_now();
    spawn_result_t *r = spawn_run(argv, NULL, timeout_s, NULL, NULL);
    printf("--- job stdout ---\n%s--- job stderr ---\n%s--- end (exit %d, %.2f s) ---\n", r->out,
           r->err, exit_code(r->status), vt_now() - t0);
    fflush(stdout);
    return r;
}

/* Did the process write @s, on its stdout or its stderr? */
static inline int spawn_said(const spawn_result_t *r, const char *s)
{
    return strstr(r->out, s) || strstr(r->err, s);
}

#endif
