/* The fabric transport closes an export's registered region once no rank
 * it was granted to imports it any more (tcp;ofi_rxm, three ranks): rank 1
 * exports, rank 0 imports it twice and rank 2 once, and each writes
 * through it (RMA). The region is registered once (fabric.rma_regions) and
 * stays while any import is left: rank 0's first unimport, then its
 * second, close nothing (fabric.rma_regions_closed), nor do unimports it
 * then forges (more than it had imports, a wrong generation), and the
 * writes of the importers left still land; rank 2's unimport, the last, closes it. A new
 * import then registers it again (the old key reaches nothing: a region
 * closed at unexport refuses a stale key, t_fab_rma). The same once more
 * with rank 2's import ended by its leaving the job (vmmc_finalize) instead
 * of an unimport.
 * usage (a rank of `vmmc run -n 3`): t_fab_release */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "core/ctl.h"
#include "core/core.h"

#define LEN (64u * 1024)

static vmmc_ep_t *ep;

/* Rank 1: wait until fabric.rma_regions_closed reaches @want (the
 * unimport travels as a control message), or check it stays there. */
static void closed_is(uint64_t want, const char *when)
{
    double t0 = vt_now();
    while (vt_counter(ep, "fabric.rma_regions_closed") < want && vt_now() - t0 < conf_timeout())
        vmmc_wait(ep, 10);
    double t1 = vt_now(); /* and nothing more closes for a while */
    while (vt_now() - t1 < 0.2)
        vmmc_wait(ep, 10);
    uint64_t c = vt_counter(ep, "fabric.rma_regions_closed");
    printf("[fabric] rank 1: %s: %llu regions closed\n", when, (unsigned long long)c);
    if (c != want)
        VT_FAIL("%s: %llu regions closed, expected %llu", when, (unsigned long long)c,
                (unsigned long long)want);
}

static void put(vmmc_proxy_t *px, size_t off, uint64_t seed)
{
    unsigned char b[256];
    conf_fill(b, sizeof b, seed, off);
    VT_OK(vmmc_send(px, off, b, sizeof b, 0));
    VT_OK(vmmc_fence(ep, 1));
}

static void landed(const unsigned char *a, size_t off, uint64_t seed)
{
    long bad = conf_mismatch(a + off, 256, seed, off);
    if (bad >= 0)
        VT_FAIL("the write at %zu did not land (byte %ld)", off, bad);
}

int main(void)
{
    ep = conf_init(3);
    int me = vmmc_rank(ep);
    unsigned char *a = NULL;
    vmmc_export_t *ex = NULL;
    if (me == 1) {
        a = calloc(1, LEN);
        VT_CHECK(a != NULL);
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .name = "rel",
                                  .addr = a, .length = LEN, .flags = VMMC_EXPORT_READ};
        VT_OK(vmmc_export(ep, &p, &ex));
    }
    VT_OK(vmmc_barrier(ep)); /* 1: exported */
    vmmc_proxy_t *p1 = NULL, *p2 = NULL;
    if (me == 0) {
        p1 = conf_import(ep, 1, "rel");
        p2 = conf_import(ep, 1, "rel");
        put(p1, 0, 1);
        put(p2, 256, 2);
    } else if (me == 2) {
        p1 = conf_import(ep, 1, "rel");
        put(p1, 512, 3);
    }
    VT_OK(vmmc_barrier(ep)); /* 2: three imports, three writes */
    if (me == 1) {
        landed(a, 0, 1);
        landed(a, 256, 2);
        landed(a, 512, 3);
        uint64_t regs = vt_counter(ep, "fabric.rma_regions");
        printf("[fabric] rank 1: %llu regions registered for 3 imports\n",
               (unsigned long long)regs);
        if (regs != 1)
            VT_FAIL("%llu regions registered for three imports of one export (RMA path off?)",
                    (unsigned long long)regs);
        closed_is(0, "three imports");
    }
    VT_OK(vmmc_barrier(ep)); /* 3 */
    if (me == 0)
        VT_OK(vmmc_unimport(p1));
    VT_OK(vmmc_barrier(ep)); /* 4 */
    if (me == 1)
        closed_is(0, "rank 0 dropped one of two imports");
    VT_OK(vmmc_barrier(ep)); /* 5 */
    if (me == 0) {
        put(p2, 1024, 4);
        uint32_t id = VMMC_TL_PX(p2)->export_id, gen = VMMC_TL_PX(p2)->gen;
        VT_OK(vmmc_unimport(p2));
        /* A hostile importer: more unimports than it had imports, and one
         * of a generation that never was. They can release only its own
         * grant (gone already), never rank 2's. */
        int st;
        vmmc_peer_t *peer = vmmc_peer_get(ep, 1, &st);
        VT_CHECK(peer && peer->tl);
        for (int i = 0; i < 4; i++) {
            vmmc_ctl_msg_t u;
            vmmc_ctl_init(ep, &u, CTL_UNIMPORT);
            u.export_id = id;
            u.gen = i == 3 ? gen + 1 : gen;
            VT_OK(peer->tl->ctl_send(ep, &peer->view, &u, NULL, 0));
        }
    }
    VT_OK(vmmc_barrier(ep)); /* 6 */
    if (me == 1) {
        landed(a, 1024, 4);
        closed_is(0, "rank 0 dropped both and sent 4 forged unimports, rank 2 imports");
    }
    VT_OK(vmmc_barrier(ep)); /* 7 */
    if (me == 2) {
        put(p1, 1536, 5);
        VT_OK(vmmc_unimport(p1));
    }
    VT_OK(vmmc_barrier(ep)); /* 8 */
    if (me == 1) {
        landed(a, 1536, 5);
        closed_is(1, "the last import ended");
    }
    VT_OK(vmmc_barrier(ep)); /* 9 */
    /* Imported again: registered again. Then rank 2, the last importer,
     * leaves the job without unimporting. */
    if (me == 2) {
        p1 = conf_import(ep, 1, "rel");
        put(p1, 2048, 6);
    }
    VT_OK(vmmc_barrier(ep)); /* 10 */
    if (me == 1) {
        landed(a, 2048, 6);
        uint64_t regs = vt_counter(ep, "fabric.rma_regions");
        if (regs != 2)
            VT_FAIL("imported again after its region closed: %llu registrations, expected 2",
                    (unsigned long long)regs);
        printf("[fabric] rank 1: registered again for the new import\n");
    }
    VT_OK(vmmc_barrier(ep)); /* 11 */
    if (me == 2) {
        VT_OK(vmmc_finalize(ep));
        return 0;
    }
    if (me == 1) {
        closed_is(2, "the last importer left the job");
        printf("ok a registered region closes with its last import\n");
    }
    /* (no barrier: rank 2 has left) */
    if (me == 1)
        VT_OK(vmmc_unexport(ex));
    free(a);
    VT_OK(vmmc_finalize(ep));
    return 0;
}
