/* The core API over the udp transport (VMMC_TRANSPORT=udp, 2 ranks), for
 * what the core's own tests do not cover there: remote reads (vmmc_fetch) of
 * every size class including multi-chunk ones, their permission and bounds
 * errors, writes larger than a datagram with a notification that reports the
 * whole range, a send that lands after an unexport (refused, nothing written),
 * vmmc_signal waking a sleeper, and sends after remote completion being
 * visible at once, and vmmc_signal after a plain write that a progress hook
 * watches (the VMMC pattern for waking a sleeping receiver). */
#include <unistd.h>

#include "vtest.h"

#define LEN (6u << 20)

static vmmc_ep_t *ep;
static volatile int notes;
static size_t note_off, note_len;
static uint64_t note_imm;

static void handler(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    note_off = n->offset;
    note_len = n->length;
    note_imm = n->imm;
    notes++;
}

static volatile uint32_t *wake_flag;
static int hook(void *arg)
{
    return wake_flag[1] != 0; /* counts as an event once the flag landed */
}

static unsigned char pat(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 9) + 7);
}

int main(void)
{
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    unsigned char *buf = malloc(LEN), *back = malloc(LEN);
    VT_CHECK(buf && back);
    vmmc_export_t *ex_r = NULL, *ex_w = NULL, *ex_gone = NULL;
    volatile uint32_t *flag = calloc(1, 4096);
    wake_flag = calloc(1, 64);
    if (me == 1) {
        for (size_t i = 0; i < LEN; i++)
            buf[i] = pat(i);
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_FLAGS;
        p.flags = VMMC_EXPORT_READ;
        p.name = "readable";
        p.addr = buf;
        p.length = LEN;
        VT_OK(vmmc_export(ep, &p, &ex_r));
        p = (vmmc_export_params_t){0};
        p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
        p.handler = handler;
        p.name = "writable";
        p.addr = back;
        p.length = LEN;
        VT_OK(vmmc_export(ep, &p, &ex_w));
        p = (vmmc_export_params_t){0};
        p.name = "gone";
        p.addr = (void *)flag;
        p.length = 4096;
        VT_OK(vmmc_export(ep, &p, &ex_gone));
        p.name = "flag";
        p.addr = (void *)wake_flag;
        p.length = 64;
        vmmc_export_t *ex_flag;
        VT_OK(vmmc_export(ep, &p, &ex_flag));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *pr, *pw, *pg;
        VT_OK(vmmc_import(ep, 1, "readable", 5000, &pr));
        VT_OK(vmmc_import(ep, 1, "writable", 5000, &pw));
        VT_OK(vmmc_import(ep, 1, "gone", 5000, &pg));
        /* Remote reads: tiny, one datagram, several, several 1 MiB chunks. */
        size_t sizes[] = {1, 64, 4000, 70000, 1u << 20, (1u << 20) + 1, LEN - 12345};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t off = (LEN - sizes[k]) / 3;
            memset(back, 0, sizes[k]);
            VT_OK(vmmc_fetch(pr, off, back, sizes[k]));
            for (size_t i = 0; i < sizes[k]; i++)
                if (back[i] != pat(off + i))
                    VT_FAIL("fetch of %zu bytes at %zu: byte %zu wrong", sizes[k], off, i);
        }
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_fetch(pr, LEN - 4, back, 8));
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_fetch(pw, 0, back, 8)); /* not VMMC_EXPORT_READ */

        /* A write of several datagrams with a notification covering it all,
         * visible on the receiver when vmmc_send returns (remote completion). */
        for (size_t i = 0; i < 300000; i++)
            buf[i] = pat(i + 5);
        VT_OK(vmmc_send_imm(pw, 1000, buf, 300000, VMMC_SEND_NOTIFY, 0xABCDEF));
        VT_OK(vmmc_barrier(ep)); /* 1: receiver checks */

        /* The exporter withdraws "gone"; our send is refused remotely (or
         * locally once the revocation arrived) and writes nothing. */
        VT_OK(vmmc_barrier(ep)); /* 2: unexported */
        int st = vmmc_send(pg, 0, "zzzz", 4, 0);
        VT_CHECK(st == VMMC_OK || st == VMMC_ERR_STALE);
        VT_OK(vmmc_barrier(ep)); /* 3: receiver checks nothing landed */

        /* Write a flag the other rank's progress hook watches, then wake it
         * from its vmmc_wait(). */
        vmmc_proxy_t *pf;
        VT_OK(vmmc_import(ep, 1, "flag", 5000, &pf));
        VT_OK(vmmc_barrier(ep)); /* 4 */
        usleep(100000);
        uint32_t one = 1;
        VT_OK(vmmc_send(pf, 4, &one, 4, 0));
        VT_OK(vmmc_signal(ep, 1));
        VT_OK(vmmc_unimport(pf));
        VT_OK(vmmc_barrier(ep)); /* 5 */
        VT_OK(vmmc_unimport(pr));
        VT_OK(vmmc_unimport(pw));
        VT_OK(vmmc_unimport(pg));
    } else {
        VT_OK(vmmc_barrier(ep)); /* 1 */
        for (size_t i = 0; i < 300000; i++)
            if (back[1000 + i] != pat(i + 5))
                VT_FAIL("written byte %zu wrong after the sender's vmmc_send returned", i);
        double t0 = vt_now();
        while (notes < 1 && vt_now() - t0 < 10)
            vmmc_wait(ep, 100);
        VT_CHECK(notes == 1 && note_off == 1000 && note_len == 300000 && note_imm == 0xABCDEF);
        VT_OK(vmmc_unexport(ex_gone));
        VT_OK(vmmc_barrier(ep)); /* 2 */
        VT_OK(vmmc_barrier(ep)); /* 3 */
        VT_CHECK(flag[0] == 0);
        VT_OK(vmmc_progress_hook_add(ep, hook, hook, NULL));
        VT_OK(vmmc_barrier(ep)); /* 4 */
        VT_CHECK(vmmc_wait(ep, 60000) > 0); /* the hook saw the flag */
        VT_CHECK(wake_flag[1] == 1);
        VT_OK(vmmc_progress_hook_remove(ep, hook, NULL));
        VT_OK(vmmc_barrier(ep)); /* 5 */
        VT_OK(vmmc_unexport(ex_r));
        VT_OK(vmmc_unexport(ex_w));
    }
    VT_OK(vmmc_finalize(ep));
    free(buf);
    free(back);
    free((void *)flag);
    free((void *)wake_flag);
    printf("t_udp_core rank %d: ok\n", me);
    return 0;
}
