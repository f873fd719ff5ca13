/* `vmmc run`: a rank process, from fork to exec, and the descriptors the
 * launcher needs for its ranks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "run_int.h"

static void bind_cpu(int rank)
{
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) < 0)
        return;
    int count = CPU_COUNT(&allowed);
    if (count <= 0)
        return;
    int want = rank % count, seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed))
            continue;
        if (seen++ == want) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            if (sched_setaffinity(0, sizeof one, &one) < 0)
                fprintf(stderr, "vmmc run: rank %d: cannot bind to cpu %d: %s\n", rank, c,
                        strerror(errno));
            return;
        }
    }
}

/* In the child, between fork and exec (the launcher is single-threaded). */
static struct rlimit nofile_orig; /* the caller's limit, restored in the ranks */
static int nofile_raised;

/* One connection per rank, two pipes per rank with --tag-output: make sure
 * the launcher may open that many descriptors. */
int run_raise_nofile(const job_t *j)
{
    rlim_t need = (rlim_t)j->n * (j->tag_output ? 3 : 2) + 32;
    if (getrlimit(RLIMIT_NOFILE, &nofile_orig) < 0 || nofile_orig.rlim_cur >= need)
        return 0;
    if (nofile_orig.rlim_max < need) {
        fprintf(stderr,
                "vmmc run: %d ranks%s need %llu file descriptors in the launcher, but only %llu "
                "are allowed (ulimit -n)\n",
                j->n, j->tag_output ? " with --tag-output" : "", (unsigned long long)need,
                (unsigned long long)nofile_orig.rlim_max);
        return -1;
    }
    struct rlimit nl = nofile_orig;
    nl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &nl) < 0) {
        fprintf(stderr, "vmmc run: cannot raise the file descriptor limit to %llu: %s\n",
                (unsigned long long)need, strerror(errno));
        return -1;
    }
    nofile_raised = 1;
    return 0;
}

void run_child(const job_t *j, int r, const char *job, const char *sock, const sigset_t *oldmask,
               int pipes[2][2], pid_t launcher)
{
    if (nofile_raised)
        setrlimit(RLIMIT_NOFILE, &nofile_orig);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != launcher)
        _exit(127); /* the launcher is already gone */
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    if (j->tag_output)
        dup2(pipes[0][1], STDOUT_FILENO);
    dup2(pipes[1][1], STDERR_FILENO);
    for (int k = 0; k < 2; k++)
        for (int e = 0; e < 2; e++)
            if (pipes[k][e] >= 0)
                close(pipes[k][e]);
    char v[32];
    snprintf(v, sizeof v, "%d", r);
    setenv("VMMC_RANK", v, 1);
    setenv("VMMC_LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", j->n);
    setenv("VMMC_SIZE", v, 1);
    setenv("VMMC_JOB", job, 1);
    setenv("VMMC_LAUNCHER", sock, 1);
    setenv("VMMC_SETTINGS_CHECKED", "1", 1); /* the launcher warned already */
    unsetenv("VMMC_BOOTSTRAP");
    if (j->cpu_bind)
        bind_cpu(r);
    execvp(j->argv[0], j->argv);
    fprintf(stderr, "vmmc run: rank %d: cannot execute '%s': %s\n", r, j->argv[0], strerror(errno));
    _exit(127);
}
