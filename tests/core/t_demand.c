/* Exports made on demand (vmmc_export_on_demand), between two ranks; rank 0
 * exports, rank 1 imports:
 *   1. "dem.<r>" is made when rank r first imports it (and works: a send
 *      lands); a second import finds it without a call;
 *   2. a name the function declines ("dem.0" asked by rank 1, "dem.junk")
 *      is refused at once with the function's status and reason, and
 *      creates nothing;
 *   3. a request that came before the prefix was registered is served by
 *      the registration;
 *   4. a function that accepts without exporting leaves the request waiting
 *      (it times out as any import of a missing name), and a flood of such
 *      requests reaches it at most VMMC_PENDING_IMPORTS_MAX times: the rest
 *      are refused with VMMC_ERR_AGAIN before the function runs;
 *   5. registration rules (overlapping and reserved prefixes, NULLs), and
 *      after removal no call happens. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/ctl.h"
#include "core/export.h"
#include "vtest.h"

#define FLOOD (VMMC_PENDING_IMPORTS_MAX + 40)

static _Atomic int calls, hold_calls;
static char *mem;
static vmmc_export_t *made[4];
static _Atomic int nmade;

/* "dem.<peer>" only, exported to that peer alone. */
static int make(vmmc_ep_t *ep, const char *name, int peer, void *arg)
{
    VT_CHECK(arg == &calls);
    calls++;
    char want[32];
    snprintf(want, sizeof want, "dem.%d", peer);
    if (strcmp(name, want))
        return vmmc_error(VMMC_ERR_PERMISSION, "test: peer %d may not have '%s'", peer, name);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_IMPORTERS, .name = name,
                              .addr = mem, .length = 4096, .importers = &peer,
                              .num_importers = 1};
    int st = vmmc_export(ep, &p, &made[nmade]);
    if (st == VMMC_OK)
        nmade++;
    return st;
}

static int hold(vmmc_ep_t *ep, const char *name, int peer, void *arg)
{
    (void)ep, (void)name, (void)peer, (void)arg;
    hold_calls++;
    return VMMC_OK; /* "maybe later" */
}

static int never(vmmc_ep_t *ep, const char *name, int peer, void *arg)
{
    (void)ep, (void)name, (void)peer, (void)arg;
    VT_FAIL("a removed prefix's function was called for '%s'", name);
    return VMMC_ERR_INVALID;
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 2)
        VT_SKIP("needs 2 ranks");
    int me = vmmc_rank(ep);
    vmmc_proxy_t *px, *early = NULL;
    if (me == 1) /* 3: asked for before rank 0 registers "late." */
        VT_CHECK(vmmc_import_start(ep, 0, "late.1", 20000, &early) >= 0);
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_OK(vmmc_mem_alloc(ep, 4096, (void **)&mem));
        /* 5: the rules */
        VT_STATUS(VMMC_ERR_INVALID, vmmc_export_on_demand(NULL, "x.", make, &calls));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_export_on_demand(ep, NULL, make, &calls));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_export_on_demand(ep, "x.", NULL, &calls));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_export_on_demand(ep, "", make, &calls));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_export_on_demand(ep, "vmmc.m", make, &calls));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_export_on_demand(ep, "vmmc.mem.7", make, &calls));
        VT_OK(vmmc_export_on_demand(ep, "dem.", make, &calls));
        VT_STATUS(VMMC_ERR_EXISTS, vmmc_export_on_demand(ep, "dem.", make, &calls));
        VT_STATUS(VMMC_ERR_EXISTS, vmmc_export_on_demand(ep, "de", make, &calls));
        VT_STATUS(VMMC_ERR_EXISTS, vmmc_export_on_demand(ep, "dem.1", make, &calls));
        VT_OK(vmmc_export_on_demand(ep, "hold.", hold, NULL));
        VT_STATUS(VMMC_ERR_NOT_FOUND, vmmc_export_on_demand_remove(ep, "nope."));
        VT_CHECK(calls == 0);
        /* 3: the early request, served by this registration (once it is
         * here: it travels apart from the barrier) */
        double t0 = vt_now();
        for (int here = 0; !here;) {
            pthread_mutex_lock(&ep->lock);
            for (pending_import_t *pi = ep->pending_imports; pi && !here; pi = pi->next)
                here = !strcmp(pi->name, "late.1");
            pthread_mutex_unlock(&ep->lock);
            VT_CHECK(vt_now() - t0 < 10);
        }
        VT_OK(vmmc_export_on_demand(ep, "late.", make, &calls));
        VT_CHECK(calls == 1 && nmade == 0); /* "late.1" is not "dem.1": declined */
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        double t0 = vt_now();
        int st;
        while ((st = vmmc_import_test(early)) == VMMC_INPROGRESS)
            VT_CHECK(vt_now() - t0 < 20);
        VT_STATUS(VMMC_ERR_PERMISSION, st);
        VT_CHECK(strstr(vmmc_last_error(), "may not have 'late.1'") != NULL);
        VT_OK(vmmc_unimport(early));
        /* 1 */
        VT_OK(vmmc_import(ep, 0, "dem.1", 5000, &px));
        VT_CHECK(vmmc_proxy_length(px) == 4096);
        VT_OK(vmmc_send(px, 100, "made", 5, 0));
        vmmc_proxy_t *px2;
        VT_OK(vmmc_import(ep, 0, "dem.1", 5000, &px2));
        VT_OK(vmmc_unimport(px2));
        /* 2: declined at once (well before the 20 s deadline) */
        t0 = vt_now();
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_import(ep, 0, "dem.0", 20000, &px2));
        VT_CHECK(strstr(vmmc_last_error(), "may not have 'dem.0'") != NULL);
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_import(ep, 0, "dem.junk", 20000, &px2));
        VT_CHECK(vt_now() - t0 < 15);
        /* 4: waits, then times out */
        VT_STATUS(VMMC_ERR_TIMEOUT, vmmc_import(ep, 0, "hold.one", 300, &px2));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_CHECK(nmade == 1 && !strcmp(mem + 100, "made"));
        VT_CHECK(calls == 4); /* late.1, dem.1, dem.0, dem.junk */
        /* 5: removed: no more calls */
        VT_OK(vmmc_export_on_demand_remove(ep, "dem."));
        VT_OK(vmmc_export_on_demand_remove(ep, "late."));
        VT_OK(vmmc_export_on_demand(ep, "dem.", never, NULL));
        VT_OK(vmmc_export_on_demand_remove(ep, "dem."));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        vmmc_proxy_t *px2;
        VT_STATUS(VMMC_ERR_TIMEOUT, vmmc_import(ep, 0, "dem.7", 300, &px2));
        int st;
        double t0;
        /* 4: a flood */
        static vmmc_proxy_t *fl[FLOOD];
        char name[32];
        for (int i = 0; i < FLOOD; i++) {
            snprintf(name, sizeof name, "hold.%d", i);
            VT_CHECK(vmmc_import_start(ep, 0, name, 30000, &fl[i]) >= 0);
            if (i % 16 == 15)
                usleep(2000); /* (the control socket holds only so many) */
        }
        /* Answers come in order: once the last is in, so are the others. */
        t0 = vt_now();
        while (vmmc_import_test(fl[FLOOD - 1]) == VMMC_INPROGRESS)
            VT_CHECK(vt_now() - t0 < 20);
        int again = 0;
        for (int i = 0; i < FLOOD; i++) {
            st = vmmc_import_test(fl[i]);
            if (st != VMMC_ERR_AGAIN && st != VMMC_INPROGRESS)
                VT_FAIL("flooded import %d: %d (%s)", i, st, vmmc_last_error());
            again += st == VMMC_ERR_AGAIN;
        }
        /* (hold.one and dem.7 still wait there: two places fewer) */
        VT_CHECK(again == FLOOD - (VMMC_PENDING_IMPORTS_MAX - 2));
        for (int i = 0; i < FLOOD; i++)
            VT_OK(vmmc_unimport(fl[i]));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        /* hold.one and dem.7 still wait there: 254 places were left */
        VT_CHECK(hold_calls == 1 + VMMC_PENDING_IMPORTS_MAX - 2);
        printf("rank 0: %d calls, one export made; %d of %d flooded requests reached the function\n",
               (int)calls, (int)hold_calls, FLOOD + 1);
    }
    if (me == 1)
        VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_OK(vmmc_unexport(made[0]));
        VT_OK(vmmc_export_on_demand_remove(ep, "hold."));
        VT_OK(vmmc_mem_free(ep, mem));
    }
    VT_OK(vmmc_finalize(ep));
    return 0;
}
