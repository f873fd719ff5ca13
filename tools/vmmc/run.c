/* `vmmc run`: start N processes of a program on this host as one job.
 *
 * The launcher listens on an abstract Unix socket (no file anywhere), gives
 * each rank VMMC_RANK, VMMC_SIZE, VMMC_LOCAL_RANK, VMMC_JOB and
 * VMMC_LAUNCHER, and serves the rendezvous, the barrier and death notices
 * with the library's rendezvous server (vmmc/launch.h). When a rank fails (killed by a signal or non-zero exit) it says
 * so on stderr with the last line the rank wrote to its stderr (the ranks'
 * stderr passes through the launcher, line by line), sends DEAD to every
 * other rank at once, and after VMMC_RUN_GRACE sends SIGTERM, then SIGKILL.
 *
 * The launcher checks the VMMC_* settings once for the whole job: a refused
 * value stops it before any rank starts, and its warnings (unknown names)
 * are printed once; the ranks get VMMC_SETTINGS_CHECKED and stay quiet. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmds.h"
#include "vmmc/launch.h"
#include "vmmc/vmmc.h"

#define RUN_MAX_RANKS 1024
#define KILL_AFTER_TERM_MS 500

typedef struct {
    int fd;        /* read end, -1 when closed */
    char buf[4096];
    size_t len;
} outstream_t;

typedef struct {
    pid_t pid;
    int running;
    outstream_t out[2]; /* stdout (--tag-output only), stderr (always) */
    char last_err[256]; /* the last non-empty line the rank wrote to stderr */
} rank_t;

typedef struct {
    int n;
    double timeout_s;
    int tag_output;
    int cpu_bind;
    char **argv;
    rank_t *ranks;
    int alive;
    int status;        /* exit status of the launcher: the first failure */
    int stopping;      /* a failure, signal or timeout: the job is being torn down */
    int64_t t_term;    /* when to send SIGTERM (-1: not planned) */
    int64_t t_kill;    /* when to send SIGKILL (-1: not planned) */
    int64_t grace_ms;
} job_t;

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc run -n N [options] [--] prog [args...]\n"
            "\n"
            "Start N processes of prog on this host as one vmmc job.\n"
            "\n"
            "options:\n"
            "  -n, --np N        number of ranks (1..%d), required\n"
            "  --timeout SEC     kill the job after SEC seconds (exit status 124)\n"
            "  --tag-output      prefix every output line with [rank]\n"
            "  --cpu-bind        pin rank r to the (r mod ncpus)-th allowed cpu\n"
            "  -h, --help        this text\n"
            "\n"
            "Each rank gets VMMC_RANK, VMMC_SIZE, VMMC_LOCAL_RANK, VMMC_JOB, VMMC_LAUNCHER.\n"
            "If a rank is killed by a signal or exits non-zero, the others get a death\n"
            "notice at once, then SIGTERM after VMMC_RUN_GRACE (default 500ms), then\n"
            "SIGKILL. SIGINT and SIGTERM are forwarded to every rank. The exit status is\n"
            "the first failure's (128+signal for a signal), else 0.\n"
            "The ranks' stderr passes through the launcher; a failed rank is named with\n"
            "the last line it wrote there. The VMMC_* settings are checked once, before\n"
            "any rank starts: a refused value stops the job (status 1), and warnings are\n"
            "printed once (the ranks get VMMC_SETTINGS_CHECKED).\n",
            RUN_MAX_RANKS);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "500ms", "2s", "1.5s", "100us", bare number = ns (the VMMC_* time syntax). */
static int parse_time_ms(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    double ms;
    if (!*end || !strcmp(end, "ns"))
        ms = v / 1e6;
    else if (!strcmp(end, "us"))
        ms = v / 1e3;
    else if (!strcmp(end, "ms"))
        ms = v;
    else if (!strcmp(end, "s"))
        ms = v * 1e3;
    else if (!strcmp(end, "m") || !strcmp(end, "min"))
        ms = v * 60e3;
    else
        return -1;
    if (ms > 1e9)
        ms = 1e9;
    *out = (int64_t)ms;
    return 0;
}

/* The grace period in effect, through the library's settings table. */
static int64_t grace_ms(void)
{
    const char *name, *value;
    int64_t ms = 500;
    for (int i = 0; vmmc_config_get(i, &name, &value, NULL, NULL) == VMMC_OK; i++)
        if (!strcmp(name, "VMMC_RUN_GRACE") && parse_time_ms(value, &ms) != 0)
            ms = 500;
    return ms;
}

static int parse_args(job_t *j, int argc, char **argv)
{
    int i;
    j->n = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--np") || !strncmp(a, "-n", 2) ||
                   !strncmp(a, "--np=", 5)) {
            const char *v = !strcmp(a, "-n") || !strcmp(a, "--np") ? (i + 1 < argc ? argv[++i] : NULL)
                            : a[1] == 'n' ? a + 2 : a + 5;
            char *end;
            long n = v ? strtol(v, &end, 10) : 0;
            if (!v || !*v || *end || n < 1 || n > RUN_MAX_RANKS) {
                fprintf(stderr, "vmmc run: -n needs a number of ranks in 1..%d (got '%s')\n",
                        RUN_MAX_RANKS, v ? v : "");
                return -1;
            }
            j->n = (int)n;
        } else if (!strcmp(a, "--timeout") || !strncmp(a, "--timeout=", 10)) {
            const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            char *end;
            double t = v ? strtod(v, &end) : 0;
            if (!v || !*v || *end || !(t > 0) || t > 1e7) {
                fprintf(stderr, "vmmc run: --timeout needs a positive number of seconds (got '%s')\n",
                        v ? v : "");
                return -1;
            }
            j->timeout_s = t;
        } else if (!strcmp(a, "--tag-output")) {
            j->tag_output = 1;
        } else if (!strcmp(a, "--cpu-bind")) {
            j->cpu_bind = 1;
        } else {
            fprintf(stderr, "vmmc run: unknown option '%s'\n", a);
            return -1;
        }
    }
    if (!j->n) {
        fprintf(stderr, "vmmc run: -n N is required\n");
        return -1;
    }
    if (i >= argc) {
        fprintf(stderr, "vmmc run: no program to run\n");
        return -1;
    }
    j->argv = argv + i;
    return 0;
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
static int raise_nofile(const job_t *j)
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

static void child(job_t *j, int r, const char *job, const char *sock, const sigset_t *oldmask,
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

static void drain(job_t *j, int r, int k, int eof_flush);

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
            drain(j, r, k, 0);
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

/* Copy a complete line (with a [rank] prefix under --tag-output); note the
 * last non-empty line of each rank's stderr. */
static void emit(job_t *j, int r, int k, const char *p, size_t n, int newline)
{
    FILE *f = k ? stderr : stdout;
    if (j->tag_output)
        fprintf(f, "[%d] %.*s%s", r, (int)n, p, newline ? "\n" : "");
    else
        fprintf(f, "%.*s%s", (int)n, p, newline ? "\n" : "");
    if (k == 1 && n > 0) {
        char *le = j->ranks[r].last_err;
        size_t m = n < sizeof j->ranks[r].last_err - 1 ? n : sizeof j->ranks[r].last_err - 1;
        memcpy(le, p, m);
        le[m] = 0;
        for (size_t i = 0; i < m; i++)
            if ((unsigned char)le[i] < ' ')
                le[i] = ' ';
    }
}

/* Read what the pipe holds now (all of it), pass complete lines on; at EOF
 * or with @eof_flush, the last partial line too. */
static void drain(job_t *j, int r, int k, int eof_flush)
{
    outstream_t *o = &j->ranks[r].out[k];
    FILE *f = k ? stderr : stdout;
    for (;;) {
        if (o->fd >= 0 && !eof_flush) {
            ssize_t n = read(o->fd, o->buf + o->len, sizeof o->buf - o->len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN)
                break;
            if (n <= 0) {
                close(o->fd);
                o->fd = -1;
                eof_flush = 1;
            } else {
                o->len += (size_t)n;
            }
        }
        size_t start = 0;
        for (size_t i = 0; i < o->len; i++)
            if (o->buf[i] == '\n') {
                emit(j, r, k, o->buf + start, i - start, 1);
                start = i + 1;
            }
        if (start == 0 && o->len == sizeof o->buf) { /* a line longer than the buffer */
            emit(j, r, k, o->buf, o->len, 0);
            start = o->len;
        }
        if (eof_flush && start < o->len) {
            emit(j, r, k, o->buf + start, o->len - start, 1);
            start = o->len;
        }
        memmove(o->buf, o->buf + start, o->len - start);
        o->len -= start;
        if (o->fd < 0 || eof_flush)
            break;
    }
    fflush(f);
}

static int open_streams(job_t *j)
{
    for (int r = 0; r < j->n; r++)
        for (int k = 0; k < 2; k++)
            if (j->ranks[r].out[k].fd >= 0)
                return 1;
    return 0;
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
            if (!open_streams(j))
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
                drain(j, outidx[i] / 2, outidx[i] % 2, 0);
        vmmc_boot_server_handle(srv, fds + n, nsrv);
    }
    for (int r = 0; r < j->n; r++)
        for (int k = 0; k < 2; k++) {
            drain(j, r, k, 0);
            drain(j, r, k, 1);
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
    if (parse_args(&j, argc, argv) < 0) {
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
    j.grace_ms = grace_ms();
    if (raise_nofile(&j) < 0)
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
            child(&j, r, job, sock, &old, pipes, self);
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
