/* Running external programs (see bench_proc.h). Nothing here can hang the
 * tool: every program runs in its own process group with a time limit. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench.h"
#include "bench_proc.h"
/* ------------------------------------------------------------------------- */
/* Running external programs                                                  */

int proc_in_path(const char *prog, char *full, size_t n)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[PATH_MAX];
    while (*path) {
        size_t k = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)k, path, prog);
        if (k && access(buf, X_OK) == 0) {
            if (full)
                snprintf(full, n, "%s", buf);
            return 1;
        }
        path += k;
        if (*path)
            path++;
    }
    return 0;
}

/* Process groups of the peer programs running now, stopped if this suite is
 * told to stop (SIGTERM from the tool on timeout or interrupt). */
static volatile pid_t live[4];

static void track(pid_t pid, int on)
{
    for (int i = 0; i < 4; i++)
        if (on ? live[i] == 0 : live[i] == pid) {
            live[i] = on ? pid : 0;
            return;
        }
}

static void on_stop(int sig)
{
    for (int i = 0; i < 4; i++)
        if (live[i] > 0)
            kill(-live[i], SIGKILL);
    _exit(128 + sig);
}

void proc_catch_stop(void)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
}

/* Fork and exec @argv in a new process group, pinned to @cpu (-1: not),
 * with @env (NULL-terminated "NAME=value" list) added. stdout+stderr go to
 * @outfd (-1: /dev/null). Returns the pid or -1. */
pid_t proc_spawn(char *const argv[], char *const env[], int cpu, int outfd)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        if (cpu >= 0)
            bench_pin_cpu(cpu);
        int fd = outfd >= 0 ? outfd : open("/dev/null", O_WRONLY);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        for (int i = 0; env && env[i]; i++)
            putenv(env[i]);
        execvp(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid);
    track(pid, 1);
    return pid;
}

void proc_stop_group(pid_t pid)
{
    if (pid <= 0)
        return;
    track(pid, 0);
    kill(-pid, SIGTERM);
    for (int i = 0; i < 40; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            kill(-pid, SIGKILL); /* stragglers of the group */
            return;
        }
        usleep(25000);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Run to completion within @timeout_s, capturing stdout+stderr into a
 * malloc'd string (*out). Returns the exit status (>= 0), -1 on failure to
 * start, -2 on timeout (the group is killed). */
int proc_run_capture(char *const argv[], char *const env[], int cpu, double timeout_s,
                       char **out)
{
    *out = NULL;
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    pid_t pid = proc_spawn(argv, env, cpu, p[1]);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    size_t len = 0, cap = 8192;
    char *buf = malloc(cap);
    double deadline = bench_now_ns() + timeout_s * 1e9;
    int timed_out = 0;
    while (buf) {
        double left = deadline - bench_now_ns();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {p[0], POLLIN, 0};
        int r = poll(&pf, 1, (int)(left / 1e6) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        if (len + 4097 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(p[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(p[0]);
    if (buf)
        buf[len] = 0;
    *out = buf;
    if (timed_out) {
        proc_stop_group(pid);
        return -2;
    }
    int st = 0;
    double wait_deadline = bench_now_ns() + 5e9;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (bench_now_ns() > wait_deadline) { /* closed its output but lingers */
            proc_stop_group(pid);
            return -2;
        }
        usleep(2000);
    }
    kill(-pid, SIGKILL); /* anything it left behind */
    track(pid, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* A port that was free a moment ago. */
int proc_free_port(int type)
{
    int s = socket(AF_INET, type, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (!bind(s, (struct sockaddr *)&a, sizeof a) && !getsockname(s, (struct sockaddr *)&a, &len))
        port = ntohs(a.sin_port);
    close(s);
    return port;
}

/* Is something bound to @port (TCP: listening)? Reads /proc/net. */
static int port_ready(int port, int udp)
{
    const char *files[2] = {udp ? "/proc/net/udp" : "/proc/net/tcp",
                            udp ? "/proc/net/udp6" : "/proc/net/tcp6"};
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp)
            continue;
        char line[512];
        while (fgets(line, sizeof line, fp)) {
            char local[128];
            unsigned st;
            if (sscanf(line, " %*d: %127s %*s %x", local, &st) != 2)
                continue;
            char *colon = strrchr(local, ':');
            if (!colon || (int)strtol(colon + 1, NULL, 16) != port)
                continue;
            if (udp || st == 0x0A) {
                fclose(fp);
                return 1;
            }
        }
        fclose(fp);
    }
    return 0;
}

int proc_wait_port(pid_t server, int port, int udp, double timeout_s)
{
    double deadline = bench_now_ns() + timeout_s * 1e9;
    while (bench_now_ns() < deadline) {
        if (port_ready(port, udp))
            return 0;
        if (waitpid(server, NULL, WNOHANG) == server)
            return -1; /* the server died */
        usleep(5000);
    }
    return -1;
}

const char *proc_why(int rc)
{
    static char buf[64];
    if (rc == -2)
        return "timed out";
    if (rc == -1)
        return "could not start";
    snprintf(buf, sizeof buf, "exit status %d", rc);
    return buf;
}

/* Last non-empty line of @s that starts with spaces then a number: copied. */
const char *proc_find_line(const char *s, const char *prefix)
{
    const char *found = NULL;
    for (const char *p = s; p && *p;) {
        const char *q = p;
        if (prefix) {
            if (!strncmp(q, prefix, strlen(prefix)))
                found = q;
        } else {
            while (*q == ' ')
                q++;
            if (*q >= '0' && *q <= '9')
                found = p;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return found;
}

