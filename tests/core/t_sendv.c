/* Gather sends: random pieces (empty ones too, up to VMMC_IOV_MAX, up to
 * 1 MiB in all) land one after another exactly as one send of their total
 * would, into a mapped export, a copy-path one and a redirectable one (over
 * udp all remote); one notification per notifying send, with the send's
 * offset, total length and immediate; and the refusals, which write
 * nothing: too many pieces, a NULL piece, lengths that overflow, a total
 * past the region, unknown flags, VMMC_SEND_HEAD_LAST.
 *
 * usage (vmmc run -n 2): t_sendv [rounds] */
#include <stdint.h>
#include <string.h>

#include "vtest.h"

#define REGION (1u << 20)

static volatile int notes, bad_notes;

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    /* The sender puts offset and length in the immediate. */
    if (n->offset != (n->imm >> 32) || n->length != (n->imm & 0xffffffffu))
        bad_notes++;
    notes++;
}

int main(int argc, char **argv)
{
    vt_require_transport();
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    uint32_t *count = NULL;
    char *heap = NULL, *redir = NULL;
    if (me == 1) {
        char *mem;
        heap = calloc(1, REGION), redir = calloc(1, REGION);
        VT_OK(vmmc_mem_alloc(ep, REGION, (void **)&mem));
        VT_OK(vmmc_mem_alloc(ep, 4096, (void **)&count));
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_HANDLER,
                                  .flags = VMMC_EXPORT_READ, .length = REGION,
                                  .handler = on_note};
        vmmc_export_t *e;
        p.name = "mem", p.addr = mem;
        VT_OK(vmmc_export(ep, &p, &e));
        p.name = "heap", p.addr = heap;
        VT_OK(vmmc_export(ep, &p, &e));
        p.flags |= VMMC_EXPORT_REDIRECTABLE;
        p.name = "redir", p.addr = redir;
        VT_OK(vmmc_export(ep, &p, &e));
        p.flags = VMMC_EXPORT_READ, p.name = "count", p.addr = count, p.length = 4096;
        VT_OK(vmmc_export(ep, &p, &e));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *px[3], *pc;
        const char *names[3] = {"mem", "heap", "redir"};
        for (int k = 0; k < 3; k++)
            VT_OK(vmmc_import(ep, 1, names[k], 5000, &px[k]));
        VT_OK(vmmc_import(ep, 1, "count", 5000, &pc));
        unsigned char *src = malloc(REGION), *back = malloc(REGION), *want[3];
        for (int k = 0; k < 3; k++)
            want[k] = calloc(1, REGION); /* what each region must hold */
        unsigned long long seed = 0x5e4d5e4dull;
        vmmc_iov_t iov[VMMC_IOV_MAX + 1];
        uint32_t notified = 0;

        /* Refusals first: nothing may land. */
        for (size_t i = 0; i < REGION; i++)
            src[i] = (unsigned char)(i * 31 + 1);
        iov[0] = (vmmc_iov_t){src, 16};
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i <= VMMC_IOV_MAX; i++)
                iov[i] = (vmmc_iov_t){src + i, 1};
            VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[k], 0, iov, VMMC_IOV_MAX + 1, 0, 0));
            VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[k], 0, iov, -1, 0, 0));
            VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[k], 0, NULL, 1, 0, 0));
            VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(NULL, 0, iov, 1, 0, 0));
            iov[1] = (vmmc_iov_t){NULL, 5};
            VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[k], 0, iov, 2, 0, 0));
            iov[1] = (vmmc_iov_t){src, SIZE_MAX};
            VT_STATUS(VMMC_ERR_BOUNDS, vmmc_sendv(px[k], 0, iov, 2, 0, 0));
            iov[1] = (vmmc_iov_t){src, REGION};
            VT_STATUS(VMMC_ERR_BOUNDS, vmmc_sendv(px[k], 0, iov, 2, 0, 0));
            iov[1] = (vmmc_iov_t){src, 8};
            VT_STATUS(VMMC_ERR_BOUNDS, vmmc_sendv(px[k], REGION - 8, iov, 2, 0, 0));
            VT_STATUS(VMMC_ERR_BOUNDS, vmmc_sendv(px[k], REGION + 1, iov, 0, 0, 0));
            VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[k], 0, iov, 2, 0x100, 0));
            VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[k], 0, iov, 2, VMMC_SEND_HEAD_LAST, 0));
            /* Zero pieces, or only empty ones: a send of length 0. */
            VT_OK(vmmc_sendv(px[k], REGION, iov, 0, 0, 0));
            iov[0].len = 0;
            VT_OK(vmmc_sendv(px[k], 7, iov, 1, 0, 0));
            VT_OK(vmmc_fetch(px[k], 0, back, REGION));
            VT_CHECK(memcmp(back, want[k], REGION) == 0);
        }

        for (int r = 0; r < rounds; r++) {
            int k = r % 3;
            int n = 1 + (int)(vt_rand(&seed) % VMMC_IOV_MAX);
            size_t cap = r % 10 == 0 ? REGION : 8192; /* now and then a large one */
            size_t total = 0;
            for (int i = 0; i < n; i++) {
                size_t len = vt_rand(&seed) % 4 == 0 ? 0 : vt_rand(&seed) % (cap / (size_t)n + 1);
                size_t at = vt_rand(&seed) % (REGION - len + 1);
                iov[i] = (vmmc_iov_t){src + at, len};
                total += len;
            }
            size_t off = vt_rand(&seed) % (REGION - total + 1);
            for (size_t i = 0; i < REGION; i++)
                src[i] = (unsigned char)(vt_rand(&seed) >> 7);
            unsigned flags = r % 2 ? VMMC_SEND_NOTIFY : 0;
            VT_OK(vmmc_sendv(px[k], off, iov, n, flags, (uint64_t)off << 32 | total));
            notified += flags ? 1 : 0;
            size_t at = off;
            for (int i = 0; i < n; i++) {
                memcpy(want[k] + at, iov[i].base, iov[i].len);
                at += iov[i].len;
            }
            /* The pieces in order at [off, off + total), nothing else changed. */
            VT_OK(vmmc_fetch(px[k], 0, back, REGION));
            if (memcmp(back, want[k], REGION) != 0)
                VT_FAIL("round %d (%s): %d pieces, %zu bytes at %zu landed wrong", r, names[k], n,
                        total, off);
        }
        VT_OK(vmmc_send(pc, 0, &notified, sizeof notified, 0));
        VT_OK(vmmc_fence(ep, 1));
        printf("rank 0: %d gather sends, %u notified\n", rounds, notified);
        free(src);
        free(back);
        for (int k = 0; k < 3; k++)
            free(want[k]);
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        double t0 = vt_now();
        while ((uint32_t)notes < *count && vt_now() - t0 < 30)
            VT_CHECK(vmmc_wait(ep, 100) >= 0);
        printf("rank 1: %d notifications (want %u), %d wrong\n", notes, *count, bad_notes);
        VT_CHECK((uint32_t)notes == *count && bad_notes == 0 && *count > 0);
        vmmc_wait(ep, 50); /* no extra one arrives */
        VT_CHECK((uint32_t)notes == *count);
        printf("t_sendv: ok (%s)\n", vt_remote() ? "udp" : "shm");
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    free(heap);
    free(redir);
    return 0;
}
