/* Suite "mpi": unmodified MPI figures (bench/mpi_bench.c, embedded in this
 * program and compiled at bench time with Open MPI's mpicc) through
 * several paths of Open MPI, in the same run, with the same binding
 * (2 ranks, --bind-to core):
 *
 *   vader     pml ob1, btl self,vader: Open MPI's own shared memory
 *   vmmc      `vmmc mpirun`: pml cm, mtl ofi, provider vmmc (shm)
 *   ucx       pml ucx (full runs, where UCX works)
 *   tcp       pml ob1, btl self,tcp: Open MPI over loopback TCP (full runs)
 *   vmmc_udp  `vmmc mpirun` with VMMC_TRANSPORT=udp (full runs)
 *
 * Rows are "<path>_<figure>" (lat, bw, bibw, rate, allreduce, alltoall,
 * bcast); vmmc and ucx rows carry their ratio to vader's, vmmc_udp's to
 * tcp's. --quick runs vader and vmmc only, at a few sizes. Whatever cannot
 * run is a note with the reason. Every program runs in its own process
 * group with a time limit (bench_proc.c). */
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
#include "cmds.h"
#include "fi_where.h"

#ifdef VMMC_BENCH_MPI_BENCH_SRC
__asm__(".pushsection .rodata\n"
        ".local vmmc_bench_mpi_bench_source\n"
        ".type vmmc_bench_mpi_bench_source, @object\n"
        "vmmc_bench_mpi_bench_source:\n"
        ".incbin \"" VMMC_BENCH_MPI_BENCH_SRC "\"\n"
        ".byte 0\n"
        ".popsection\n");
extern const char vmmc_bench_mpi_bench_source[];
#endif

typedef struct mpi_path {
    const char *name;      /* metric prefix */
    const char *transport; /* the rows' transport column */
    int vmmc;              /* through `vmmc mpirun` */
    const char *args;      /* mpirun options (space separated) */
    const char *env;       /* one NAME=value, or NULL */
    const char *ref;       /* the path its ratios are to, or NULL */
    int quick;             /* part of --quick */
} mpi_path_t;

static const mpi_path_t paths[] = {
    {"vader", "shm", 0, "--mca pml ob1 --mca btl self,vader", NULL, NULL, 1},
    {"vmmc", "shm", 1, "", NULL, "vader", 1},
    /* Open MPI 4.1 keeps pml ucx for InfiniBand devices unless told "any" */
    {"ucx", "shm", 0,
     "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl ^ofi,openib", NULL,
     "vader", 0},
    {"tcp", "tcp", 0, "--mca pml ob1 --mca btl self,tcp", NULL, NULL, 0},
    {"vmmc_udp", "udp", 1, "", "VMMC_TRANSPORT=udp", "tcp", 0},
};

static const char *unit_of(const char *kind)
{
    if (!strcmp(kind, "bw") || !strcmp(kind, "bibw"))
        return "GB/s";
    if (!strcmp(kind, "rate"))
        return "Mmsg/s";
    return "us";
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The program's source: VMMC_BENCH_DIR/mpi_bench.c if set, else the copy
 * embedded at build time. Written to @path; 0 or -1 with a note. */
static int put_source(bench_ctx_t *c, const char *path)
{
    const char *dir = getenv("VMMC_BENCH_DIR");
    if (dir) {
        char src[PATH_MAX];
        snprintf(src, sizeof src, "%s/mpi_bench.c", dir);
        FILE *f = fopen(src, "r");
        if (!f) {
            bench_note(c, "MPI not measured: cannot read %s (VMMC_BENCH_DIR): %s", src,
                       strerror(errno));
            return -1;
        }
        fclose(f);
        char *cp[] = {"cp", src, (char *)path, NULL};
        char *out = NULL;
        int rc = proc_run_capture(cp, NULL, -1, 30, &out);
        free(out);
        return rc ? -1 : 0;
    }
#ifdef VMMC_BENCH_MPI_BENCH_SRC
    if (write_text(path, vmmc_bench_mpi_bench_source) == 0)
        return 0;
    bench_note(c, "MPI not measured: cannot write %s: %s", path, strerror(errno));
    return -1;
#else
    bench_note(c, "MPI not measured: this build does not embed bench/mpi_bench.c; set "
                  "VMMC_BENCH_DIR to the source tree's bench/ directory");
    return -1;
#endif
}

/* Why the provider cannot be used, or NULL. */
static const char *provider_missing(char *why, size_t n)
{
    char dir[2 * PATH_MAX + 8];
    if (vmmc_fi_dir(dir, sizeof dir)) {
        snprintf(why, n, "libvmmc-fi.so is not built (looked in %.300s; needs libfabric-dev)", dir);
        return why;
    }
    char *old = getenv("FI_PROVIDER_PATH") ? strdup(getenv("FI_PROVIDER_PATH")) : NULL;
    vmmc_info_fi_probe(); /* sets FI_PROVIDER_PATH for its dlopen: put it back */
    if (old)
        setenv("FI_PROVIDER_PATH", old, 1);
    else
        unsetenv("FI_PROVIDER_PATH");
    free(old);
    if (!vmmc_info_fi_ok()) {
        snprintf(why, n, "libfabric does not list provider vmmc (FI_PROVIDER_PATH=%.300s "
                 "fi_info -p vmmc)", dir);
        return why;
    }
    return NULL;
}

/* A row of bench/mpi_bench.c: lat, bw, bibw, rate, allreduce, alltoall, bcast. */
static int mpi_row(bench_ctx_t *c, void *arg, const char *kind, size_t size, bench_stat_t st)
{
    const mpi_path_t *p = arg;
    if (!strchr("lbrae", kind[0]))
        return 0;
    char metric[64], ref[64];
    snprintf(metric, sizeof metric, "%s_%s", p->name, kind);
    snprintf(ref, sizeof ref, "mpi/%s_%s", p->ref ? p->ref : "", kind);
    c->transport = p->transport;
    bench_report(c, metric, size, unit_of(kind), st, p->ref ? ref : NULL);
    return 1;
}

static void run_path(bench_ctx_t *c, const mpi_path_t *p, const char *prog, const char *self)
{
    char args[256], nb[16], sizes[64];
    snprintf(args, sizeof args, "%s", p->args);
    snprintf(nb, sizeof nb, "%d", c->reps);
    snprintf(sizes, sizeof sizes, "%zu:%zu", c->min_size, c->max_size);
    char *argv[40];
    int n = 0;
    if (p->vmmc) {
        argv[n++] = (char *)self;
        argv[n++] = "mpirun";
    } else {
        argv[n++] = "mpirun.openmpi";
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
    }
    argv[n++] = "-np";
    argv[n++] = "2";
    argv[n++] = "--bind-to";
    argv[n++] = "core";
    for (char *save = NULL, *t = strtok_r(args, " ", &save); t && n < 28;
         t = strtok_r(NULL, " ", &save))
        argv[n++] = t;
    argv[n++] = (char *)prog;
    argv[n++] = "-b";
    argv[n++] = nb;
    argv[n++] = "-s";
    argv[n++] = sizes;
    if (c->quick)
        argv[n++] = "-q";
    argv[n] = NULL;
    char envbuf[64];
    char *env[2] = {NULL, NULL};
    if (p->env) {
        snprintf(envbuf, sizeof envbuf, "%s", p->env);
        env[0] = envbuf;
    }
    (void)bench_child_rows(c, argv, env, c->quick ? 60 : 600, p->name, mpi_row, (void *)p);
}

static int mpi_run(bench_ctx_t *c)
{
    proc_catch_stop();
    if (!proc_in_path("mpicc.openmpi", NULL, 0) || !proc_in_path("mpirun.openmpi", NULL, 0)) {
        bench_note(c, "MPI not measured: Open MPI is not installed "
                      "(apt-get install -y openmpi-bin libopenmpi-dev)");
        return 0;
    }
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        bench_note(c, "MPI not measured: cannot read /proc/self/exe: %s", strerror(errno));
        return 0;
    }
    self[sl] = 0;
    char tmp[] = "/tmp/vmmc-bench-mpi-XXXXXX";
    if (!mkdtemp(tmp)) {
        bench_note(c, "MPI not measured: mkdtemp: %s", strerror(errno));
        return 0;
    }
    char src[PATH_MAX], prog[PATH_MAX];
    snprintf(src, sizeof src, "%s/mpi_bench.c", tmp);
    snprintf(prog, sizeof prog, "%s/mpi_bench", tmp);
    if (put_source(c, src) == 0) {
        char *cc[] = {"mpicc.openmpi", "-O2", "-o", prog, src, NULL};
        char *out = NULL;
        int rc = proc_run_capture(cc, NULL, -1, 120, &out);
        if (rc) {
            bench_note(c, "MPI not measured: mpicc.openmpi failed (%s): %.300s", proc_why(rc),
                       out ? out : "");
        } else {
            char why[512];
            const char *missing = provider_missing(why, sizeof why);
            for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
                const mpi_path_t *p = &paths[i];
                if (c->quick && !p->quick)
                    continue;
                if (p->vmmc && missing) {
                    bench_note(c, "%s not measured: %s", p->name, missing);
                    continue;
                }
                if (!strcmp(p->name, "ucx") && !proc_in_path("ucx_info", NULL, 0)) {
                    bench_note(c, "ucx not measured: UCX is not installed (apt-get install -y "
                                  "ucx-utils)");
                    continue;
                }
                run_path(c, p, prog, self);
            }
        }
        free(out);
    }
    unlink(prog);
    unlink(src);
    rmdir(tmp);
    return 0;
}

BENCH_SUITE(mpi_suite, .name = "mpi",
            .help = "MPI through the vmmc provider vs Open MPI vader, UCX, TCP (mpi_bench.c)",
            .nranks = 0, .run = mpi_run);
