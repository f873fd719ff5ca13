/* vmmc bench fabric: the fabric transport beside udp, and libfabric's own
 * fi_pingpong on the same provider, in the same run.
 *
 * Each vmmc figure comes from a job of two processes formed on this host
 * with the TCP bootstrap, pinned to cpus 0 and 1, with VMMC_TRANSPORT=udp
 * or =fabric (provider FI_PROVIDER, default tcp;ofi_rxm). Latency is a
 * ping-pong: a rank sends n bytes into its peer's export, whose last word
 * carries a sequence number the peer spins on (vmmc_progress between
 * looks), then the peer answers the same way; one-way = round trip / 2.
 * fi_pingpong (fabtests) does the same exchange with fi_send/fi_recv on
 * the same provider, server on cpu 1, client on cpu 0, and prints one-way
 * time per transfer: it is the floor the fabric rows are compared with.
 *
 *   udp_lat          us    vmmc over udp
 *   fabric_lat       us    vmmc over the fabric provider, reference
 *                          fabric/fi_pingpong_lat: the ratio is vmmc's
 *                          overhead over the raw provider
 *   fi_pingpong_lat  us    fi_pingpong -e rdm -p <provider>
 *   udp_get_lat      us    vmmc_fetch of n bytes over udp (a round trip)
 *   fabric_get_lat   us    the same over the fabric (fi_read on the RMA path),
 *                          reference fabric/udp_get_lat
 *   fabric_msg_lat, fabric_msg_get_lat, fabric_msg_bw: the fabric job again
 *                          with VMMC_FABRIC_RMA=no (every put and get a
 *                          message the receiver applies), references the
 *                          RMA rows: the ratio is what the RMA path saves
 *   udp_bw           GB/s  a stream of 1 MiB sends, then a barrier
 *   fabric_bw        GB/s  the same over the fabric, reference fabric/udp_bw
 *   fabric_notify_lat us   a ping-pong of notified sends (vmmc_send with
 *                          VMMC_SEND_NOTIFY, immediate 0): each side waits
 *                          for its export's handler to run, not for a word
 *                          to change; on the RMA path, a notification that
 *                          fits goes as the write's remote CQ data
 *                          (fi_writedata: 64 B and 4 KiB do, 64 KiB does not),
 *                          reference fabric_notify_msg_lat
 *   fabric_notify_msg_lat us  the same job with VMMC_FABRIC_CQ_DATA=no: the
 *                          data by fi_write, then a NOTE message; jobs of
 *                          the two kinds run in turns, 3 of each, and each
 *                          row is the median of all their repetitions
 *
 * Rows that cannot be measured (no fabric transport in this build, no
 * fi_pingpong, a provider missing) are left out with a note saying why.
 * Public API only. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define REGION (1u << 20)
#define BW_MSG (1u << 20)
#define MAX_REPS 16
#define NSIZES 3
static const size_t sizes[NSIZES] = {64, 4096, 65536};

/* What a rank 0 tells the suite: a sample, or why it failed. */
typedef struct rec {
    int kind; /* 0: latency sample (us) of sizes[idx]; 1: bandwidth (GB/s); 2: error;
               * 3: fetch latency sample (us) of sizes[idx];
               * 4: notification latency sample (us) of sizes[idx] */
    int idx;
    double v;
    char msg[240];
} rec_t;

static void say(int out, int kind, int idx, double v, const char *msg)
{
    rec_t r = {kind, idx, v, ""};
    if (msg)
        snprintf(r.msg, sizeof r.msg, "%s", msg);
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r)
        _exit(1);
}

static const char *wait_failed;

static int wait_word(vmmc_ep_t *ep, volatile uint64_t *p, uint64_t val)
{
    double t0 = bench_now_ns();
    for (unsigned long spins = 0;; spins++) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) >= val)
            return 0;
        if (vmmc_progress(ep) == 0 && (spins & 63) == 63)
            sched_yield();
        if ((spins & 0xfff) == 0xfff && bench_now_ns() - t0 > 30e9) {
            wait_failed = "the peer did not answer within 30 s";
            return -1;
        }
    }
}

/* Notifications that ran on this rank's export (its handler). */
static volatile uint64_t notes_seen;

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)n;
    (void)arg;
    notes_seen++;
}

static int wait_note(vmmc_ep_t *ep, uint64_t val)
{
    double t0 = bench_now_ns();
    for (unsigned long spins = 0;; spins++) {
        if (notes_seen >= val)
            return 0;
        if (vmmc_progress(ep) == 0 && (spins & 63) == 63)
            sched_yield();
        if ((spins & 0xfff) == 0xfff && bench_now_ns() - t0 > 30e9) {
            wait_failed = "the peer's notification did not come within 30 s";
            return -1;
        }
    }
}

/* What a job measures: everything but notifications, or only them. */
enum { JOB_ALL = 0, JOB_NOTIFY_ONLY = 1 };
#define NOTIFY_ROUNDS 3

/* A rank of a measuring job: @cqd is VMMC_FABRIC_CQ_DATA. */
static int rank_main(bench_ctx_t *c, const char *tr, const char *prov, int rma, int cqd, int what,
                     int rank, int port, int out)
{
    char v[64];
    snprintf(v, sizeof v, "127.0.0.1:%d", port);
    setenv("VMMC_BOOTSTRAP", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("VMMC_RANK", v, 1);
    setenv("VMMC_SIZE", "2", 1);
    setenv("VMMC_TRANSPORT", tr, 1);
    if (prov)
        setenv("FI_PROVIDER", prov, 1);
    setenv("VMMC_FABRIC_RMA", rma ? "yes" : "no", 1);
    setenv("VMMC_FABRIC_CQ_DATA", cqd ? "yes" : "no", 1);
    unsetenv("VMMC_LAUNCHER");
    unsetenv("VMMC_JOB");
    bench_pin_cpu(rank);
    vmmc_ep_t *ep = NULL;
    char why[200];
    int rc = vmmc_init(NULL, &ep);
    if (rc != VMMC_OK) {
        snprintf(why, sizeof why, "vmmc_init: %s", vmmc_last_error());
        goto fail;
    }
    uint8_t *buf;
    vmmc_export_t *ex = NULL;
    vmmc_proxy_t *px = NULL;
    char name[32];
    snprintf(name, sizeof name, "fab.bench.%d", rank);
    vmmc_export_params_t p = {0};
    p.name = name;
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_HANDLER;
    p.flags = VMMC_EXPORT_READ;
    p.handler = on_note; /* runs for notified sends only (the notify rows) */
    if (vmmc_mem_alloc(ep, REGION, (void **)&buf) != VMMC_OK)
        goto err;
    memset(buf, 0, REGION);
    p.addr = buf;
    p.length = REGION;
    if (vmmc_export(ep, &p, &ex) != VMMC_OK)
        goto err;
    snprintf(name, sizeof name, "fab.bench.%d", 1 - rank);
    if (vmmc_import(ep, 1 - rank, name, 30000, &px) != VMMC_OK || vmmc_barrier(ep) != VMMC_OK)
        goto err;
    int reps = c->reps < MAX_REPS ? c->reps : MAX_REPS;
    long iters = c->quick ? 300 : 1000;
    uint64_t seq = 0;
    uint8_t src[65536];
    memset(src, 7, sizeof src);
    /* Notification latency: each side sends with VMMC_SEND_NOTIFY and
     * waits for the peer's notification to run its handler. */
    if (what == JOB_NOTIFY_ONLY) {
        uint64_t nseq = 0;
        for (int si = 0; si < NSIZES; si++) {
            size_t n = sizes[si];
            if (c->quick && si == NSIZES - 1)
                break;
            for (int r = -1; r < reps; r++) {
                double t0 = bench_now_ns();
                for (long i = 0; i < iters; i++) {
                    ++nseq;
                    if (rank == 1 && wait_note(ep, nseq))
                        goto err;
                    if (vmmc_send(px, 0, src, n, VMMC_SEND_NOTIFY) != VMMC_OK)
                        goto err;
                    if (rank == 0 && wait_note(ep, nseq))
                        goto err;
                }
                double us = (bench_now_ns() - t0) / (double)iters / 2 / 1e3;
                if (rank == 0 && r >= 0)
                    say(out, 4, si, us, NULL);
            }
        }
    }
    for (int si = 0; si < NSIZES && what == JOB_ALL; si++) {
        size_t n = sizes[si];
        if (c->quick && si == NSIZES - 1)
            break;
        volatile uint64_t *mine = (volatile uint64_t *)(void *)(buf + n - 8);
        for (int r = -1; r < reps; r++) { /* one round of warm-up */
            double t0 = bench_now_ns();
            for (long i = 0; i < iters; i++) {
                ++seq;
                if (rank == 1 && wait_word(ep, mine, seq))
                    goto err;
                memcpy(src + n - 8, &seq, 8);
                if (vmmc_send(px, 0, src, n, 0) != VMMC_OK)
                    goto err;
                if (rank == 0 && wait_word(ep, mine, seq))
                    goto err;
            }
            double us = (bench_now_ns() - t0) / (double)iters / 2 / 1e3;
            if (rank == 0 && r >= 0)
                say(out, 0, si, us, NULL);
        }
    }
    /* Fetch latency: rank 0 reads n bytes of rank 1's export, one at a
     * time, while rank 1 waits in the barrier. */
    for (int si = 0; si < NSIZES && what == JOB_ALL; si++) {
        size_t n = sizes[si];
        if (c->quick && si == NSIZES - 1)
            break;
        for (int r = -1; r < reps; r++) {
            double t0 = bench_now_ns();
            if (rank == 0)
                for (long i = 0; i < iters; i++)
                    if (vmmc_fetch(px, 0, src, n) != VMMC_OK)
                        goto err;
            double us = (bench_now_ns() - t0) / (double)iters / 1e3;
            if (vmmc_barrier(ep) != VMMC_OK)
                goto err;
            if (rank == 0 && r >= 0)
                say(out, 3, si, us, NULL);
        }
    }
    /* Bandwidth: rank 0 streams into rank 1's export, the barrier waits
     * until every byte landed. */
    size_t total = c->quick ? 16u << 20 : 64u << 20;
    for (int r = -1; r < reps && what == JOB_ALL; r++) {
        double t0 = bench_now_ns();
        if (rank == 0)
            for (size_t done = 0; done < total; done += BW_MSG)
                if (vmmc_send(px, 0, buf, BW_MSG, 0) != VMMC_OK)
                    goto err;
        if (vmmc_barrier(ep) != VMMC_OK)
            goto err;
        double gbs = (double)total / (bench_now_ns() - t0);
        if (rank == 0 && r >= 0)
            say(out, 1, 0, gbs, NULL);
    }
    vmmc_unimport(px);
    vmmc_unexport(ex);
    vmmc_barrier(ep);
    vmmc_finalize(ep);
    return 0;
err:
    snprintf(why, sizeof why, "%s", wait_failed ? wait_failed : vmmc_last_error());
fail:
    if (rank == 0)
        say(out, 2, 0, 0, why);
    if (ep)
        vmmc_finalize(ep);
    return 1;
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

typedef struct samples {
    double lat[NSIZES][MAX_REPS], glat[NSIZES][MAX_REPS], nlat_us[NSIZES][MAX_REPS];
    int nlat[NSIZES], nglat[NSIZES], nnlat[NSIZES];
    double bw[MAX_REPS];
    int nbw;
    char err[240];
} samples_t;

/* Wait for @pid for at most @secs seconds (then kill it); its exit status,
 * or -1 if it was killed or did not exit cleanly. */
static int reap(pid_t pid, double deadline)
{
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (w < 0 && errno != EINTR)
            return -1;
        if (bench_now_ns() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            return -1;
        }
        usleep(10000);
    }
}

/* One vmmc job over @tr; fills @s, returns 0 if every figure came. */
static int run_job(bench_ctx_t *c, const char *tr, const char *prov, int rma, int cqd, int what,
                   samples_t *s)
{
    memset(s, 0, sizeof *s);
    int port = free_port(), pfd[2];
    if (port < 0 || pipe(pfd) != 0) {
        snprintf(s->err, sizeof s->err, "no port or pipe for the job");
        return -1;
    }
    pid_t parent = getpid(), pid[2];
    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            close(pfd[0]);
            _exit(rank_main(c, tr, prov, rma, cqd, what, r, port, pfd[1]));
        }
    }
    close(pfd[1]);
    double deadline = bench_now_ns() + (c->quick ? 40e9 : 240e9);
    for (;;) {
        struct pollfd pf = {pfd[0], POLLIN, 0};
        int left = (int)((deadline - bench_now_ns()) / 1e6);
        if (left <= 0) {
            snprintf(s->err, sizeof s->err, "the job did not finish in time");
            break;
        }
        int k = poll(&pf, 1, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            continue;
        rec_t r;
        if (read(pfd[0], &r, sizeof r) != (ssize_t)sizeof r)
            break; /* both ranks are gone */
        if (r.kind == 0 && r.idx >= 0 && r.idx < NSIZES && s->nlat[r.idx] < MAX_REPS)
            s->lat[r.idx][s->nlat[r.idx]++] = r.v;
        else if (r.kind == 3 && r.idx >= 0 && r.idx < NSIZES && s->nglat[r.idx] < MAX_REPS)
            s->glat[r.idx][s->nglat[r.idx]++] = r.v;
        else if (r.kind == 4 && r.idx >= 0 && r.idx < NSIZES && s->nnlat[r.idx] < MAX_REPS)
            s->nlat_us[r.idx][s->nnlat[r.idx]++] = r.v;
        else if (r.kind == 1 && s->nbw < MAX_REPS)
            s->bw[s->nbw++] = r.v;
        else if (r.kind == 2)
            snprintf(s->err, sizeof s->err, "%s", r.msg);
    }
    close(pfd[0]);
    int bad = 0;
    for (int r = 0; r < 2; r++)
        bad |= reap(pid[r], bench_now_ns() + 10e9) != 0;
    if (bad && !s->err[0])
        snprintf(s->err, sizeof s->err, "a rank failed");
    return bad || s->err[0] ? -1 : 0;
}

/* fi_pingpong one-way time (us) for @size on @prov, or < 0 with @why. */
static double fi_pingpong(bench_ctx_t *c, const char *prov, size_t size, char *why, size_t wn)
{
    int port = free_port();
    char iters[16], sz[16], ps[16];
    /* Enough iterations that the provider's connection set-up, made by the
     * first message and timed by fi_pingpong, weighs little. */
    snprintf(iters, sizeof iters, "%d", c->quick ? 1000 : 4000);
    snprintf(sz, sizeof sz, "%zu", size);
    snprintf(ps, sizeof ps, "%d", port);
    int pfd[2];
    if (port < 0 || pipe(pfd) != 0) {
        snprintf(why, wn, "no port or pipe for fi_pingpong");
        return -1;
    }
    pid_t pid[2];
    for (int r = 1; r >= 0; r--) { /* 1: the server, on cpu 1, first; 0: the client, cpu 0 */
        pid[r] = fork();
        if (pid[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            bench_pin_cpu(r);
            int null = open("/dev/null", O_WRONLY);
            dup2(r == 0 ? pfd[1] : null, 1);
            dup2(null, 2);
            close(pfd[0]);
            if (r == 0)
                execlp("fi_pingpong", "fi_pingpong", "-p", prov, "-e", "rdm", "-I", iters, "-S", sz,
                       "-P", ps, "127.0.0.1", (char *)NULL);
            else
                execlp("fi_pingpong", "fi_pingpong", "-p", prov, "-e", "rdm", "-I", iters, "-S", sz,
                       "-B", ps, (char *)NULL);
            _exit(127);
        }
        if (r == 1)
            usleep(300000); /* let the server listen */
    }
    close(pfd[1]);
    char out[4096];
    size_t len = 0;
    double deadline = bench_now_ns() + 60e9;
    for (;;) {
        struct pollfd pf = {pfd[0], POLLIN, 0};
        int left = (int)((deadline - bench_now_ns()) / 1e6);
        if (left <= 0 || len + 1 >= sizeof out)
            break;
        int k = poll(&pf, 1, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        ssize_t got = read(pfd[0], out + len, sizeof out - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    out[len] = 0;
    close(pfd[0]);
    int st0 = reap(pid[0], bench_now_ns() + 5e9), st1 = reap(pid[1], bench_now_ns() + 5e9);
    /* The result line: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec */
    double us = -1;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        /* sizes print as 64, 4k, 64k, 1m */
        char f[7][32];
        if (sscanf(line, "%31s %31s %31s %31s %31s %31s %31s", f[0], f[1], f[2], f[3], f[4], f[5], f[6]) != 7)
            continue;
        char *e;
        unsigned long long b = strtoull(f[0], &e, 10);
        if (e == f[0])
            continue;
        b <<= *e == 'k' ? 10 : *e == 'm' ? 20 : *e == 'g' ? 30 : 0;
        if (b == size)
            us = strtod(f[6], NULL);
    }
    if (us <= 0)
        snprintf(why, wn, "fi_pingpong -p '%s' -S %zu gave no result (exit %d/%d%s)", prov, size, st0, st1,
                 st0 == 127 ? ": not installed (apt-get install -y libfabric-bin)" : "");
    return us;
}

static void report_lat(bench_ctx_t *c, const char *metric, samples_t *s, const char *ref)
{
    for (int i = 0; i < NSIZES; i++)
        if (s->nlat[i])
            bench_report(c, metric, sizes[i], "us", bench_stats(s->lat[i], s->nlat[i]), ref);
}

static void report_get(bench_ctx_t *c, const char *metric, samples_t *s, const char *ref)
{
    for (int i = 0; i < NSIZES; i++)
        if (s->nglat[i])
            bench_report(c, metric, sizes[i], "us", bench_stats(s->glat[i], s->nglat[i]), ref);
}

static void report_notify(bench_ctx_t *c, const char *metric, samples_t *s, const char *ref)
{
    for (int i = 0; i < NSIZES; i++)
        if (s->nnlat[i])
            bench_report(c, metric, sizes[i], "us", bench_stats(s->nlat_us[i], s->nnlat[i]), ref);
}

static int fabric_run(bench_ctx_t *c)
{
    const char *prov = getenv("FI_PROVIDER");
    if (!prov || !*prov)
        prov = "tcp;ofi_rxm";
    int ok = 0;
    c->transport = "udp";
    samples_t *s = calloc(1, sizeof *s);
    if (!s)
        return 1;
    /* The floor first: fi_pingpong on the provider, each size reps times. */
    int reps = c->reps < MAX_REPS ? c->reps : MAX_REPS, have_fi = 0;
    double fi[MAX_REPS];
    char why[300] = "";
    for (int i = 0; i < NSIZES && !(c->quick && i == NSIZES - 1); i++) {
        int n = 0;
        for (int r = 0; r < reps; r++) {
            double us = fi_pingpong(c, prov, sizes[i], why, sizeof why);
            if (us < 0)
                break;
            fi[n++] = us;
        }
        if (n == 0) {
            bench_note(c, "fabric: %s", why);
            break;
        }
        c->transport = "fabric";
        bench_report(c, "fi_pingpong_lat", sizes[i], "us", bench_stats(fi, n), NULL);
        have_fi = 1;
        ok++;
    }
    c->transport = "udp";
    if (run_job(c, "udp", NULL, 0, 1, JOB_ALL, s) == 0) {
        report_lat(c, "udp_lat", s, NULL);
        report_get(c, "udp_get_lat", s, NULL);
        bench_report(c, "udp_bw", BW_MSG, "GB/s", bench_stats(s->bw, s->nbw), NULL);
        ok++;
    } else {
        bench_note(c, "fabric: the job over udp failed: %s", s->err);
    }
    c->transport = "fabric";
    if (run_job(c, "fabric", prov, 1, 1, JOB_ALL, s) == 0) {
        report_lat(c, "fabric_lat", s, have_fi ? "fabric/fi_pingpong_lat" : NULL);
        report_get(c, "fabric_get_lat", s, "fabric/udp_get_lat");
        bench_report(c, "fabric_bw", BW_MSG, "GB/s", bench_stats(s->bw, s->nbw), "fabric/udp_bw");
        ok++;
    } else {
        bench_note(c, "fabric: no fabric_lat/fabric_bw rows: the job with VMMC_TRANSPORT=fabric "
                   "FI_PROVIDER=%s failed: %s", prov, s->err);
    }
    /* Notifications as remote CQ data, and as NOTE messages after the RMA
     * data (VMMC_FABRIC_CQ_DATA=no) for what CQ data saves: jobs of each
     * kind in turns (NOTIFY_ROUNDS each), so that a change in the
     * machine's load weighs on both. */
    samples_t *nq = calloc(2, sizeof *nq);
    int nfail = !nq;
    for (int round = 0; nq && round < NOTIFY_ROUNDS && !nfail; round++)
        for (int cqd = 1; cqd >= 0 && !nfail; cqd--) {
            if (run_job(c, "fabric", prov, 1, cqd, JOB_NOTIFY_ONLY, s) != 0) {
                bench_note(c, "fabric: no notification rows: the job with "
                           "VMMC_FABRIC_CQ_DATA=%s failed: %s", cqd ? "yes" : "no", s->err);
                nfail = 1;
                break;
            }
            samples_t *t = &nq[cqd];
            for (int i = 0; i < NSIZES; i++)
                for (int k = 0; k < s->nnlat[i] && t->nnlat[i] < MAX_REPS; k++)
                    t->nlat_us[i][t->nnlat[i]++] = s->nlat_us[i][k];
        }
    if (nq && !nfail) {
        report_notify(c, "fabric_notify_lat", &nq[1], "fabric/fabric_notify_msg_lat");
        report_notify(c, "fabric_notify_msg_lat", &nq[0], NULL);
        ok++;
    }
    free(nq);
    /* The message path on the same provider, for what the RMA path saves. */
    if (run_job(c, "fabric", prov, 0, 1, JOB_ALL, s) == 0) {
        report_lat(c, "fabric_msg_lat", s, "fabric/fabric_lat");
        report_get(c, "fabric_msg_get_lat", s, "fabric/fabric_get_lat");
        bench_report(c, "fabric_msg_bw", BW_MSG, "GB/s", bench_stats(s->bw, s->nbw),
                     "fabric/fabric_bw");
        ok++;
    } else {
        bench_note(c, "fabric: no fabric_msg rows: the job with VMMC_FABRIC_RMA=no failed: %s",
                   s->err);
    }
    free(s);
    return ok ? 0 : 1;
}

BENCH_SUITE(fabric_suite, .name = "fabric",
            .help = "the fabric transport (FI_PROVIDER, default tcp;ofi_rxm) beside udp: latency "
                    "and bandwidth, and fi_pingpong on the same provider (vmmc's overhead ratio)",
            .nranks = 0, .run = fabric_run);
