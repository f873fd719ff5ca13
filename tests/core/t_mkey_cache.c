/* The translation cache under pressure (run with VMMC_MKEY_CACHE=4):
 * rank 0 hands rank 1 keys for 10 separate allocations; rank 1 attaches
 * them in turn (evicting the least recently used mappings), writes through
 * each, and attaches evicted ones again. With every entry attached at once
 * the next attach is refused with VMMC_ERR_AGAIN, and detaching one makes
 * room. Rank 0 checks every byte. */
#include <stdint.h>
#include <string.h>

#include "vtest.h"

#define NBUF 10
#define LEN 8192

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 2)
        VT_SKIP("needs 2 ranks");
    if (vt_remote()) {
        VT_OK(vmmc_finalize(ep));
        VT_SKIP("memory keys are for peers on this host");
    }
    int me = vmmc_rank(ep);
    vmmc_mkey_t *keys;
    VT_OK(vmmc_mem_alloc(ep, sizeof(vmmc_mkey_t) * NBUF, (void **)&keys));
    vmmc_export_params_t pa = {.name = "keys", .addr = keys, .length = sizeof(vmmc_mkey_t) * NBUF};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &pa, &ex));
    char *buf[NBUF];
    if (me == 0) {
        vmmc_mkey_t k[NBUF];
        for (int i = 0; i < NBUF; i++) {
            VT_OK(vmmc_mem_alloc(ep, LEN, (void **)&buf[i]));
            VT_OK(vmmc_mem_key(ep, buf[i], LEN, 1, &k[i]));
        }
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(ep, 1, "keys", -1, &px));
        VT_OK(vmmc_send(px, 0, k, sizeof k, 0));
        VT_OK(vmmc_unimport(px));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        /* Two rounds over all ten: every attach of round two follows an
         * eviction, since only four fit. */
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < NBUF; i++) {
                char *p;
                VT_OK(vmmc_mem_attach(ep, 0, &keys[i], -1, (void **)&p));
                for (int j = 0; j < LEN; j++)
                    p[j] = (char)(i * 31 + j + round);
                VT_OK(vmmc_mem_detach(ep, p));
            }
        }
        /* Four attached at once fill the cache. */
        char *held[4];
        for (int i = 0; i < 4; i++)
            VT_OK(vmmc_mem_attach(ep, 0, &keys[i], -1, (void **)&held[i]));
        char *p;
        VT_STATUS(VMMC_ERR_AGAIN, vmmc_mem_attach(ep, 0, &keys[7], -1, (void **)&p));
        VT_OK(vmmc_mem_detach(ep, held[2]));
        VT_OK(vmmc_mem_attach(ep, 0, &keys[7], -1, (void **)&p)); /* evicts keys[2]'s */
        VT_CHECK(p[5] == (char)(7 * 31 + 5 + 1));
        VT_OK(vmmc_mem_detach(ep, p));
        for (int i = 0; i < 4; i++)
            if (i != 2)
                VT_OK(vmmc_mem_detach(ep, held[i]));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        for (int i = 0; i < NBUF; i++)
            for (int j = 0; j < LEN; j++)
                if (buf[i][j] != (char)(i * 31 + j + 1))
                    VT_FAIL("allocation %d byte %d is wrong", i, j);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
