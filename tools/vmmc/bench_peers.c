/* Suite "peers": the libraries vmmc is compared with, measured in the same
 * run on the same two cores (cpu 0 and cpu 1). Only what is installed runs;
 * for anything missing a note names the Debian package to install.
 *
 *  - UCX's ucx_perftest (ucx-utils): UCT put_short and am_short latency over
 *    posix shared memory, UCT am_short message rate, UCT put zcopy bandwidth
 *    over CMA, UCP put/am bandwidth and tag latency over sm (the commands of
 *    the performance anchors);
 *  - Open MPI and MPICH: bench/mpi_pingpong.c (embedded in this program),
 *    compiled at bench time with mpicc.openmpi / mpicc.mpich in a temporary
 *    directory and run with 2 ranks bound to cores;
 *  - sockperf UDP ping-pong on loopback (busy-poll, and blocking in full runs).
 *
 * Every external program runs in its own process group with a time limit;
 * on expiry the group is killed. Nothing here can hang the tool. */
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

#define MAX_RUNS 100

#ifdef VMMC_BENCH_MPI_SRC
/* The MPI program's source, embedded at build time. */
__asm__(".pushsection .rodata\n"
        ".local vmmc_bench_mpi_source\n"
        ".type vmmc_bench_mpi_source, @object\n"
        "vmmc_bench_mpi_source:\n"
        ".incbin \"" VMMC_BENCH_MPI_SRC "\"\n"
        ".byte 0\n"
        ".popsection\n");
extern const char vmmc_bench_mpi_source[];
#endif

/* ------------------------------------------------------------------------- */
/* UCX                                                                        */

typedef struct ucx_test {
    const char *metric;
    const char *tls;   /* UCX_TLS */
    const char *args;  /* test arguments (both sides) */
    size_t size;
    long n, w;         /* iterations and warm-up, full run */
    int kind;          /* 0 latency (us, 50th percentile), 1 bandwidth GB/s, 2 Mmsg/s */
    int quick;         /* part of --quick */
    const char *ref;
} ucx_test_t;

static const ucx_test_t ucx_tests[] = {
    {"ucx_uct_put_short_lat", "posix", "-t put_lat -x posix -d memory", 8, 1000000, 10000, 0, 1,
     "limits/cacheline_oneway"},
    {"ucx_uct_am_short_lat", "posix", "-t am_lat -x posix -d memory", 8, 1000000, 10000, 0, 1,
     "limits/cacheline_oneway"},
    {"ucx_uct_am_short_rate", "posix", "-t am_bw -x posix -d memory", 8, 5000000, 10000, 2, 0,
     NULL},
    {"ucx_uct_put_zcopy_cma_bw", "cma", "-t put_bw -x cma -d memory -D zcopy", 4194304, 2000, 10,
     1, 0, "limits/memcpy_bw"},
    {"ucx_ucp_tag_lat", "sm,self", "-t tag_lat", 8, 200000, 100, 0, 0, "limits/cacheline_oneway"},
    {"ucx_ucp_tag_lat", "sm,self", "-t tag_lat", 65536, 20000, 100, 0, 0, NULL},
    {"ucx_ucp_tag_lat", "sm,self", "-t tag_lat", 1048576, 300, 100, 0, 0, NULL},
    {"ucx_ucp_tag_lat", "sm,self", "-t tag_lat", 4194304, 300, 100, 0, 0, NULL},
    {"ucx_ucp_put_bw", "sm,self", "-t ucp_put_bw", 65536, 50000, 100, 1, 0, "limits/memcpy_bw"},
    {"ucx_ucp_put_bw", "sm,self", "-t ucp_put_bw", 1048576, 2000, 10, 1, 0, "limits/memcpy_bw"},
    {"ucx_ucp_put_bw", "sm,self", "-t ucp_put_bw", 4194304, 2000, 10, 1, 1, "limits/memcpy_bw"},
    {"ucx_ucp_am_bw", "sm,self", "-t ucp_am_bw", 65536, 50000, 100, 1, 0, "limits/memcpy_bw"},
    {"ucx_ucp_am_bw", "sm,self", "-t ucp_am_bw", 1048576, 2000, 10, 1, 0, "limits/memcpy_bw"},
    {"ucx_ucp_am_bw", "sm,self", "-t ucp_am_bw", 4194304, 2000, 10, 1, 0, "limits/memcpy_bw"},
};

/* Split @s on spaces into @argv (at most @max-1 words); @s is modified. */
static int split_words(char *s, char **argv, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, " ", &save); t && n < max - 1;
         t = strtok_r(NULL, " ", &save))
        argv[n++] = t;
    argv[n] = NULL;
    return n;
}

/* One client/server pair; returns 0 and the figure in *val. */
static int ucx_once(bench_ctx_t *c, const ucx_test_t *t, long n, long w, double *val)
{
    int port = proc_free_port(SOCK_STREAM);
    if (port < 0)
        return -1;
    char envtls[64];
    snprintf(envtls, sizeof envtls, "UCX_TLS=%s", t->tls);
    char *env[] = {envtls, "UCX_WARN_UNUSED_ENV_VARS=n", NULL};
    char words[2][512];
    char *sargv[40], *cargv[40];
    snprintf(words[0], sizeof words[0], "ucx_perftest -p %d -c 1 %s -s %zu -n %ld -w %ld", port,
             t->args, t->size, n, w);
    snprintf(words[1], sizeof words[1], "ucx_perftest 127.0.0.1 -p %d -c 0 -f %s -s %zu -n %ld -w %ld",
             port, t->args, t->size, n, w);
    split_words(words[0], sargv, 40);
    split_words(words[1], cargv, 40);
    /* the server pins itself with -c 1, the client with -c 0 */
    pid_t server = proc_spawn(sargv, env, -1, -1);
    if (server < 0)
        return -1;
    if (proc_wait_port(server, port, 0, 10)) {
        proc_stop_group(server);
        bench_note(c, "%s: ucx_perftest server did not start listening", t->metric);
        return -1;
    }
    char *out = NULL;
    double tmo = c->quick ? 20 : 120;
    int rc = proc_run_capture(cargv, env, -1, tmo, &out);
    proc_stop_group(server);
    int ok = -1;
    const char *line = out ? proc_find_line(out, NULL) : NULL;
    double f[8];
    if (rc == 0 && line &&
        sscanf(line, " %lf %lf %lf %lf %lf %lf %lf %lf", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5],
               &f[6], &f[7]) == 8) {
        if (t->kind == 0)
            *val = f[1]; /* 50th percentile latency, us */
        else if (t->kind == 1)
            *val = f[5] * 1.048576 / 1000; /* overall MiB/s -> GB/s */
        else
            *val = f[7] / 1e6; /* overall msg/s -> Mmsg/s */
        ok = 0;
    } else {
        const char *last = out && *out ? out : "(no output)";
        size_t l = strlen(last);
        bench_note(c, "%s %zu B: ucx_perftest failed (%s): %.200s", t->metric, t->size, proc_why(rc),
                   l > 200 ? last + l - 200 : last);
    }
    free(out);
    return ok;
}

static void run_ucx(bench_ctx_t *c)
{
    if (!proc_in_path("ucx_perftest", NULL, 0)) {
        bench_note(c, "UCX not measured: ucx_perftest is not installed "
                      "(apt-get install -y ucx-utils)");
        return;
    }
    int runs = c->quick ? 3 : (c->reps < 5 ? c->reps : 5);
    double v[MAX_RUNS];
    for (size_t i = 0; i < sizeof ucx_tests / sizeof *ucx_tests; i++) {
        const ucx_test_t *t = &ucx_tests[i];
        if ((c->quick && !t->quick) || t->size < c->min_size || t->size > c->max_size)
            continue;
        long n = c->quick ? (t->n / 10 > 10 ? t->n / 10 : t->n) : t->n;
        long w = t->w;
        int got = 0;
        for (int r = 0; r < runs; r++)
            if (!ucx_once(c, t, n, w, &v[got]))
                got++;
            else
                break;
        if (!got)
            continue;
        static const char *const units[] = {"us", "GB/s", "Mmsg/s"};
        c->transport = "shm";
        bench_report(c, t->metric, t->size, units[t->kind], bench_stats(v, got), t->ref);
    }
}

/* ------------------------------------------------------------------------- */
/* MPI                                                                        */

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = 0;
    return buf;
}

/* The MPI program's source text (malloc'd), or NULL with a note. */
static char *mpi_source(bench_ctx_t *c)
{
    const char *dir = getenv("VMMC_BENCH_DIR");
    if (dir) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/mpi_pingpong.c", dir);
        char *s = read_file(path);
        if (s)
            return s;
        bench_note(c, "MPI peers: cannot read %s (VMMC_BENCH_DIR): %s", path, strerror(errno));
        return NULL;
    }
#ifdef VMMC_BENCH_MPI_SRC
    return strdup(vmmc_bench_mpi_source);
#else
    bench_note(c, "MPI peers not measured: this build does not embed bench/mpi_pingpong.c; "
                  "set VMMC_BENCH_DIR to the source tree's bench/ directory");
    return NULL;
#endif
}

typedef struct mpi_impl {
    const char *name;     /* metric prefix */
    const char *mpicc, *mpirun;
    const char *pkg_cc, *pkg_run;
} mpi_impl_t;

static const mpi_impl_t mpis[] = {
    {"openmpi", "mpicc.openmpi", "mpirun.openmpi", "libopenmpi-dev", "openmpi-bin"},
    {"mpich", "mpicc.mpich", "mpirun.mpich", "libmpich-dev", "mpich"},
};

/* A row of bench/mpi_pingpong.c: lat, bw, and the floor of the same run. */
typedef struct pp_rows {
    const mpi_impl_t *m;
    size_t floor_size; /* the size of the last "floor" line: its "lat" is bounded */
} pp_rows_t;

static int pp_row(bench_ctx_t *c, void *arg, const char *kind, size_t size, bench_stat_t st)
{
    pp_rows_t *pr = arg;
    if (strcmp(kind, "lat") && strcmp(kind, "bw") && strcmp(kind, "floor"))
        return 0;
    char metric[64], bound[80];
    snprintf(metric, sizeof metric, "%s_%s", pr->m->name, kind);
    snprintf(bound, sizeof bound, "peers/%s_floor", pr->m->name);
    c->transport = "shm";
    if (!strcmp(kind, "floor")) {
        /* The same ping-pong by stores into shared memory, in the same MPI
         * processes (bench/mpi_pingpong.c). */
        bench_report(c, metric, size, "us", st, "limits/cacheline_oneway");
        pr->floor_size = size;
    } else if (!strcmp(kind, "lat") && pr->floor_size && size == pr->floor_size)
        bench_report_bounded(c, metric, size, "us", st, bound);
    else if (!strcmp(kind, "lat"))
        bench_report(c, metric, size, "us", st, size <= 64 ? "limits/cacheline_oneway" : NULL);
    else
        bench_report(c, metric, size, "GB/s", st, "limits/memcpy_bw");
    return 1;
}

static void run_mpi_one(bench_ctx_t *c, const mpi_impl_t *m, const char *tmp, const char *src)
{
    if (!proc_in_path(m->mpicc, NULL, 0) || !proc_in_path(m->mpirun, NULL, 0)) {
        bench_note(c, "%s not measured: %s is not installed (apt-get install -y %s %s)", m->name,
                   proc_in_path(m->mpicc, NULL, 0) ? m->mpirun : m->mpicc, m->pkg_run, m->pkg_cc);
        return;
    }
    char prog[PATH_MAX];
    snprintf(prog, sizeof prog, "%s/pp_%s", tmp, m->name);
    char *cc[] = {(char *)m->mpicc, "-O2", "-o", prog, (char *)src, NULL};
    char *out = NULL;
    int rc = proc_run_capture(cc, NULL, -1, 120, &out);
    if (rc) {
        bench_note(c, "%s not measured: %s failed (%s): %.300s", m->name, m->mpicc, proc_why(rc),
                   out ? out : "");
        free(out);
        return;
    }
    free(out);
    char nb[16], sizes[64];
    snprintf(nb, sizeof nb, "%d", c->reps);
    snprintf(sizes, sizeof sizes, "%zu:%zu", c->min_size, c->max_size);
    char *argv[24];
    int n = 0;
    argv[n++] = (char *)m->mpirun;
    if (!strcmp(m->name, "openmpi")) {
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
        argv[n++] = "--oversubscribe";
        argv[n++] = "-np";
        argv[n++] = "2";
        argv[n++] = "--bind-to";
        argv[n++] = "core";
    } else {
        argv[n++] = "-np";
        argv[n++] = "2";
        argv[n++] = "-bind-to";
        argv[n++] = "core";
    }
    argv[n++] = prog;
    argv[n++] = "-b";
    argv[n++] = nb;
    argv[n++] = "-s";
    argv[n++] = sizes;
    if (c->quick)
        argv[n++] = "-q";
    argv[n] = NULL;
    pp_rows_t pr = {m, 0};
    (void)bench_child_rows(c, argv, NULL, c->quick ? 30 : 600, m->name, pp_row, &pr);
}

static void run_mpi(bench_ctx_t *c)
{
    /* the sizes bench/mpi_pingpong.c measures (quick: 8 B latency, 1 MiB bandwidth) */
    static const size_t full[] = {8, 1024, 65536, 1 << 20, 4 << 20}, quick[] = {8, 1 << 20};
    int any = 0;
    for (size_t i = 0; i < (c->quick ? 2 : 5); i++) {
        size_t n = c->quick ? quick[i] : full[i];
        any |= n >= c->min_size && n <= c->max_size;
    }
    if (!any)
        return;
    char *text = mpi_source(c);
    if (!text)
        return;
    char tmp[] = "/tmp/vmmc-bench-XXXXXX";
    if (!mkdtemp(tmp)) {
        bench_note(c, "MPI peers not measured: mkdtemp: %s", strerror(errno));
        free(text);
        return;
    }
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/mpi_pingpong.c", tmp);
    if (write_file(src, text)) {
        bench_note(c, "MPI peers not measured: cannot write %s: %s", src, strerror(errno));
    } else {
        for (size_t i = 0; i < sizeof mpis / sizeof *mpis; i++)
            run_mpi_one(c, &mpis[i], tmp, src);
    }
    free(text);
    /* clean up the temporary directory */
    for (size_t i = 0; i < sizeof mpis / sizeof *mpis; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/pp_%s", tmp, mpis[i].name);
        unlink(p);
    }
    unlink(src);
    rmdir(tmp);
}

/* ------------------------------------------------------------------------- */
/* sockperf                                                                   */

int bench_sockperf_udp(bench_ctx_t *c, int busy, double *val)
{
    int port = proc_free_port(SOCK_DGRAM);
    if (port < 0)
        return -1;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    char *sargv[] = {"sockperf", "server", "-i", "127.0.0.1", "-p", ps,
                     busy ? "--nonblocked" : NULL, NULL};
    char *cargv[] = {"sockperf", "ping-pong", "-i", "127.0.0.1", "-p", ps, "-m", "64", "-t",
                     c->quick ? "1" : "3", busy ? "--nonblocked" : NULL, NULL};
    pid_t server = proc_spawn(sargv, NULL, 1, -1);
    if (server < 0)
        return -1;
    if (proc_wait_port(server, port, 1, 10)) {
        proc_stop_group(server);
        bench_note(c, "sockperf server did not start");
        return -1;
    }
    char *out = NULL;
    int rc = proc_run_capture(cargv, NULL, 0, c->quick ? 20 : 60, &out);
    proc_stop_group(server);
    int ok = -1;
    const char *p = out ? strstr(out, "percentile 50.000 =") : NULL;
    if (rc == 0 && p && sscanf(p, "percentile 50.000 = %lf", val) == 1)
        ok = 0;
    else
        bench_note(c, "sockperf ping-pong failed (%s)", proc_why(rc));
    free(out);
    return ok;
}

static void run_sockperf(bench_ctx_t *c)
{
    if (!proc_in_path("sockperf", NULL, 0)) {
        bench_note(c, "UDP loopback not measured: sockperf is not installed "
                      "(apt-get install -y sockperf)");
        return;
    }
    if (64 < c->min_size || 64 > c->max_size)
        return;
    int runs = c->quick ? 1 : 3;
    double v[MAX_RUNS];
    for (int busy = 1; busy >= (c->quick ? 1 : 0); busy--) {
        int got = 0;
        for (int r = 0; r < runs; r++)
            if (!bench_sockperf_udp(c, busy, &v[got]))
                got++;
            else
                break;
        if (!got)
            continue;
        c->transport = "udp";
        bench_report(c, busy ? "sockperf_udp_lat" : "sockperf_udp_block_lat", 64, "us",
                     bench_stats(v, got), busy ? NULL : "limits/wake_eventfd_cross");
    }
}

/* ------------------------------------------------------------------------- */

static int peers_run(bench_ctx_t *c)
{
    proc_catch_stop();
    run_ucx(c);
    run_mpi(c);
    run_sockperf(c);
    return 0;
}

BENCH_SUITE(peers_suite, .name = "peers",
            .help = "installed peers: UCX ucx_perftest, Open MPI, MPICH, sockperf UDP",
            .nranks = 0, .run = peers_run);
