/* A rank program for the bootstrap tests. It uses the bootstrap module
 * directly (vmmc_boot_init / _barrier_send / _dispatch / _fini). The first
 * argument says what to do:
 *
 *   ranks N     check rank/size/env/table, then N barriers, leave cleanly
 *   singleton   no launcher in the environment: a job of size 1
 *   dead        rank 1 dies by SIGKILL after a barrier; the others print the
 *               DEAD event they receive, then wait to be stopped
 *   block       join, barrier, print "ready <rank> <pid>", wait to be stopped
 *   tcpdead     like ranks 1, but rank 2 dies by SIGKILL after a barrier and
 *               the others must see DEAD(2) and leave cleanly
 *   garbage     rank 1 first sends malformed input to the launcher on raw
 *               connections (each must be closed) and opens 40 connections
 *               that never speak, then everybody joins
 *
 * Every wait has a deadline; output lines are what the drivers check. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/boot.h"
#include "vtest.h"

typedef struct {
    int64_t barrier;  /* highest completed epoch */
    int dead_rank;    /* last DEAD event */
    int64_t dead_status;
    int ndead;
    int closed;
} evs_t;

static void on_event(void *arg, vmmc_boot_event_t ev, int64_t a, int64_t b)
{
    evs_t *e = arg;
    switch (ev) {
    case VMMC_BOOT_EV_BARRIER:
        VT_CHECK(a > e->barrier);
        e->barrier = a;
        break;
    case VMMC_BOOT_EV_DEAD:
        e->dead_rank = (int)a;
        e->dead_status = b;
        e->ndead++;
        break;
    case VMMC_BOOT_EV_CLOSED:
        e->closed = 1;
        break;
    }
}

/* Dispatch events until @done says so; fails after @timeout_s. */
static void wait_for(vmmc_boot_t *b, evs_t *e, int (*done)(const evs_t *, int64_t), int64_t arg,
                     double timeout_s)
{
    double end = vt_now() + timeout_s;
    while (!done(e, arg)) {
        if (vt_now() > end)
            VT_FAIL("rank %d: timed out waiting for a bootstrap event", b->rank);
        if (b->fd < 0)
            VT_FAIL("rank %d: launcher connection closed while waiting", b->rank);
        struct pollfd pf = {.fd = b->fd, .events = POLLIN};
        int n = poll(&pf, 1, 100);
        if (n < 0 && errno != EINTR)
            VT_FAIL("poll: %s", strerror(errno));
        if (n > 0)
            VT_OK(vmmc_boot_dispatch(b, on_event, e));
    }
}

static int barrier_done(const evs_t *e, int64_t epoch)
{
    return e->barrier >= epoch;
}

static int dead_seen(const evs_t *e, int64_t n)
{
    return e->ndead >= n;
}

static void barrier(vmmc_boot_t *b, evs_t *e, uint64_t epoch)
{
    VT_OK(vmmc_boot_barrier_send(b, epoch));
    if (b->fd >= 0)
        wait_for(b, e, barrier_done, (int64_t)epoch, 30);
}

static void make_card(char *card, size_t n, int rank)
{
    snprintf(card, n, "card-of-rank-%d-pid-%d", rank, (int)getpid());
}

static int env_int(const char *name)
{
    const char *s = getenv(name);
    if (!s)
        VT_FAIL("%s is not set", name);
    return atoi(s);
}

static void join(vmmc_boot_t *b)
{
    char card[128];
    make_card(card, sizeof card,
              getenv("VMMC_RANK") ? env_int("VMMC_RANK") : getenv("PMIX_RANK") ? env_int("PMIX_RANK") : 0);
    VT_OK(vmmc_boot_init(b, card, -1)); /* VMMC_BOOT_TIMEOUT */
}

/* Everything the table and the environment must agree on. */
static void check_job(vmmc_boot_t *b)
{
    VT_CHECK(b->size >= 1);
    VT_CHECK(b->rank >= 0 && b->rank < b->size);
    VT_CHECK(b->job[0] != 0);
    if (getenv("VMMC_RANK")) {
        VT_CHECK(b->rank == env_int("VMMC_RANK"));
        VT_CHECK(b->size == env_int("VMMC_SIZE"));
    }
    if (getenv("VMMC_LAUNCHER")) {
        VT_CHECK(getenv("VMMC_JOB") && !strcmp(b->job, getenv("VMMC_JOB")));
        VT_CHECK(env_int("VMMC_LOCAL_RANK") == b->rank);
        VT_CHECK(b->fd >= 0 || b->size == 1);
    }
    for (int r = 0; r < b->size; r++) {
        char want[128];
        VT_CHECK(b->peers[r].card != NULL);
        VT_CHECK(b->peers[r].pid > 0);
        snprintf(want, sizeof want, "card-of-rank-%d-pid-%d", r, (int)b->peers[r].pid);
        if (strcmp(b->peers[r].card, want))
            VT_FAIL("rank %d: card of rank %d is '%s', expected '%s'", b->rank, r,
                    b->peers[r].card, want);
        for (int q = 0; q < r; q++)
            VT_CHECK(b->peers[q].pid != b->peers[r].pid);
    }
    VT_CHECK(b->peers[b->rank].pid == getpid());
}

static void ranks(int nbarriers)
{
    vmmc_boot_t b;
    evs_t e = {0};
    join(&b);
    check_job(&b);
    for (int i = 1; i <= nbarriers; i++)
        barrier(&b, &e, (uint64_t)i);
    VT_CHECK(e.ndead == 0);
    printf("rank %d of %d ok (%d barriers)\n", b.rank, b.size, nbarriers);
    fflush(stdout);
    vmmc_boot_fini(&b);
    VT_CHECK(b.priv == NULL);
}

static void singleton(void)
{
    static const char *vars[] = {"VMMC_LAUNCHER", "VMMC_BOOTSTRAP", "VMMC_RANK", "VMMC_SIZE",
                                 "VMMC_JOB", "VMMC_LOCAL_RANK", "PMIX_RANK", "PMIX_NAMESPACE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    vmmc_boot_t b;
    join(&b);
    VT_CHECK(b.rank == 0 && b.size == 1 && b.fd == -1);
    check_job(&b);
    VT_OK(vmmc_boot_barrier_send(&b, 1));
    VT_OK(vmmc_boot_dispatch(&b, on_event, NULL));
    vmmc_boot_fini(&b);
    printf("singleton ok\n");
}

static void dead(int victim, int expect_signal, int leave)
{
    vmmc_boot_t b;
    evs_t e = {0};
    join(&b);
    check_job(&b);
    barrier(&b, &e, 1);
    if (b.rank == victim) {
        fflush(stdout);
        raise(SIGKILL);
    }
    wait_for(&b, &e, dead_seen, 1, 30);
    VT_CHECK(e.dead_rank == victim);
    if (expect_signal) {
        VT_CHECK(e.dead_status >= 0);
        int st = (int)e.dead_status;
        VT_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        printf("rank %d saw DEAD %d signal %d\n", b.rank, e.dead_rank, WTERMSIG(st));
    } else {
        VT_CHECK(e.dead_status == -1);
        printf("rank %d saw DEAD %d\n", b.rank, e.dead_rank);
    }
    fflush(stdout);
    if (leave) {
        vmmc_boot_fini(&b);
        return;
    }
    for (;;)
        pause(); /* the launcher stops us */
}

static void block(void)
{
    vmmc_boot_t b;
    evs_t e = {0};
    join(&b);
    barrier(&b, &e, 1);
    printf("ready %d %d\n", b.rank, (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
}

static int connect_launcher_raw(void)
{
    const char *name = getenv("VMMC_LAUNCHER");
    VT_CHECK(name != NULL);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(sa.sun_path + 1, name, n);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    VT_CHECK(connect(fd, (struct sockaddr *)&sa,
                     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) == 0);
    return fd;
}

/* Connect to the launcher, send @len bytes, expect the connection closed. */
static void send_garbage(const void *buf, size_t len)
{
    int fd = connect_launcher_raw();
    VT_CHECK(send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len);
    char tmp[512];
    double end = vt_now() + 10;
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        VT_CHECK(vt_now() < end); /* the server must drop a bad client */
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0)
            break;
    }
    close(fd);
}

/* A well-formed HELLO (see src/core/boot_wire.h) with chosen fields. */
static size_t hello(unsigned char *out, uint32_t rank, uint32_t size, const char *job)
{
    uint32_t f[3] = {rank, size, 1};
    size_t n = 8, jl = strlen(job);
    for (int i = 0; i < 3; i++, n += 4)
        for (int k = 0; k < 4; k++)
            out[n + (size_t)k] = (unsigned char)(f[i] >> (8 * k));
    for (int k = 0; k < 4; k++)
        out[n + (size_t)k] = (unsigned char)(jl >> (8 * k));
    memcpy(out + n + 4, job, jl);
    n += 4 + jl;
    memset(out + n, 0, 4); /* empty card */
    n += 4;
    uint32_t body = (uint32_t)(n - 8);
    for (int k = 0; k < 4; k++)
        out[k] = (unsigned char)(body >> (8 * k));
    out[4] = 1; /* HELLO */
    out[5] = 0;
    out[6] = 1; /* version */
    out[7] = 0;
    return n;
}

static void garbage(void)
{
    int idle[40];
    for (int i = 0; i < 40; i++)
        idle[i] = -1;
    if (env_int("VMMC_RANK") == 1) {
        /* header: length, type, version (little endian) */
        static const unsigned char huge[8] = {0xff, 0xff, 0xff, 0x7f, 1, 0, 1, 0};
        static const unsigned char badver[8] = {0, 0, 0, 0, 1, 0, 9, 0};
        static const unsigned char badtype[8] = {0, 0, 0, 0, 77, 0, 1, 0};
        static const unsigned char shorthello[12] = {4, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0};
        /* HELLO with a card length far beyond the body */
        static const unsigned char badcard[28] = {20, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 2, 0,
                                                  0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
        static const unsigned char barrier_first[16] = {8, 0, 0, 0, 3, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0};
        send_garbage(huge, sizeof huge);
        send_garbage(badver, sizeof badver);
        send_garbage(badtype, sizeof badtype);
        send_garbage(shorthello, sizeof shorthello);
        send_garbage(badcard, sizeof badcard);
        send_garbage(barrier_first, sizeof barrier_first);
        unsigned char h[128];
        send_garbage(h, hello(h, 0, 2, "not-this-job"));  /* another job's id */
        send_garbage(h, hello(h, 0, 3, getenv("VMMC_JOB"))); /* another size */
        send_garbage(h, hello(h, 2, 2, getenv("VMMC_JOB"))); /* rank out of range */
        unsigned long long seed = 12345;
        for (int i = 0; i < 20; i++) {
            unsigned char rnd[64];
            for (size_t k = 0; k < sizeof rnd; k++)
                rnd[k] = (unsigned char)vt_rand(&seed);
            rnd[6] = 7; /* never a valid version: every message is refused */
            send_garbage(rnd, sizeof rnd);
        }
        printf("garbage refused\n");
        /* Connections that never speak must not keep the ranks out. */
        for (int i = 0; i < 40; i++)
            idle[i] = connect_launcher_raw();
    }
    ranks(3);
    for (int i = 0; i < 40; i++)
        if (idle[i] >= 0)
            close(idle[i]);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2)
        VT_FAIL("usage: boot_peer ranks N|singleton|dead|block|tcpdead|garbage");
    const char *m = argv[1];
    if (!strcmp(m, "ranks"))
        ranks(argc > 2 ? atoi(argv[2]) : 1);
    else if (!strcmp(m, "singleton"))
        singleton();
    else if (!strcmp(m, "dead"))
        dead(1, 1, 0);
    else if (!strcmp(m, "tcpdead"))
        dead(2, 0, 1);
    else if (!strcmp(m, "block"))
        block();
    else if (!strcmp(m, "garbage"))
        garbage();
    else
        VT_FAIL("unknown mode %s", m);
    return 0;
}
