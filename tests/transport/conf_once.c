/* Exactly once: every rank sends N notified writes to every other rank at
 * the same time, each carrying its sequence number; each receiver counts
 * them per sender and fails on a duplicate, a gap or a reordering, and at the
 * end on a count other than N. Every third send is VMMC_SEND_NONBLOCK and
 * retried on VMMC_ERR_AGAIN (a refused send must deliver nothing), every
 * fifth is of length 0. Under injected loss and duplication (udp_lossy) the
 * link must hide both.
 *
 * usage: conf_once [N]   (default 20000) */
#include "conf.h"

#define MAXR 8
#define SLOTS 64
#define SLOT 64

static vmmc_ep_t *ep;
static long nmsg = 20000;
static uint64_t got[MAXR];  /* notifications from each sender */
static uint64_t ends;       /* senders whose last notification came */

static size_t msg_len(uint64_t i) { return i % 5 == 0 ? 0 : 1 + conf_hash(i) % SLOT; }

static void on_msg(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)arg;
    int s = n->sender;
    if (s < 0 || s >= vmmc_size(e) || s == vmmc_rank(e))
        VT_FAIL("[%s] notification from rank %d", conf_transport(), s);
    uint64_t i = got[s];
    if (n->imm != i + 1)
        VT_FAIL("[%s] from rank %d: notification %llu where %llu was due (%s)", conf_transport(),
                s, (unsigned long long)n->imm, (unsigned long long)i + 1,
                n->imm <= i ? "a duplicate" : "a gap or reordering");
    size_t off = ((size_t)s * SLOTS + i % SLOTS) * SLOT;
    if (n->offset != off || n->length != msg_len(i))
        VT_FAIL("[%s] from rank %d: notification %llu for %zu bytes at %zu, sent %zu at %zu",
                conf_transport(), s, (unsigned long long)i + 1, n->length, n->offset,
                msg_len(i), off);
    got[s] = i + 1;
    if (got[s] == (uint64_t)nmsg)
        ends++;
}

int main(int argc, char **argv)
{
    ep = conf_init(0);
    if (argc > 1)
        nmsg = atol(argv[1]);
    int me = vmmc_rank(ep), np = vmmc_size(ep);
    VT_CHECK(np <= MAXR);
    conf_region_t r;
    conf_region_alloc(ep, &r, CONF_HEAP, (size_t)MAXR * SLOTS * SLOT);
    conf_export(ep, &r, "once", 0, on_msg, NULL);
    vmmc_proxy_t *px[MAXR];
    for (int p = 0; p < np; p++)
        if (p != me)
            px[p] = conf_import(ep, p, "once");
    VT_OK(vmmc_barrier(ep));
    double t0 = vt_now();
    unsigned char src[SLOT];
    uint64_t again = 0;
    for (uint64_t i = 0; i < (uint64_t)nmsg; i++) {
        for (int k = 1; k < np; k++) {
            int p = (me + k) % np;
            size_t off = ((size_t)me * SLOTS + i % SLOTS) * SLOT, len = msg_len(i);
            conf_fill(src, len, i, off);
            unsigned fl = VMMC_SEND_NOTIFY | (i % 3 == 0 ? VMMC_SEND_NONBLOCK : 0);
            int rc;
            double w0 = vt_now();
            while ((rc = vmmc_send_imm(px[p], off, src, len, fl, i + 1)) == VMMC_ERR_AGAIN) {
                again++;
                VT_CHECK(vmmc_progress(ep) >= 0);
                if (vt_now() - w0 > conf_timeout() / 2) {
                    conf_dump_counters(ep);
                    VT_FAIL("[%s] rank %d's queue stayed full for %.0f s (message %llu)",
                            conf_transport(), p, conf_timeout() / 2, (unsigned long long)i + 1);
                }
                sched_yield();
            }
            VT_OK(rc);
        }
        if (i % 64 == 0)
            VT_CHECK(vmmc_progress(ep) >= 0);
    }
    double w0 = vt_now();
    while (ends != (uint64_t)np - 1) {
        if (vt_now() - w0 > conf_timeout()) {
            for (int p = 0; p < np; p++)
                if (p != me && got[p] != (uint64_t)nmsg)
                    fprintf(stderr, "[%s] rank %d: %llu of %ld notifications from rank %d\n",
                            conf_transport(), me, (unsigned long long)got[p], nmsg, p);
            conf_dump_counters(ep);
            VT_FAIL("[%s] notifications missing after %.0f s", conf_transport(), conf_timeout());
        }
        int rc = vmmc_wait(ep, 20);
        if (rc < 0)
            VT_FAIL("vmmc_wait: %s", vmmc_strerror(rc));
    }
    VT_OK(vmmc_barrier(ep));
    VT_CHECK(vmmc_progress(ep) >= 0); /* a late duplicate fails in the handler */
    for (int p = 0; p < np; p++)
        if (p != me && got[p] != (uint64_t)nmsg)
            VT_FAIL("[%s] %llu notifications from rank %d, sent %ld", conf_transport(),
                    (unsigned long long)got[p], p, nmsg);
    conf_guard_check(&r);
    conf_ok(me, "%ld notifications from each of %d ranks, each once (%llu retries after "
            "VMMC_ERR_AGAIN, %.2f s)", nmsg, np - 1, (unsigned long long)again, vt_now() - t0);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    conf_region_release(&r);
    return 0;
}
