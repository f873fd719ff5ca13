/* Notifications: run after the data, in order, once each; blocking nests and
 * queues; handlers never nest; a full queue back-pressures the sender or
 * gives VMMC_ERR_AGAIN with VMMC_SEND_NONBLOCK. Rank 0 sends, rank 1 receives. */
#include <string.h>
#include <unistd.h>

#include "vtest.h"

#define N 1000

static vmmc_ep_t *ep;
static char *region;
static volatile uint32_t done_flag;
static int count, in_handler, nested, bad_order, data_before;
static uint64_t next_imm;

static void handler(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)arg;
    if (in_handler)
        nested++;
    in_handler = 1;
    if (n->imm != next_imm)
        bad_order++;
    next_imm = n->imm + 1;
    /* The data covered by the notification is already in place. */
    uint32_t v;
    memcpy(&v, region + n->offset, sizeof v);
    if (v != (uint32_t)n->imm)
        data_before++;
    /* Inside a handler: no nesting through progress, no wait, the handler's
     * own blocking level cannot be undone. */
    if (vmmc_progress(e) != 0)
        nested++;
    if (vmmc_wait(e, 10) != VMMC_ERR_INVALID)
        nested++;
    if (vmmc_notify_unblock(e) != VMMC_ERR_INVALID)
        nested++;
    VT_OK(vmmc_notify_block(e));
    if (vmmc_notify_unblock(e) != 0) /* back to the handler's level: still blocked */
        nested++;
    count++;
    in_handler = 0;
}

int main(void)
{
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    if (me == 1) {
        VT_OK(vmmc_mem_alloc(ep, N * 4, (void **)&region));
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
        p.name = "n";
        p.addr = region;
        p.length = N * 4;
        p.handler = handler;
        vmmc_export_t *ex;
        VT_OK(vmmc_export(ep, &p, &ex));
        vmmc_export_params_t d = {0};
        d.name = "done";
        d.addr = (void *)&done_flag;
        d.length = sizeof done_flag;
        VT_OK(vmmc_export(ep, &d, &ex));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_notify_unblock(ep)); /* not blocked */
        VT_OK(vmmc_notify_block(ep));
        VT_OK(vmmc_notify_block(ep));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(ep, 1, "n", 5000, &px));
        /* More notifications than the per-sender queue holds: the receiver
         * drains them into its own queue while blocked, so none is lost. */
        vmmc_proxy_t *pd;
        VT_OK(vmmc_import(ep, 1, "done", 5000, &pd));
        for (uint32_t i = 0; i < N; i++)
            VT_OK(vmmc_send_imm(px, i * 4, &i, 4, VMMC_SEND_NOTIFY, i));
        uint32_t one = 1;
        VT_OK(vmmc_send(pd, 0, &one, sizeof one, 0)); /* lands after all of the above */
        VT_OK(vmmc_barrier(ep)); /* 2: receiver checked and stops progressing */
        /* The receiver does not progress now: the queue (256) fills up.
         * (Over udp the receiver's progress thread queues them instead, so
         * the sender is never told to wait: nothing to check there.) */
        int rc = vt_remote() ? VMMC_ERR_AGAIN : VMMC_OK, sent = vt_remote() ? 2 : 0;
        for (uint32_t i = 0; i < 100000 && rc == VMMC_OK; i++) {
            rc = vmmc_send_imm(px, 0, &i, 4, VMMC_SEND_NOTIFY | VMMC_SEND_NONBLOCK, 0);
            if (rc == VMMC_OK)
                sent++;
        }
        VT_STATUS(VMMC_ERR_AGAIN, rc);
        VT_CHECK(sent >= 2 && sent <= 100000);
        printf("queue full after %d notifications\n", sent);
        uint32_t two = 2; /* lands without the receiver's progress */
        VT_OK(vmmc_send(pd, 0, &two, sizeof two, 0));
        VT_OK(vmmc_unimport(pd));
        VT_OK(vmmc_barrier(ep)); /* 3 */
        VT_OK(vmmc_unimport(px));
    } else {
        /* Blocked: waiting drains the queue (so the sender is not stalled)
         * but runs nothing. */
        double t0 = vt_now();
        while (!done_flag || vt_now() - t0 < 0.2) {
            VT_CHECK(vmmc_wait(ep, 50) == 0);
            VT_CHECK(vt_now() - t0 < 20);
        }
        VT_CHECK(count == 0);
        VT_STATUS(0, vmmc_notify_unblock(ep)); /* still blocked once */
        VT_CHECK(vmmc_progress(ep) == 0 && count == 0);
        VT_STATUS(1, vmmc_notify_unblock(ep));
        while (count < N)
            VT_CHECK(vmmc_wait(ep, 2000) > 0);
        VT_CHECK(vmmc_progress(ep) == 0);
        VT_CHECK(count == N && nested == 0 && bad_order == 0 && data_before == 0);
        VT_OK(vmmc_barrier(ep)); /* 2 */
        /* Let the sender fill our queue while we do not progress (a barrier
         * would: it serves while it waits). */
        t0 = vt_now();
        while (done_flag != 2) {
            VT_CHECK(vt_now() - t0 < 30);
            usleep(1000);
        }
        VT_OK(vmmc_barrier(ep)); /* 3 */
        int extra = 0;
        double t1 = vt_now();
        while (!vt_remote() && (vmmc_progress(ep) > 0 || (extra == 0 && vt_now() - t1 < 5)))
            extra++;
        VT_CHECK(extra > 0 || vt_remote());
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    printf("t_notify rank %d: ok\n", me);
    return 0;
}
