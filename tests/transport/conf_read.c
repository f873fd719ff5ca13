/* Remote read: vmmc_fetch of tiny, huge and edge ranges returns exactly the
 * exporter's bytes (as they are now, not as they were), writes exactly the
 * bytes asked for into the caller's buffer, and is refused with
 * VMMC_ERR_PERMISSION, writing nothing, when the export does not grant
 * VMMC_EXPORT_READ.
 *
 * Rank 0 exports heap memory and a whole allocation with VMMC_EXPORT_READ
 * (mapped on shm) and both kinds without it; it fills them with a pattern,
 * then with another one. Rank 1 fetches every size at every edge after each
 * fill. */
#include "conf.h"

#define L ((size_t)(4 << 20) + 3)
static const size_t sizes[] = {1, 7, 8, 16, 4095, 4096, 4097, 65537, 1 << 20, L};
#define NSIZES (sizeof sizes / sizeof sizes[0])
static const char *names[4] = {"heap", "mem", "heap.wo", "mem.wo"};

static unsigned char *dst; /* L bytes between guards */

static void fetch_one(vmmc_proxy_t *px, int k, size_t off, size_t len, uint64_t seed)
{
    memset(dst, CONF_GUARD_BYTE, L + 2 * CONF_GUARD);
    int rc = vmmc_fetch(px, off, dst + CONF_GUARD, len), readable = k < 2;
    if (rc != (readable ? VMMC_OK : VMMC_ERR_PERMISSION))
        VT_FAIL("[%s] fetch of %zu bytes at %zu of '%s': %d (%s)", conf_transport(), len, off,
                names[k], rc, vmmc_strerror(rc));
    size_t got = readable ? len : 0;
    if (readable)
        conf_check(dst + CONF_GUARD, len, seed, off, "fetch of %zu bytes at %zu of '%s'", len,
                   off, names[k]);
    for (size_t i = 0; i < L + 2 * CONF_GUARD; i++)
        if ((i < CONF_GUARD || i >= CONF_GUARD + got) && dst[i] != CONF_GUARD_BYTE)
            VT_FAIL("[%s] fetch of %zu bytes at %zu of '%s' wrote byte %zd of its buffer",
                    conf_transport(), len, off, names[k], (ssize_t)i - CONF_GUARD);
}

int main(void)
{
    vmmc_ep_t *ep = conf_init(2);
    int me = vmmc_rank(ep);
    conf_region_t r[4];
    if (me == 0) {
        for (int k = 0; k < 4; k++) {
            conf_region_alloc(ep, &r[k], k % 2 ? CONF_MEM : CONF_HEAP, L);
            conf_export(ep, &r[k], names[k], k < 2 ? VMMC_EXPORT_READ : 0, NULL, NULL);
        }
    }
    dst = malloc(L + 2 * CONF_GUARD);
    VT_CHECK(dst != NULL);
    vmmc_proxy_t *px[4];
    if (me == 1)
        for (int k = 0; k < 4; k++) {
            px[k] = conf_import(ep, 0, names[k]);
            VT_CHECK(vmmc_proxy_length(px[k]) == L);
            VT_CHECK(!!(vmmc_proxy_flags(px[k]) & VMMC_EXPORT_READ) == (k < 2));
        }
    double t0 = vt_now();
    for (uint64_t seed = 1; seed <= 2; seed++) {
        if (me == 0)
            for (int k = 0; k < 4; k++)
                conf_fill(r[k].p, L, seed, 0);
        VT_OK(vmmc_barrier(ep)); /* the exporter's own stores are in place */
        if (me == 1) {
            for (int k = 0; k < 4; k++) {
                for (size_t s = 0; s < NSIZES; s++) {
                    size_t len = sizes[s];
                    fetch_one(px[k], k, 0, len, seed);
                    fetch_one(px[k], k, L - len, len, seed);
                    if (len < L) {
                        fetch_one(px[k], k, 1, len, seed);
                        fetch_one(px[k], k, 4095, len, seed);
                    }
                    if (seed == 2 && k >= 2)
                        break; /* refusals do not depend on the size */
                }
                /* Past the end: refused whatever the rights. */
                int rc = vmmc_fetch(px[k], L, dst, 1);
                VT_CHECK(rc == VMMC_ERR_BOUNDS || (k >= 2 && rc == VMMC_ERR_PERMISSION));
                rc = vmmc_fetch(px[k], 1, dst, SIZE_MAX);
                VT_CHECK(rc == VMMC_ERR_BOUNDS || (k >= 2 && rc == VMMC_ERR_PERMISSION));
            }
        }
        VT_OK(vmmc_barrier(ep));
    }
    if (me == 0)
        for (int k = 0; k < 4; k++) {
            conf_check(r[k].p, L, 2, 0, "fetches changed the exporter's memory");
            conf_guard_check(&r[k]);
        }
    conf_ok(me, "fetches of 1 byte .. %zu bytes at every edge (%.2f s)", L, vt_now() - t0);
    VT_OK(vmmc_finalize(ep));
    if (me == 0)
        for (int k = 0; k < 4; k++)
            conf_region_release(&r[k]);
    free(dst);
    return 0;
}
