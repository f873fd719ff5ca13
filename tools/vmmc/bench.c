/* vmmc bench: the benchmark instrument's framework.
 *
 * Runs the registered suites (bench.h), collects their rows, computes each
 * row's ratio to its named reference measured in the same run, and prints a
 * table, CSV or JSON, optionally with gnuplot charts.
 *
 * Every suite runs in a child process so that a crash, a hang or an error in
 * one suite is reported and the others still run:
 *  - nranks == 0: a forked child of the tool, rows come back over a pipe;
 *  - nranks == 2: `vmmc run -n 2 --cpu-bind -- <self> bench --worker <suite>`,
 *    rank 0 prints its rows on stdout, which the launcher forwards to us.
 * Rows travel as tab-separated lines starting with ROW_TAG: bench_report.c
 * writes them, bench_rows.c reads them and computes the ratios.
 * The command line is parsed in bench_opts.c; the rows are printed and
 * charted in bench_out.c (bench_int.h holds what the three share). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_int.h"
#include "cmds.h"

extern const bench_suite_t *const __start_vmmc_bench[];
extern const bench_suite_t *const __stop_vmmc_bench[];

/* The order suites run in and are printed in: the floor first. */
const char *const suite_order[] = {"limits", "vmmc", "fm",  "udp",   "fabric", "peers",
                                   "mpi",    "sock", "rpc", "shmem", "dsm"};
const size_t suite_order_n = sizeof suite_order / sizeof *suite_order;

/* ------------------------------------------------------------------------- */
/* Running suites                                                             */

static void fill_ctx(bench_ctx_t *c, const opts_t *o)
{
    memset(c, 0, sizeof *c);
    c->quick = o->quick;
    c->min_size = o->min_size;
    c->max_size = o->max_size;
    c->reps = o->reps;
    c->transport = o->transport;
    c->size = 1;
}

/* Read a child's output until EOF or the deadline; returns 0, or -1 on
 * timeout (the child's process group is then killed). */
static int collect(const char *suite, int fd, pid_t pid, double deadline_ns)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int timed_out = 0;
    for (;;) {
        double left = deadline_ns - bench_now_ns();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(left / 1e6) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        if (r == 0)
            continue;
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 65536;
            buf = xrealloc(buf, cap);
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        /* hand complete lines over */
        char *start = buf, *nl;
        while ((nl = memchr(start, '\n', (size_t)(buf + len - start)))) {
            *nl = 0;
            parse_line(suite, start);
            start = nl + 1;
        }
        len -= (size_t)(start - buf);
        memmove(buf, start, len);
    }
    if (len) {
        buf[len] = 0;
        parse_line(suite, buf);
    }
    free(buf);
    if (timed_out) {
        kill(-pid, SIGTERM);
        for (int i = 0; i < 20 && waitpid(pid, NULL, WNOHANG) == 0; i++)
            usleep(50000);
        kill(-pid, SIGKILL);
        return -1;
    }
    return 0;
}

static void describe_status(const char *suite, int status, int timed_out, int timeout_s)
{
    if (timed_out)
        add_note(suite, "suite '%s' did not finish within %d s and was stopped (--timeout)", suite,
                 timeout_s);
    else if (WIFSIGNALED(status))
        add_note(suite, "suite '%s' failed: killed by signal %d (%s)", suite, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 124)
        add_note(suite, "suite '%s' did not finish within %d s and was stopped by the launcher "
                        "(--timeout)", suite, timeout_s);
    else if (WIFEXITED(status) && WEXITSTATUS(status))
        add_note(suite, "suite '%s' failed: exit status %d", suite, WEXITSTATUS(status));
}

static int self_path(char *buf, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0)
        return -1;
    buf[k] = 0;
    return 0;
}

/* The process group of the suite running now: an interrupt of the tool
 * stops it too (suites run in their own groups so a timeout can stop them). */
static volatile pid_t g_child_group;

static void on_interrupt(int sig)
{
    pid_t g = g_child_group;
    if (g > 0)
        kill(-g, SIGTERM);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void watch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Run a suite in a forked child; returns 0 if it succeeded. */
static int run_local(const bench_suite_t *s, const opts_t *o)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
        add_note(s->name, "cannot create a pipe for suite '%s': %s", s->name, strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        add_note(s->name, "cannot fork for suite '%s': %s", s->name, strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        close(p[0]);
        /* Anything a suite prints by accident must not mix with the table. */
        dup2(2, 1);
        g_rows = fdopen(p[1], "w");
        if (!g_rows)
            _exit(1);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        if (o->crash && !strcmp(o->crash, s->name))
            kill(getpid(), SIGKILL);
        bench_ctx_t c;
        fill_ctx(&c, o);
        int rc = s->run(&c);
        fflush(g_rows);
        _exit(rc ? 1 : 0);
    }
    setpgid(pid, pid);
    g_child_group = pid;
    close(p[1]);
    int timed_out = collect(s->name, p[0], pid, bench_now_ns() + o->timeout_s * 1e9) < 0;
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    describe_status(s->name, status, timed_out, o->timeout_s);
    return timed_out || !WIFEXITED(status) || WEXITSTATUS(status) ? -1 : 0;
}

/* Does this library select its transport with VMMC_TRANSPORT? */
static int have_transport_setting(void)
{
    const char *name, *value, *deflt, *help;
    for (int i = 0; vmmc_config_get(i, &name, &value, &deflt, &help) == VMMC_OK; i++)
        if (!strcmp(name, "VMMC_TRANSPORT"))
            return 1;
    return 0;
}

/* Run a two-rank suite as a job of the launcher. */
static int run_job(const bench_suite_t *s, const opts_t *o)
{
    if (strcmp(o->transport, "shm") && !have_transport_setting()) {
        add_note(s->name, "this library has no VMMC_TRANSPORT setting: cannot force --transport %s",
                 o->transport);
        return -1;
    }
    char self[PATH_MAX];
    if (self_path(self, sizeof self)) {
        add_note(s->name, "cannot find this program's path (/proc/self/exe): %s",
                 strerror(errno));
        return -1;
    }
    char reps[16], sizes[64], tmo[16];
    snprintf(reps, sizeof reps, "%d", o->reps);
    snprintf(sizes, sizeof sizes, "%zu:%zu", o->min_size, o->max_size);
    snprintf(tmo, sizeof tmo, "%d", o->timeout_s);
    const char *argv[32];
    int n = 0;
    argv[n++] = self;
    argv[n++] = "run";
    argv[n++] = "-n";
    argv[n++] = "2";
    argv[n++] = "--cpu-bind";
    argv[n++] = "--timeout";
    argv[n++] = tmo;
    argv[n++] = "--";
    argv[n++] = self;
    argv[n++] = "bench";
    argv[n++] = "--worker";
    argv[n++] = s->name;
    argv[n++] = "--reps";
    argv[n++] = reps;
    argv[n++] = "--sizes";
    argv[n++] = sizes;
    argv[n++] = "--transport";
    argv[n++] = o->transport;
    if (o->quick)
        argv[n++] = "--quick";
    argv[n] = NULL;

    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
        add_note(s->name, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        add_note(s->name, "cannot fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(p[1], 1);
        if (have_transport_setting())
            setenv("VMMC_TRANSPORT", o->transport, 1);
        execv(self, (char *const *)argv);
        fprintf(stderr, "vmmc bench: cannot run %s: %s\n", self, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    g_child_group = pid;
    close(p[1]);
    /* A little beyond the launcher's own timeout, so it can report first. */
    int timed_out =
        collect(s->name, p[0], pid, bench_now_ns() + (o->timeout_s + 10) * 1e9) < 0;
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    describe_status(s->name, status, timed_out, o->timeout_s);
    return timed_out || !WIFEXITED(status) || WEXITSTATUS(status) ? -1 : 0;
}

/* --worker: one rank of a two-rank suite. */
static int run_worker(const opts_t *o)
{
    const bench_suite_t *s = find_suite(o->worker);
    if (!s) {
        fprintf(stderr, "vmmc bench: unknown suite '%s'\n", o->worker);
        return 2;
    }
    vmmc_ep_t *ep = NULL;
    int rc = vmmc_init(NULL, &ep);
    if (rc) {
        fprintf(stderr, "vmmc bench: vmmc_init failed: %s (%s)\n", vmmc_strerror(rc),
                vmmc_last_error());
        return 1;
    }
    bench_ctx_t c;
    fill_ctx(&c, o);
    c.ep = ep;
    c.rank = vmmc_rank(ep);
    c.size = vmmc_size(ep);
    g_rows = stdout;
    if (c.size < s->nranks) {
        if (c.rank == 0)
            bench_note(&c, "suite '%s' needs %d ranks, the job has %d (use vmmc run -n %d)",
                       s->name, s->nranks, c.size, s->nranks);
        vmmc_finalize(ep);
        return 1;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu > 0)
        bench_pin_cpu((int)(c.rank % ncpu));
    rc = s->run(&c);
    fflush(stdout);
    int frc = vmmc_finalize(ep);
    if (frc)
        fprintf(stderr, "vmmc bench: rank %d: vmmc_finalize failed: %s (%s)\n", c.rank,
                vmmc_strerror(frc), vmmc_last_error());
    return rc || frc ? 1 : 0;
}

/* ------------------------------------------------------------------------- */

int vmmc_cmd_bench(int argc, char **argv)
{
    opts_t o;
    if (parse_opts(argc, argv, &o))
        return 2;
    if (o.worker)
        return run_worker(&o);
    /* The settings, once for the run: a refused value would fail every
     * suite; the warnings are not repeated by the suites' processes. The
     * check runs in a child: the library reads the settings once per
     * process, and suites that fork (udp) set their own before vmmc_init. */
    pid_t ck = fork();
    if (ck == 0) {
        if (vmmc_config_check() != VMMC_OK) {
            fprintf(stderr, "vmmc bench: %s\n", vmmc_last_error());
            _exit(1);
        }
        _exit(0);
    }
    int ckst = 0;
    if (ck < 0 || waitpid(ck, &ckst, 0) != ck || !WIFEXITED(ckst) || WEXITSTATUS(ckst) != 0)
        return 1;
    setenv("VMMC_SETTINGS_CHECKED", "1", 1);

    /* selected suites, in canonical order */
    const char *ran[16];
    int nran = 0;
    for (size_t i = 0; i < sizeof suite_order / sizeof *suite_order; i++) {
        int sel = o.nsuites == 0;
        for (int k = 0; k < o.nsuites; k++)
            if (!strcmp(o.suites[k], suite_order[i]))
                sel = 1;
        if (sel)
            ran[nran++] = suite_order[i];
    }
    /* suites registered but not in the canonical order list run last */
    for (const bench_suite_t *const *p = __start_vmmc_bench; p < __stop_vmmc_bench; p++) {
        if (suite_rank((*p)->name) < 99 || nran == 16)
            continue;
        int sel = o.nsuites == 0;
        for (int k = 0; k < o.nsuites; k++)
            if (!strcmp(o.suites[k], (*p)->name))
                sel = 1;
        if (sel)
            ran[nran++] = (*p)->name;
    }

    if (o.plot_dir && check_gnuplot())
        fprintf(stderr, "vmmc bench: measuring anyway; there will be no charts\n");
    int failed = 0;
    double t_all = bench_now_ns();
    g_busy_start = sample_busy(o.quick ? 100 : 300);
    watch_interrupts();
    for (int i = 0; i < nran; i++) {
        const bench_suite_t *s = find_suite(ran[i]);
        if (!s) {
            add_note(ran[i], "suite '%s' is not built into this vmmc", ran[i]);
            continue;
        }
        fprintf(stderr, "vmmc bench: running %s ...", s->name);
        double t0 = bench_now_ns();
        int rc = s->nranks >= 2 ? run_job(s, &o) : run_local(s, &o);
        fprintf(stderr, " %s (%.1f s)\n", rc ? "failed" : "done", (bench_now_ns() - t0) / 1e9);
        failed |= rc != 0;
    }
    fprintf(stderr, "vmmc bench: total %.1f s\n", (bench_now_ns() - t_all) / 1e9);
    apply_bounds(&o);
    compute_ratios();

    if (!strcmp(o.format, "csv")) {
        print_csv(stdout);
        for (size_t i = 0; i < nnotes; i++)
            fprintf(stderr, "note [%s]: %s\n", notes[i].suite, notes[i].text);
    } else if (!strcmp(o.format, "json")) {
        print_json(stdout, &o);
    } else {
        print_table(stdout, &o, ran, nran);
    }
    fflush(stdout);
    int rc = failed ? 1 : 0;
    if (o.plot_dir && make_plots(o.plot_dir))
        rc = 1;
    return rc;
}
