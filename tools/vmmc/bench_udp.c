/* vmmc bench udp: the udp transport's goodput under injected loss.
 *
 * For each loss rate (0, 1, 5, 20 % of the datagrams each endpoint
 * receives, dropped by the link's fault injector: VMMC_UDP_FAULT, a test
 * facility) a job of two processes is formed on this host with the TCP
 * bootstrap and VMMC_TRANSPORT=udp, pinned to cpus 0 and 1. Rank 0 writes
 * a stream of 4 MiB sends into rank 1's export and then enters a barrier
 * (which waits until every byte is in rank 1's memory): goodput = bytes /
 * (time until the barrier returns). The lossy rows are ratios to the
 * lossless one of the same run:
 *
 *   goodput_0pct  GB/s   lossless
 *   goodput_1pct  GB/s   1 % loss, reference udp/goodput_0pct
 *   goodput_5pct  GB/s   5 % loss, reference udp/goodput_0pct
 *   goodput_20pct GB/s   20 % loss, reference udp/goodput_0pct
 *
 * --quick measures 0 and 20 % only, on 64 MiB streams (256 MiB otherwise).
 * Public API only: the loss is set through the environment of each job. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MSG (4u << 20)
#define REGION (16u << 20)
#define MAX_REPS 64

/* One rank of a measuring job; rank 0 writes its samples (GB/s) to @out. */
static int rank_main(int rank, int port, double loss, size_t total, int reps, int out)
{
    char v[64];
    snprintf(v, sizeof v, "127.0.0.1:%d", port);
    setenv("VMMC_BOOTSTRAP", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("VMMC_RANK", v, 1);
    setenv("VMMC_SIZE", "2", 1);
    setenv("VMMC_TRANSPORT", "udp", 1);
    unsetenv("VMMC_LAUNCHER");
    unsetenv("VMMC_JOB");
    if (loss > 0) {
        snprintf(v, sizeof v, "drop=%g,seed=%d", loss, 7 + rank);
        setenv("VMMC_UDP_FAULT", v, 1);
    } else {
        unsetenv("VMMC_UDP_FAULT");
    }
    setenv("VMMC_LOG_LEVEL", "0", 1); /* the injector's warning is expected */
    bench_pin_cpu(rank);
    vmmc_ep_t *ep;
    if (vmmc_init(NULL, &ep) != VMMC_OK) {
        fprintf(stderr, "bench udp: rank %d: vmmc_init: %s\n", rank, vmmc_last_error());
        return 1;
    }
    int rc = 0;
    char *buf = NULL;
    if (vmmc_mem_alloc(ep, REGION, (void **)&buf) != VMMC_OK)
        goto fail;
    memset(buf, rank + 1, REGION);
    vmmc_export_t *ex = NULL;
    vmmc_proxy_t *px = NULL;
    if (rank == 1) {
        vmmc_export_params_t p = {0};
        p.name = "udp.goodput";
        p.addr = buf;
        p.length = REGION;
        if (vmmc_export(ep, &p, &ex) != VMMC_OK)
            goto fail;
    }
    if (vmmc_barrier(ep) != VMMC_OK)
        goto fail;
    if (rank == 0 && vmmc_import(ep, 1, "udp.goodput", 10000, &px) != VMMC_OK)
        goto fail;
    for (int r = -1; r < reps; r++) { /* one round of warm-up */
        double t0 = bench_now_ns();
        if (rank == 0)
            for (size_t done = 0; done < total; done += MSG)
                if (vmmc_send(px, done % REGION, buf + done % REGION, MSG, 0) != VMMC_OK)
                    goto fail;
        if (vmmc_barrier(ep) != VMMC_OK)
            goto fail;
        double gbs = (double)total / (bench_now_ns() - t0);
        if (rank == 0 && r >= 0 && write(out, &gbs, sizeof gbs) != (ssize_t)sizeof gbs)
            goto fail;
    }
    if (rank == 0) { /* the figures mean something only if datagrams carried them */
        const char *cn;
        uint64_t cv, udp_events = 0;
        for (int i = 0; vmmc_counter_get(ep, i, &cn, &cv) == VMMC_OK; i++)
            if (!strncmp(cn, "udp.", 4))
                udp_events += cv;
        if (udp_events == 0) {
            fprintf(stderr, "bench udp: the transfer did not go through the udp transport\n");
            goto fail;
        }
    }
    if (px)
        vmmc_unimport(px);
    if (ex)
        vmmc_unexport(ex);
    vmmc_barrier(ep);
    vmmc_finalize(ep);
    return 0;
fail:
    fprintf(stderr, "bench udp: rank %d: %s\n", rank, vmmc_last_error());
    rc = 1;
    vmmc_finalize(ep);
    return rc;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Run one job at @loss; fills @gbs with up to @reps samples, returns how many. */
static int measure(bench_ctx_t *c, double loss, size_t total, double *gbs)
{
    int port = free_port(), pfd[2];
    if (port < 0 || pipe(pfd) != 0) {
        bench_note(c, "udp: no port or pipe for the job at %g %% loss", loss * 100);
        return 0;
    }
    pid_t parent = getpid(), pid[2];
    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            close(pfd[0]);
            _exit(rank_main(r, port, loss, total, c->reps < MAX_REPS ? c->reps : MAX_REPS,
                            pfd[1]));
        }
    }
    close(pfd[1]);
    int n = 0, reps = c->reps < MAX_REPS ? c->reps : MAX_REPS;
    /* Bounded: a job that hangs is stopped (generous: 20 % loss at the
     * worst figures seen before the loss recovery took 0.04 s per MiB). */
    double deadline = bench_now_ns() + 300e9;
    while (n < reps && bench_now_ns() < deadline) {
        struct timeval tv = {1, 0};
        fd_set fs;
        FD_ZERO(&fs);
        FD_SET(pfd[0], &fs);
        int s = select(pfd[0] + 1, &fs, NULL, NULL, &tv);
        if (s < 0 && errno == EINTR)
            continue;
        if (s <= 0)
            continue;
        if (read(pfd[0], &gbs[n], sizeof gbs[n]) != (ssize_t)sizeof gbs[n])
            break;
        n++;
    }
    close(pfd[0]);
    int failed = n < reps;
    for (int r = 0; r < 2; r++) {
        if (failed)
            kill(pid[r], SIGKILL);
        int st;
        while (waitpid(pid[r], &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            failed = 1;
    }
    if (failed)
        bench_note(c, "udp: the job at %g %% loss did not complete (%d of %d rounds)",
                   loss * 100, n, reps);
    return n;
}

static int udp_run(bench_ctx_t *c)
{
    static const struct {
        double loss;
        const char *metric;
    } levels[] = {{0, "goodput_0pct"}, {0.01, "goodput_1pct"}, {0.05, "goodput_5pct"},
                  {0.20, "goodput_20pct"}};
    size_t total = c->quick ? 64u << 20 : 256u << 20;
    int ok = 0;
    c->transport = "udp"; /* whatever --transport says: these rows are udp's */
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (c->quick && levels[i].loss > 0 && levels[i].loss < 0.2)
            continue; /* --quick: the ends of the curve only */
        double gbs[MAX_REPS];
        int n = measure(c, levels[i].loss, total, gbs);
        if (n == 0)
            continue;
        bench_report(c, levels[i].metric, MSG, "GB/s", bench_stats(gbs, n),
                     i ? "udp/goodput_0pct" : NULL);
        ok++;
    }
    return ok ? 0 : 1;
}

BENCH_SUITE(udp_suite, .name = "udp",
            .help = "the udp transport's goodput with 0, 1, 5 and 20 % of datagrams lost "
                    "(two processes, TCP bootstrap, fault injector)",
            .nranks = 0, .run = udp_run);
