/* Memory keys and the translation cache, 3 ranks: rank 0 owns memory and
 * hands out keys; ranks 1 and 2 attach them and write with plain stores.
 * Covers: data lands in the right place; the cache maps an allocation once;
 * keys outside vmmc_mem_alloc() memory, a key for another rank, forged
 * ranges, freed allocations and bad pointers are refused with the right
 * status. */
#include <stdint.h>
#include <string.h>

#include "vtest.h"

#define BIG (1u << 20)

typedef struct box {
    vmmc_mkey_t key[4];  /* 0: BIG buffer for rank 1, 1: second range, 2: rank 1's key, 3: freed */
    uint64_t ready;
} box_t;

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep), n = vmmc_size(ep);
    if (n != 3)
        VT_SKIP("needs 3 ranks, has %d", n);
    if (vt_remote()) {
        /* Keys need shared memory: attaching over udp is refused. */
        VT_OK(vmmc_finalize(ep));
        VT_SKIP("memory keys are for peers on this host");
    }

    box_t *box;
    VT_OK(vmmc_mem_alloc(ep, sizeof *box, (void **)&box));
    vmmc_export_params_t pa = {.name = "box", .addr = box, .length = sizeof *box};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &pa, &ex));

    char *big = NULL, *other = NULL;
    if (me == 0) {
        /* Bad inputs on the owner's side. */
        char stackbuf[64];
        vmmc_mkey_t k;
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_mem_key(ep, stackbuf, sizeof stackbuf, 1, &k));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_key(ep, stackbuf, 0, 1, &k));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_key(ep, stackbuf, 8, 7, &k));
        VT_OK(vmmc_mem_alloc(ep, BIG, (void **)&big));
        VT_OK(vmmc_mem_alloc(ep, 8192, (void **)&other));
        VT_STATUS(VMMC_ERR_UNSUPPORTED, vmmc_mem_key(ep, big + BIG - 8, 64, 1, &k));

        box_t b;
        memset(&b, 0, sizeof b);
        VT_OK(vmmc_mem_key(ep, big + 4096, BIG - 8192, 1, &b.key[0]));
        VT_OK(vmmc_mem_key(ep, big + 100, 50, 1, &b.key[1]));       /* same allocation */
        VT_OK(vmmc_mem_key(ep, other, 8192, 1, &b.key[2]));         /* issued to rank 1 only */
        char *gone;
        VT_OK(vmmc_mem_alloc(ep, 4096, (void **)&gone));
        VT_OK(vmmc_mem_key(ep, gone, 4096, 1, &b.key[3]));
        VT_OK(vmmc_mem_free(ep, gone));                             /* the key export goes too */
        b.ready = 1;
        for (int r = 1; r < 3; r++) {
            vmmc_proxy_t *px;
            VT_OK(vmmc_import(ep, r, "box", -1, &px));
            VT_OK(vmmc_send(px, 0, &b, sizeof b, 0));
            VT_OK(vmmc_unimport(px));
        }
    }
    VT_OK(vmmc_barrier(ep)); /* keys delivered */

    if (me == 1) {
        VT_CHECK(box->ready == 1);
        char *p, *q, *p2;
        VT_OK(vmmc_mem_attach(ep, 0, &box->key[0], -1, (void **)&p));
        VT_OK(vmmc_mem_attach(ep, 0, &box->key[1], -1, (void **)&q));
        VT_CHECK(q == p - 4096 + 100); /* one mapping of the allocation, cached */
        VT_OK(vmmc_mem_attach(ep, 0, &box->key[0], 0, (void **)&p2));
        VT_CHECK(p2 == p);
        for (size_t i = 0; i < BIG - 8192; i++)
            p[i] = (char)(i * 7 + 3);
        memset(q, 0x5a, 50);
        VT_OK(vmmc_mem_detach(ep, p2));
        VT_OK(vmmc_mem_detach(ep, q));
        VT_OK(vmmc_mem_detach(ep, p));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_detach(ep, p)); /* not attached any more */
        int x;
        VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_detach(ep, &x));
        /* A range altered in the key (past the allocation, or elsewhere in
         * it) fails the key's MAC. */
        vmmc_mkey_t f = box->key[1];
        f.opaque[2] = (uint64_t)BIG * 2;
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_mem_attach(ep, 0, &f, -1, (void **)&p));
        f = box->key[1];
        f.opaque[1] ^= 1;
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_mem_attach(ep, 0, &f, -1, (void **)&p));
        /* A freed allocation. */
        VT_STATUS(VMMC_ERR_STALE, vmmc_mem_attach(ep, 0, &box->key[3], -1, (void **)&p));
        /* A forged generation names nothing. */
        f = box->key[0];
        f.opaque[0] ^= (uint64_t)1 << 40;
        VT_STATUS(VMMC_ERR_STALE, vmmc_mem_attach(ep, 0, &f, -1, (void **)&p));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_attach(ep, 9, &box->key[0], -1, (void **)&p));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_mem_attach(ep, 0, NULL, -1, (void **)&p));
        /* The key for `other` works here; without waiting, the mapping is
         * made in the background and a later attach finds it. */
        int st = vmmc_mem_attach(ep, 0, &box->key[2], 0, (void **)&p);
        VT_CHECK(st == VMMC_ERR_AGAIN || st == VMMC_OK);
        double until = vt_now() + 10;
        while (st == VMMC_ERR_AGAIN && vt_now() < until)
            st = vmmc_mem_attach(ep, 0, &box->key[2], 0, (void **)&p);
        VT_OK(st);
        memcpy(p, "rank1", 6);
        VT_OK(vmmc_mem_detach(ep, p));
    } else if (me == 2) {
        /* Keys issued to rank 1 do not open anything to rank 2. */
        char *p;
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_mem_attach(ep, 0, &box->key[2], -1, (void **)&p));
        VT_STATUS(VMMC_ERR_PERMISSION, vmmc_mem_attach(ep, 0, &box->key[0], -1, (void **)&p));
    }
    VT_OK(vmmc_barrier(ep)); /* writes done */

    if (me == 0) {
        for (size_t i = 0; i < BIG - 8192; i++)
            if (big[4096 + i] != (char)(i * 7 + 3))
                VT_FAIL("byte %zu of the attached range is wrong", i);
        for (size_t i = 0; i < 50; i++)
            VT_CHECK(big[100 + i] == 0x5a);
        VT_CHECK(big[99] == 0 && big[150] == 0 && big[4095] == 0 && big[BIG - 4096] == 0);
        VT_CHECK(!strcmp(other, "rank1"));
        /* Rank 2 may be granted the same allocation later. */
        vmmc_mkey_t k;
        VT_OK(vmmc_mem_key(ep, other, 16, 2, &k));
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(ep, 2, "box", -1, &px));
        VT_OK(vmmc_send(px, 0, &k, sizeof k, 0));
        VT_OK(vmmc_unimport(px));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 2) {
        char *p;
        VT_OK(vmmc_mem_attach(ep, 0, &box->key[0], -1, (void **)&p));
        memcpy(p, "rank2", 6);
        VT_OK(vmmc_mem_detach(ep, p));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_CHECK(!strcmp(other, "rank2"));
        VT_OK(vmmc_mem_free(ep, big));
        VT_OK(vmmc_mem_free(ep, other));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        /* The owner freed it: the cached entry is dropped, the attach refused.
         * The owner's revocation travels on its own channel, so a cached
         * entry may be used until it arrives; after that the attach is
         * refused. */
        char *p;
        int st;
        double end = vt_now() + 10;
        while ((st = vmmc_mem_attach(ep, 0, &box->key[0], -1, (void **)&p)) == VMMC_OK &&
               vt_now() < end) {
            VT_OK(vmmc_mem_detach(ep, p));
            VT_CHECK(vmmc_wait(ep, 10) >= 0);
        }
        VT_STATUS(VMMC_ERR_STALE, st);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
