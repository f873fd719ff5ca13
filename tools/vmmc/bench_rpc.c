/* Suite "rpc": SunRPC round trips (bench/rpc_bench.c, built as
 * vmmc-rpc-bench next to this tool) through three paths in the same run,
 * server and client pinned to distinct cores:
 *
 *   tcp      libtirpc's TCP transport over the kernel (the reference)
 *   preload  the same unmodified program under `vmmc preload` (both ends)
 *   vrpc     vRPC's native transport (libvmmc-rpc.so) at both ends
 *
 * Rows: "<path>_null" (size 0, the null call) and "<path>_echo" (4 KiB and
 * 64 KiB of opaque data echoed), round-trip time in us; preload and vrpc
 * rows carry their ratio to tcp's. Whatever cannot run is a note with the
 * reason. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "bench_proc.h"

typedef struct rpc_path {
    const char *name;
    const char *transport; /* the rows' transport column */
    int native;            /* vRPC's transport */
    int preload;           /* under `vmmc preload` */
    const char *ref;       /* the path its ratios are to */
} rpc_path_t;

static const rpc_path_t paths[] = {
    {"tcp", "tcp", 0, 0, NULL},
    {"preload", "shm", 0, 1, "tcp"},
    {"vrpc", "shm", 1, 0, "tcp"},
};

static int self_path(char *out, size_t n)
{
    ssize_t l = readlink("/proc/self/exe", out, n - 1);
    if (l <= 0)
        return -1;
    out[l] = 0;
    return 0;
}

static void run_path(bench_ctx_t *c, const rpc_path_t *p, const char *self, const char *prog)
{
    int port = proc_free_port(SOCK_STREAM);
    if (port < 0) {
        bench_note(c, "%s not measured: no free TCP port", p->name);
        return;
    }
    char ports[16], reps[16];
    snprintf(ports, sizeof ports, "%d", port);
    int n = c->quick ? 2000 : 20000;
    if (c->reps > 0 && !c->quick && c->reps * 200 > n)
        n = c->reps * 200;
    snprintf(reps, sizeof reps, "%d", n);
    const char *kind = p->native ? "native" : "plain";
    char *sargv[10], *cargv[16];
    int s = 0, k = 0;
    if (p->preload) {
        sargv[s++] = (char *)self;
        sargv[s++] = "preload";
        sargv[s++] = "--";
        cargv[k++] = (char *)self;
        cargv[k++] = "preload";
        cargv[k++] = "--";
    }
    sargv[s++] = (char *)prog;
    sargv[s++] = "server";
    sargv[s++] = (char *)kind;
    sargv[s++] = ports;
    sargv[s] = NULL;
    cargv[k++] = (char *)prog;
    cargv[k++] = "client";
    cargv[k++] = (char *)kind;
    cargv[k++] = ports;
    cargv[k++] = reps;
    cargv[k++] = "0";
    cargv[k++] = "4096";
    cargv[k++] = "65536";
    cargv[k] = NULL;
    pid_t server = proc_spawn(sargv, NULL, 0, -1);
    if (server < 0) {
        bench_note(c, "%s not measured: cannot start the server: %s", p->name, strerror(errno));
        return;
    }
    if (proc_wait_port(server, port, 0, 20)) {
        proc_stop_group(server);
        bench_note(c, "%s not measured: the server did not listen on port %d", p->name, port);
        return;
    }
    char *out = NULL;
    int rc = proc_run_capture(cargv, NULL, 1, c->quick ? 120 : 600, &out);
    proc_stop_group(server);
    int rows = 0;
    for (const char *l = out; l && *l;) {
        size_t size;
        bench_stat_t st;
        if (sscanf(l, "rtt %zu %lf %lf %lf", &size, &st.median, &st.min, &st.max) == 4) {
            char metric[64], ref[64];
            snprintf(metric, sizeof metric, "%s_%s", p->name, size ? "echo" : "null");
            snprintf(ref, sizeof ref, "rpc/%s_%s", p->ref ? p->ref : "", size ? "echo" : "null");
            c->transport = p->transport;
            bench_report(c, metric, size, "us", st, p->ref ? ref : NULL);
            rows++;
        }
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    if (rc || rows != 3) {
        const char *o = out && *out ? out : "(no output)";
        size_t len = strlen(o);
        bench_note(c, "%s not measured: the client failed (%s): %.300s", p->name, proc_why(rc),
                   len > 300 ? o + len - 300 : o);
    }
    free(out);
}

static int rpc_run(bench_ctx_t *c)
{
    proc_catch_stop();
    char self[PATH_MAX], prog[PATH_MAX + 32];
    if (self_path(self, sizeof self)) {
        bench_note(c, "RPC not measured: cannot read /proc/self/exe: %s", strerror(errno));
        return 0;
    }
    snprintf(prog, sizeof prog, "%s", self);
    char *slash = strrchr(prog, '/');
    snprintf(slash ? slash + 1 : prog, sizeof prog - (size_t)(slash ? slash + 1 - prog : 0),
             "vmmc-rpc-bench");
    if (access(prog, X_OK)) {
        bench_note(c, "RPC not measured: %s is not built (needs libtirpc-dev)", prog);
        return 0;
    }
    char *pre[] = {self, "preload", "--", "true", NULL};
    char *out = NULL;
    int prc = proc_run_capture(pre, NULL, -1, 30, &out);
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        if (paths[i].preload && prc) {
            bench_note(c, "%s not measured: `vmmc preload -- true` failed (%s): %.200s",
                       paths[i].name, proc_why(prc), out && *out ? out : "(no output)");
            continue;
        }
        run_path(c, &paths[i], self, prog);
    }
    free(out);
    return 0;
}

BENCH_SUITE(rpc_suite, .name = "rpc",
            .help = "SunRPC null call and echo: libtirpc over TCP vs under vmmc preload vs vRPC",
            .nranks = 0, .run = rpc_run);
