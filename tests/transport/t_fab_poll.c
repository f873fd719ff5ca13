/* A thread that drives a fabric endpoint reads its receive queue itself
 * (two ranks on tcp;ofi_rxm, VMMC_FABRIC_SPIN=0 so that the progress
 * thread sleeps as soon as it is idle):
 *   - a ping-pong of puts, each side spinning on vmmc_progress for the
 *     peer's word: every value arrives, in order, and (on the message
 *     path, mode msg) the polling thread took receives itself
 *     (fabric.rx_polled grows);
 *   - notified puts, the handler run by the polling thread: every
 *     notification, in order, with its offset and immediate;
 *   - gets on the message path answered by a target that polls in one
 *     thread while another of its threads sleeps in vmmc_wait and a third
 *     puts to the requester: every answer holds the bytes asked for.
 * usage (a rank of `vmmc run -n 2`): t_fab_poll rma|msg */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

#define ROUNDS 2000
#define NOTES 500
#define GETS 300
#define PUTS 3000
#define LEN (64u * 1024)

static vmmc_ep_t *ep;
static int rank, rma;
static unsigned char *region;
static volatile uint64_t notes_seen;
static volatile int notes_bad;
static _Atomic int stop_threads;

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    /* the i-th notification names offset 64 * (i % 100) and immediate i */
    uint64_t i = notes_seen;
    if (n->imm != i % 256 || n->offset != 64 * (i % 100) + 8192 || n->length != 64 ||
        n->sender != 1 - rank)
        notes_bad = 1;
    notes_seen = i + 1;
}

/* Spin on vmmc_progress until the word at @off holds @val. */
static void spin_for(size_t off, uint64_t val)
{
    double t0 = vt_now();
    for (unsigned long s = 0; conf_load(region + off) < val; s++) {
        vmmc_progress(ep);
        if ((s & 0xfff) == 0xfff && vt_now() - t0 > conf_timeout())
            VT_FAIL("rank %d: word %zu stayed %llu, waiting for %llu", rank, off,
                    (unsigned long long)conf_load(region + off), (unsigned long long)val);
    }
}

static void *poller(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_threads))
        vmmc_progress(ep);
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_threads))
        (void)vmmc_wait(ep, 5);
    return NULL;
}

static void *putter(void *arg)
{
    vmmc_proxy_t *px = arg;
    unsigned char buf[256];
    /* bounded: an endless stream would hold the peer's answers back (they
     * share this sender's turn to send) */
    for (uint64_t i = 0; i < PUTS && !atomic_load(&stop_threads); i++) {
        conf_fill(buf, sizeof buf, 7 + i, 0);
        if (vmmc_send(px, 32768 + (i % 64) * 256, buf, sizeof buf, 0) != VMMC_OK)
            VT_FAIL("a put beside the gets failed: %s", vmmc_last_error());
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "rma") && strcmp(argv[1], "msg"))) {
        fprintf(stderr, "usage: t_fab_poll rma|msg (a rank of vmmc run -n 2)\n");
        return 2;
    }
    rma = !strcmp(argv[1], "rma");
    ep = conf_init(2);
    rank = vmmc_rank(ep);
    conf_region_t r;
    conf_region_alloc(ep, &r, CONF_MEM, LEN);
    region = r.p;
    vmmc_export_t *ex = conf_export(ep, &r, "r", VMMC_EXPORT_READ, on_note, NULL);
    VT_OK(vmmc_barrier(ep));
    vmmc_proxy_t *px = conf_import(ep, 1 - rank, "r");
    VT_OK(vmmc_barrier(ep));
    uint64_t polled0 = vt_counter(ep, "fabric.rx_polled");

    /* 1. ping-pong: rank 0 writes word 0 of rank 1, rank 1 answers into
     * word 0 of rank 0; each spins on vmmc_progress */
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        if (rank == 1)
            spin_for(0, i);
        VT_OK(vmmc_send(px, 0, &i, sizeof i, 0));
        if (rank == 0)
            spin_for(0, i);
    }
    VT_OK(vmmc_barrier(ep));
    uint64_t polled = vt_counter(ep, "fabric.rx_polled") - polled0;
    printf("[%s] rank %d: %d round trips, %llu receive-queue reads by the polling thread\n",
           argv[1], rank, ROUNDS, (unsigned long long)polled);
    if (!rma && polled == 0)
        VT_FAIL("rank %d: the polling thread took none of %d messages", rank, ROUNDS);

    /* 2. notified puts from rank 1, handled while rank 0 polls */
    if (rank == 1) {
        unsigned char buf[64];
        for (uint64_t i = 0; i < NOTES; i++) {
            conf_fill(buf, sizeof buf, 100 + i, 0);
            VT_OK(vmmc_send_imm(px, 64 * (i % 100) + 8192, buf, sizeof buf, VMMC_SEND_NOTIFY,
                                i % 256));
        }
    } else {
        double t0 = vt_now();
        while (notes_seen < NOTES && vt_now() - t0 < conf_timeout())
            vmmc_progress(ep);
        if (notes_seen != NOTES || notes_bad)
            VT_FAIL("%llu of %d notifications ran%s", (unsigned long long)notes_seen, NOTES,
                    notes_bad ? ", some out of order or wrong" : "");
        /* the last of each offset holds its put's bytes */
        for (uint64_t i = NOTES - 100; i < NOTES; i++)
            if (conf_mismatch(region + 64 * (i % 100) + 8192, 64, 100 + i, 0) >= 0)
                VT_FAIL("notified put %llu: its bytes did not land", (unsigned long long)i);
    }
    VT_OK(vmmc_barrier(ep));

    /* 3. gets from rank 0 of what rank 1 wrote into its own region; rank 1
     * polls in one thread, sleeps in vmmc_wait in another and puts to
     * rank 0 from a third */
    if (rank == 1)
        conf_fill(region + 16384, 8192, 55, 0);
    VT_OK(vmmc_barrier(ep));
    pthread_t th[3];
    int nth = 0;
    if (rank == 1) {
        VT_CHECK(pthread_create(&th[nth++], NULL, poller, NULL) == 0);
        VT_CHECK(pthread_create(&th[nth++], NULL, sleeper, NULL) == 0);
        VT_CHECK(pthread_create(&th[nth++], NULL, putter, px) == 0);
    }
    if (rank == 0) {
        unsigned char got[8192];
        for (int i = 0; i < GETS; i++) {
            size_t off = (size_t)(i * 97) % 4096, n = 64 + (size_t)(i * 31) % 4096;
            memset(got, 0, sizeof got);
            VT_OK(vmmc_fetch(px, 16384 + off, got, n));
            long bad = conf_mismatch(got, n, 55, off);
            if (bad >= 0)
                VT_FAIL("get %d (%zu bytes at %zu): byte %ld differs", i, n, off, bad);
        }
        uint64_t done = 1;
        VT_OK(vmmc_send(px, 24576, &done, sizeof done, 0));
    } else {
        spin_for(24576, 1);
    }
    atomic_store(&stop_threads, 1);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_finalize(ep));
    printf("[%s] rank ok\n", argv[1]);
    return 0;
}
