/* Suite "shmem": OpenSHMEM figures (bench/shmem_bench.c, embedded in this
 * program and compiled at bench time by each library's oshcc) through two
 * libraries in the same run, 2 PEs bound to distinct cores:
 *
 *   vmmc        vmmc's oshcc and oshrun (libvmmc-shmem over shm)
 *   oshmem      Open MPI's OSHMEM (oshcc and oshrun of openmpi-bin, over UCX)
 *   vmmc_udp    vmmc with VMMC_TRANSPORT=udp (full runs)
 *   oshmem_tcp  OSHMEM with UCX_TLS=tcp,self and `--mca btl self,tcp`
 *               (full runs): OSHMEM's collectives (shmem_barrier_all) go
 *               through Open MPI's own messages, which take shared memory
 *               (btl vader) whatever UCX_TLS says, unless told otherwise
 *
 * Rows are "<path>_<figure>" (put, get, pp, rate, fadd, barrier); vmmc rows
 * carry their ratio to oshmem's, vmmc_udp's to oshmem_tcp's. Full runs add
 * the kernel's floor for a round trip over UDP, `kernel_udp_rtt`: twice
 * sockperf's busy-polled one-way latency on loopback, with its ratio to
 * oshmem_tcp's get (above 0.5, a get or fetch-add 2x faster than OSHMEM's
 * over TCP would be faster than the kernel's own UDP round trip). --quick runs
 * vmmc and oshmem only, at a few sizes. Open MPI's runs carry
 * `--mca osc ^rdma`: without it Open MPI 4.1's OSHMEM crashes in
 * shmem_finalize (a memory hook of the one-sided component it unloaded).
 * Whatever cannot run is a note with the reason. Every program runs in its
 * own process group with a time limit (bench_proc.c). */
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

#ifdef VMMC_BENCH_SHMEM_SRC
__asm__(".pushsection .rodata\n"
        ".local vmmc_bench_shmem_source\n"
        ".type vmmc_bench_shmem_source, @object\n"
        "vmmc_bench_shmem_source:\n"
        ".incbin \"" VMMC_BENCH_SHMEM_SRC "\"\n"
        ".byte 0\n"
        ".popsection\n");
extern const char vmmc_bench_shmem_source[];
#endif

typedef struct shmem_path {
    const char *name;      /* metric prefix */
    const char *transport; /* the rows' transport column */
    int vmmc;              /* our library (else Open MPI's) */
    const char *env;       /* one NAME=value, or NULL */
    const char *btl;       /* Open MPI's --mca btl, or NULL for its default */
    const char *ref;       /* the path its ratios are to, or NULL */
    int quick;             /* part of --quick */
} shmem_path_t;

static const shmem_path_t paths[] = {
    {"oshmem", "shm", 0, NULL, NULL, NULL, 1},
    {"vmmc", "shm", 1, NULL, NULL, "oshmem", 1},
    {"oshmem_tcp", "tcp", 0, "UCX_TLS=tcp,self", "self,tcp", NULL, 0},
    {"vmmc_udp", "udp", 1, "VMMC_TRANSPORT=udp", NULL, "oshmem_tcp", 0},
};

/* The two builds of the program and the launchers. */
typedef struct shmem_tools {
    char our_cc[PATH_MAX + 16], our_run[PATH_MAX + 16], ompi_cc[PATH_MAX], ompi_run[PATH_MAX];
    char our_prog[PATH_MAX], ompi_prog[PATH_MAX];
    const char *our_missing, *ompi_missing; /* why not, or NULL */
    char our_why[600], ompi_why[600];
} shmem_tools_t;

#ifdef VMMC_BENCH_SHMEM_SRC
static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}
#endif

/* The program's source: VMMC_BENCH_DIR/shmem_bench.c if set, else the copy
 * embedded at build time. Written to @path; 0 or -1 with a note. */
static int put_source(bench_ctx_t *c, const char *path)
{
    const char *dir = getenv("VMMC_BENCH_DIR");
    if (dir) {
        char src[PATH_MAX];
        snprintf(src, sizeof src, "%s/shmem_bench.c", dir);
        char *cp[] = {"cp", src, (char *)path, NULL};
        char *out = NULL;
        int rc = proc_run_capture(cp, NULL, -1, 30, &out);
        if (rc)
            bench_note(c, "OpenSHMEM not measured: cannot copy %s (VMMC_BENCH_DIR): %.200s", src,
                       out ? out : "");
        free(out);
        return rc ? -1 : 0;
    }
#ifdef VMMC_BENCH_SHMEM_SRC
    if (write_text(path, vmmc_bench_shmem_source) == 0)
        return 0;
    bench_note(c, "OpenSHMEM not measured: cannot write %s: %s", path, strerror(errno));
    return -1;
#else
    bench_note(c, "OpenSHMEM not measured: this vmmc is built without libvmmc-shmem");
    return -1;
#endif
}

/* Compile @src into @prog with @cc; returns 0 or sets @why. */
static int compile(const char *cc, const char *src, const char *prog, char *why, size_t n)
{
    char *argv[] = {(char *)cc, "-O2", "-o", (char *)prog, (char *)src, NULL};
    char *out = NULL;
    int rc = proc_run_capture(argv, NULL, -1, 120, &out);
    if (rc)
        snprintf(why, n, "%.100s failed (%.60s): %.400s", cc, proc_why(rc), out ? out : "");
    free(out);
    return rc ? -1 : 0;
}

/* vmmc's wrappers: next to this tool (installed, <prefix>/bin) or in bin/
 * under it (the build tree). Open MPI's: beside its oshmem_info. */
static void find_tools(shmem_tools_t *t, const char *self, const char *src, const char *dir)
{
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", self);
    char *slash = strrchr(d, '/');
    if (slash)
        *slash = 0;
    t->our_missing = t->ompi_missing = NULL;
    static const char *const sub[] = {"/bin", ""};
    t->our_cc[0] = 0;
    for (int i = 0; i < 2 && !t->our_cc[0]; i++) {
        char cc[PATH_MAX + 16], run[PATH_MAX + 16];
        snprintf(cc, sizeof cc, "%s%s/oshcc", d, sub[i]);
        snprintf(run, sizeof run, "%s%s/oshrun", d, sub[i]);
        char *show[] = {cc, "--showme:link", NULL};
        char *out = NULL;
        if (access(cc, X_OK) == 0 && access(run, X_OK) == 0 &&
            proc_run_capture(show, NULL, -1, 30, &out) == 0 && out && strstr(out, "vmmc-shmem")) {
            snprintf(t->our_cc, sizeof t->our_cc, "%s", cc);
            snprintf(t->our_run, sizeof t->our_run, "%s", run);
        }
        free(out);
    }
    if (!t->our_cc[0]) {
        snprintf(t->our_why, sizeof t->our_why,
                 "vmmc's oshcc is not built (looked in %.300s/bin and beside the tool)", d);
        t->our_missing = t->our_why;
    } else {
        snprintf(t->our_prog, sizeof t->our_prog, "%s/shmem_bench_vmmc", dir);
        if (compile(t->our_cc, src, t->our_prog, t->our_why, sizeof t->our_why))
            t->our_missing = t->our_why;
    }
    char info[PATH_MAX];
    if (!proc_in_path("oshmem_info", info, sizeof info)) {
        t->ompi_missing = "Open MPI's OSHMEM is not installed (apt-get install -y openmpi-bin "
                          "libopenmpi-dev)";
        return;
    }
    slash = strrchr(info, '/');
    *slash = 0;
    snprintf(t->ompi_cc, sizeof t->ompi_cc, "%.4000s/oshcc", info);
    snprintf(t->ompi_run, sizeof t->ompi_run, "%.4000s/oshrun", info);
    if (access(t->ompi_cc, X_OK) || access(t->ompi_run, X_OK)) {
        snprintf(t->ompi_why, sizeof t->ompi_why, "no oshcc/oshrun beside %.300s/oshmem_info",
                 info);
        t->ompi_missing = t->ompi_why;
        return;
    }
    snprintf(t->ompi_prog, sizeof t->ompi_prog, "%s/shmem_bench_oshmem", dir);
    if (compile(t->ompi_cc, src, t->ompi_prog, t->ompi_why, sizeof t->ompi_why))
        t->ompi_missing = t->ompi_why;
}

static const char *unit_of(const char *kind)
{
    return !strcmp(kind, "rate") ? "Mmsg/s" : "us";
}

/* A row of bench/shmem_bench.c. */
static int shmem_row(bench_ctx_t *c, void *arg, const char *kind, size_t size, bench_stat_t st)
{
    const shmem_path_t *p = arg;
    if (strcmp(kind, "put") && strcmp(kind, "get") && strcmp(kind, "pp") && strcmp(kind, "rate") &&
        strcmp(kind, "fadd") && strcmp(kind, "barrier"))
        return 0;
    char metric[64], ref[64];
    snprintf(metric, sizeof metric, "%s_%s", p->name, kind);
    snprintf(ref, sizeof ref, "shmem/%s_%s", p->ref ? p->ref : "", kind);
    c->transport = p->transport;
    bench_report(c, metric, size, unit_of(kind), st, p->ref ? ref : NULL);
    return 1;
}

static void run_path(bench_ctx_t *c, const shmem_path_t *p, const shmem_tools_t *t)
{
    char nb[16], sizes[64];
    snprintf(nb, sizeof nb, "%d", c->reps > 100 ? 100 : c->reps); /* the program's limit */
    snprintf(sizes, sizeof sizes, "%zu:%zu", c->min_size, c->max_size);
    char *argv[32];
    int n = 0;
    char tenv[64];
    if (p->vmmc) {
        argv[n++] = (char *)t->our_run;
        argv[n++] = "-n";
        argv[n++] = "2";
        argv[n++] = "--cpu-bind";
        argv[n++] = (char *)t->our_prog;
    } else {
        argv[n++] = (char *)t->ompi_run;
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
        argv[n++] = "-np";
        argv[n++] = "2";
        argv[n++] = "--bind-to";
        argv[n++] = "core";
        argv[n++] = "--mca";
        argv[n++] = "osc";
        argv[n++] = "^rdma";
        if (p->btl) {
            argv[n++] = "--mca";
            argv[n++] = "btl";
            argv[n++] = (char *)p->btl;
        }
        if (p->env) { /* reaches the PEs through mpirun's -x */
            snprintf(tenv, sizeof tenv, "%s", p->env);
            argv[n++] = "-x";
            argv[n++] = tenv;
        }
        argv[n++] = (char *)t->ompi_prog;
    }
    argv[n++] = "-b";
    argv[n++] = nb;
    argv[n++] = "-s";
    argv[n++] = sizes;
    if (c->quick)
        argv[n++] = "-q";
    argv[n] = NULL;
    char envbuf[64];
    char *env[2] = {NULL, NULL};
    if (p->env && p->vmmc) {
        snprintf(envbuf, sizeof envbuf, "%s", p->env);
        env[0] = envbuf;
    }
    (void)bench_child_rows(c, argv, env, c->quick ? 90 : 300, p->name, shmem_row, (void *)p);
}

/* The kernel's UDP round trip on loopback, both sides busy-polling. */
static void kernel_floor(bench_ctx_t *c)
{
    if (8 < c->min_size || 8 > c->max_size)
        return;
    if (!proc_in_path("sockperf", NULL, 0)) {
        bench_note(c, "kernel_udp_rtt not measured: sockperf is not installed "
                      "(apt-get install -y sockperf)");
        return;
    }
    double v[3];
    int got = 0;
    for (int r = 0; r < 3; r++)
        if (bench_sockperf_udp(c, 1, &v[got]) == 0)
            v[got] *= 2, got++; /* one way -> round trip */
    if (!got)
        return;
    c->transport = "udp";
    bench_report(c, "kernel_udp_rtt", 8, "us", bench_stats(v, got), "shmem/oshmem_tcp_get");
}

static int shmem_run(bench_ctx_t *c)
{
    proc_catch_stop();
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        bench_note(c, "OpenSHMEM not measured: cannot read /proc/self/exe: %s", strerror(errno));
        return 0;
    }
    self[sl] = 0;
    char tmp[] = "/tmp/vmmc-bench-shmem-XXXXXX";
    if (!mkdtemp(tmp)) {
        bench_note(c, "OpenSHMEM not measured: mkdtemp: %s", strerror(errno));
        return 0;
    }
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/shmem_bench.c", tmp);
    static shmem_tools_t t;
    if (put_source(c, src) == 0) {
        find_tools(&t, self, src, tmp);
        for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
            const shmem_path_t *p = &paths[i];
            if (c->quick && !p->quick)
                continue;
            const char *missing = p->vmmc ? t.our_missing : t.ompi_missing;
            if (missing) {
                bench_note(c, "%s not measured: %s", p->name, missing);
                continue;
            }
            run_path(c, p, &t);
        }
        unlink(t.our_prog);
        unlink(t.ompi_prog);
    }
    if (!c->quick)
        kernel_floor(c);
    unlink(src);
    rmdir(tmp);
    return 0;
}

BENCH_SUITE(shmem_suite, .name = "shmem",
            .help = "OpenSHMEM put/get/fetch-add/barrier: vmmc's vs Open MPI's OSHMEM "
                    "(shmem_bench.c)",
            .nranks = 0, .run = shmem_run);
