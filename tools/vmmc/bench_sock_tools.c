/* vmmc bench sock: unmodified programs through `vmmc preload`.
 *
 * When libvmmc-preload.so is found (next to the tool in a build tree, or in
 * <prefix>/<libdir> installed), the same installed program runs twice in
 * the same run: on the kernel's TCP, then with the preload library in
 * LD_PRELOAD (server and client both, so their connections upgrade):
 *
 *   sockperf_tcp_lat / preload_sockperf_lat   us      sockperf pp --tcp,
 *                                                     64 B, median latency
 *   redis_tcp_get / preload_redis_get         Mmsg/s  redis-benchmark GET,
 *                                                     64 B values, 20 clients
 *
 * Rows that went through the preload are named preload_*; a missing
 * program or library is a note, not a failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_proc.h"
#include "bench_sock.h"

#ifndef VMMC_INSTALL_LIBDIR
#define VMMC_INSTALL_LIBDIR "lib"
#endif

/* "LD_PRELOAD=<the library>" into @env, or -1 if it is not there. */
static int find_preload(char *env, size_t n)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return -1;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = 0;
    const char *fmt[] = {"LD_PRELOAD=%s/libvmmc-preload.so",
                         "LD_PRELOAD=%s/../" VMMC_INSTALL_LIBDIR "/libvmmc-preload.so"};
    for (int i = 0; i < 2; i++) {
        if (snprintf(env, n, fmt[i], exe) >= (int)n)
            continue;
        if (!access(env + strlen("LD_PRELOAD="), R_OK))
            return 0;
    }
    return -1;
}

/* One sockperf ping-pong (server and client under @env, NULL: plain);
 * the median latency in us into *v. */
static int sockperf_once(bench_ctx_t *c, char *env, double *v)
{
    int port = proc_free_port(SOCK_STREAM);
    if (port < 0)
        return -1;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    char *envv[] = {env, NULL};
    char *sargv[] = {"sockperf", "server", "--tcp", "-i", "127.0.0.1", "-p", ps, NULL};
    /* 1 s at 1 M messages/s at most: sockperf sizes its table of sequence
     * numbers for rates the kernel reaches; unpaced, vmmc's rate overflows it
     * ("_seqN > m_maxSequenceNo", exit 6). Both paths get the same pacing. */
    char *cargv[] = {"sockperf", "ping-pong", "--tcp", "-i", "127.0.0.1", "-p", ps,
                     "-m", "64", "-t", "1", "--mps", "1000000", NULL};
    pid_t server = proc_spawn(sargv, env ? envv : NULL, 1, -1);
    if (server < 0)
        return -1;
    if (proc_wait_port(server, port, 0, 10)) {
        proc_stop_group(server);
        bench_note(c, "sock: the sockperf server did not start%s", env ? " under the preload" : "");
        return -1;
    }
    char *out = NULL;
    int rc = proc_run_capture(cargv, env ? envv : NULL, 0, 60, &out);
    proc_stop_group(server);
    /* the median; if sockperf gave no percentiles, its mean */
    const char *p = out ? strstr(out, "percentile 50.000 =") : NULL;
    const char *m = out ? strstr(out, "Summary: Latency is") : NULL;
    int ok = rc == 0 && ((p && sscanf(p, "percentile 50.000 = %lf", v) == 1) ||
                         (m && sscanf(m, "Summary: Latency is %lf", v) == 1)) && *v > 0;
    if (!ok) {
        size_t l = out ? strlen(out) : 0;
        bench_note(c, "sock: sockperf pp --tcp%s failed (%s): %.300s",
                   env ? " under the preload" : "", proc_why(rc),
                   l > 300 ? out + l - 300 : out ? out : "");
    }
    free(out);
    return ok ? 0 : -1;
}

/* One redis-benchmark GET run; millions of requests per second into *v. */
static int redis_once(bench_ctx_t *c, char *env, double *v)
{
    int port = proc_free_port(SOCK_STREAM);
    if (port < 0)
        return -1;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    char *envv[] = {env, NULL};
    char *sargv[] = {"redis-server", "--bind", "127.0.0.1", "--port", ps, "--save", "",
                     "--appendonly", "no", "--daemonize", "no", "--dir", "/tmp", NULL};
    char *cargv[] = {"redis-benchmark", "-h", "127.0.0.1", "-p", ps, "-t", "get", "-d", "64",
                     "-c", "20", "-n", c->quick ? "20000" : "100000", "-q", NULL};
    pid_t server = proc_spawn(sargv, env ? envv : NULL, 1, -1);
    if (server < 0)
        return -1;
    if (proc_wait_port(server, port, 0, 10)) {
        proc_stop_group(server);
        bench_note(c, "sock: redis-server did not start%s", env ? " under the preload" : "");
        return -1;
    }
    char *out = NULL;
    int rc = proc_run_capture(cargv, env ? envv : NULL, 0, 120, &out);
    proc_stop_group(server);
    const char *p = out ? strstr(out, "GET: ") : NULL;
    /* progress lines "GET: rps=..." come first; the result is the last one */
    for (const char *q = p; q; q = strstr(q + 1, "GET: "))
        p = q;
    double rps = 0;
    int ok = rc == 0 && p && sscanf(p, "GET: %lf requests per second", &rps) == 1 && rps > 0;
    if (ok)
        *v = rps / 1e6;
    else
        bench_note(c, "sock: redis-benchmark%s failed (%s)", env ? " under the preload" : "",
                   proc_why(rc));
    free(out);
    return ok ? 0 : -1;
}

typedef struct tool_row {
    const char *prog, *prog2; /* both must be installed */
    const char *plain, *pre;  /* metric names */
    const char *ref;          /* the plain row, for the preload one */
    size_t size;
    const char *unit;
    int (*once)(bench_ctx_t *, char *, double *);
} tool_row_t;

static const tool_row_t rows[] = {
    {"sockperf", "sockperf", "sockperf_tcp_lat", "preload_sockperf_lat", "sock/sockperf_tcp_lat",
     64, "us", sockperf_once},
    {"redis-server", "redis-benchmark", "redis_tcp_get", "preload_redis_get", "sock/redis_tcp_get",
     64, "Mmsg/s", redis_once},
};

void bench_sock_tools(bench_ctx_t *c)
{
    char env[PATH_MAX + 16];
    if (find_preload(env, sizeof env)) {
        bench_note(c, "sock: programs through vmmc preload not measured: libvmmc-preload.so is "
                      "not built or installed next to this tool");
        return;
    }
    proc_catch_stop();
    int runs = c->quick ? 1 : 3;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const tool_row_t *t = &rows[i];
        if (!proc_in_path(t->prog, NULL, 0) || !proc_in_path(t->prog2, NULL, 0)) {
            bench_note(c, "sock: %s not measured: %s is not installed", t->pre,
                       proc_in_path(t->prog, NULL, 0) ? t->prog2 : t->prog);
            continue;
        }
        double v[2][BENCH_SOCK_MAX_REPS];
        int got[2] = {0, 0};
        /* alternate, so that both see the same machine; a run that gave no
         * figure (noted: sockperf finds "no valid observations" when a
         * loaded machine delays its 1 s window) is tried again, twice */
        for (int r = 0; r < runs; r++)
            for (int pre = 0; pre < 2; pre++)
                for (int a = 0; a < 3; a++)
                    if (!t->once(c, pre ? env : NULL, &v[pre][got[pre]])) {
                        got[pre]++;
                        break;
                    }
        if (got[0])
            bench_report(c, t->plain, t->size, t->unit, bench_stats(v[0], got[0]), NULL);
        if (got[1])
            bench_report(c, t->pre, t->size, t->unit, bench_stats(v[1], got[1]), t->ref);
    }
}
