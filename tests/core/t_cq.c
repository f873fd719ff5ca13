/* Completion queues: sends, fetches and atomics complete with their
 * contexts (small ones at once, large ones from the copy engine, atomics to
 * unmapped memory after their round trip); a queue of depth d refuses the
 * (d+1)th unpolled operation with VMMC_ERR_AGAIN and takes it again once
 * polled; its descriptor wakes an epoll loop; notifications of an export
 * given a queue arrive there, in order, held back (not lost) while the queue
 * is full; an operation in flight to a peer that dies completes with
 * VMMC_ERR_PEER_DEAD and a message naming the peer, and a fence to it fails.
 *
 * usage: t_cq <path to vmmc>   (driver: runs a job of 3, rank 2 is killed)
 *        t_cq worker */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "vspawn.h"
#include "vtest.h"

#define BIG (4u << 20)
#define NOTES 10

static vmmc_ep_t *ep;
static int handler_calls;

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e, (void)n, (void)arg;
    handler_calls++;
}

/* Wait for exactly one completion. */
static vmmc_completion_t one(vmmc_cq_t *cq)
{
    vmmc_completion_t c[2];
    int n = vmmc_cq_wait(cq, c, 1, 20000);
    if (n != 1)
        VT_FAIL("vmmc_cq_wait returned %d (%s)", n, vmmc_strerror(n));
    return c[0];
}

static void expect(vmmc_completion_t c, vmmc_op_t op, void *ctx, int peer, size_t len)
{
    if (c.status != VMMC_OK)
        VT_FAIL("completion of op %d failed: %s (%s)", c.op, vmmc_strerror(c.status),
                c.error ? c.error : "no message");
    VT_CHECK(c.op == op && c.context == ctx && c.peer == peer && c.length == len);
}

/* Threads sharing one queue: each posts atomics and polls whatever
 * completed, its own or another's. */
#define HAMMER_THREADS 3
#define HAMMER_OPS 300
typedef struct hammer {
    vmmc_cq_t *cq;
    vmmc_proxy_t *px;
    _Atomic int *completed;
    _Atomic int *seen; /* by old value */
} hammer_t;

static void *hammer_main(void *arg)
{
    hammer_t *h = arg;
    vmmc_completion_t c[4];
    for (int posted = 0; posted < HAMMER_OPS;) {
        int rc = vmmc_atomic_cq(h->px, 128, VMMC_ATOMIC_ADD, 8, 1, 0, h->cq, h);
        if (rc == VMMC_OK)
            posted++;
        else if (rc != VMMC_ERR_AGAIN)
            VT_FAIL("vmmc_atomic_cq: %s", vmmc_strerror(rc));
        int n = vmmc_cq_poll(h->cq, c, 4);
        VT_CHECK(n >= 0);
        for (int i = 0; i < n; i++) {
            VT_CHECK(c[i].status == VMMC_OK && c[i].op == VMMC_OP_ATOMIC);
            VT_CHECK(c[i].value < HAMMER_THREADS * HAMMER_OPS);
            atomic_fetch_add(&h->seen[c[i].value], 1);
            atomic_fetch_add(h->completed, 1);
        }
    }
    double t0 = vt_now();
    while (atomic_load(h->completed) < HAMMER_THREADS * HAMMER_OPS && vt_now() - t0 < 30) {
        int n = vmmc_cq_wait(h->cq, c, 4, 100);
        VT_CHECK(n >= 0);
        for (int i = 0; i < n; i++) {
            VT_CHECK(c[i].status == VMMC_OK && c[i].value < HAMMER_THREADS * HAMMER_OPS);
            atomic_fetch_add(&h->seen[c[i].value], 1);
            atomic_fetch_add(h->completed, 1);
        }
    }
    return NULL;
}

static void hammer(vmmc_proxy_t *px)
{
    vmmc_cq_t *cq;
    VT_OK(vmmc_cq_open(ep, 8, &cq));
    uint64_t zero = 0;
    VT_OK(vmmc_send(px, 128, &zero, 8, 0));
    static _Atomic int completed, seen[HAMMER_THREADS * HAMMER_OPS];
    pthread_t t[HAMMER_THREADS];
    hammer_t h = {cq, px, &completed, seen};
    for (int i = 0; i < HAMMER_THREADS; i++)
        VT_CHECK(pthread_create(&t[i], NULL, hammer_main, &h) == 0);
    for (int i = 0; i < HAMMER_THREADS; i++)
        pthread_join(t[i], NULL);
    VT_CHECK(atomic_load(&completed) == HAMMER_THREADS * HAMMER_OPS);
    for (int i = 0; i < HAMMER_THREADS * HAMMER_OPS; i++)
        if (atomic_load(&seen[i]) != 1)
            VT_FAIL("old value %d completed %d times", i, atomic_load(&seen[i]));
    uint64_t v;
    VT_OK(vmmc_fetch(px, 128, &v, 8));
    VT_CHECK(v == HAMMER_THREADS * HAMMER_OPS);
    VT_OK(vmmc_cq_close(cq));
}

static void rank0(vmmc_proxy_t *pm, vmmc_proxy_t *ph, vmmc_proxy_t *pn, vmmc_proxy_t *pw)
{
    vmmc_cq_t *cq;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_cq_open(ep, 0, &cq));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_cq_open(NULL, 4, &cq));
    VT_OK(vmmc_cq_open(ep, 8, &cq));
    vmmc_completion_t c[16];
    VT_CHECK(vmmc_cq_poll(cq, c, 16) == 0);
    VT_STATUS(VMMC_ERR_INVALID, vmmc_cq_poll(cq, c, 0));
    unsigned char *src = malloc(BIG), *back = malloc(BIG);
    for (size_t i = 0; i < BIG; i++)
        src[i] = (unsigned char)(i * 11 + 3);
    int ctx[8];

    /* Refused posts post nothing. */
    VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send_cq(pm, BIG, src, 1, 0, 0, cq, &ctx[0]));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_send_cq(pm, 0, src, 1, 0, 0, NULL, &ctx[0]));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_atomic_cq(pm, 3, VMMC_ATOMIC_ADD, 8, 1, 0, cq, &ctx[0]));
    VT_STATUS(VMMC_ERR_BOUNDS, vmmc_fetch_cq(ph, 1, back, BIG, cq, &ctx[0]));
    VT_CHECK(vmmc_cq_poll(cq, c, 16) == 0);

    for (int k = 0; k < 2; k++) {
        vmmc_proxy_t *px = k ? ph : pm;
        /* Small send: done at once, its completion already queued. */
        VT_OK(vmmc_send_cq(px, 0, src, 64, 0, 0, cq, &ctx[1]));
        VT_CHECK(vmmc_cq_poll(cq, c, 16) == 1);
        expect(c[0], VMMC_OP_SEND, &ctx[1], 1, 64);
        /* Large send through the copy engine, then a fetch behind it. */
        VT_OK(vmmc_send_cq(px, 0, src, BIG, 0, 0, cq, &ctx[2]));
        memset(back, 0, BIG);
        VT_OK(vmmc_fetch_cq(px, 0, back, BIG, cq, &ctx[3]));
        expect(one(cq), VMMC_OP_SEND, &ctx[2], 1, BIG);
        expect(one(cq), VMMC_OP_FETCH, &ctx[3], 1, BIG);
        VT_CHECK(memcmp(back, src, BIG) == 0);
        /* Atomics: the old value comes back in the completion. */
        VT_OK(vmmc_atomic_cq(px, 64, VMMC_ATOMIC_SWAP, 8, 40, 0, cq, &ctx[4]));
        VT_OK(vmmc_atomic_cq(px, 64, VMMC_ATOMIC_ADD, 8, 2, 0, cq, &ctx[5]));
        VT_OK(vmmc_atomic_cq(px, 64, VMMC_ATOMIC_CSWAP, 4, 7, 42, cq, &ctx[6]));
        vmmc_completion_t a = one(cq);
        expect(a, VMMC_OP_ATOMIC, &ctx[4], 1, 8);
        VT_CHECK(a.value == (uint64_t)src[64] + ((uint64_t)src[65] << 8) +
                                ((uint64_t)src[66] << 16) + ((uint64_t)src[67] << 24) +
                                ((uint64_t)src[68] << 32) + ((uint64_t)src[69] << 40) +
                                ((uint64_t)src[70] << 48) + ((uint64_t)src[71] << 56));
        a = one(cq);
        expect(a, VMMC_OP_ATOMIC, &ctx[5], 1, 8);
        VT_CHECK(a.value == 40);
        a = one(cq);
        expect(a, VMMC_OP_ATOMIC, &ctx[6], 1, 4);
        VT_CHECK(a.value == 42);
        uint64_t v;
        VT_OK(vmmc_fetch(px, 64, &v, 8));
        VT_CHECK(v == 7);
    }

    hammer(ph);

    /* A write-only export takes atomics, but gives no old value. */
    VT_STATUS(VMMC_ERR_PERMISSION, vmmc_atomic_cq(pw, 0, VMMC_ATOMIC_READ, 8, 0, 0, cq, NULL));
    for (int i = 0; i < 2; i++) {
        VT_OK(vmmc_atomic_cq(pw, 0, VMMC_ATOMIC_ADD, 8, 5, 0, cq, &ctx[i]));
        vmmc_completion_t a = one(cq);
        expect(a, VMMC_OP_ATOMIC, &ctx[i], 1, 8);
        VT_CHECK(a.value == 0);
    }

    /* Depth: 8 unpolled completions fill the queue. */
    for (int i = 0; i < 8; i++)
        VT_OK(vmmc_send_cq(pm, (size_t)i, src, 1, 0, 0, cq, &ctx[i]));
    VT_STATUS(VMMC_ERR_AGAIN, vmmc_send_cq(pm, 0, src, 1, 0, 0, cq, NULL));
    VT_STATUS(VMMC_ERR_AGAIN, vmmc_atomic_cq(ph, 0, VMMC_ATOMIC_ADD, 8, 1, 0, cq, NULL));
    VT_CHECK(vmmc_cq_poll(cq, c, 3) == 3);
    for (int i = 0; i < 3; i++)
        expect(c[i], VMMC_OP_SEND, &ctx[i], 1, 1);
    VT_OK(vmmc_send_cq(pm, 0, src, 1, 0, 0, cq, NULL));
    VT_CHECK(vmmc_cq_poll(cq, c, 16) == 6);
    for (int i = 0; i < 5; i++)
        expect(c[i], VMMC_OP_SEND, &ctx[i + 3], 1, 1);
    VT_CHECK(vmmc_cq_poll(cq, c, 16) == 0);

    /* The descriptor: readable once a completion waits. */
    int fd = vmmc_cq_fd(cq);
    VT_CHECK(fd >= 0 && vmmc_cq_fd(cq) == fd);
    int epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN}, got;
    VT_CHECK(epfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
    VT_OK(vmmc_send_cq(ph, 0, src, BIG, 0, 0, cq, &ctx[7]));
    int seen = 0;
    double t0 = vt_now();
    while (!seen && vt_now() - t0 < 20) {
        if (epoll_wait(epfd, &got, 1, 1000) == 1) {
            int n;
            while ((n = vmmc_cq_poll(cq, c, 16)) > 0) {
                VT_CHECK(n == 1);
                expect(c[0], VMMC_OP_SEND, &ctx[7], 1, BIG);
                seen = 1;
            }
            VT_CHECK(n == 0);
        }
    }
    VT_CHECK(seen);
    close(epfd);

    /* Notifications into rank 1's queue, more than it holds. */
    for (uint64_t i = 0; i < NOTES; i++)
        VT_OK(vmmc_send_imm(pn, i * 8, &i, 8, VMMC_SEND_NOTIFY, 100 + i));
    VT_OK(vmmc_fence(ep, 1));
    VT_OK(vmmc_cq_close(cq));
}

static void rank1(vmmc_cq_t *ncq, vmmc_export_t *nex, char *nbuf)
{
    vmmc_completion_t c[NOTES];
    int got = 0;
    double t0 = vt_now();
    /* Let every notification arrive before polling: the queue (depth 4)
     * fills and holds the rest back. */
    while (vt_now() - t0 < 0.3)
        vmmc_wait(ep, 50);
    while (got < NOTES && vt_now() - t0 < 20) {
        int n = vmmc_cq_wait(ncq, c, 3, 1000);
        VT_CHECK(n >= 0 && n <= 3);
        for (int i = 0; i < n; i++, got++) {
            VT_CHECK(c[i].status == VMMC_OK && c[i].op == VMMC_OP_NOTIFY);
            VT_CHECK(c[i].context == nbuf && c[i].export_ == nex && c[i].peer == 0);
            VT_CHECK(c[i].offset == (size_t)got * 8 && c[i].length == 8);
            VT_CHECK(c[i].value == 100 + (uint64_t)got);
            uint64_t v;
            memcpy(&v, nbuf + c[i].offset, 8);
            VT_CHECK(v == (uint64_t)got); /* the data is there with its completion */
        }
    }
    VT_CHECK(got == NOTES && handler_calls == 0);
    VT_STATUS(VMMC_ERR_BUSY, vmmc_cq_close(ncq));
    VT_OK(vmmc_unexport(nex));
    VT_OK(vmmc_cq_close(ncq));
}

static int worker(void)
{
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 3);
    char *mem, *heap = calloc(1, BIG), *nbuf = calloc(1, 4096), *wo = calloc(1, 64);
    VT_OK(vmmc_mem_alloc(ep, BIG, (void **)&mem));
    vmmc_cq_t *ncq = NULL;
    vmmc_export_t *nex = NULL, *e;
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .flags = VMMC_EXPORT_READ,
                              .length = BIG};
    p.name = "mem", p.addr = mem;
    VT_OK(vmmc_export(ep, &p, &e));
    p.name = "heap", p.addr = heap;
    VT_OK(vmmc_export(ep, &p, &e));
    p.flags = 0, p.name = "wo", p.addr = wo, p.length = 64;
    VT_OK(vmmc_export(ep, &p, &e));
    p.flags = VMMC_EXPORT_READ;
    if (me == 1) {
        VT_OK(vmmc_cq_open(ep, 4, &ncq));
        p.field_mask |= VMMC_EXPORT_PARAM_CQ | VMMC_EXPORT_PARAM_HANDLER;
        p.handler = on_note; /* the queue takes precedence */
        p.cq = NULL;
        p.name = "notes", p.addr = nbuf, p.length = 4096;
        VT_STATUS(VMMC_ERR_INVALID, vmmc_export(ep, &p, &nex));
        p.cq = ncq, p.cq_context = nbuf;
        VT_OK(vmmc_export(ep, &p, &nex));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 2) {
        /* Once rank 0 imported from us, stop here: it posts to us, then
         * kills us. */
        volatile int64_t *go = (volatile int64_t *)(void *)(heap + BIG - 8);
        double t0 = vt_now();
        while (*go != 0x60 && vt_now() - t0 < 30)
            vmmc_wait(ep, 10);
        VT_CHECK(*go == 0x60);
        int64_t pid = getpid();
        vmmc_proxy_t *p0;
        VT_OK(vmmc_import(ep, 0, "heap", 5000, &p0));
        VT_OK(vmmc_send(p0, BIG - 8, &pid, 8, 0));
        VT_OK(vmmc_fence(ep, 0));
        raise(SIGSTOP);
        _exit(3); /* never reached */
    }
    if (me == 0) {
        vmmc_proxy_t *pm, *ph, *pn, *pv, *pw;
        VT_OK(vmmc_import(ep, 1, "wo", 5000, &pw));
        VT_OK(vmmc_import(ep, 1, "mem", 5000, &pm));
        VT_OK(vmmc_import(ep, 1, "heap", 5000, &ph));
        VT_OK(vmmc_import(ep, 1, "notes", 5000, &pn));
        VT_OK(vmmc_import(ep, 2, "heap", 5000, &pv));
        int64_t go = 0x60;
        VT_OK(vmmc_send(pv, BIG - 8, &go, 8, 0));
        rank0(pm, ph, pn, pw);
        printf("rank 0: completions ok\n");
        /* Rank 2 stopped: an atomic and a large send to it cannot finish. */
        volatile int64_t *pidp = (volatile int64_t *)(void *)(heap + BIG - 8);
        double t0 = vt_now();
        while (!*pidp && vt_now() - t0 < 20)
            usleep(1000);
        VT_CHECK(*pidp > 0);
        usleep(100000);
        vmmc_cq_t *cq;
        VT_OK(vmmc_cq_open(ep, 4, &cq));
        int ctx;
        VT_OK(vmmc_atomic_cq(pv, 0, VMMC_ATOMIC_ADD, 8, 1, 0, cq, &ctx));
        usleep(100000);
        vmmc_completion_t c[4];
        VT_CHECK(vmmc_cq_poll(cq, c, 4) == 0); /* still waiting for the stopped peer */
        VT_CHECK(kill((pid_t)*pidp, SIGKILL) == 0);
        int n = vmmc_cq_wait(cq, c, 4, 20000);
        VT_CHECK(n == 1);
        printf("rank 0: completion after the death: %s (%s)\n", vmmc_strerror(c[0].status),
               c[0].error ? c[0].error : "no message");
        VT_CHECK(c[0].status == VMMC_ERR_PEER_DEAD && c[0].peer == 2 && c[0].context == &ctx);
        VT_CHECK(c[0].error && strstr(c[0].error, "rank 2"));
        VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_fence(ep, 2));
        VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_fence(ep, -1));
        VT_STATUS(VMMC_ERR_PEER_DEAD, vmmc_atomic_cq(pv, 0, VMMC_ATOMIC_ADD, 8, 1, 0, cq, &ctx));
        VT_OK(vmmc_cq_close(cq));
        /* Rank 1 checks, then waits for the second word: the first fence
         * cannot race with its exit; the last one may (either result). */
        int64_t done = 0x600d;
        VT_OK(vmmc_send(ph, BIG - 16, &done, 8, 0));
        VT_OK(vmmc_fence(ep, 1));
        VT_OK(vmmc_send(ph, BIG - 8, &done, 8, 0));
        int rc = vmmc_fence(ep, 1);
        VT_CHECK(rc == VMMC_OK || rc == VMMC_ERR_PEER_DEAD);
    } else {
        rank1(ncq, nex, nbuf);
        printf("rank 1: notifications ok\n");
        volatile int64_t *done = (volatile int64_t *)(void *)(heap + BIG - 16);
        double t0 = vt_now();
        while (done[0] != 0x600d && vt_now() - t0 < 30)
            vmmc_wait(ep, 10);
        VT_CHECK(done[0] == 0x600d);
        uint64_t w;
        memcpy(&w, wo, 8);
        VT_CHECK(w == 10);
        while (done[1] != 0x600d && vt_now() - t0 < 30)
            vmmc_wait(ep, 10);
        VT_CHECK(done[1] == 0x600d);
    }
    /* The survivors meet without a barrier (rank 2 is gone): rank 0 tells
     * rank 1 it is done through rank 1's memory. */
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv)
{
    vt_require_transport();
    if (argc > 1 && !strcmp(argv[1], "worker"))
        return worker();
    if (argc < 2)
        VT_FAIL("usage: t_cq <path to vmmc>");
    /* The survivors go on after rank 2's death: give them time. */
    setenv("VMMC_RUN_GRACE", "30s", 1);
    spawn_result_t *r =
        spawn_job(argv[1], 3, (const char *[]){"worker", NULL}, vt_remote() ? 160 : 100);
    VT_CHECK(spawn_said(r, "rank 0: completions ok") && spawn_said(r, "rank 1: notifications ok"));
    VT_CHECK(spawn_said(r, "rank 0: completion after the death: peer process is dead"));
    VT_CHECK(!spawn_said(r, "FAIL"));
    VT_CHECK(exit_code(r->status) == 128 + SIGKILL);
    printf("t_cq: ok (%s)\n", vt_remote() ? "udp" : "shm");
    return 0;
}
