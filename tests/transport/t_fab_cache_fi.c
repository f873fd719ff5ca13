/* The fabric registration cache with libfabric's own registration
 * (fi_mr_reg / fi_close on a domain of the tcp;ofi_rxm provider, or
 * FI_PROVIDER): real memory regions, whose deregistration allocates and
 * frees inside libfabric, through hits, evictions and the memory hooks
 * (munmap, free of a large block). Skipped without libfabric or provider. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <malloc.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "transport/fabric/fab_cache.h"
#include "util/log.h"
#include "vtest.h"

static int live, regs, close_errors;

static int mr_reg(void *ctx, void *addr, size_t len, uint64_t access, fab_reg_t *out)
{
    struct fid_mr *mr;
    static uint64_t next_key = 1; /* a key of our own: unique per live region */
    int rc = fi_mr_reg((struct fid_domain *)ctx, addr, len, access, 0, next_key++, 0, &mr, NULL);
    if (rc)
        return vmmc_error(VMMC_ERR_SYSTEM, "fi_mr_reg: %s", fi_strerror(-rc));
    out->desc = fi_mr_desc(mr);
    out->key = fi_mr_key(mr);
    out->handle = mr;
    live++;
    regs++;
    return 0;
}

static void mr_dereg(void *ctx, fab_reg_t *r)
{
    (void)ctx;
    if (fi_close(&((struct fid_mr *)r->handle)->fid) != 0)
        close_errors++;
    live--;
}

int main(void)
{
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    VT_CHECK(hints);
    const char *prov = getenv("FI_PROVIDER");
    hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "tcp;ofi_rxm");
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_RMA | FI_MSG;
    int rc = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc)
        VT_SKIP("no libfabric provider %s with FI_RMA: %s", prov && *prov ? prov : "tcp;ofi_rxm",
                fi_strerror(-rc));
    struct fid_fabric *fab;
    struct fid_domain *dom;
    VT_CHECK(fi_fabric(info->fabric_attr, &fab, NULL) == 0);
    VT_CHECK(fi_domain(fab, info, &dom, NULL) == 0);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);

    fab_cache_t *c = fab_cache_new(64 * ps, 4, mr_reg, mr_dereg, dom);
    VT_CHECK(c);
    fab_cache_stats_t s;
    /* Hit: one registration for many gets of one buffer. */
    char *b = mmap(NULL, 16 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    VT_CHECK(b != MAP_FAILED);
    for (int i = 0; i < 100; i++) {
        const fab_reg_t *r = fab_cache_get(c, b + i, 1000, FI_READ | FI_WRITE);
        VT_CHECK(r && r->handle && (char *)r->addr <= b + i);
        fab_cache_put(c, r);
    }
    fab_cache_stats(c, &s);
    VT_CHECK(regs == 1 && s.hits == 99 && s.misses == 1);
    /* Evictions by count: 8 disjoint pages through a cache of 4. */
    for (int i = 0; i < 8; i++) {
        const fab_reg_t *r = fab_cache_get(c, b + (size_t)(2 * i) * ps, 8, FI_READ);
        VT_CHECK(r);
        fab_cache_put(c, r);
    }
    fab_cache_stats(c, &s);
    VT_CHECK(s.entries == 4 && live == 4 && s.evictions >= 4);
    /* munmap drops what it covered. */
    VT_CHECK(munmap(b, 16 * ps) == 0);
    fab_cache_stats(c, &s);
    VT_CHECK(s.entries == 0 && live == 0 && s.invalidations == 4);
    /* A large block freed and allocated again gets a fresh registration. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    size_t n = 4u << 20;
    char *p = malloc(n);
    VT_CHECK(p);
    const fab_reg_t *r = fab_cache_get(c, p, n, FI_READ);
    VT_CHECK(r);
    uint64_t before = (uint64_t)regs;
    fab_cache_put(c, r);
    free(p);
    p = malloc(n);
    VT_CHECK(p);
    r = fab_cache_get(c, p, n, FI_READ);
    VT_CHECK(r && (uint64_t)regs == before + 1);
    fab_cache_put(c, r);
    free(p);
    fab_cache_free(c);
    VT_CHECK(live == 0 && close_errors == 0);
    fi_close(&dom->fid);
    fi_close(&fab->fid);
    fi_freeinfo(info);
    printf("PASS fi (%d registrations)\n", regs);
    return 0;
}
