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
 * Rows travel as tab-separated lines starting with ROW_TAG (see emit_*()).
 * The command line is parsed in bench_opts.c; the rows are printed and
 * charted in bench_out.c (bench_int.h holds what the three share). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_int.h"
#include "cmds.h"

#define ROW_TAG "@@vmmc-bench"
#define BOUND_TAG "bound:" /* a row's reference that is its floor or ceiling */
/* How far past its bound's extreme repetition a figure must be to be flagged:
 * the spread of repetitions on a quiet machine. */
#define BOUND_MARGIN 0.03

extern const bench_suite_t *const __start_vmmc_bench[];
extern const bench_suite_t *const __stop_vmmc_bench[];

/* The order suites run in and are printed in: the floor first. */
const char *const suite_order[] = {"limits", "vmmc", "fm", "udp", "peers"};
const size_t suite_order_n = sizeof suite_order / sizeof *suite_order;

/* ------------------------------------------------------------------------- */
/* Helpers for suites (bench.h)                                               */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_n_half(const size_t *sizes, const double *bw, int n)
{
    double peak = 0;
    for (int i = 0; i < n; i++)
        if (bw[i] > peak)
            peak = bw[i];
    int i = 0;
    while (i < n - 1 && bw[i] < peak / 2)
        i++;
    if (i == 0)
        return (double)sizes[0];
    double t = (peak / 2 - bw[i - 1]) / (bw[i] - bw[i - 1]);
    return exp(log((double)sizes[i - 1]) + t * (log((double)sizes[i]) - log((double)sizes[i - 1])));
}

bench_stat_t bench_stats(double *samples, int n)
{
    bench_stat_t st = {0, 0, 0};
    if (n <= 0)
        return st;
    qsort(samples, (size_t)n, sizeof *samples, cmp_double);
    st.min = samples[0];
    st.max = samples[n - 1];
    st.median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    return st;
}

double bench_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int bench_pin_cpu(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return sched_setaffinity(0, sizeof s, &s) ? -1 : 0;
}

/* Where the current (child) process writes its rows. */
static FILE *g_rows;

/* Text fields travel on one line between tabs: flatten tabs and newlines. */
static void put_field(FILE *f, const char *s)
{
    fputc('\t', f);
    for (; s && *s; s++)
        fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

void bench_report(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                  bench_stat_t st, const char *ref)
{
    if (!g_rows || c->rank != 0)
        return;
    fputs(ROW_TAG "\trow", g_rows);
    put_field(g_rows, c->transport ? c->transport : "-");
    put_field(g_rows, metric);
    fprintf(g_rows, "\t%zu", size);
    put_field(g_rows, unit);
    fprintf(g_rows, "\t%.17g\t%.17g\t%.17g", st.median, st.min, st.max);
    put_field(g_rows, ref ? ref : "");
    fputc('\n', g_rows);
    fflush(g_rows);
}

void bench_report_bounded(bench_ctx_t *c, const char *metric, size_t size, const char *unit,
                          bench_stat_t st, const char *bound)
{
    char ref[256];
    snprintf(ref, sizeof ref, BOUND_TAG "%s", bound);
    bench_report(c, metric, size, unit, st, ref);
}

void bench_note(bench_ctx_t *c, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->rank != 0) { /* other ranks' notes are diagnostics */
        fprintf(stderr, "vmmc bench: rank %d: %s\n", c->rank, buf);
        return;
    }
    if (!g_rows)
        return;
    fputs(ROW_TAG "\tnote", g_rows);
    put_field(g_rows, buf);
    fputc('\n', g_rows);
    fflush(g_rows);
}

/* ------------------------------------------------------------------------- */
/* Collected results                                                          */



row_t *rows;
size_t nrows;
static size_t caprows;
note_t *notes;
size_t nnotes;
static size_t capnotes;

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "vmmc bench: out of memory\n");
        exit(1);
    }
    return q;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        fprintf(stderr, "vmmc bench: out of memory\n");
        exit(1);
    }
    return d;
}

static void add_note(const char *suite, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(const char *suite, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (nnotes == capnotes) {
        capnotes = capnotes ? 2 * capnotes : 16;
        notes = xrealloc(notes, capnotes * sizeof *notes);
    }
    notes[nnotes].suite = xstrdup(suite);
    notes[nnotes].text = xstrdup(buf);
    nnotes++;
}

/* Parse one line from a suite; lines without the tag are diagnostics and go
 * to stderr. Returns 1 for a row or note, 0 otherwise. */
static int parse_line(const char *suite, char *line)
{
    char *tag = strstr(line, ROW_TAG "\t");
    if (!tag) {
        if (*line)
            fprintf(stderr, "[%s] %s\n", suite, line);
        return 0;
    }
    char *f[12];
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(tag, "\t", &save); t && n < 12; t = strtok_r(NULL, "\t", &save))
        f[n++] = t;
    /* strtok_r drops empty fields: the only optional one is the last (ref). */
    if (n >= 3 && !strcmp(f[1], "note")) {
        add_note(suite, "%s", f[2]);
        return 1;
    }
    if (n < 9 || strcmp(f[1], "row")) {
        fprintf(stderr, "vmmc bench: [%s] malformed result line ignored\n", suite);
        return 0;
    }
    if (nrows == caprows) {
        caprows = caprows ? 2 * caprows : 64;
        rows = xrealloc(rows, caprows * sizeof *rows);
    }
    row_t *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    r->suite = xstrdup(suite);
    r->transport = xstrdup(f[2]);
    r->metric = xstrdup(f[3]);
    r->size = (size_t)strtoull(f[4], NULL, 10);
    r->unit = xstrdup(f[5]);
    r->value = strtod(f[6], NULL);
    r->min = strtod(f[7], NULL);
    r->max = strtod(f[8], NULL);
    r->ref = n > 9 ? xstrdup(f[9]) : NULL;
    if (r->ref && !strncmp(r->ref, BOUND_TAG, strlen(BOUND_TAG))) {
        memmove(r->ref, r->ref + strlen(BOUND_TAG), strlen(r->ref) - strlen(BOUND_TAG) + 1);
        r->bound = 1;
    }
    r->ratio = NAN;
    return 1;
}

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
/* Ratios                                                                     */

/* Time units are converted to ns; other units must match exactly. */
static int unit_scale(const char *u, double *scale, const char **family)
{
    if (!strcmp(u, "ns")) {
        *scale = 1;
        *family = "time";
    } else if (!strcmp(u, "us")) {
        *scale = 1e3;
        *family = "time";
    } else if (!strcmp(u, "ms")) {
        *scale = 1e6;
        *family = "time";
    } else {
        *scale = 1;
        *family = u;
    }
    return 0;
}

static double size_distance(size_t a, size_t b)
{
    return fabs(log2((double)(a ? a : 1)) - log2((double)(b ? b : 1)));
}

static void compute_ratios(void)
{
    for (size_t i = 0; i < nrows; i++) {
        row_t *r = &rows[i];
        if (!r->ref || !*r->ref)
            continue;
        const char *slash = strchr(r->ref, '/');
        if (!slash)
            continue;
        size_t slen = (size_t)(slash - r->ref);
        const row_t *best = NULL;
        double bestd = INFINITY;
        for (size_t j = 0; j < nrows; j++) {
            const row_t *q = &rows[j];
            if (q == r || strlen(q->suite) != slen || strncmp(q->suite, r->ref, slen) ||
                strcmp(q->metric, slash + 1))
                continue;
            double d = size_distance(q->size, r->size);
            /* same size wins; among equals prefer the same transport */
            if (!strcmp(q->transport, r->transport))
                d -= 0.01;
            if (d < bestd) {
                bestd = d;
                best = q;
            }
        }
        if (!best)
            continue;
        double s1, s2;
        const char *f1, *f2;
        unit_scale(r->unit, &s1, &f1);
        unit_scale(best->unit, &s2, &f2);
        if (strcmp(f1, f2) || best->value == 0)
            continue;
        r->ratio = (r->value * s1) / (best->value * s2);
        char buf[256];
        if (best->size)
            snprintf(buf, sizeof buf, "%s@%zu", r->ref, best->size);
        else
            snprintf(buf, sizeof buf, "%s", r->ref);
        r->ratio_to = xstrdup(buf);
        /* A figure beyond its own floor or ceiling, measured the same way in
         * this run, is impossible: flag it rather than let it be quoted.
         * Beyond means past every repetition of the bound (below the floor's
         * min, above the ceiling's max) by more than BOUND_MARGIN, so that
         * neither the bound's noise nor the figure's raises the flag. */
        if (r->bound && best->size == r->size) {
            int is_time = !strcmp(f1, "time");
            if (is_time ? r->value * s1 < best->min * s2 * (1 - BOUND_MARGIN)
                        : r->value * s1 > best->max * s2 * (1 + BOUND_MARGIN)) {
                char sz[32];
                r->flag = is_time ? "below-floor" : "above-ceiling";
                snprintf(sz, sizeof sz, "%zu B", r->size);
                add_note(r->suite,
                         "! %s at %s is %.3gx its %s %s, measured the same way in this run, "
                         "and more than 3 %% beyond every repetition of it: impossible, so the "
                         "two did not see "
                         "the same machine (the cpus moved or other work ran) or the path "
                         "skipped work it owes; do not quote it",
                         r->metric, r->size ? sz : "-", r->ratio,
                         is_time ? "floor" : "ceiling", r->ratio_to);
            }
        }
    }
}

/* --bound METRIC:BOUND (both "suite/metric"): treat BOUND as METRIC's floor
 * (times) or ceiling (rates), as suites do for their own figures. */
static void apply_bounds(const opts_t *o)
{
    for (int b = 0; b < o->nbounds; b++) {
        const char *colon = strchr(o->bounds[b], ':');
        const char *slash = strchr(o->bounds[b], '/');
        if (!colon || !slash || slash > colon)
            continue;
        for (size_t i = 0; i < nrows; i++) {
            row_t *r = &rows[i];
            size_t sl = (size_t)(slash - o->bounds[b]), ml = (size_t)(colon - slash - 1);
            if (strlen(r->suite) != sl || strncmp(r->suite, o->bounds[b], sl) ||
                strlen(r->metric) != ml || strncmp(r->metric, slash + 1, ml))
                continue;
            free(r->ref);
            r->ref = xstrdup(colon + 1);
            r->bound = 1;
        }
    }
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
