/* Joining and leaving the DSM.
 *
 * vmmc_dsm_init: join the vmmc job, agree on the area (rank 0 reserves an
 * address range and publishes it with the size and view count in a small
 * readable export; the others fetch it and reserve the same range), map the
 * views, export the privileged view with dsm_notify as its handler, import
 * every other rank's, install the fault handler, start vmmc's service
 * thread, and meet in the job's barrier. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dsm/dsm_int.h"

dsm_state_t dsm = {.lock = PTHREAD_MUTEX_INITIALIZER,
                   .api = PTHREAD_MUTEX_INITIALIZER,
                   .memfd = -1,
                   .me = -1,
                   .n = -1};

typedef struct boot {
    uint64_t magic, base, size, views, page_mode, spread;
} boot_t;
#define BOOT_MAGIC 0x76646d73646d3031ull /* "vdmsdm01" */

static boot_t boot; /* rank 0's, exported until everyone read it */

static int agree(void)
{
    boot_t b;
    if (dsm.me == 0) {
        void *base = NULL;
        int st = dsm_view_reserve(dsm.size, dsm.views, &base);
        if (st)
            return st;
        dsm.base = base;
        boot = (boot_t){BOOT_MAGIC, (uint64_t)(uintptr_t)base, dsm.size, dsm.views,
                        (uint64_t)dsm.page_mode, (uint64_t)dsm.spread};
        vmmc_export_params_t ep = {0};
        ep.field_mask = VMMC_EXPORT_PARAM_FLAGS;
        ep.name = "vmmc.dsm.boot";
        ep.addr = &boot;
        ep.length = sizeof boot;
        ep.flags = VMMC_EXPORT_READ;
        st = vmmc_export(dsm.ep, &ep, &dsm.boot_ex);
        return st ? dsm_error_vmmc(st, "vmmc_dsm_init: exporting the area's description") : 0;
    }
    vmmc_proxy_t *px;
    int st = vmmc_import(dsm.ep, 0, "vmmc.dsm.boot", -1, &px);
    if (st)
        return dsm_error_vmmc(st, "vmmc_dsm_init: importing rank 0's description of the area");
    st = vmmc_fetch(px, 0, &b, sizeof b);
    vmmc_unimport(px);
    if (st)
        return dsm_error_vmmc(st, "vmmc_dsm_init: reading rank 0's description of the area");
    if (b.magic != BOOT_MAGIC)
        return dsm_error(VMMC_ERR_PROTOCOL, "vmmc_dsm_init: rank 0 published no DSM description");
    if (b.size != dsm.size || b.views != dsm.views || b.page_mode != (uint64_t)dsm.page_mode)
        return dsm_error(VMMC_ERR_INVALID,
                         "vmmc_dsm_init: rank %d asks for %zu bytes, %u views, %s mode; rank 0 "
                         "for %llu bytes, %llu views, %s mode (every rank must pass the same "
                         "parameters and VMMC_DSM_* settings)",
                         dsm.me, dsm.size, dsm.views, dsm.page_mode ? "page" : "minipage",
                         (unsigned long long)b.size, (unsigned long long)b.views,
                         b.page_mode ? "page" : "minipage");
    if (b.spread != (uint64_t)dsm.spread)
        return dsm_error(VMMC_ERR_INVALID,
                         "vmmc_dsm_init: rank %d has VMMC_DSM_MANAGERS=%s, rank 0 %s (every rank "
                         "must have the same)",
                         dsm.me, dsm.spread ? "all" : "1", b.spread ? "all" : "1");
    void *base = (void *)(uintptr_t)b.base;
    st = dsm_view_reserve(dsm.size, dsm.views, &base);
    if (st)
        return st;
    dsm.base = base;
    return VMMC_OK;
}

static int setup(void)
{
    int st = agree();
    if (st)
        return st;
    st = dsm_view_map(dsm.base, dsm.size, dsm.views, dsm.page_mode, dsm.me);
    if (st)
        return st;
    dsm.priv = dsm.base + (size_t)dsm.views * dsm.size;
    size_t ids = dsm.npages * dsm.views;
    dsm.acc = calloc(ids, 1);
    dsm.ext = dsm.page_mode ? NULL : calloc(ids, sizeof *dsm.ext);
    dsm.hint = calloc(ids, sizeof *dsm.hint);
    dsm.dset = calloc(ids, sizeof *dsm.dset);
    dsm.px = calloc((size_t)dsm.n, sizeof *dsm.px);
    if (!dsm.acc || (!dsm.page_mode && !dsm.ext) || !dsm.hint || !dsm.dset || !dsm.px)
        return dsm_error(VMMC_ERR_NOMEM, "vmmc_dsm_init: out of memory for the tables");
    if (dsm.page_mode && dsm.me == 0)
        memset(dsm.acc, ACC_W | ACC_OWNER, ids);
    if ((dsm.spread || dsm.me == dsm_manager()) && dsm_mgr_create() != VMMC_OK)
        return dsm_error(VMMC_ERR_NOMEM, "vmmc_dsm_init: out of memory for the minipage table");
    dsm_sync_reset();
    vmmc_export_params_t ep = {0};
    /* With the memfd behind it: ranks on this host map the privileged view
     * (a DATA message is a memcpy plus the notification). A mapping grants
     * reading and writing, hence VMMC_EXPORT_READ. */
    ep.field_mask = VMMC_EXPORT_PARAM_HANDLER | VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_FD;
    ep.name = "vmmc.dsm.area";
    ep.addr = dsm.priv;
    ep.length = dsm.size;
    ep.handler = dsm_notify;
    ep.flags = VMMC_EXPORT_READ;
    ep.fd = dsm.memfd;
    ep.fd_offset = 0;
    st = vmmc_export(dsm.ep, &ep, &dsm.ex);
    if (st)
        return dsm_error_vmmc(st, "vmmc_dsm_init: exporting the area");
    st = dsm_clock_peers();
    if (st)
        return st;
    st = dsm_cpus_publish();
    if (st)
        return st;
    st = dsm_fault_install();
    if (st)
        return st;
    dsm.active = 1;
    for (int r = 0; r < dsm.n; r++) {
        if (r == dsm.me)
            continue;
        st = vmmc_import(dsm.ep, r, "vmmc.dsm.area", -1, &dsm.px[r]);
        if (st) {
            char what[96];
            snprintf(what, sizeof what, "vmmc_dsm_init: importing rank %d's area", r);
            return dsm_error_vmmc(st, what);
        }
    }
    st = dsm_wait_hook(1);
    if (!st)
        st = dsm_sched_hook(1);
    if (st)
        return st;
    if (dsm.spin_gated && (st = vmmc_service_spin_gate(dsm.ep, dsm_spin_gate, NULL)) != VMMC_OK)
        return dsm_error_vmmc(st, "vmmc_dsm_init: the service thread's spin");
    st = vmmc_service_start(dsm.ep);
    if (st)
        return dsm_error_vmmc(st, "vmmc_dsm_init: starting the service thread");
    st = vmmc_barrier(dsm.ep);
    if (st)
        return dsm_error_vmmc(st, "vmmc_dsm_init: the job's barrier");
    return VMMC_OK;
}

static void teardown(void)
{
    dsm.active = 0;
    dsm_fault_remove();
    if (dsm.ep) {
        vmmc_service_stop(dsm.ep);
        dsm_wait_hook(0);
        dsm_sched_hook(0);
        vmmc_finalize(dsm.ep); /* withdraws the exports, drops the imports */
    }
    dsm.ep = NULL;
    dsm.ex = dsm.boot_ex = dsm.cpus_ex = NULL;
    if (dsm.mgr)
        dsm_mgr_destroy();
    dsm_view_unmap();
    dsm_outbox_free();
    dsm_direct_free_all();
    free(dsm.acc);
    free(dsm.ext);
    free(dsm.hint);
    free(dsm.dset);
    free(dsm.px);
    free(dsm.same_clock);
    dsm.same_clock = NULL;
    dsm.acc = NULL;
    dsm.ext = NULL;
    dsm.hint = NULL;
    dsm.dset = NULL;
    dsm.px = NULL;
    dsm.me = dsm.n = -1;
}

int vmmc_dsm_init(const vmmc_dsm_params_t *p)
{
    dsm_sched_skip_thread(1); /* an application thread: its handlers (in
                                 vmmc's waits) keep its scheduling */
    if (dsm.active || dsm.ep)
        return dsm_error(VMMC_ERR_BUSY, "vmmc_dsm_init: the DSM is initialised already");
    if (dsm_cfg_error())
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_init: %s", dsm_cfg_error());
    if (dsm_spin_yield_mode() < 0)
        return dsm_error(VMMC_ERR_INVALID,
                         "vmmc_dsm_init: VMMC_DSM_SPIN_YIELD=%s: expected auto, y or n",
                         dsm_cfg.spin_yield);
    const char *ss = dsm_cfg.service_spin ? dsm_cfg.service_spin : "waiting";
    if (strcmp(ss, "waiting") && strcmp(ss, "always"))
        return dsm_error(VMMC_ERR_INVALID,
                         "vmmc_dsm_init: VMMC_DSM_SERVICE_SPIN=%s: expected waiting or always", ss);
    dsm.spin_gated = !strcmp(ss, "waiting");
    const char *mg = dsm_cfg.managers ? dsm_cfg.managers : "all";
    if (strcmp(mg, "all") && strcmp(mg, "1"))
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_init: VMMC_DSM_MANAGERS=%s: expected all or 1",
                         mg);
    dsm.spread = !strcmp(mg, "all");
    const char *th = dsm_cfg.threads ? dsm_cfg.threads : "multiple";
    if (strcmp(th, "multiple") && strcmp(th, "funneled"))
        return dsm_error(VMMC_ERR_INVALID,
                         "vmmc_dsm_init: VMMC_DSM_THREADS=%s: expected multiple or funneled", th);
    dsm.funneled = !strcmp(th, "funneled");
    dsm.init_thread = pthread_self();
    size_t size = p && p->size ? p->size : (size_t)dsm_cfg.size;
    unsigned views = p && p->views ? p->views : (unsigned)dsm_cfg.views;
    dsm.page_mode = dsm_cfg.page;
    if (dsm.page_mode)
        views = 1;
    size = (size + DSM_PAGE - 1) & ~(size_t)(DSM_PAGE - 1);
    if (size < DSM_PAGE || size > (1ull << 40) || views < 1 || views > DSM_MAX_VIEWS ||
        (size / DSM_PAGE) * views > DSM_MAX_IDS)
        return dsm_error(VMMC_ERR_INVALID,
                         "vmmc_dsm_init: %zu bytes and %u views: the area takes 4K..1T bytes, "
                         "1..%d views, and at most %u pages times views",
                         size, views, DSM_MAX_VIEWS, DSM_MAX_IDS);
    if (dsm.spread && size / DSM_PAGE > (1u << 25))
        return dsm_error(VMMC_ERR_INVALID,
                         "vmmc_dsm_init: %zu bytes: with VMMC_DSM_MANAGERS=all the area takes at "
                         "most 128 GiB (VMMC_DSM_MANAGERS=1 takes more)",
                         size);
    dsm.size = size;
    dsm.views = views;
    dsm.npages = size / DSM_PAGE;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&dsm.cond, &ca);
    pthread_condattr_destroy(&ca);
    int st = vmmc_init(NULL, &dsm.ep);
    if (st) {
        dsm.ep = NULL;
        return dsm_error_vmmc(st, "vmmc_dsm_init: joining the job");
    }
    dsm.me = vmmc_rank(dsm.ep);
    dsm.n = vmmc_size(dsm.ep);
    if (dsm.n > DSM_MAX_RANKS) {
        st = dsm_error(VMMC_ERR_UNSUPPORTED, "vmmc_dsm_init: %d ranks; the DSM takes at most %d",
                       dsm.n, DSM_MAX_RANKS);
    } else {
        st = setup();
    }
    if (st) {
        char keep[512];
        snprintf(keep, sizeof keep, "%s", vmmc_dsm_last_error());
        teardown();
        dsm_error(st, "%s", keep);
        return st;
    }
    if (dsm.boot_ex) {
        vmmc_unexport(dsm.boot_ex); /* everyone read it before the barrier */
        dsm.boot_ex = NULL;
    }
    if (dsm.cpus_ex) {
        vmmc_unexport(dsm.cpus_ex); /* (the same) */
        dsm.cpus_ex = NULL;
    }
    return VMMC_OK;
}

int vmmc_dsm_finalize(void)
{
    dsm_sched_skip_thread(1);
    if (!dsm.active)
        return dsm_error(VMMC_ERR_ENDPOINT, "vmmc_dsm_finalize: the DSM is not initialised");
    /* Everyone is done with the shared memory; then every message this
     * rank posted has left before the job's barrier, so nobody leaves while
     * a message to it travels. */
    int st = dsm_barrier_internal();
    for (int i = 0; i < 10000 && atomic_load(&dsm.sending); i++)
        usleep(1000);
    int st2 = vmmc_barrier(dsm.ep);
    if (!st && st2)
        st = dsm_error_vmmc(st2, "vmmc_dsm_finalize: the job's barrier");
    teardown();
    return st;
}

int vmmc_dsm_rank(void)
{
    return dsm.active ? dsm.me : -1;
}

int vmmc_dsm_size(void)
{
    return dsm.active ? dsm.n : -1;
}

const char *vmmc_dsm_mode(void)
{
    return dsm.active ? (dsm.page_mode ? "page" : "minipage") : NULL;
}
