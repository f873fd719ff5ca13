/* The fabric transport's RMA path (two ranks on tcp;ofi_rxm):
 *   puts of every size class (inline, copied, from the caller's buffer)
 *   and gets go by fi_write/fi_read (the counters fabric.rma_writes and
 *   fabric.rma_reads move, the receiver's fabric.msgs_received does not
 *   grow by one per put), the data lands, a notification after an RMA
 *   write reaches the handler with its offset, length and immediate;
 *   after the exporter unexports, a stale importer that writes and reads
 *   anyway (the transport's put/get called directly, as a process that
 *   ignores the revocation would) is refused by the provider: clear errors
 *   (VMMC_ERR_PERMISSION), counted refusals, not a byte lands, and the
 *   peers stay alive.
 * usage (a rank of `vmmc run -n 2`): t_fab_rma rma|msg
 *   msg: VMMC_FABRIC_RMA=no: the same traffic, and the RMA counters stay 0;
 *   the 64 KiB pieces of large puts are sent from the caller's buffer
 *   (fabric.zcopy_sends, with VMMC_FABRIC_ZCOPY=16K as ctest sets it) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "transport/transport.h"

#define LEN (256u * 1024)
#define BIG (200u * 1024)

static int rma;
static vmmc_ep_t *ep;
static volatile int got_note;
static uint64_t flag[8];
static vmmc_proxy_t *pf;
static vmmc_notification_t note;

static uint64_t counter(const char *want)
{
    const char *name;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &name, &v) == VMMC_OK; i++)
        if (!strcmp(name, want))
            return v;
    VT_FAIL("no counter %s", want);
    return 0;
}

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    note = *n;
    got_note++;
}

static void exporter(void)
{
    unsigned char *a = malloc(LEN);
    VT_CHECK(a != NULL);
    memset(a, 0, LEN);
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_HANDLER;
    p.name = "a";
    p.addr = a;
    p.length = LEN;
    p.flags = VMMC_EXPORT_READ;
    p.handler = on_note;
    vmmc_export_t *ex, *fex;
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "f";
    p.addr = flag;
    p.length = sizeof flag;
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    VT_OK(vmmc_export(ep, &p, &fex));
    uint64_t rx0 = counter("fabric.msgs_received");
    VT_OK(vmmc_barrier(ep)); /* 1: exported */
    VT_OK(vmmc_barrier(ep)); /* 2: the importer wrote */
    double t0 = vt_now();
    while (!got_note && vt_now() - t0 < conf_timeout())
        vmmc_wait(ep, 100);
    if (!got_note)
        VT_FAIL("the notification of an RMA put never ran");
    if (note.offset != 1000 || note.length != BIG || note.imm != 42 || note.sender != 1)
        VT_FAIL("notification: offset %zu length %zu imm %llu sender %d, expected 1000 %u 42 1",
                (size_t)note.offset, (size_t)note.length, (unsigned long long)note.imm,
                note.sender, BIG);
    /* what the importer's puts left, in the order it made them */
    unsigned char *img = calloc(1, LEN);
    conf_fill(img + 0, 8, 1, 0);
    conf_fill(img + 100, 4096, 2, 100);
    conf_fill(img + 10000, BIG, 3, 10000);
    conf_fill(img + 1000, BIG, 4, 1000);
    if (memcmp(a, img, LEN))
        VT_FAIL("the exported region does not hold what the importer put");
    uint64_t rx = counter("fabric.msgs_received") - rx0;
    if (rma) {
        if (counter("fabric.rma_regions") < 1)
            VT_FAIL("the export was not registered for RMA");
        /* the data went by RMA: only the notification, barriers and
         * control messages arrived as messages (a put of 200 KiB as
         * messages alone is 4) */
        if (rx > 12)
            VT_FAIL("%llu messages arrived for 4 RMA puts", (unsigned long long)rx);
    } else if (counter("fabric.rma_regions") != 0) {
        VT_FAIL("VMMC_FABRIC_RMA=no registered an export");
    }
    memset(a, 0x5A, LEN);
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_barrier(ep)); /* 3: unexported */
    /* the stale importer tried: it says so in a file (the provider may
     * have ended the connection it misused: tcp and verbs do) */
    char path[64];
    snprintf(path, sizeof path, "/tmp/t_fab_rma.%d", (int)getppid());
    double t1 = vt_now();
    while (access(path, F_OK) != 0 && vt_now() - t1 < conf_timeout())
        vmmc_wait(ep, 10);
    if (access(path, F_OK) != 0)
        VT_FAIL("the stale importer did not finish");
    unlink(path);
    int alive = conf_load((const void *)&flag[0]) == 1;
    for (size_t i = 0; i < LEN; i++)
        if (a[i] != 0x5A)
            VT_FAIL("byte %zu of the withdrawn region changed (0x%02x)", i, a[i]);
    printf("[fabric] rank 0: the withdrawn region is intact; rank 1 %s (%d)\n",
           alive ? "still connected" : "disconnected by the provider", alive);
    if (alive)
        VT_OK(vmmc_barrier(ep)); /* 4 */
    free(img);
    free(a);
}

static void importer(void)
{
    unsigned char *src = malloc(LEN), *dst = malloc(LEN);
    VT_CHECK(src && dst);
    VT_OK(vmmc_barrier(ep)); /* 1 */
    vmmc_proxy_t *px = conf_import(ep, 0, "a");
    pf = conf_import(ep, 0, "f");
    uint64_t w0 = counter("fabric.rma_writes"), r0 = counter("fabric.rma_reads");
    uint64_t z0 = counter("fabric.zcopy_sends");
    /* inline (fi_inject_write), copied, from the caller's buffer */
    conf_fill(src, 8, 1, 0);
    VT_OK(vmmc_send(px, 0, src, 8, 0));
    conf_fill(src, 4096, 2, 100);
    VT_OK(vmmc_send(px, 100, src, 4096, 0));
    conf_fill(src, BIG, 3, 10000);
    VT_OK(vmmc_send(px, 10000, src, BIG, 0));
    /* with a notification, over the previous one */
    conf_fill(src, BIG, 4, 1000);
    VT_OK(vmmc_send_imm(px, 1000, src, BIG, VMMC_SEND_NOTIFY, 42));
    memset(dst, 0, LEN);
    VT_OK(vmmc_fetch(px, 1000, dst, BIG));
    long bad = conf_mismatch(dst, BIG, 4, 1000);
    if (bad >= 0)
        VT_FAIL("fetch after the put: byte %ld differs", bad);
    uint64_t w = counter("fabric.rma_writes") - w0, r = counter("fabric.rma_reads") - r0;
    if (rma && (w < 4 || r < 1))
        VT_FAIL("%llu RMA writes and %llu reads for 4 puts and a fetch",
                (unsigned long long)w, (unsigned long long)r);
    if (!rma && (w || r))
        VT_FAIL("VMMC_FABRIC_RMA=no made %llu RMA writes, %llu reads", (unsigned long long)w,
                (unsigned long long)r);
    /* as messages, the 64 KiB pieces of the two 200 KiB puts go from the
     * source itself (VMMC_FABRIC_ZCOPY, when set); by RMA no message
     * carries data */
    uint64_t z = counter("fabric.zcopy_sends") - z0;
    const char *zs = getenv("VMMC_FABRIC_ZCOPY");
    if (!rma && zs && strcmp(zs, "0") && z < 6)
        VT_FAIL("%llu messages sent from the caller's buffer for two 200 KiB puts",
                (unsigned long long)z);
    if (rma && z)
        VT_FAIL("%llu messages from the caller's buffer on the RMA path", (unsigned long long)z);
    VT_OK(vmmc_barrier(ep)); /* 2 */
    VT_OK(vmmc_barrier(ep)); /* 3: the export is gone */
    /* the core refuses: the proxy is stale */
    VT_STATUS(VMMC_ERR_STALE, vmmc_send(px, 0, src, 8, 0));
    /* A process that ignores the revocation (its proxy made active again,
     * the transport called directly): the provider refuses, or ends the
     * connection; it gets errors, never a crash, and nothing lands. */
    vmmc_tl_proxy_t *v = VMMC_TL_PX(px);
    atomic_store(&v->state, PX_ACTIVE);
    conf_fill(src, LEN, 9, 0);
    /* a read first: waited for, its refusal comes back to it (the
     * connection the provider ends after it is not used again: libfabric
     * 1.17's rxm may crash on operations posted to a connection that broke
     * under them) */
    int rc = v->get(v, 0, dst, 4096);
    printf("[fabric] rank 1: stale get: %d (%s)\n", rc, rc ? vmmc_last_error() : "");
    if (rma) {
        if (rc == VMMC_OK)
            VT_FAIL("a read of a withdrawn region succeeded");
        if (rc != VMMC_ERR_PERMISSION && rc != VMMC_ERR_PEER_DEAD &&
            rc != VMMC_ERR_PEER_UNREACHABLE)
            VT_FAIL("a read of a withdrawn region: %d (%s)", rc, vmmc_strerror(rc));
        if (!vmmc_last_error()[0])
            VT_FAIL("a refused read without a message");
    }
    int fr = rc == VMMC_OK || rc == VMMC_ERR_PERMISSION ? VMMC_OK : rc;
    if (fr == VMMC_OK) {
        rc = v->put(v, 0, src, BIG, 0, 0);
        printf("[fabric] rank 1: stale put: %d (%s)\n", rc, rc ? vmmc_last_error() : "");
    }
    atomic_store(&v->state, PX_STALE);
    char path[64];
    snprintf(path, sizeof path, "/tmp/t_fab_rma.%d", (int)getppid());
    if (fr == VMMC_OK) {
        uint64_t one = 1;
        VT_OK(vmmc_send(pf, 0, &one, sizeof one, 0));
        VT_OK(vmmc_fence(ep, 0));
    }
    FILE *fp = fopen(path, "w");
    VT_CHECK(fp != NULL);
    fclose(fp);
    if (fr == VMMC_OK)
        VT_OK(vmmc_barrier(ep)); /* 4 */
    VT_OK(vmmc_unimport(px));
    free(src);
    free(dst);
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "rma") && strcmp(argv[1], "msg"))) {
        fprintf(stderr, "usage: t_fab_rma rma|msg (a rank of vmmc run -n 2)\n");
        return 2;
    }
    rma = !strcmp(argv[1], "rma");
    ep = conf_init(2);
    if (vmmc_rank(ep) == 0)
        exporter();
    else
        importer();
    VT_OK(vmmc_finalize(ep));
    printf("[%s] rank ok\n", argv[1]);
    return 0;
}
