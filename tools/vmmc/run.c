/* `vmmc run`: start N processes of a program on this host as one job.
 *
 * The launcher listens on an abstract Unix socket (no file anywhere), gives
 * each rank VMMC_RANK, VMMC_SIZE, VMMC_LOCAL_RANK, VMMC_JOB and
 * VMMC_LAUNCHER, and serves the rendezvous, the barrier and death notices
 * with the library's rendezvous server (vmmc/launch.h). When a rank fails
 * (killed by a signal or non-zero exit) it says so on stderr with the last line the rank wrote to its stderr (the ranks'
 * stderr passes through the launcher, line by line), sends DEAD to every
 * other rank at once, and after VMMC_RUN_GRACE sends SIGTERM, then SIGKILL.
 *
 * The launcher checks the VMMC_* settings once for the whole job: a refused
 * value stops it before any rank starts, and its warnings (unknown names)
 * are printed once; the ranks get VMMC_SETTINGS_CHECKED and stay quiet.
 *
 * This file starts the job and watches it; the command line is parsed in
 * run_opts.c, a forked child becomes a rank in run_rank.c, and the ranks'
 * output passes through run_output.c (run_int.h holds what they share). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmds.h"
#include "run_int.h"
#include "vmmc/launch.h"
#include "vmmc/vmmc.h"

#define KILL_AFTER_TERM_MS 500

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int make_listener(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(sa.sun_path + 1, name, n);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static void signal_all(job_t *j, int sig)
{
    for (int r = 0; r < j->n; r++)
        if (j->ranks[r].running)
            kill(j->ranks[r].pid, sig);
}

static void set_status(job_t *j, int st)
{
    if (!j->status)
        j->status = st;
}

/* Start tearing the job down: SIGTERM after @term_in ms (if >= 0), SIGKILL
 * KILL_AFTER_TERM_MS later. */
static void plan_kill(job_t *j, int64_t term_in)
{
    int64_t t = now_ms();
    if (j->stopping)
        return;
    j->stopping = 1;
    j->t_term = term_in >= 0 ? t + term_in : -1;
    j->t_kill = t + (term_in >= 0 ? term_in : 0) + KILL_AFTER_TERM_MS;
}

/* The summary's tail: the rank's own last words, if it wrote any. */
#define LAST_ERR(rk) (rk)->last_err[0] ? "; its last message: \"" : "", (rk)->last_err, \
                     (rk)->last_err[0] ? "\"" : ""

static void on_exit_status(job_t *j, vmmc_boot_server_t *srv, int r, int ws)
{
    rank_t *rk = &j->ranks[r];
    int failed = 0;
    /* What the rank wrote before it exited is in the pipe: pass it on (and
     * note its last line) before the summary. */
    for (int k = 0; k < 2; k++)
        if (rk->out[k].fd >= 0)
            run_drain(j, r, k, 0);
    rk->running = 0;
    j->alive--;
    if (WIFSIGNALED(ws)) {
        int sig = WTERMSIG(ws);
        failed = 1;
        if (!j->stopping)
            fprintf(stderr, "vmmc run: rank %d (pid %d) killed by signal %d (%s)%s%s%s\n", r,
                    (int)rk->pid, sig, strsignal(sig), LAST_ERR(rk));
        set_status(j, 128 + sig);
    } else if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) {
        failed = 1;
        if (!j->stopping)
            fprintf(stderr, "vmmc run: rank %d (pid %d) exited with status %d%s%s%s\n", r,
                    (int)rk->pid, WEXITSTATUS(ws), LAST_ERR(rk));
        set_status(j, WEXITSTATUS(ws));
    }
    vmmc_boot_server_rank_exited(srv, r, ws, failed);
    if (failed && !j->stopping && j->alive > 0) {
        fprintf(stderr, "vmmc run: stopping the other %d rank%s\n", j->alive,
                j->alive == 1 ? "" : "s");
        plan_kill(j, j->grace_ms);
    }
}

static void reap(job_t *j, vmmc_boot_server_t *srv)
{
    for (;;) {
        int ws;
        pid_t pid = waitpid(-1, &ws, WNOHANG);
        if (pid <= 0)
            return;
        for (int r = 0; r < j->n; r++)
            if (j->ranks[r].running && j->ranks[r].pid == pid) {
                on_exit_status(j, srv, r, ws);
                break;
            }
    }
}

static int event_loop(job_t *j, vmmc_boot_server_t *srv, int sfd)
{
    int maxfds = 1 + 2 * j->n + vmmc_boot_server_maxfds(srv);
    struct pollfd *fds = calloc((size_t)maxfds, sizeof *fds);
    int *outidx = calloc((size_t)(2 * j->n), sizeof *outidx); /* poll slot -> 2*rank+stream */
    if (!fds || !outidx) {
        free(fds);
        free(outidx);
        fprintf(stderr, "vmmc run: out of memory\n");
        signal_all(j, SIGKILL);
        return 1;
    }
    int64_t deadline = j->timeout_s > 0 ? now_ms() + (int64_t)(j->timeout_s * 1000) : -1;
    int64_t drain_until = -1; /* output still open after every rank exited */
    int nsig = 0;
    for (;;) {
        if (j->alive == 0) {
            if (!run_open_streams(j))
                break;
            if (drain_until < 0)
                drain_until = now_ms() + 500;
            else if (now_ms() >= drain_until)
                break;
        }
        int64_t t = now_ms();
        if (deadline >= 0 && t >= deadline && !j->stopping) {
            fprintf(stderr, "vmmc run: job timed out after %g s; killing it\n", j->timeout_s);
            set_status(j, 124);
            plan_kill(j, 0);
        }
        if (j->t_term >= 0 && t >= j->t_term) {
            signal_all(j, SIGTERM);
            j->t_term = -1;
        }
        if (j->t_kill >= 0 && t >= j->t_kill) {
            signal_all(j, SIGKILL);
            j->t_kill = -1;
        }
        int64_t next = -1;
        int64_t cand[] = {j->stopping ? -1 : deadline, j->t_term, j->t_kill, drain_until};
        for (size_t c = 0; c < sizeof cand / sizeof cand[0]; c++)
            if (cand[c] >= 0 && (next < 0 || cand[c] < next))
                next = cand[c];
        int wait = next < 0 ? -1 : (int)(next > t ? next - t : 0);

        /* Only open descriptors: poll() refuses more entries than the
         * descriptor limit, closed ones included. */
        int n = 0;
        fds[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        for (int r = 0; r < j->n; r++)
            for (int k = 0; k < 2; k++)
                if (j->ranks[r].out[k].fd >= 0) {
                    outidx[n - 1] = 2 * r + k;
                    fds[n++] = (struct pollfd){.fd = j->ranks[r].out[k].fd, .events = POLLIN};
                }
        int nout = n - 1;
        int nsrv = vmmc_boot_server_pollfds(srv, fds + n);
        int rc = poll(fds, (nfds_t)(n + nsrv), wait);
        if (rc < 0 && errno != EINTR) {
            fprintf(stderr, "vmmc run: poll: %s; killing the job\n", strerror(errno));
            set_status(j, 1);
            signal_all(j, SIGKILL);
            while (j->alive > 0) {
                int ws;
                pid_t pid = waitpid(-1, &ws, 0);
                if (pid < 0 && errno == EINTR)
                    continue;
                if (pid < 0)
                    break;
                for (int r = 0; r < j->n; r++)
                    if (j->ranks[r].running && j->ranks[r].pid == pid) {
                        j->ranks[r].running = 0;
                        j->alive--;
                    }
            }
            break;
        }
        if (rc <= 0)
            continue;
        if (fds[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                int sig = (int)si.ssi_signo;
                if (sig == SIGCHLD)
                    continue;
                /* SIGINT/SIGTERM/SIGHUP: forward; a second one kills. */
                nsig++;
                set_status(j, 128 + sig);
                if (nsig == 1) {
                    fprintf(stderr, "vmmc run: got signal %d (%s); forwarding it to the ranks\n",
                            sig, strsignal(sig));
                    signal_all(j, sig);
                    j->stopping = 1;
                    j->t_term = -1;
                    j->t_kill = now_ms() + 1000;
                } else {
                    signal_all(j, SIGKILL);
                }
            }
            reap(j, srv);
        }
        for (int i = 0; i < nout; i++)
            if (fds[1 + i].revents)
                run_drain(j, outidx[i] / 2, outidx[i] % 2, 0);
        vmmc_boot_server_handle(srv, fds + n, nsrv);
    }
    for (int r = 0; r < j->n; r++)
        for (int k = 0; k < 2; k++) {
            run_drain(j, r, k, 0);
            run_drain(j, r, k, 1);
            if (j->ranks[r].out[k].fd >= 0)
                close(j->ranks[r].out[k].fd);
        }
    free(fds);
    free(outidx);
    return j->status;
}

int vmmc_cmd_run(int argc, char **argv)
{
    job_t j = {0};
    j.t_term = j.t_kill = -1;
    if (run_parse_args(&j, argc, argv) < 0) {
        fprintf(stderr, "(`vmmc run --help` for usage)\n");
        return 2;
    }
    /* The settings, once for the whole job: a refused value stops it here
     * with the reason (each rank's vmmc_init() would fail the same way);
     * the warnings about unknown names were printed while reading them. */
    if (vmmc_config_check() != VMMC_OK) {
        fprintf(stderr, "vmmc run: %s\n", vmmc_last_error());
        return 1;
    }
    j.grace_ms = run_grace_ms();
    if (run_raise_nofile(&j) < 0)
        return 1;
    j.ranks = calloc((size_t)j.n, sizeof *j.ranks);
    if (!j.ranks) {
        fprintf(stderr, "vmmc run: out of memory\n");
        return 1;
    }

    unsigned char rnd[8];
    char job[32], sock[64];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t x = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)now_ms();
        memcpy(rnd, &x, sizeof rnd);
    }
    snprintf(job, sizeof job, "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
             rnd[4], rnd[5], rnd[6], rnd[7]);
    snprintf(sock, sizeof sock, "vmmc-run-%s", job);
    int lfd = make_listener(sock);
    if (lfd < 0) {
        fprintf(stderr, "vmmc run: cannot listen on @%s: %s\n", sock, strerror(errno));
        free(j.ranks);
        return 1;
    }
    vmmc_boot_server_t *srv;
    int rc = vmmc_boot_server_create(&srv, lfd, j.n, job, 0);
    if (rc < 0) {
        fprintf(stderr, "vmmc run: cannot start the job server: %s\n", strerror(-rc));
        close(lfd);
        free(j.ranks);
        return 1;
    }

    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &old);
    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "vmmc run: signalfd: %s\n", strerror(errno));
        vmmc_boot_server_destroy(srv);
        free(j.ranks);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    fflush(NULL);

    pid_t self = getpid();
    for (int r = 0; r < j.n; r++) {
        int pipes[2][2] = {{-1, -1}, {-1, -1}};
        j.ranks[r].out[0].fd = j.ranks[r].out[1].fd = -1;
        if ((j.tag_output && pipe2(pipes[0], O_CLOEXEC) < 0) || pipe2(pipes[1], O_CLOEXEC) < 0) {
            fprintf(stderr, "vmmc run: pipe: %s\n", strerror(errno));
            set_status(&j, 1);
            plan_kill(&j, 0);
            break;
        }
        pid_t pid = fork();
        if (pid == 0)
            run_child(&j, r, job, sock, &old, pipes, self);
        for (int k = 0; k < 2; k++) {
            if (pipes[k][0] < 0)
                continue;
            close(pipes[k][1]);
            if (pid > 0) {
                j.ranks[r].out[k].fd = pipes[k][0];
                fcntl(pipes[k][0], F_SETFL, O_NONBLOCK);
            } else {
                close(pipes[k][0]);
            }
        }
        if (pid < 0) {
            fprintf(stderr, "vmmc run: cannot start rank %d: fork: %s\n", r, strerror(errno));
            set_status(&j, 1);
            /* The ranks started so far cannot complete the job. */
            for (int k = r; k < j.n; k++)
                vmmc_boot_server_rank_exited(srv, k, 1 << 8, 1);
            plan_kill(&j, 0);
            break;
        }
        j.ranks[r].pid = pid;
        j.ranks[r].running = 1;
        j.alive++;
    }
    rc = event_loop(&j, srv, sfd);
    close(sfd);
    vmmc_boot_server_destroy(srv);
    sigprocmask(SIG_SETMASK, &old, NULL);
    free(j.ranks);
    return rc;
}
