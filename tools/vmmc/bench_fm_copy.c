/* Suite "fm": the copy ceilings of fm_bw, measured in the same job through
 * the peer's memory mapped here: one core's copy (copy1) and the copy both
 * cores share as FM's split path does (copy2). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <string.h>

#include "bench_fm.h"

/* Spin until this rank's word reaches @k (20 s at most). */
static int copy_wait(volatile uint64_t *mine, uint64_t k)
{
    double t0 = 0;
    for (unsigned long spins = 0; __atomic_load_n(mine, __ATOMIC_ACQUIRE) < k; spins++) {
        bench_cpu_relax();
        if ((spins & 0xffff) == 0xffff) {
            double t = bench_now_ns();
            if (!t0)
                t0 = t;
            else if (t - t0 > 20e9) {
                bench_note(fb.c, "fm: copy ceiling: the peer did not answer within 20 s");
                return -1;
            }
        }
    }
    return 0;
}

/* copy_bw in this job: rank 0 copies @count messages into rank 1's ubuf,
 * then says go and waits for done (the stream, flag and ack of fm_bw). */
int fb_copy1_run(size_t n, long count)
{
    volatile uint64_t *mine = (volatile uint64_t *)(void *)(fb.ctl + (fb.me ? 0 : 64));
    uint64_t *theirs = (uint64_t *)(void *)(fb.peer_ctl + (fb.me ? 64 : 0));
    uint64_t k = ++fb.seq2;
    if (fb.me == 0) {
        for (long i = 0; i < count; i++)
            memcpy(fb.peer_buf, fb.cbuf, n);
        __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
        return copy_wait(mine, k);
    }
    if (copy_wait(mine, k))
        return -1;
    __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
    return 0;
}

/* copy2_bw: @count messages of @n bytes, each copied by both ranks (rank 1
 * the front half out of rank 0's src, rank 0 the back half into rank 1's
 * ubuf) with a go/done handshake per message, as a sender that may reuse
 * its buffer on return must: the two-core copy FM's split path does. */
int fb_copy2_run(size_t n, long count)
{
    size_t h = (n / 2) & ~(size_t)63;
    volatile uint64_t *mine = (volatile uint64_t *)(void *)(fb.ctl + (fb.me ? 0 : 64));
    uint64_t *theirs = (uint64_t *)(void *)(fb.peer_ctl + (fb.me ? 64 : 0));
    for (long i = 0; i < count; i++) {
        uint64_t k = ++fb.seq2;
        if (fb.me == 0) {
            __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
            memcpy(fb.peer_buf + h, fb.cbuf + h, n - h);
        }
        if (copy_wait(mine, k))
            return -1;
        if (fb.me == 1) {
            memcpy(fb.cbuf, fb.peer_buf, h);
            __atomic_store_n(theirs, k, __ATOMIC_RELEASE);
        }
    }
    return 0;
}

/* Export this rank's side of copy2 and map the peer's: 0, or -1 (no
 * ceiling measured in this suite; a note says why). */
int fb_copy2_setup(vmmc_ep_t *ep)
{
    int rc;
    const char *what = "vmmc_mem_alloc";
    if ((rc = vmmc_mem_alloc(ep, 4096, (void **)&fb.ctl)) != VMMC_OK)
        goto fail;
    memset(fb.ctl, 0, 4096);
    if ((rc = vmmc_mem_alloc(ep, MAX_SIZE, (void **)&fb.cbuf)) != VMMC_OK)
        goto fail;
    memset(fb.cbuf, 0x5a, MAX_SIZE);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .flags = VMMC_EXPORT_READ};
    p.name = "fmbench.ctl";
    p.addr = fb.ctl;
    p.length = 4096;
    what = "vmmc_export";
    if ((rc = vmmc_export(ep, &p, &fb.ex[0])) != VMMC_OK)
        goto fail;
    p.name = fb.me ? "fmbench.ubuf" : "fmbench.src";
    p.addr = fb.cbuf;
    p.length = MAX_SIZE;
    if ((rc = vmmc_export(ep, &p, &fb.ex[1])) != VMMC_OK)
        goto fail;
    what = "vmmc_import";
    if ((rc = vmmc_import(ep, fb.peer, "fmbench.ctl", 20000, &fb.px[0])) != VMMC_OK ||
        (rc = vmmc_import(ep, fb.peer, fb.me ? "fmbench.src" : "fmbench.ubuf", 20000, &fb.px[1])) !=
            VMMC_OK)
        goto fail;
    what = "vmmc_proxy_map";
    void *a, *b;
    if ((rc = vmmc_proxy_map(fb.px[0], &a)) != VMMC_OK || (rc = vmmc_proxy_map(fb.px[1], &b)) != VMMC_OK)
        goto fail;
    fb.peer_ctl = a;
    fb.peer_buf = b;
    return 0;
fail:
    if (fb.me == 0)
        bench_note(fb.c, "fm: no two-core copy ceiling in this suite (%s: %s); fm_bw is checked "
                        "against vmmc/copy2_bw of the vmmc suite", what, vmmc_last_error());
    return -1;
}

void fb_copy2_teardown(vmmc_ep_t *ep)
{
    for (int i = 0; i < 2; i++) {
        if (fb.px[i])
            vmmc_unimport(fb.px[i]);
        if (fb.ex[i])
            vmmc_unexport(fb.ex[i]);
    }
    if (fb.ctl)
        vmmc_mem_free(ep, fb.ctl);
    if (fb.cbuf)
        vmmc_mem_free(ep, fb.cbuf);
}
