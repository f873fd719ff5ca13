/* Remote atomics on the fabric transport (3 ranks, tcp;ofi_rxm), rank 0
 * exporting, ranks 1 and 2 importing:
 *   - ranks 1 and 2 fetch-add 1 to a 64-bit word (each sees its own old
 *     values rise) and add 1 to a 32-bit one, N times each, while rank 0
 *     adds to both words in its own memory with the processor's atomic
 *     instructions: both end exactly at 3 N, so the provider's atomics are
 *     atomic with the exporter's;
 *   - what the provider cannot do as vmmc defines it goes as the core's
 *     control message and still means vmmc's semantics: a double CSWAP with
 *     compare +0.0 replaces a -0.0 (C's ==, where the provider compares
 *     bits), a CSWAP without a result on a write-only export lands;
 *   - a fetch from the write-only export is refused by the core
 *     (VMMC_ERR_PERMISSION), and, with the transport called directly (a
 *     process that skips the core's check), by the provider: nothing
 *     changes, the error is clear;
 *   - after the unexport, vmmc_atomic is VMMC_ERR_STALE, and a process that
 *     ignores the revocation (the transport called directly) is refused by
 *     the provider: the word does not change, every rank stays up.
 * Counters: "fi" (VMMC_FABRIC_ATOMIC=auto): the importers' fabric.rma_atomics
 * grows by every atomic the provider did, and rank 0 serves (atomics_served)
 * only the ones that went as control messages; "ctl" (VMMC_FABRIC_ATOMIC=no):
 * fabric.rma_atomics stays 0 and rank 0 serves them all.
 * usage (a rank of `vmmc run -n 3`): t_fab_atomic fi|ctl */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "transport/transport.h"

#define N 2000
/* words of rw: the 64-bit counter, the 32-bit one, a double per importer,
 * a word the stale importer aims at */
enum { C64 = 0, C32 = 1, DBL = 2, STALE_W = 6 };

static int fi;
/* the provider checks FI_REMOTE_READ for fetching atomics (ofi_rxm does;
 * sockets checks only FI_REMOTE_WRITE: a documented limitation) */
static int rights = 1;
static vmmc_ep_t *ep;
static _Alignas(64) uint64_t rw[16];
static _Alignas(64) uint64_t wo[4];

static const vmmc_tl_ops_t *fabric_ops(void)
{
    for (int i = 0; vmmc_tl_all[i]; i++)
        if (!strcmp(vmmc_tl_all[i]->name, "fabric"))
            return vmmc_tl_all[i];
    VT_FAIL("no fabric transport in this build");
    return NULL;
}

static void exporter(void)
{
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    p.name = "rw";
    p.addr = rw;
    p.length = sizeof rw;
    p.flags = VMMC_EXPORT_READ;
    vmmc_export_t *ex, *exw;
    VT_OK(vmmc_export(ep, &p, &ex));
    p.name = "wo";
    p.addr = wo;
    p.length = sizeof wo;
    p.flags = 0;
    VT_OK(vmmc_export(ep, &p, &exw));
    for (int r = 1; r <= 2; r++)
        rw[DBL + r] = vmmc_atomic_from_double(-0.0);
    uint64_t served0 = vt_counter(ep, "atomics_served");
    VT_OK(vmmc_barrier(ep)); /* 1: exported */
    for (int i = 0; i < N; i++) {
        __atomic_fetch_add(&rw[C64], 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add((uint32_t *)&rw[C32], 1, __ATOMIC_SEQ_CST);
    }
    VT_OK(vmmc_barrier(ep)); /* 2: the importers are done */
    uint64_t c64 = __atomic_load_n(&rw[C64], __ATOMIC_SEQ_CST);
    uint32_t c32 = __atomic_load_n((uint32_t *)&rw[C32], __ATOMIC_SEQ_CST);
    if (c64 != 3u * N || c32 != 3u * N)
        VT_FAIL("[fabric] counters %llu and %u after 3 x %d adds: an update was lost",
                (unsigned long long)c64, c32, N);
    for (int r = 1; r <= 2; r++) {
        double d = vmmc_atomic_to_double(rw[DBL + r]);
        if (d != 5.0 + r)
            VT_FAIL("double CSWAP of rank %d: %g, expected %g (compare +0.0 with -0.0)", r, d,
                    5.0 + r);
        if (wo[r] != 10u + (unsigned)r)
            VT_FAIL("CSWAP without a result on the write-only export, rank %d: %llu", r,
                    (unsigned long long)wo[r]);
    }
    VT_OK(vmmc_barrier(ep)); /* 2b: what the importers' direct fetches did */
    if (rights && wo[0] != 0)
        VT_FAIL("a refused fetch-add changed the write-only word: %llu",
                (unsigned long long)wo[0]);
    if (!rights)
        printf("[fabric] rank 0: the provider let %llu fetch-adds of a write-only word through\n",
               (unsigned long long)wo[0]);
    uint64_t served = vt_counter(ep, "atomics_served") - served0;
    /* the two declined per importer; in ctl mode every one */
    uint64_t want = fi ? 4 : 2u * 2u * N + 4;
    printf("[fabric] rank 0: counters exact (%llu), served %llu (want %llu)\n",
           (unsigned long long)c64, (unsigned long long)served, (unsigned long long)want);
    if (served != want)
        VT_FAIL("rank 0 served %llu atomics, expected %llu", (unsigned long long)served,
                (unsigned long long)want);
    rw[STALE_W] = 77;
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_barrier(ep)); /* 3: unexported */
    VT_OK(vmmc_barrier(ep)); /* 4: the stale importer tried */
    if (rw[STALE_W] != 77)
        VT_FAIL("an atomic reached the withdrawn region: %llu", (unsigned long long)rw[STALE_W]);
    VT_OK(vmmc_unexport(exw));
}

static void importer(int me)
{
    VT_OK(vmmc_barrier(ep)); /* 1 */
    vmmc_proxy_t *prw = conf_import(ep, 0, "rw");
    vmmc_proxy_t *pwo = conf_import(ep, 0, "wo");
    uint64_t a0 = vt_counter(ep, "fabric.rma_atomics");
    uint64_t last = 0;
    for (int i = 0; i < N; i++) {
        uint64_t old = 0;
        VT_OK(vmmc_atomic(prw, C64 * 8, VMMC_ATOMIC_ADD, 8, 1, 0, &old));
        if (i && old <= last)
            VT_FAIL("rank %d saw %llu after %llu", me, (unsigned long long)old,
                    (unsigned long long)last);
        last = old;
        VT_OK(vmmc_atomic(prw, C32 * 8, VMMC_ATOMIC_ADD, 4, 1, 0, NULL));
    }
    /* declined by the transport: the core's control message */
    uint64_t was = 0;
    VT_OK(vmmc_atomic(prw, (size_t)(DBL + me) * 8, VMMC_ATOMIC_CSWAP, 8 | VMMC_ATOMIC_FLOAT,
                      vmmc_atomic_from_double(5.0 + me), vmmc_atomic_from_double(0.0), &was));
    if (was != vmmc_atomic_from_double(-0.0))
        VT_FAIL("double CSWAP returned %#llx, expected the bits of -0.0",
                (unsigned long long)was);
    VT_OK(vmmc_atomic(pwo, (size_t)me * 8, VMMC_ATOMIC_CSWAP, 8, 10u + (unsigned)me, 0, NULL));
    /* refused by the core */
    VT_STATUS(VMMC_ERR_PERMISSION, vmmc_atomic(pwo, 0, VMMC_ATOMIC_ADD, 8, 1, 0, &was));
    uint64_t a = vt_counter(ep, "fabric.rma_atomics") - a0;
    if (fi) {
        /* and by the provider: the region has no FI_REMOTE_READ */
        const vmmc_tl_ops_t *tl = fabric_ops();
        uint64_t v = 12345;
        int rc = tl->atomic(VMMC_TL_PX(pwo), 0, VMMC_ATOMIC_ADD, 8, 1, 0, 1, &v);
        printf("[fabric] rank %d: fetch-add on a write-only region, the transport called "
               "directly: %d (%s)\n", me, rc, rc ? vmmc_last_error() : "");
        if (rights && (rc != VMMC_ERR_PERMISSION || !vmmc_last_error()[0]))
            VT_FAIL("a fetch from a write-only region: %d, expected VMMC_ERR_PERMISSION", rc);
        if (a < 2u * N)
            VT_FAIL("%llu atomics by the provider for %d", (unsigned long long)a, 2 * N);
    } else if (a) {
        VT_FAIL("VMMC_FABRIC_ATOMIC=no: %llu atomics by the provider", (unsigned long long)a);
    }
    VT_OK(vmmc_barrier(ep)); /* 2 */
    VT_OK(vmmc_barrier(ep)); /* 2b */
    VT_OK(vmmc_barrier(ep)); /* 3: "rw" is gone */
    VT_STATUS(VMMC_ERR_STALE, vmmc_atomic(prw, STALE_W * 8, VMMC_ATOMIC_ADD, 8, 1, 0, NULL));
    if (fi && me == 1) {
        /* a process that ignores the revocation: its proxy made active
         * again, the transport called directly */
        vmmc_tl_proxy_t *v = VMMC_TL_PX(prw);
        atomic_store(&v->state, PX_ACTIVE);
        uint64_t old = 0;
        int rc = fabric_ops()->atomic(v, STALE_W * 8, VMMC_ATOMIC_ADD, 8, 1, 0, 1, &old);
        atomic_store(&v->state, PX_STALE);
        printf("[fabric] rank 1: stale atomic: %d (%s)\n", rc, rc ? vmmc_last_error() : "");
        if (rc == VMMC_OK)
            VT_FAIL("an atomic on a withdrawn region succeeded (old %llu)",
                    (unsigned long long)old);
        if (rc != VMMC_ERR_PERMISSION || !vmmc_last_error()[0])
            VT_FAIL("a stale atomic: %d (%s), expected VMMC_ERR_PERMISSION", rc,
                    vmmc_strerror(rc));
    }
    VT_OK(vmmc_barrier(ep)); /* 4 */
    VT_OK(vmmc_unimport(prw));
    VT_OK(vmmc_unimport(pwo));
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "fi") && strcmp(argv[1], "ctl"))) {
        fprintf(stderr, "usage: t_fab_atomic fi|ctl (a rank of vmmc run -n 3)\n");
        return 2;
    }
    fi = !strcmp(argv[1], "fi");
    const char *prov = getenv("VMMC_FABRIC_PROVIDER");
    rights = !(prov && !strcmp(prov, "sockets"));
    ep = conf_init(3);
    int me = vmmc_rank(ep);
    if (me == 0)
        exporter();
    else
        importer(me);
    VT_OK(vmmc_finalize(ep));
    printf("[%s] rank %d ok\n", argv[1], me);
    return 0;
}
