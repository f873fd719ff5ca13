/* Ordering: sends from one process to one peer land in the order they were
 * issued, so "data, then flag" works across exports, synchronous or not,
 * with and without notification, and notifications run in send order.
 *
 * Rank 0 streams N records into slots of three data exports of rank 1 (a
 * heap one: copy path; a whole allocation: mapped on shm; another heap one),
 * each of a length and offset derived from its sequence number, every fourth
 * one asynchronous, and after each the sequence number into a flag word of a
 * fourth export. Rank 1 checks, for every flag value it sees (polling) or
 * for every notification it gets, that every record up to it is there whole;
 * it hands slots back through an acknowledgement word in rank 0's memory.
 *
 * usage: conf_order [N]   (records per mode; default 4000) */
#include <stdatomic.h>

#include "conf.h"

#define SLOTS 16
#define SLOT 3000 /* bytes per slot: a record spans 1 .. SLOT bytes */
#define NEX 3

static vmmc_ep_t *ep;
static long nrec = 4000;
static conf_region_t data[NEX], flag, ack;
static vmmc_export_t *dex[NEX];
static vmmc_proxy_t *ack_px;
static uint64_t next; /* receiver: next record expected */

static size_t rec_len(uint64_t i) { return 1 + conf_hash(i) % SLOT; }
static size_t rec_off(uint64_t i)
{
    return (i % SLOTS) * SLOT + (conf_hash(i) >> 32) % (SLOT - rec_len(i) + 1);
}
static int rec_async(uint64_t i) { return i % 4 == 3; }

/* Receiver: record @p i must be whole in its export, and the flag must not
 * be behind it. */
static void check_record(uint64_t i, const char *how)
{
    conf_region_t *r = &data[i % NEX];
    conf_check(r->p + rec_off(i), rec_len(i), i, rec_off(i), "record %llu (%s)",
               (unsigned long long)i, how);
}

static void send_ack(uint64_t v)
{
    VT_OK(vmmc_send(ack_px, 0, &v, sizeof v, 0));
}

static void on_record(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    uint64_t i = next;
    if (n->sender != 0 || n->export_ != dex[i % NEX] || n->offset != rec_off(i) ||
        n->length != rec_len(i))
        VT_FAIL("[%s] notification %llu out of order: from %d, %zu bytes at %zu of export %p; "
                "expected %zu bytes at %zu of export %p", conf_transport(),
                (unsigned long long)i, n->sender, n->length, n->offset, (void *)n->export_,
                rec_len(i), rec_off(i), (void *)dex[i % NEX]);
    if (!rec_async(i) && n->imm != i + 1)
        VT_FAIL("[%s] notification %llu carries imm %llu", conf_transport(),
                (unsigned long long)i, (unsigned long long)n->imm);
    /* The flag of record i - 1 was sent before record i. */
    if (conf_load(flag.p) < i)
        VT_FAIL("[%s] record %llu notified before flag %llu landed (flag %llu)",
                conf_transport(), (unsigned long long)i, (unsigned long long)i,
                (unsigned long long)conf_load(flag.p));
    check_record(i, "at its notification");
    next = i + 1;
    if (next % 4 == 0 || next == (uint64_t)nrec)
        send_ack(next);
}

static void run(int notify)
{
    int me = vmmc_rank(ep);
    const char *mode = notify ? "notify" : "poll";
    char name[32];
    next = 0;
    if (me == 1) {
        for (int k = 0; k < NEX; k++) {
            conf_region_alloc(ep, &data[k], k == 1 ? CONF_MEM : CONF_HEAP, SLOTS * SLOT);
            snprintf(name, sizeof name, "%s.d%d", mode, k);
            dex[k] = conf_export(ep, &data[k], name, VMMC_EXPORT_READ,
                                 notify ? on_record : NULL, NULL);
        }
        conf_region_alloc(ep, &flag, CONF_MEM, 64);
        snprintf(name, sizeof name, "%s.f", mode);
        conf_export(ep, &flag, name, VMMC_EXPORT_READ, NULL, NULL);
    } else {
        conf_region_alloc(ep, &ack, CONF_MEM, 64);
        snprintf(name, sizeof name, "%s.ack", mode);
        conf_export(ep, &ack, name, VMMC_EXPORT_READ, NULL, NULL);
    }
    if (me == 1) {
        snprintf(name, sizeof name, "%s.ack", mode);
        ack_px = conf_import(ep, 0, name); /* before the first notification */
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *dpx[NEX], *fpx;
        for (int k = 0; k < NEX; k++) {
            snprintf(name, sizeof name, "%s.d%d", mode, k);
            dpx[k] = conf_import(ep, 1, name);
        }
        snprintf(name, sizeof name, "%s.f", mode);
        fpx = conf_import(ep, 1, name);
        static unsigned char src[SLOTS][SLOT];
        static vmmc_request_t rq[SLOTS];
        static int pending[SLOTS];
        for (uint64_t i = 0; i < (uint64_t)nrec; i++) {
            unsigned s = i % SLOTS;
            CONF_POLL(ep, conf_load(ack.p) + SLOTS > i, "a free slot");
            if (pending[s]) {
                VT_OK(vmmc_request_wait(&rq[s], (int)(conf_timeout() * 1000)));
                pending[s] = 0;
            }
            size_t len = rec_len(i), off = rec_off(i);
            conf_fill(src[s], len, i, off);
            vmmc_proxy_t *px = dpx[i % NEX];
            unsigned fl = notify ? VMMC_SEND_NOTIFY : 0;
            if (rec_async(i)) {
                int rc = vmmc_send_async(px, off, src[s], len, fl, &rq[s]);
                VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
                pending[s] = rc == VMMC_INPROGRESS;
            } else {
                VT_OK(vmmc_send_imm(px, off, src[s], len, fl, i + 1));
            }
            uint64_t f = i + 1;
            VT_OK(vmmc_send(fpx, 0, &f, sizeof f, 0));
        }
        CONF_POLL(ep, conf_load(ack.p) == (uint64_t)nrec, "the last acknowledgement");
        for (unsigned s = 0; s < SLOTS; s++)
            if (pending[s])
                VT_OK(vmmc_request_wait(&rq[s], (int)(conf_timeout() * 1000)));
        for (int k = 0; k < NEX; k++)
            VT_OK(vmmc_unimport(dpx[k]));
        VT_OK(vmmc_unimport(fpx));
    } else {
        if (notify) {
            CONF_WAIT(ep, next == (uint64_t)nrec, "every notification");
        } else {
            while (next < (uint64_t)nrec) {
                uint64_t f;
                CONF_POLL(ep, (f = conf_load(flag.p)) > next, "the next flag");
                if (f > (uint64_t)nrec)
                    VT_FAIL("[%s] flag %llu past the last record", conf_transport(),
                            (unsigned long long)f);
                for (; next < f; next++)
                    check_record(next, "when its flag was seen");
                send_ack(next);
            }
        }
        VT_OK(vmmc_unimport(ack_px));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        /* Nothing more arrived (a duplicate would have been notified). */
        VT_CHECK(vmmc_progress(ep) >= 0);
        VT_CHECK(next == (uint64_t)nrec);
        VT_CHECK(conf_load(flag.p) == (uint64_t)nrec);
        for (int k = 0; k < NEX; k++) {
            conf_guard_check(&data[k]);
            VT_OK(vmmc_unexport(dex[k]));
            conf_region_free(ep, &data[k]);
        }
        conf_guard_check(&flag);
    } else {
        conf_guard_check(&ack);
    }
    VT_OK(vmmc_barrier(ep));
    conf_ok(me, "%s: %ld records in order", mode, nrec);
}

int main(int argc, char **argv)
{
    ep = conf_init(2);
    if (argc > 1)
        nrec = atol(argv[1]);
    run(0);
    run(1);
    VT_OK(vmmc_finalize(ep));
    return 0;
}
