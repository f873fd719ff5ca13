/* Suite "dsm": the MILLIPAGE-style DSM (vmmc/dsm.h) in minipage mode and
 * in page mode (VMMC_DSM_PAGE=1: 4 KiB granularity, one view) in the same
 * run, each in a job of 2 ranks pinned to distinct cores:
 *
 *   vmmc-dsm-bench (bench/dsm_bench.c)  read and write fault latency for
 *       128 B and 4 KiB minipages, writes to two objects of one page by
 *       two ranks at once (false sharing), lock and barrier latency, the request
 *       delay with the owner idle and while its application thread
 *       computes, a private computation inside the DSM and outside it;
 *   vmmc-dsm-<app> (apps/dsm)  SOR, IS, MM, TSP and WATER: parallel time
 *       and speedup over the sequential run of the same program, at the
 *       sizes of apps[] below (--quick: the small ones).
 *
 * The ranks run on the transport of --transport (VMMC_TRANSPORT=shm or udp
 * in their environment; with udp, ranks of one host talk over udp too) and
 * the rows carry it in their transport column; the micro-benchmark job must
 * say it ran on it ("transport <t>").
 *
 * Then IS and WATER in minipage mode with 3 ranks (not pinned: more ranks
 * than the cores of a small machine), once with one manager
 * (VMMC_DSM_MANAGERS=1) and once with homes spread over the ranks,
 * alternating: rows mgr1_<app>_np3 and spread_<app>_np3, the second with
 * its ratio to the first.
 *
 * The micro-benchmarks run a third time in minipage mode with
 * VMMC_DSM_THREADS=funneled (rows funneled_<figure>).
 *
 * Rows are "<mode>_<figure>"; every minipage row carries its ratio to the
 * page row of the same figure, every funneled row its ratio to the
 * minipage row (<mode>_compute_dsm: to <mode>_compute_alone). The programs
 * are looked for next to this tool. Whatever cannot run is a note with the
 * reason. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"

typedef struct dsm_mode {
    const char *name;  /* metric prefix */
    const char *says;  /* the mode the programs must say they ran in */
    const char *env;
    const char *extra; /* another NAME=value, or NULL */
    const char *ref;   /* the mode whose rows are this one's references */
} dsm_mode_t;

/* page first: the minipage rows' references */
static const dsm_mode_t modes[] = {
    {"page", "page", "VMMC_DSM_PAGE=1", NULL, NULL},
    {"minipage", "minipage", "VMMC_DSM_PAGE=0", NULL, "page"},
};

/* The micro-benchmarks once more in minipage mode with the application's
 * promise that only its one thread touches the area: faults open their
 * page while the request travels (docs/dsm.md). */
static const dsm_mode_t funneled = {"funneled", "minipage", "VMMC_DSM_PAGE=0",
                                    "VMMC_DSM_THREADS=funneled", "minipage"};

typedef struct dsm_app {
    const char *name;
    const char *quick_n, *quick_i; /* --quick */
    const char *n, *i;
} dsm_app_t;

static const dsm_app_t apps[] = {
    {"sor", "128", "4", "1024", "20"},
    {"is", "65536", "2", "2097152", "5"},
    {"mm", "96", "1", "384", "2"},
    {"tsp", "10", "1", "14", "1"},
    {"water", "128", "2", "2048", "3"},
};

static const char *const micro_kinds[] = {"read_fault", "read_fault_asleep", "read_fault_mgr",
                                          "write_fault",
                                          "lock", "lock_local", "barrier", "delay_idle",
                                          "read_fault_busy",
                                          "delay_busy", "compute_alone", "compute_dsm",
                                          "false_sharing", "serve_idle", "serve_wait_idle",
                                          "serve_busy", "serve_wait_busy"};

/* <dir of this tool>/<name> into @out if executable; 0 or -1. */
static int beside_tool(const char *self, const char *name, char *out, size_t n)
{
    const char *slash = strrchr(self, '/');
    int dl = slash ? (int)(slash - self) : 1;
    snprintf(out, n, "%.*s/%s", dl, slash ? self : ".", name);
    return access(out, X_OK) ? -1 : 0;
}

/* Run @prog (and its arguments) in a job of @np ranks in @m (2: pinned to
 * distinct cores; more: free), with @extra (NAME=value or NULL) in their
 * environment; the output in *out (to free), the exit status returned. */
static int run_job_np(bench_ctx_t *c, const char *self, const dsm_mode_t *m, int np,
                      const char *extra, char *const prog[], char **out)
{
    char *argv[24], nps[8];
    int n = 0;
    snprintf(nps, sizeof nps, "%d", np);
    argv[n++] = (char *)self;
    argv[n++] = "run";
    argv[n++] = "-n";
    argv[n++] = nps;
    if (np == 2)
        argv[n++] = "--cpu-bind";
    argv[n++] = "--";
    for (int i = 0; prog[i] && n < 23; i++)
        argv[n++] = prog[i];
    argv[n] = NULL;
    char envbuf[64], trbuf[64];
    snprintf(envbuf, sizeof envbuf, "%s", m->env);
    snprintf(trbuf, sizeof trbuf, "VMMC_TRANSPORT=%s", c->transport ? c->transport : "shm");
    char *env[] = {envbuf, trbuf, (char *)extra, NULL};
    return proc_run_capture(argv, env, -1, c->quick ? 120 : 600, out);
}

static int run_job(bench_ctx_t *c, const char *self, const dsm_mode_t *m, char *const prog[],
                   char **out)
{
    return run_job_np(c, self, m, 2, m->extra, prog, out);
}

static void failed(bench_ctx_t *c, const char *what, const dsm_mode_t *m, int rc, const char *out)
{
    const char *o = out && *out ? out : "(no output)";
    size_t len = strlen(o);
    bench_note(c, "dsm %s in %s mode not measured: the job failed (%s): %.300s", what, m->name,
               proc_why(rc), len > 300 ? o + len - 300 : o);
}

/* Does the job say it ran in mode @m ("mode <m>" or "<m> mode")? */
static int ran_in(const char *out, const dsm_mode_t *m)
{
    char a[32], b[32];
    snprintf(a, sizeof a, "mode %s\n", m->says);
    snprintf(b, sizeof b, ", %s mode;", m->says);
    return strstr(out, a) || strstr(out, b);
}

/* Does the job say its ranks got the transport asked for? */
static int ran_on(const char *out, const bench_ctx_t *c)
{
    char a[48];
    snprintf(a, sizeof a, "transport %s\n", c->transport ? c->transport : "shm");
    return strstr(out, a) != NULL;
}

static void micro(bench_ctx_t *c, const char *self, const char *prog, const dsm_mode_t *m)
{
    char reps[16], per[16];
    /* --reps batches of samples (at least 3 for the full run's medians) */
    snprintf(reps, sizeof reps, "%d", c->quick || c->reps >= 3 ? c->reps : 3);
    snprintf(per, sizeof per, "%d", c->quick ? 4 : 20);
    char *argv[] = {(char *)prog, "-r", reps, "-k", per, NULL};
    char *out = NULL;
    int rc = run_job(c, self, m, argv, &out);
    int rows = 0;
    if (!rc && out && !ran_in(out, m)) {
        bench_note(c, "dsm micro-benchmarks: the job did not run in %s mode", m->name);
        free(out);
        return;
    }
    if (!rc && out && !ran_on(out, c)) {
        bench_note(c, "dsm micro-benchmarks in %s mode: the ranks did not run on transport %s",
                   m->name, c->transport);
        free(out);
        return;
    }
    for (const char *l = out; !rc && l && *l;) {
        char kind[32];
        size_t size;
        bench_stat_t st;
        if (sscanf(l, "%31s %zu %lf %lf %lf", kind, &size, &st.median, &st.min, &st.max) == 5) {
            for (size_t k = 0; k < sizeof micro_kinds / sizeof *micro_kinds; k++)
                if (!strcmp(kind, micro_kinds[k])) {
                    char metric[64], ref[64];
                    snprintf(metric, sizeof metric, "%s_%s", m->name, kind);
                    /* a private computation in the DSM: to itself outside it */
                    int in_dsm = !strcmp(kind, "compute_dsm");
                    snprintf(ref, sizeof ref, "dsm/%s_%s", in_dsm ? m->name : m->ref,
                             in_dsm ? "compute_alone" : kind);
                    bench_report(c, metric, size, "us", st, in_dsm || m->ref ? ref : NULL);
                    rows++;
                }
        }
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    if (rc || !rows)
        failed(c, "micro-benchmarks", m, rc, out);
    free(out);
}

/* "<app>: result matches sequential (<p>s parallel, <s>s sequential)" */
static int app_times(const char *out, const char *app, double *par, double *seq)
{
    char key[64];
    snprintf(key, sizeof key, "%s: result matches sequential (", app);
    const char *l = strstr(out, key);
    return l && sscanf(l + strlen(key), "%lfs parallel, %lfs sequential", par, seq) == 2 &&
                   *par > 0 && *seq > 0
               ? 0
               : -1;
}

static void app(bench_ctx_t *c, const char *self, const dsm_app_t *a, const dsm_mode_t *m)
{
    char exe[64], prog[PATH_MAX];
    snprintf(exe, sizeof exe, "vmmc-dsm-%s", a->name);
    if (beside_tool(self, exe, prog, sizeof prog)) {
        bench_note(c, "dsm %s not measured: %s is not built", a->name, prog);
        return;
    }
    char *argv[] = {prog, "-n", (char *)(c->quick ? a->quick_n : a->n), "-i",
                    (char *)(c->quick ? a->quick_i : a->i), NULL};
    int runs = c->quick ? 1 : 3;
    double par[3], speed[3];
    for (int r = 0; r < runs; r++) {
        char *out = NULL;
        double seq;
        int rc = run_job(c, self, m, argv, &out);
        if (rc || !out || !ran_in(out, m) || app_times(out, a->name, &par[r], &seq)) {
            failed(c, a->name, m, rc, out);
            free(out);
            return;
        }
        speed[r] = seq / par[r];
        par[r] *= 1e6;
        free(out);
    }
    char metric[64], ref[64];
    snprintf(metric, sizeof metric, "%s_%s", m->name, a->name);
    snprintf(ref, sizeof ref, "dsm/page_%s", a->name);
    int mini = strcmp(m->name, "page") != 0;
    bench_report(c, metric, 0, "us", bench_stats(par, runs), mini ? ref : NULL);
    snprintf(metric, sizeof metric, "%s_%s_speedup", m->name, a->name);
    snprintf(ref, sizeof ref, "dsm/page_%s_speedup", a->name);
    bench_report(c, metric, 0, "x", bench_stats(speed, runs), mini ? ref : NULL);
}

/* One manager (VMMC_DSM_MANAGERS=1: rank 0 is every minipage's home)
 * against homes spread over the ranks (all), @a in minipage mode with 3
 * ranks, the two alternating run by run: rows mgr1_<app>_np3 and
 * spread_<app>_np3 (its ratio to the first). */
static void managers(bench_ctx_t *c, const char *self, const dsm_app_t *a)
{
    static const char *const env[2] = {"VMMC_DSM_MANAGERS=1", "VMMC_DSM_MANAGERS=all"};
    static const char *const name[2] = {"mgr1", "spread"};
    char exe[64], prog[PATH_MAX];
    snprintf(exe, sizeof exe, "vmmc-dsm-%s", a->name);
    if (beside_tool(self, exe, prog, sizeof prog)) {
        bench_note(c, "dsm managers with %s not measured: %s is not built", a->name, prog);
        return;
    }
    char *argv[] = {prog, "-n", (char *)(c->quick ? a->quick_n : a->n), "-i",
                    (char *)(c->quick ? a->quick_i : a->i), NULL};
    const dsm_mode_t *m = &modes[1];
    int runs = c->quick ? 1 : 5;
    double par[2][5];
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < 2; k++) {
            char *out = NULL;
            double seq;
            int rc = run_job_np(c, self, m, 3, env[k], argv, &out);
            if (rc || !out || !ran_in(out, m) || app_times(out, a->name, &par[k][r], &seq)) {
                const char *o = out && *out ? out : "(no output)";
                size_t len = strlen(o);
                bench_note(c, "dsm %s with 3 ranks and %s not measured: the job failed (%s): "
                           "%.300s",
                           a->name, env[k], proc_why(rc), len > 300 ? o + len - 300 : o);
                free(out);
                return;
            }
            par[k][r] *= 1e6;
            free(out);
        }
    for (int k = 0; k < 2; k++) {
        char metric[64], ref[64];
        snprintf(metric, sizeof metric, "%s_%s_np3", name[k], a->name);
        snprintf(ref, sizeof ref, "dsm/%s_%s_np3", name[0], a->name);
        bench_report(c, metric, 0, "us", bench_stats(par[k], runs), k ? ref : NULL);
    }
}

static int dsm_run(bench_ctx_t *c)
{
    proc_catch_stop();
    char self[PATH_MAX], prog[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        bench_note(c, "DSM not measured: cannot read /proc/self/exe: %s", strerror(errno));
        return 0;
    }
    self[sl] = 0;
    if (beside_tool(self, "vmmc-dsm-bench", prog, sizeof prog)) {
        bench_note(c, "DSM not measured: %s is not built (libvmmc-dsm is not)", prog);
        return 0;
    }
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        micro(c, self, prog, &modes[i]);
    micro(c, self, prog, &funneled);
    for (size_t k = 0; k < sizeof apps / sizeof *apps; k++)
        for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
            app(c, self, &apps[k], &modes[i]);
    for (size_t k = 0; k < sizeof apps / sizeof *apps; k++)
        if (!strcmp(apps[k].name, "is") || !strcmp(apps[k].name, "water"))
            managers(c, self, &apps[k]);
    return 0;
}

BENCH_SUITE(dsm_suite, .name = "dsm",
            .help = "DSM (vmmc/dsm.h): fault, lock, barrier latency, request delay, apps' speedup; "
                    "minipage vs page mode",
            .nranks = 0, .run = dsm_run);
