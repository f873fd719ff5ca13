/* A ping-pong of notifying writes between two ranks that poll
 * (VMMC_TRANSPORT=udp, 2 ranks): each side sends 8 bytes with a
 * notification carrying a sequence number and polls with vmmc_progress()
 * until the other's arrives. Checked:
 *  - every notification arrives once, in order, with its immediate, offset
 *    and length, and the data is in place when its handler runs;
 *  - handing the notifications to the core wakes the link's progress
 *    thread only when a write was held back for room: with no delivery
 *    refused, udp.retry_wakes stays 0. (A drain that woke the thread for
 *    every notification, in case one had been, cost a context switch on the
 *    poller's core per message: about 2x the one-way latency; the counter
 *    was then about one per round trip.)
 *  - nor for anything else more than now and then: udp.thread_wakes at most
 *    a twentieth of the round trips. (A poll that found an acknowledgement
 *    owed while the thread slept long woke it again at every poll until it
 *    ran, and on a cpu shared with the poller that took a while: hundreds
 *    of wakes in some runs.) */
#include <stdatomic.h>
#include <string.h>

#include "vtest.h"

#define N 2000

static _Atomic uint64_t got;
static volatile uint64_t *mem;
static int bad;

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)arg;
    uint64_t want = atomic_load(&got) + 1;
    if (n->imm != want || n->offset != 8 || n->length != 8 || mem[1] != want)
        bad++;
    atomic_store(&got, want);
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    mem = calloc(1, 4096);
    VT_CHECK(mem);
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
    p.name = "pingpong";
    p.addr = (void *)mem;
    p.length = 4096;
    p.handler = on_note;
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    VT_OK(vmmc_barrier(ep));
    vmmc_proxy_t *px;
    VT_OK(vmmc_import(ep, 1 - me, "pingpong", 5000, &px));
    VT_OK(vmmc_barrier(ep));
    uint64_t w0 = vt_counter(ep, "udp.retry_wakes"), t0 = vt_counter(ep, "udp.thread_wakes");
    for (uint64_t i = 1; i <= N; i++) {
        if (me == 0)
            VT_OK(vmmc_send_imm(px, 8, &i, 8, VMMC_SEND_NOTIFY, i));
        while (atomic_load(&got) < i)
            VT_CHECK(vmmc_progress(ep) >= 0);
        if (me == 1)
            VT_OK(vmmc_send_imm(px, 8, &i, 8, VMMC_SEND_NOTIFY, i));
    }
    uint64_t wakes = vt_counter(ep, "udp.retry_wakes") - w0;
    uint64_t refused = vt_counter(ep, "udp.deliver_busy");
    printf("rank %d: %d round trips, %llu retry wakes of the progress thread (%llu wakes in all), "
           "%d bad notifications, %llu deliveries refused\n",
           me, N, (unsigned long long)wakes,
           (unsigned long long)(vt_counter(ep, "udp.thread_wakes") - t0), bad,
           (unsigned long long)refused);
    VT_CHECK(bad == 0);
    VT_CHECK(refused > 0 || wakes == 0);
    VT_CHECK(vt_counter(ep, "udp.thread_wakes") - t0 <= N / 20);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
