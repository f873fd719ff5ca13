/* Length 0 is defined in the core, the same on every transport (run on shm
 * and on udp): a send of 0 bytes at an offset within 0..length is a no-op
 * that completes, and with VMMC_SEND_NOTIFY still delivers its
 * notification, in order with the others; a fetch of 0 bytes completes at
 * once; an offset past the end is still VMMC_ERR_BOUNDS. With the argument
 * "mapped" the export is a whole vmmc_mem_alloc() allocation that grants
 * reads, so on shm the sends take the mapped short path. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "vtest.h"

#define LEN 64

static struct {
    size_t off, len;
} seen[8];
static _Atomic int nseen;

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)arg;
    int i = atomic_load(&nseen);
    if (i < 8) {
        seen[i].off = n->offset;
        seen[i].len = n->length;
    }
    atomic_store(&nseen, i + 1);
}

int main(int argc, char **argv)
{
    int mapped = argc > 1 && !strcmp(argv[1], "mapped");
    vt_require_transport();
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep), n = vmmc_size(ep);
    if (n != 2)
        VT_SKIP("needs 2 ranks, has %d", n);
    unsigned char *buf = NULL;
    if (mapped)
        VT_OK(vmmc_mem_alloc(ep, LEN, (void **)&buf));
    else
        buf = malloc(LEN);
    VT_CHECK(buf != NULL);
    memset(buf, 0xEE, LEN);
    if (me == 0) {
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_HANDLER;
        p.name = "z";
        p.addr = buf;
        p.length = LEN;
        p.flags = VMMC_EXPORT_READ;
        p.handler = on_note;
        vmmc_export_t *ex;
        VT_OK(vmmc_export(ep, &p, &ex));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(ep, 0, "z", 10000, &px));
        void *map = NULL;
        if (mapped && !vt_remote()) /* the path this variant is for */
            VT_OK(vmmc_proxy_map(px, &map));
        unsigned char one = 0x42;
        VT_OK(vmmc_send(px, 0, NULL, 0, 0));
        VT_OK(vmmc_send(px, LEN, &one, 0, 0));     /* at the very end: still within */
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(px, LEN + 1, &one, 0, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send(px, LEN + 1, &one, 0, VMMC_SEND_NOTIFY));
        VT_OK(vmmc_send(px, 10, NULL, 0, VMMC_SEND_NOTIFY));
        VT_OK(vmmc_send(px, 11, &one, 1, VMMC_SEND_NOTIFY));
        VT_OK(vmmc_send_imm(px, 12, &one, 0, VMMC_SEND_NOTIFY, 9));
        vmmc_request_t rq;
        int rc = vmmc_send_async(px, 5, NULL, 0, 0, &rq);
        VT_CHECK(rc == VMMC_OK || rc == VMMC_INPROGRESS);
        VT_OK(vmmc_request_wait(&rq, 10000));
        unsigned char back[4] = {1, 2, 3, 4};
        VT_OK(vmmc_fetch(px, 0, back, 0));
        VT_OK(vmmc_fetch(px, LEN, NULL, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_fetch(px, LEN + 1, back, 0));
        VT_CHECK(back[0] == 1 && back[3] == 4);
        VT_OK(vmmc_unimport(px));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        double t0 = vt_now();
        while (atomic_load(&nseen) < 3 && vt_now() - t0 < 10)
            VT_CHECK(vmmc_wait(ep, 100) >= 0);
        VT_CHECK(atomic_load(&nseen) == 3);
        VT_CHECK(seen[0].off == 10 && seen[0].len == 0);
        VT_CHECK(seen[1].off == 11 && seen[1].len == 1);
        VT_CHECK(seen[2].off == 12 && seen[2].len == 0);
        VT_CHECK(buf[11] == 0x42 && buf[10] == 0xEE && buf[12] == 0xEE && buf[0] == 0xEE);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep)); /* releases library memory */
    if (!mapped)
        free(buf);
    printf("rank %d: ok\n", me);
    return 0;
}
