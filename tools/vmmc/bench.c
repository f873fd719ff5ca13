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
 * Rows travel as tab-separated lines starting with ROW_TAG (see emit_*()). */
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
#include "cmds.h"

#define ROW_TAG "@@vmmc-bench"
#define BOUND_TAG "bound:" /* a row's reference that is its floor or ceiling */
/* How far past its bound's extreme repetition a figure must be to be flagged:
 * the spread of repetitions on a quiet machine. */
#define BOUND_MARGIN 0.03

extern const bench_suite_t *const __start_vmmc_bench[];
extern const bench_suite_t *const __stop_vmmc_bench[];

/* The order suites run in and are printed in: the floor first. */
static const char *const suite_order[] = {"limits", "vmmc", "fm", "udp", "peers"};

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

typedef struct row {
    char *suite, *transport, *metric, *unit, *ref;
    size_t size;
    double value, min, max;
    double ratio;    /* NAN if none */
    char *ratio_to;  /* "suite/metric@size", NULL if none */
    int bound;       /* ref is a floor (times) or ceiling (rates) of this figure */
    const char *flag; /* "below-floor", "above-ceiling", or NULL */
} row_t;

typedef struct note {
    char *suite, *text;
} note_t;

static row_t *rows;
static size_t nrows, caprows;
static note_t *notes;
static size_t nnotes, capnotes;

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
/* Options                                                                    */

typedef struct opts {
    int quick;
    const char *format; /* table, csv, json */
    const char *plot_dir;
    const char *transport;
    int reps;
    size_t min_size, max_size;
    int sizes_set;
    const char *worker;
    const char *crash; /* --crash-test: this suite kills itself (tests the failure path) */
    const char *bounds[8]; /* --bound METRIC:BOUND */
    int nbounds;
    int timeout_s;
    const char *suites[16];
    int nsuites;
} opts_t;

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc bench [options] [suite...]\n"
            "\n"
            "Measure latency, bandwidth and overheads, with this machine's limits\n"
            "and the installed peer libraries measured in the same run. Every figure\n"
            "is the median over repetitions after warm-up, with min and max; the\n"
            "ratio column compares it with the named reference of the same run.\n"
            "Two-rank suites run through `vmmc run -n 2 --cpu-bind` on cpus 0 and 1.\n"
            "\n"
            "options:\n"
            "  --quick               a short run (< 30 s): the headline figures only\n"
            "  --format FMT          table (default), csv or json\n"
            "  --plot DIR            write latency.png and bandwidth.png into DIR (gnuplot)\n"
            "  --transport T         shm (default) or udp, for the two-rank suites\n"
            "  --reps N              repetitions per figure (default 7, quick 5)\n"
            "  --sizes MIN:MAX       message sizes to cover, e.g. 8:1M (K/M/G suffixes)\n"
            "  --timeout S           give up on a suite after S seconds (default 600,\n"
            "                        quick 60)\n"
            "  --crash-test SUITE    make SUITE die at start (checks that the others\n"
            "                        still run and the failure is reported)\n"
            "  --bound S/M:S2/M2     also check figure S/M against S2/M2 as its floor\n"
            "                        (times) or ceiling (rates)\n"
            "  -h, --help            this text\n"
            "\n"
            "suites (all by default):\n");
    const char *const *o = suite_order;
    for (size_t i = 0; i < sizeof suite_order / sizeof *suite_order; i++) {
        const bench_suite_t *s = NULL;
        for (const bench_suite_t *const *p = __start_vmmc_bench; p < __stop_vmmc_bench; p++)
            if (!strcmp((*p)->name, o[i]))
                s = *p;
        fprintf(f, "  %-8s %s%s\n", o[i], s ? s->help : "(not built in)",
                s && s->nranks == 2 ? " [2 ranks]" : "");
    }
    fprintf(f,
            "\n"
            "examples:\n"
            "  vmmc bench --quick\n"
            "  vmmc bench limits vmmc --sizes 8:4M --format csv > run.csv\n"
            "  vmmc bench --plot docs/img\n");
}

static const bench_suite_t *find_suite(const char *name)
{
    for (const bench_suite_t *const *p = __start_vmmc_bench; p < __stop_vmmc_bench; p++)
        if (!strcmp((*p)->name, name))
            return *p;
    return NULL;
}

/* "64", "4K", "1M", "1G": binary multiples. Returns 0 or -1. */
static int parse_size(const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned long long mul = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mul = 1ull << 10; break;
        case 'M': mul = 1ull << 20; break;
        case 'G': mul = 1ull << 30; break;
        case 'B': mul = 1; break;
        default: return -1;
        }
        end++;
        if (mul > 1 && (*end == 'i' || *end == 'I'))
            end++;
        if (mul > 1 && (*end == 'B' || *end == 'b'))
            end++;
        if (*end)
            return -1;
    }
    if (v > (unsigned long long)SIZE_MAX / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int parse_opts(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->format = "table";
    o->transport = "shm";
    o->min_size = 1;
    o->max_size = (size_t)16 << 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        /* --opt=value and --opt value */
        char name[64];
        const char *eq = strchr(a, '=');
        if (!strncmp(a, "--", 2) && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
            a = name;
        }
#define NEED_VAL()                                                                      \
    do {                                                                                \
        if (!val) {                                                                     \
            if (i + 1 >= argc) {                                                        \
                fprintf(stderr, "vmmc bench: %s needs a value (see --help)\n", a);      \
                return -1;                                                              \
            }                                                                           \
            val = argv[++i];                                                            \
        }                                                                               \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--format")) {
            NEED_VAL();
            if (strcmp(val, "table") && strcmp(val, "csv") && strcmp(val, "json")) {
                fprintf(stderr, "vmmc bench: unknown format '%s' (table, csv or json)\n", val);
                return -1;
            }
            o->format = val;
        } else if (!strcmp(a, "--plot")) {
            NEED_VAL();
            if (!*val) {
                fprintf(stderr, "vmmc bench: --plot needs a directory\n");
                return -1;
            }
            o->plot_dir = val;
        } else if (!strcmp(a, "--transport")) {
            NEED_VAL();
            if (strcmp(val, "shm") && strcmp(val, "udp")) {
                fprintf(stderr, "vmmc bench: unknown transport '%s' (shm or udp)\n", val);
                return -1;
            }
            o->transport = val;
        } else if (!strcmp(a, "--reps")) {
            NEED_VAL();
            char *end;
            errno = 0;
            long r = strtol(val, &end, 10);
            if (errno || *end || end == val || r < 1 || r > 1000) {
                fprintf(stderr, "vmmc bench: --reps must be a number from 1 to 1000, not '%s'\n",
                        val);
                return -1;
            }
            o->reps = (int)r;
        } else if (!strcmp(a, "--timeout")) {
            NEED_VAL();
            char *end;
            errno = 0;
            long t = strtol(val, &end, 10);
            if (errno || *end || end == val || t < 1 || t > 86400) {
                fprintf(stderr, "vmmc bench: --timeout must be 1..86400 seconds, not '%s'\n", val);
                return -1;
            }
            o->timeout_s = (int)t;
        } else if (!strcmp(a, "--sizes")) {
            NEED_VAL();
            const char *colon = strchr(val, ':');
            char lo[32];
            if (!colon || (size_t)(colon - val) >= sizeof lo) {
                fprintf(stderr, "vmmc bench: --sizes wants MIN:MAX, e.g. 8:4M, not '%s'\n", val);
                return -1;
            }
            memcpy(lo, val, (size_t)(colon - val));
            lo[colon - val] = 0;
            if (parse_size(lo, &o->min_size) || parse_size(colon + 1, &o->max_size) ||
                o->min_size < 1 || o->min_size > o->max_size ||
                o->max_size > ((size_t)1 << 30)) {
                fprintf(stderr,
                        "vmmc bench: bad --sizes '%s': want 1 <= MIN <= MAX <= 1G, e.g. 8:4M\n",
                        val);
                return -1;
            }
            o->sizes_set = 1;
        } else if (!strcmp(a, "--worker")) {
            NEED_VAL();
            o->worker = val;
        } else if (!strcmp(a, "--crash-test")) {
            NEED_VAL();
            o->crash = val;
        } else if (!strcmp(a, "--bound")) {
            NEED_VAL();
            const char *colon = strchr(val, ':');
            if (o->nbounds == 8 || !colon || !strchr(val, '/') || strchr(val, '/') > colon ||
                !strchr(colon, '/')) {
                fprintf(stderr, "vmmc bench: bad --bound '%s': give SUITE/METRIC:SUITE/METRIC "
                                "(at most 8)\n", val);
                return -1;
            }
            o->bounds[o->nbounds++] = val;
        } else if (a[0] == '-') {
            fprintf(stderr, "vmmc bench: unknown option '%s' (see --help)\n", a);
            return -1;
        } else {
            if (val) {
                fprintf(stderr, "vmmc bench: unknown option '%s' (see --help)\n", argv[i]);
                return -1;
            }
            if (!find_suite(a)) {
                fprintf(stderr, "vmmc bench: unknown suite '%s' (see --help)\n", a);
                return -1;
            }
            for (int k = 0; k < o->nsuites; k++)
                if (!strcmp(o->suites[k], a)) {
                    a = NULL;
                    break;
                }
            if (!a)
                continue;
            if (o->nsuites == (int)(sizeof o->suites / sizeof *o->suites)) {
                fprintf(stderr, "vmmc bench: too many suites\n");
                return -1;
            }
            o->suites[o->nsuites++] = a;
        }
#undef NEED_VAL
    }
    if (!o->reps)
        o->reps = o->quick ? 5 : 7;
    if (!o->timeout_s)
        o->timeout_s = o->quick ? 60 : 600;
    return 0;
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
/* Output                                                                     */

static void fmt_size(size_t s, char *buf, size_t n)
{
    if (s == 0)
        snprintf(buf, n, "-");
    else if (s >= (1u << 30) && s % (1u << 30) == 0)
        snprintf(buf, n, "%zu GiB", s >> 30);
    else if (s >= (1u << 20) && s % (1u << 20) == 0)
        snprintf(buf, n, "%zu MiB", s >> 20);
    else if (s >= 1024 && s % 1024 == 0)
        snprintf(buf, n, "%zu KiB", s >> 10);
    else
        snprintf(buf, n, "%zu B", s);
}

static void fmt_num(double v, char *buf, size_t n)
{
    if (isnan(v))
        snprintf(buf, n, "-");
    else if (v != 0 && (fabs(v) >= 1e6 || fabs(v) < 1e-3))
        snprintf(buf, n, "%.3g", v);
    else if (fabs(v) >= 100)
        snprintf(buf, n, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(buf, n, "%.1f", v);
    else
        snprintf(buf, n, "%.3g", v);
}

static int suite_rank(const char *name)
{
    for (size_t i = 0; i < sizeof suite_order / sizeof *suite_order; i++)
        if (!strcmp(suite_order[i], name))
            return (int)i;
    return 99;
}

static void machine_cpu(char *buf, size_t n);

/* How busy the cpus were just before the run (0..1, -1 unknown): other
 * work on the machine shows up in spinning two-core benchmarks. */
static double g_busy_start = -1;

static int cpu_times(unsigned long long *busy, unsigned long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4]; /* minus idle and iowait */
    return 0;
}

static double sample_busy(double ms)
{
    unsigned long long b0, t0, b1, t1;
    if (cpu_times(&b0, &t0))
        return -1;
    usleep((useconds_t)(ms * 1000));
    if (cpu_times(&b1, &t1) || t1 == t0)
        return -1;
    return (double)(b1 - b0) / (double)(t1 - t0);
}

static void print_table(FILE *f, const opts_t *o, const char *const *ran, int nran)
{
    static const char *hdr[] = {"suite", "transport", "size", "metric", "value",
                                "unit", "min", "max", "ratio", "ratio to"};
    enum { NC = 10 };
    int w[NC];
    for (int k = 0; k < NC; k++)
        w[k] = (int)strlen(hdr[k]);
    char cell[NC][128];
    char cpu[256];
    machine_cpu(cpu, sizeof cpu);
    struct utsname u;
    uname(&u);
    fprintf(f, "vmmc bench %s: %s, %ld cpus, Linux %s; transport %s", vmmc_version(), cpu,
            sysconf(_SC_NPROCESSORS_ONLN), u.release, o->transport);
    if (g_busy_start >= 0)
        fprintf(f, "; cpus %.0f%% busy before the run", 100 * g_busy_start);
    fputc('\n', f);
    if (g_busy_start >= 0.25)
        fprintf(f, "warning: other work was using %.0f%% of the cpus when the run started: "
                   "two-core figures are noisy; compare min, and rerun when it is idle\n",
                100 * g_busy_start);
    for (int pass = 0; pass < 2; pass++) {
        for (int si = 0; si < nran; si++) {
            const char *suite = ran[si];
            int any = 0;
            for (size_t i = 0; i < nrows; i++) {
                const row_t *r = &rows[i];
                if (strcmp(r->suite, suite))
                    continue;
                snprintf(cell[0], sizeof cell[0], "%s", r->suite);
                snprintf(cell[1], sizeof cell[1], "%s", r->transport);
                fmt_size(r->size, cell[2], sizeof cell[2]);
                snprintf(cell[3], sizeof cell[3], "%s", r->metric);
                fmt_num(r->value, cell[4], sizeof cell[4]);
                snprintf(cell[5], sizeof cell[5], "%s", r->unit);
                fmt_num(r->min, cell[6], sizeof cell[6]);
                fmt_num(r->max, cell[7], sizeof cell[7]);
                if (isnan(r->ratio))
                    snprintf(cell[8], sizeof cell[8], "-");
                else
                    snprintf(cell[8], sizeof cell[8], "%.3gx%s", r->ratio, r->flag ? " !" : "");
                snprintf(cell[9], sizeof cell[9], "%s",
                         r->ratio_to ? r->ratio_to
                                     : (r->ref && *r->ref ? "(reference not measured)" : ""));
                if (pass == 0) {
                    for (int k = 0; k < NC; k++)
                        if ((int)strlen(cell[k]) > w[k])
                            w[k] = (int)strlen(cell[k]);
                    continue;
                }
                if (!any) {
                    fprintf(f, "\n== %s ==\n", suite);
                    for (int k = 0; k < NC; k++)
                        fprintf(f, (k == 4 || (k >= 6 && k <= 8)) ? "%*s  " : "%-*s  ",
                                k == NC - 1 ? 0 : w[k], hdr[k]);
                    fputc('\n', f);
                }
                any = 1;
                for (int k = 0; k < NC; k++)
                    fprintf(f, (k == 4 || (k >= 6 && k <= 8)) ? "%*s  " : "%-*s  ",
                            k == NC - 1 ? 0 : w[k], cell[k]);
                fputc('\n', f);
            }
            if (pass == 1) {
                if (!any)
                    fprintf(f, "\n== %s ==\n(no figures)\n", suite);
                for (size_t i = 0; i < nnotes; i++)
                    if (!strcmp(notes[i].suite, suite))
                        fprintf(f, "note: %s\n", notes[i].text);
            }
        }
    }
    fprintf(f, "\nmedian of %d repetitions after warm-up%s; one-way latency = round trip / 2;"
               " GB/s = 1e9 B/s\n",
            o->reps, o->quick ? " (--quick)" : "");
    int flagged = 0;
    for (size_t i = 0; i < nrows; i++)
        flagged += rows[i].flag != NULL;
    if (flagged)
        fprintf(f, "! = %d figure%s beyond the floor or ceiling measured the same way in this "
                   "run (see the notes): not to be quoted\n",
                flagged, flagged == 1 ? "" : "s");
}

static void csv_field(FILE *f, const char *s)
{
    if (s && strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else if (s) {
        fputs(s, f);
    }
}

static void print_csv(FILE *f)
{
    fprintf(f, "suite,transport,size,metric,value,unit,min,max,ratio,ratio_to,flag\n");
    for (size_t i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        csv_field(f, r->suite);
        fputc(',', f);
        csv_field(f, r->transport);
        fprintf(f, ",%zu,", r->size);
        csv_field(f, r->metric);
        fprintf(f, ",%.6g,", r->value);
        csv_field(f, r->unit);
        fprintf(f, ",%.6g,%.6g,", r->min, r->max);
        if (!isnan(r->ratio))
            fprintf(f, "%.6g", r->ratio);
        fputc(',', f);
        csv_field(f, r->ratio_to);
        fputc(',', f);
        csv_field(f, r->flag);
        fputc('\n', f);
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", f);
    else
        fprintf(f, "%.6g", v);
}

static void machine_cpu(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ')
                    c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

static void print_json(FILE *f, const opts_t *o)
{
    struct utsname u;
    uname(&u);
    char cpu[256];
    machine_cpu(cpu, sizeof cpu);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "{\n  \"machine\": {\"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ", \"ncpu\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
    json_str(f, u.release);
    fprintf(f, ", \"date\": ");
    json_str(f, date);
    fprintf(f, ", \"busy_before\": ");
    json_num(f, g_busy_start);
    fprintf(f, "},\n  \"quick\": %s, \"reps\": %d, \"transport\": ", o->quick ? "true" : "false",
            o->reps);
    json_str(f, o->transport);
    fprintf(f, ",\n  \"rows\": [");
    for (size_t i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        fprintf(f, "%s\n    {\"suite\": ", i ? "," : "");
        json_str(f, r->suite);
        fprintf(f, ", \"transport\": ");
        json_str(f, r->transport);
        fprintf(f, ", \"size\": %zu, \"metric\": ", r->size);
        json_str(f, r->metric);
        fprintf(f, ", \"value\": ");
        json_num(f, r->value);
        fprintf(f, ", \"unit\": ");
        json_str(f, r->unit);
        fprintf(f, ", \"min\": ");
        json_num(f, r->min);
        fprintf(f, ", \"max\": ");
        json_num(f, r->max);
        fprintf(f, ", \"ratio\": ");
        json_num(f, r->ratio);
        fprintf(f, ", \"ratio_to\": ");
        if (r->ratio_to)
            json_str(f, r->ratio_to);
        else
            fputs("null", f);
        fprintf(f, ", \"flag\": ");
        if (r->flag)
            json_str(f, r->flag);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n  \"notes\": [");
    for (size_t i = 0; i < nnotes; i++) {
        fprintf(f, "%s\n    {\"suite\": ", i ? "," : "");
        json_str(f, notes[i].suite);
        fprintf(f, ", \"text\": ");
        json_str(f, notes[i].text);
        fputc('}', f);
    }
    fprintf(f, "\n  ]\n}\n");
}

/* ------------------------------------------------------------------------- */
/* Charts                                                                     */

static int in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    char buf[PATH_MAX];
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog);
        if (n && access(buf, X_OK) == 0)
            return 1;
        path += n;
        if (*path)
            path++;
    }
    return 0;
}

static int is_latency(const row_t *r)
{
    size_t n = strlen(r->metric);
    return (!strcmp(r->unit, "ns") || !strcmp(r->unit, "us")) && r->size > 0 &&
           ((n > 4 && !strcmp(r->metric + n - 4, "_lat")) || strstr(r->metric, "_lat_") ||
            !strcmp(r->metric, "cacheline_oneway"));
}

/* Rows that restate another row against a second reference ("_vs_") are
 * left out of the charts. */
static int is_bandwidth(const row_t *r)
{
    return !strcmp(r->unit, "GB/s") && r->size > 0 && !strstr(r->metric, "_vs_");
}

/* One chart: every (suite, transport, metric) series that @want selects. */
static void plot_chart(FILE *gp, const char *png, const char *title, const char *ylabel,
                       int (*want)(const row_t *), int to_us)
{
    /* series keys, in row order */
    size_t *first = calloc(nrows ? nrows : 1, sizeof *first);
    size_t nser = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (!want(&rows[i]))
            continue;
        int seen = 0;
        for (size_t k = 0; k < nser; k++) {
            const row_t *q = &rows[first[k]];
            if (!strcmp(q->suite, rows[i].suite) && !strcmp(q->transport, rows[i].transport) &&
                !strcmp(q->metric, rows[i].metric))
                seen = 1;
        }
        if (!seen)
            first[nser++] = i;
    }
    if (!nser) {
        free(first);
        return;
    }
    for (size_t k = 0; k < nser; k++) {
        const row_t *q = &rows[first[k]];
        fprintf(gp, "$s%zu << EOD\n", k);
        /* sizes ascending */
        size_t last = 0;
        for (;;) {
            const row_t *best = NULL;
            for (size_t i = 0; i < nrows; i++) {
                const row_t *r = &rows[i];
                if (!want(r) || strcmp(r->suite, q->suite) || strcmp(r->transport, q->transport) ||
                    strcmp(r->metric, q->metric) || r->size <= last)
                    continue;
                if (!best || r->size < best->size)
                    best = r;
            }
            if (!best)
                break;
            double sc = to_us && !strcmp(best->unit, "ns") ? 1e-3 : 1;
            fprintf(gp, "%zu %g %g %g\n", best->size, best->value * sc, best->min * sc,
                    best->max * sc);
            last = best->size;
        }
        fprintf(gp, "EOD\n");
    }
    fprintf(gp,
            "set terminal pngcairo noenhanced size 880,520 font ',9'\n"
            "set output '%s'\n"
            "set title '%s'\n"
            "set logscale xy\n"
            "set xlabel 'message size (bytes)'\n"
            "set ylabel '%s'\n"
            "set format x '%%.0s%%cB'\n"
            "set key outside right top\n"
            "set grid\n"
            "plot ",
            png, title, ylabel);
    for (size_t k = 0; k < nser; k++) {
        const row_t *q = &rows[first[k]];
        int floor = !strcmp(q->suite, "limits");
        int peer = !strcmp(q->suite, "peers");
        fprintf(gp, "%s$s%zu using 1:2:3:4 with yerrorlines %s title '%s %s%s%s'", k ? ", " : "", k,
                floor ? "dashtype 2 lw 2" : peer ? "dashtype 3" : "lw 2", q->suite,
                q->metric, strcmp(q->transport, "-") ? " " : "",
                strcmp(q->transport, "-") ? q->transport : "");
    }
    fprintf(gp, "\nunset output\n");
    free(first);
}

static int check_gnuplot(void)
{
    if (in_path("gnuplot"))
        return 0;
    fprintf(stderr, "vmmc bench: --plot needs gnuplot, which is not installed; install it with\n"
                    "    apt-get install -y gnuplot-nox\n");
    return -1;
}

static int make_plots(const char *dir)
{
    if (check_gnuplot())
        return -1;
    if (mkdir(dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "vmmc bench: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (strchr(dir, '\'')) {
        fprintf(stderr, "vmmc bench: --plot directory name must not contain a quote\n");
        return -1;
    }
    char lat[PATH_MAX], bw[PATH_MAX];
    snprintf(lat, sizeof lat, "%s/latency.png", dir);
    snprintf(bw, sizeof bw, "%s/bandwidth.png", dir);
    FILE *gp = popen("gnuplot", "w");
    if (!gp) {
        fprintf(stderr, "vmmc bench: cannot start gnuplot: %s\n", strerror(errno));
        return -1;
    }
    plot_chart(gp, lat, "one-way latency by size (dashed: machine limits and peers)",
               "microseconds", is_latency, 1);
    plot_chart(gp, bw, "bandwidth by size (dashed: machine limits and peers)", "GB/s",
               is_bandwidth, 0);
    int st = pclose(gp);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "vmmc bench: gnuplot failed (status %d)\n", st);
        return -1;
    }
    int wrote = 0;
    struct stat sb;
    if (!stat(lat, &sb)) {
        fprintf(stderr, "vmmc bench: wrote %s\n", lat);
        wrote++;
    }
    if (!stat(bw, &sb)) {
        fprintf(stderr, "vmmc bench: wrote %s\n", bw);
        wrote++;
    }
    if (!wrote)
        fprintf(stderr, "vmmc bench: no latency or bandwidth figures to plot\n");
    return 0;
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
