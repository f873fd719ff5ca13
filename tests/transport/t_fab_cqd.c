/* Notifications as remote CQ data on the fabric transport's RMA path
 * (tcp;ofi_rxm; docs/fabric.md "Notifications").
 *
 * order (2 ranks): rank 1 sends batches of notified puts of mixed sizes,
 *   offsets and immediates to rank 0, some that fit the CQ data encoding
 *   (one fi_writedata) and some that do not (the data, then a NOTE
 *   message), puts and gather puts; rank 0 checks every notification in
 *   order (offset, length, immediate, sender) and the data of each batch,
 *   then lets the next batch go. Then a flood of small notified puts, one in
 *   five with an immediate that does not fit, into a notification queue
 *   kept small (VMMC_NOTIFY_QUEUE) and drained late: the immediates must
 *   come in the order sent. With VMMC_FABRIC_CQ_DATA=yes (the default)
 *   fabric.notes_cq_data must grow, with no it must stay 0;
 *   fabric.bad_cq_data stays 0 either way.
 * hostile (3 ranks): rank 2 issues fi_writedata with forged CQ data, using
 *   the key of its own legitimate import (a raw endpoint could not get a
 *   key: keys travel only in import replies) and the endpoint of its vmmc
 *   process: a slot nobody has, rank 1's slot with a wrong check (rank 1
 *   hands its slot word over through a file, as a leak would), its own slot
 *   with a wrong check, its own slot of a small export with a range beyond
 *   it, and the slot of an export that ended. Each is dropped and counted
 *   (fabric.bad_cq_data), no notification runs, and legitimate notified
 *   puts from both importers still arrive. The two wrong checks retire
 *   their slots (fabric.cqd_slots_retired 2): once rank 2 was told and
 *   answered, CQ data naming its retired slot is refused even with the
 *   right check, and its notifications still come (as NOTE messages).
 *   Each slot's importer is told once (fabric.cqd_retire_msgs 2), though
 *   rank 2 guesses at its own slot three times. (Before that answer, the
 *   right check of another importer's slot would pass: the provider names
 *   no sender of CQ data; docs/fabric.md.) Then x ends and rank 2 imports
 *   two new exports, which get the slot numbers x had (one of them the
 *   number retired for rank 2): notifications on both go as CQ data again.
 * usage (a rank of `vmmc run -n 2|3`): t_fab_cqd order|hostile */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "transport/fabric/fab_int.h"
#include "transport/transport.h"

static vmmc_ep_t *ep;

typedef struct rec {
    size_t off, len;
    uint64_t imm;
    int sender;
    void *ex;
} rec_t;
#define NREC 8192
static rec_t recs[NREC];
static volatile int nrec;

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    if (nrec < NREC)
        recs[nrec] = (rec_t){n->offset, n->length, n->imm, n->sender, n->export_};
    nrec++;
}

static int cq_data_on(void)
{
    const char *s = getenv("VMMC_FABRIC_CQ_DATA");
    return !s || (strcmp(s, "no") && strcmp(s, "0") && strcmp(s, "off"));
}

/* ---- order --------------------------------------------------------------- */

/* One batch: disjoint ranges, so each one's data can be checked at the
 * end. fits: the CQ data encoding holds it (offset < 16 KiB, length 1..16
 * KiB, immediate < 256). */
static const struct {
    size_t off, len;
    uint64_t imm;
    int gather;
} batch[] = {
    {0, 8, 1, 0},            /* fits */
    {8, 56, 2, 1},           /* fits, gather */
    {64, 1000, 255, 0},      /* fits: the largest immediate */
    {1064, 3032, 0, 0},      /* fits */
    {4096, 4096, 256, 0},    /* NOTE: immediate */
    {8192, 4000, 7, 0},      /* fits */
    {12192, 300, 11, 1},     /* fits, gather */
    {12492, 3891, 1ull << 40, 0}, /* NOTE: immediate */
    {16383, 1, 12, 0},       /* fits: the last offset */
    {16384, 100, 3, 0},      /* NOTE: offset */
    {16484, 20000, 4, 0},    /* NOTE: length (and from the caller's buffer) */
    {36484, 16384, 5, 1},    /* NOTE: offset, gather */
};
#define NB (int)(sizeof batch / sizeof batch[0])
#define BATCHES 60
#define REGION (64u * 1024)
#define FLOOD 3000

static uint64_t flood_imm(int i)
{
    return i % 5 == 4 ? 1000 + (uint64_t)i : (uint64_t)(i % 256);
}

static void order_exporter(void)
{
    static unsigned char r[REGION]; /* (static: exported until the end) */
    conf_region_t reg = {.p = r, .len = REGION};
    conf_export(ep, &reg, "r", 0, on_note, NULL);
    VT_OK(vmmc_barrier(ep)); /* 1: exported */
    VT_OK(vmmc_barrier(ep)); /* 2: rank 1's ack region is exported */
    vmmc_proxy_t *pa = conf_import(ep, 1, "ack");
    uint64_t n0 = vt_counter(ep, "fabric.notes_cq_data");
    for (int b = 0; b < BATCHES; b++) {
        CONF_WAIT(ep, nrec >= (b + 1) * NB, "a batch's notifications");
        for (int j = 0; j < NB; j++) {
            const rec_t *x = &recs[b * NB + j];
            if (x->off != batch[j].off || x->len != batch[j].len || x->imm != batch[j].imm ||
                x->sender != 1)
                VT_FAIL("batch %d notification %d: offset %zu length %zu imm %llu sender %d, "
                        "expected %zu %zu %llu 1", b, j, x->off, x->len,
                        (unsigned long long)x->imm, x->sender, batch[j].off, batch[j].len,
                        (unsigned long long)batch[j].imm);
            conf_check(r + batch[j].off, batch[j].len, (uint64_t)(b * 64 + j), batch[j].off,
                       "batch %d put %d: data", b, j);
        }
        uint64_t v = (uint64_t)b + 1;
        VT_OK(vmmc_send(pa, 0, &v, sizeof v, 0));
    }
    if (nrec != BATCHES * NB)
        VT_FAIL("%d notifications, expected %d", nrec, BATCHES * NB);
    /* the flood: drained late into a small queue */
    nrec = 0;
    VT_OK(vmmc_barrier(ep)); /* 3: flood starts */
    usleep(200000);
    CONF_WAIT(ep, nrec >= FLOOD, "the flood's notifications");
    for (int i = 0; i < FLOOD; i++)
        if (recs[i].imm != flood_imm(i) || recs[i].len != 8 || recs[i].off != (size_t)(i % 64) * 8)
            VT_FAIL("flood notification %d: imm %llu offset %zu length %zu, expected %llu %zu 8",
                    i, (unsigned long long)recs[i].imm, recs[i].off, recs[i].len,
                    (unsigned long long)flood_imm(i), (size_t)(i % 64) * 8);
    uint64_t fast = vt_counter(ep, "fabric.notes_cq_data") - n0;
    uint64_t bad = vt_counter(ep, "fabric.bad_cq_data");
    printf("[fabric] rank 0: %d notifications checked, %llu as CQ data, %llu bad\n",
           BATCHES * NB + FLOOD, (unsigned long long)fast, (unsigned long long)bad);
    /* every one that fits in the batches (their sender waits for each
     * batch: its messages are acknowledged); some of the flood's (a sender
     * that runs FAB_CQD_WINDOW messages ahead of the receiver falls back to
     * NOTE messages until they are handled) */
    if (cq_data_on() && fast <= (uint64_t)BATCHES * 7)
        VT_FAIL("%llu notifications as CQ data, expected more than %d",
                (unsigned long long)fast, BATCHES * 7);
    if (!cq_data_on() && fast)
        VT_FAIL("VMMC_FABRIC_CQ_DATA=no, yet %llu notifications as CQ data",
                (unsigned long long)fast);
    if (bad)
        VT_FAIL("%llu CQ data dropped in a job without forgeries", (unsigned long long)bad);
    VT_OK(vmmc_barrier(ep)); /* 4: done */
    VT_OK(vmmc_unimport(pa));
}

static void order_importer(void)
{
    unsigned char *src = malloc(REGION);
    static volatile uint64_t ack[8]; /* (static: exported until the end) */
    VT_CHECK(src != NULL);
    VT_OK(vmmc_barrier(ep)); /* 1 */
    vmmc_proxy_t *px = conf_import(ep, 0, "r");
    conf_region_t reg = {.p = (void *)ack, .len = 64};
    conf_export(ep, &reg, "ack", 0, NULL, NULL);
    VT_OK(vmmc_barrier(ep)); /* 2 */
    for (int b = 0; b < BATCHES; b++) {
        for (int j = 0; j < NB; j++) {
            size_t off = batch[j].off, len = batch[j].len;
            conf_fill(src + off, len, (uint64_t)(b * 64 + j), off);
            if (!batch[j].gather) {
                VT_OK(vmmc_send_imm(px, off, src + off, len, VMMC_SEND_NOTIFY, batch[j].imm));
                continue;
            }
            /* three pieces, the middle one empty */
            vmmc_iov_t iov[3] = {{src + off, len / 3}, {src + off, 0},
                                 {src + off + len / 3, len - len / 3}};
            VT_OK(vmmc_sendv(px, off, iov, 3, VMMC_SEND_NOTIFY, batch[j].imm));
        }
        CONF_POLL(ep, *ack == (uint64_t)b + 1, "a batch's acknowledgement");
    }
    VT_OK(vmmc_barrier(ep)); /* 3 */
    for (int i = 0; i < FLOOD; i++) {
        uint64_t v = (uint64_t)i;
        VT_OK(vmmc_send_imm(px, (size_t)(i % 64) * 8, &v, 8, VMMC_SEND_NOTIFY, flood_imm(i)));
    }
    VT_OK(vmmc_barrier(ep)); /* 4 */
    VT_OK(vmmc_unimport(px));
    free(src);
}

/* ---- hostile ------------------------------------------------------------- */

static unsigned char junk[64];

/* What a process that holds a key of the target's (its import of @px)
 * can do beyond vmmc: fi_writedata of 8 bytes at @off with CQ data @data
 * (the sequence field made the one due now, so that the target decides at
 * once). The completion frees the tx as for the transport's own. */
static void forge(vmmc_proxy_t *px, size_t off, uint64_t data)
{
    vmmc_tl_proxy_t *v = VMMC_TL_PX(px);
    const fab_rpx_t *r = v->tl_priv;
    VT_CHECK(r != NULL);
    fab_ep_t *f = F(v->ep);
    fab_peer_t *p = fab_peer_of(f, v->rank);
    VT_CHECK(p != NULL);
    fab_tx_t *tx = calloc(1, sizeof *tx);
    VT_CHECK(tx != NULL);
    tx->peer = v->rank;
    tx->rma = 1;
    atomic_init(&tx->wstat, VMMC_INPROGRESS);
    pthread_mutex_lock(&p->seqlock);
    data |= (uint64_t)(p->tx_seq & FAB_CQD_SEQ_MASK) << 36;
    ssize_t rc;
    while ((rc = fi_writedata(f->fep, junk, 8, NULL, data, p->fa, r->base + off, r->key,
                              &tx->ctx)) == -FI_EAGAIN)
        (void)vmmc_fab__tx_progress(f);
    pthread_mutex_unlock(&p->seqlock);
    if (rc)
        VT_FAIL("fi_writedata: %zd", rc);
    vmmc_fab__posted(f);
}

static void path_of(char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/t_fab_cqd.%d", (int)getppid());
}

static void hostile_exporter(void)
{
    static unsigned char x[16384], y[4096]; /* (static: exported until the end) */
    conf_region_t rx = {.p = x, .len = 16384}, ry = {.p = y, .len = 4096};
    vmmc_export_t *ex = conf_export(ep, &rx, "x", 0, on_note, NULL);
    vmmc_export_t *ey = conf_export(ep, &ry, "y", 0, on_note, NULL);
    VT_OK(vmmc_barrier(ep)); /* 1: exported */
    VT_OK(vmmc_barrier(ep)); /* 2: imported, rank 1's slot word is out */
    VT_OK(vmmc_barrier(ep)); /* 3: rank 2 forged 4 times, then both sent one each */
    CONF_WAIT(ep, nrec >= 2, "the legitimate notifications");
    double t0 = vt_now();
    while (vt_now() - t0 < 0.3)
        vmmc_wait(ep, 20);
    uint64_t bad = vt_counter(ep, "fabric.bad_cq_data");
    printf("[fabric] rank 0: %d notifications, fabric.bad_cq_data %llu\n", nrec,
           (unsigned long long)bad);
    if (nrec != 2)
        VT_FAIL("%d notifications ran, expected the 2 legitimate ones", nrec);
    for (int i = 0; i < 2; i++) {
        int want_imm = recs[i].sender == 1 ? 66 : 77;
        if ((recs[i].sender != 1 && recs[i].sender != 2) || recs[i].imm != (uint64_t)want_imm ||
            recs[i].off != 100 || recs[i].len != 8)
            VT_FAIL("notification %d: sender %d imm %llu offset %zu length %zu", i,
                    recs[i].sender, (unsigned long long)recs[i].imm, recs[i].off, recs[i].len);
    }
    if (recs[0].sender == recs[1].sender)
        VT_FAIL("both notifications from rank %d", recs[0].sender);
    if (bad != 6)
        VT_FAIL("fabric.bad_cq_data %llu after 6 forgeries", (unsigned long long)bad);
    /* (the two importers' slots were retired meanwhile: their notifications
     * went as CQ data or, once told, as NOTE messages) */
    uint64_t ncqd = vt_counter(ep, "fabric.notes_cq_data");
    if (ncqd > 2)
        VT_FAIL("fabric.notes_cq_data %llu, at most 2", (unsigned long long)ncqd);
    if (vt_counter(ep, "fabric.cqd_slots_retired") != 2)
        VT_FAIL("fabric.cqd_slots_retired %llu after wrong checks on 2 slots",
                (unsigned long long)vt_counter(ep, "fabric.cqd_slots_retired"));
    if (vt_counter(ep, "fabric.cqd_retire_msgs") != 2)
        VT_FAIL("fabric.cqd_retire_msgs %llu after 4 wrong checks on 2 slots: each importer "
                "is told once", (unsigned long long)vt_counter(ep, "fabric.cqd_retire_msgs"));
    VT_OK(vmmc_unexport(ey));
    VT_OK(vmmc_barrier(ep)); /* 4: y is gone */
    VT_OK(vmmc_barrier(ep)); /* 5: rank 2 forged with y's slot, then sent one more */
    CONF_WAIT(ep, nrec >= 3, "the last legitimate notification");
    t0 = vt_now();
    while (vt_now() - t0 < 0.3)
        vmmc_wait(ep, 20);
    bad = vt_counter(ep, "fabric.bad_cq_data");
    if (nrec != 3 || recs[2].sender != 2 || recs[2].imm != 78)
        VT_FAIL("%d notifications (the last from %d, imm %llu), expected 3, the last from 2 "
                "with 78", nrec, recs[2].sender, (unsigned long long)recs[2].imm);
    if (bad != 7)
        VT_FAIL("fabric.bad_cq_data %llu after 7 forgeries", (unsigned long long)bad);
    VT_OK(vmmc_barrier(ep)); /* 6 */
    VT_OK(vmmc_barrier(ep)); /* 7: rank 2 forged its retired slot with the right check, then
                                sent one more */
    CONF_WAIT(ep, nrec >= 4, "the notification after the retirement");
    t0 = vt_now();
    while (vt_now() - t0 < 0.3)
        vmmc_wait(ep, 20);
    bad = vt_counter(ep, "fabric.bad_cq_data");
    printf("[fabric] rank 0: after the retirement, %d notifications, fabric.bad_cq_data %llu\n",
           nrec, (unsigned long long)bad);
    if (nrec != 4 || recs[3].sender != 2 || recs[3].imm != 79)
        VT_FAIL("%d notifications (the last from %d, imm %llu), expected 4, the last from 2 "
                "with 79", nrec, recs[3].sender, (unsigned long long)recs[3].imm);
    if (bad != 8)
        VT_FAIL("fabric.bad_cq_data %llu: CQ data with the right check on a retired slot was "
                "not refused", (unsigned long long)bad);
    if (vt_counter(ep, "fabric.notes_cq_data") != ncqd)
        VT_FAIL("CQ data taken on a retired slot");
    if (vt_counter(ep, "fabric.cqd_retire_msgs") != 2)
        VT_FAIL("fabric.cqd_retire_msgs %llu: a retired slot's importer told again",
                (unsigned long long)vt_counter(ep, "fabric.cqd_retire_msgs"));
    VT_OK(vmmc_barrier(ep)); /* 8 */
    /* x ends (its slots are free again); two new exports for rank 2 take
     * the lowest free slot numbers, x's */
    VT_OK(vmmc_unexport(ex));
    static unsigned char z[2][4096];
    conf_region_t rz0 = {.p = z[0], .len = 4096}, rz1 = {.p = z[1], .len = 4096};
    conf_export(ep, &rz0, "z0", 0, on_note, NULL);
    conf_export(ep, &rz1, "z1", 0, on_note, NULL);
    VT_OK(vmmc_barrier(ep)); /* 9: x gone, z0 and z1 exported */
    VT_OK(vmmc_barrier(ep)); /* 10: rank 2 sent a notified put to each */
    CONF_WAIT(ep, nrec >= 6, "the notifications on the new exports");
    for (int i = 4; i < 6; i++)
        if (recs[i].sender != 2 || (recs[i].imm != 80 && recs[i].imm != 81))
            VT_FAIL("notification %d: sender %d imm %llu, expected rank 2's 80 and 81", i,
                    recs[i].sender, (unsigned long long)recs[i].imm);
    uint64_t now = vt_counter(ep, "fabric.notes_cq_data");
    printf("[fabric] rank 0: on the slots x had, %llu of 2 notifications as CQ data\n",
           (unsigned long long)(now - ncqd));
    if (now - ncqd != 2)
        VT_FAIL("%llu of the 2 notifications on reused slot numbers went as CQ data, not 2: "
                "the importer kept an old retirement", (unsigned long long)(now - ncqd));
    VT_OK(vmmc_barrier(ep)); /* 11 */
}

static void hostile_importer(int me)
{
    char path[64];
    path_of(path, sizeof path);
    VT_OK(vmmc_barrier(ep)); /* 1 */
    vmmc_proxy_t *px = conf_import(ep, 0, "x"), *py = me == 2 ? conf_import(ep, 0, "y") : NULL;
    uint32_t word = ((const fab_rpx_t *)VMMC_TL_PX(px)->tl_priv)->nslot;
    if (!(word & FAB_NSLOT_VALID))
        VT_FAIL("no notification slot granted (VMMC_FABRIC_CQ_DATA=yes on tcp;ofi_rxm)");
    static uint32_t wy;
    if (py)
        wy = ((const fab_rpx_t *)VMMC_TL_PX(py)->tl_priv)->nslot;
    if (me == 1) {
        FILE *fp = fopen(path, "w");
        VT_CHECK(fp != NULL);
        fprintf(fp, "%u\n", word);
        fclose(fp);
    }
    VT_OK(vmmc_barrier(ep)); /* 2 */
    uint64_t v = 1234;
    if (me == 2) {
        unsigned w1 = 0;
        FILE *fp = fopen(path, "r");
        VT_CHECK(fp != NULL && fscanf(fp, "%u", &w1) == 1);
        fclose(fp);
        unlink(path);
        /* a slot nobody has (the three in use are low numbers) */
        forge(px, 0, fab_cqd_make(FAB_NSLOT_VALID | 1000u, 0, 8, 1));
        /* rank 1's slot, a wrong check */
        forge(px, 0, fab_cqd_make(w1 ^ (0x5au << 16), 0, 8, 2));
        /* our own slot, a wrong check, three times (the target tells us once) */
        for (unsigned k = 1; k <= 3; k++)
            forge(px, 0, fab_cqd_make(word ^ (k << 16), 0, 8, 3));
        /* our own slot of y (4096 bytes): a range beyond its end */
        forge(px, 0, fab_cqd_make(wy, 4000, 200, 4));
        VT_OK(vmmc_send_imm(px, 100, &v, 8, VMMC_SEND_NOTIFY, 77));
        VT_OK(vmmc_fence(ep, 0));
    } else {
        VT_OK(vmmc_send_imm(px, 100, &v, 8, VMMC_SEND_NOTIFY, 66));
        VT_OK(vmmc_fence(ep, 0));
    }
    VT_OK(vmmc_barrier(ep)); /* 3 */
    VT_OK(vmmc_barrier(ep)); /* 4: y is gone */
    if (me == 2) {
        forge(px, 0, fab_cqd_make(wy, 0, 8, 5)); /* the slot of an ended export */
        VT_OK(vmmc_send_imm(px, 100, &v, 8, VMMC_SEND_NOTIFY, 78));
        VT_OK(vmmc_fence(ep, 0));
    }
    VT_OK(vmmc_barrier(ep)); /* 5 */
    VT_OK(vmmc_barrier(ep)); /* 6 */
    if (me == 2) {
        /* the target told us our slot of x is retired (we forged a wrong
         * check on it): wait until we took that in and answered */
        vmmc_tl_proxy_t *tv = VMMC_TL_PX(px);
        fab_peer_t *p = fab_peer_of(F(tv->ep), 0);
        unsigned slot = word & (FAB_CQD_SLOTS - 1);
        int told = 0;
        for (double t0 = vt_now(); !told && vt_now() - t0 < conf_timeout();) {
            pthread_mutex_lock(&p->seqlock);
            told = (p->ns_retired[slot / 64] >> (slot % 64)) & 1;
            pthread_mutex_unlock(&p->seqlock);
            if (!told)
                vmmc_wait(ep, 10);
        }
        if (!told)
            VT_FAIL("rank 0 never retired our notification slot %u", slot);
        /* the right check now: refused all the same */
        forge(px, 0, fab_cqd_make(word, 0, 8, 6));
        VT_OK(vmmc_send_imm(px, 100, &v, 8, VMMC_SEND_NOTIFY, 79));
        VT_OK(vmmc_fence(ep, 0));
    }
    VT_OK(vmmc_barrier(ep)); /* 7 */
    VT_OK(vmmc_barrier(ep)); /* 8 */
    VT_OK(vmmc_unimport(px));
    if (py)
        vmmc_unimport(py); /* stale: its export ended */
    VT_OK(vmmc_barrier(ep)); /* 9: x gone, z0 and z1 exported */
    if (me == 2) {
        vmmc_proxy_t *pz[2] = {conf_import(ep, 0, "z0"), conf_import(ep, 0, "z1")};
        unsigned old = word & (FAB_CQD_SLOTS - 1), got[2];
        for (int i = 0; i < 2; i++) {
            uint32_t w = ((const fab_rpx_t *)VMMC_TL_PX(pz[i])->tl_priv)->nslot;
            if (!(w & FAB_NSLOT_VALID))
                VT_FAIL("no notification slot for z%d", i);
            got[i] = w & (FAB_CQD_SLOTS - 1);
        }
        if (got[0] != old && got[1] != old)
            VT_FAIL("z0 and z1 got slots %u and %u, not x's %u: this test needs the number "
                    "reused", got[0], got[1], old);
        VT_OK(vmmc_send_imm(pz[0], 100, &v, 8, VMMC_SEND_NOTIFY, 80));
        VT_OK(vmmc_send_imm(pz[1], 100, &v, 8, VMMC_SEND_NOTIFY, 81));
        VT_OK(vmmc_fence(ep, 0));
        VT_OK(vmmc_unimport(pz[0]));
        VT_OK(vmmc_unimport(pz[1]));
    }
    VT_OK(vmmc_barrier(ep)); /* 10 */
    VT_OK(vmmc_barrier(ep)); /* 11 */
}

int main(int argc, char **argv)
{
    int hostile = argc >= 2 && !strcmp(argv[1], "hostile");
    if (argc < 2 || (!hostile && strcmp(argv[1], "order"))) {
        fprintf(stderr, "usage: t_fab_cqd order|hostile (a rank of vmmc run -n 2|3)\n");
        return 2;
    }
    ep = conf_init(hostile ? 3 : 2);
    int me = vmmc_rank(ep);
    if (hostile && !cq_data_on())
        VT_SKIP("VMMC_FABRIC_CQ_DATA=no");
    if (me == 0)
        hostile ? hostile_exporter() : order_exporter();
    else if (hostile)
        hostile_importer(me);
    else
        order_importer();
    VT_OK(vmmc_finalize(ep));
    printf("[%s] rank %d ok\n", argv[1], me);
    return 0;
}
