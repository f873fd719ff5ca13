/* vmmc_service_spin_gate(): the service thread spins after activity only
 * while the gate says so. Rank 0 runs a service thread with a 10 s spin
 * and a gate it opens and closes; rank 1 sends it notifications 2 ms
 * apart. Gate closed: the service thread sleeps after every one of them
 * (the "sleeps" counter grows by one in each of the NOTES-1 gaps; at least
 * half of them are required, for a loaded machine); gate
 * open: it spins through the whole series (at most the sleep it was in
 * when the series began). Also: the gate cannot change once the service
 * thread runs, and a NULL endpoint is refused. */
#include <stdatomic.h>
#include <unistd.h>

#include "vtest.h"

#define NOTES 20

static atomic_int got, gate_open;
static uint64_t box[8];

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)n;
    (void)arg;
    atomic_fetch_add(&got, 1);
}

static int gate(void *arg)
{
    VT_CHECK(arg == &gate_open);
    return atomic_load_explicit(&gate_open, memory_order_relaxed);
}

/* Rank 1 sends NOTES notifications; rank 0 returns the sleeps they cost. */
static uint64_t series(vmmc_ep_t *ep, vmmc_proxy_t *px, int base)
{
    VT_OK(vmmc_barrier(ep));
    /* (after the barrier: its own waits in this thread count sleeps too) */
    uint64_t s0 = vt_counter(ep, "sleeps");
    if (px) {
        for (int i = 0; i < NOTES; i++) {
            usleep(2000);
            VT_OK(vmmc_send(px, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
        }
    } else {
        double t0 = vt_now();
        while (atomic_load(&got) < base + NOTES) {
            if (vt_now() - t0 > 30.0)
                VT_FAIL("%d of %d notifications handled in 30 s", atomic_load(&got) - base, NOTES);
            usleep(1000);
        }
    }
    return vt_counter(ep, "sleeps") - s0;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    VT_STATUS(VMMC_ERR_INVALID, vmmc_service_spin_gate(NULL, gate, &gate_open));
    vmmc_ep_params_t ep_p = {.field_mask = VMMC_EP_PARAM_SPIN_NS, .spin_ns = 10000000000ull};
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(&ep_p, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    vmmc_proxy_t *px = NULL;
    if (me == 0) {
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "box",
                                  .addr = box, .length = sizeof box, .handler = on_note};
        vmmc_export_t *ex;
        VT_OK(vmmc_export(ep, &p, &ex));
        VT_OK(vmmc_service_spin_gate(ep, gate, &gate_open));
        VT_OK(vmmc_service_start(ep));
        VT_STATUS(VMMC_ERR_BUSY, vmmc_service_spin_gate(ep, NULL, NULL));
    } else {
        VT_OK(vmmc_import(ep, 0, "box", 5000, &px));
    }
    uint64_t closed = series(ep, px, 0);
    atomic_store(&gate_open, 1);
    uint64_t open = series(ep, px, NOTES);
    if (me == 0) {
        printf("sleeps: %llu with the gate closed, %llu open (%d notifications each)\n",
               (unsigned long long)closed, (unsigned long long)open, NOTES);
        /* (under load two notifications may come within one slow wake-up:
         * half of them is still far from the open gate's one sleep) */
        if (closed < NOTES / 2)
            VT_FAIL("gate closed: the service thread slept %llu times for %d notifications "
                    "2 ms apart (it spun through some)",
                    (unsigned long long)closed, NOTES);
        if (open > 1)
            VT_FAIL("gate open (10 s spin): the service thread slept %llu times",
                    (unsigned long long)open);
        printf("ok the spin gate decides whether the service thread spins\n");
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
