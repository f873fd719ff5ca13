/* May another rank of this job run on this rank's processors?
 * (VMMC_DSM_SPIN_YIELD=auto)
 *
 * vmmc's spin after activity saves a wake-up per message when each rank
 * has a processor of its own, but when another rank may need the processor
 * a spinning thread holds (two ranks bound to one, or ranks free to run
 * anywhere on a machine with more runnable threads than processors), that
 * rank cannot answer until the spinner's time slice ends. Each rank
 * publishes its affinity mask in a small readable export (vmmc.dsm.cpus);
 * every rank reads those of the ranks on its kernel (the boot id of their
 * address, stats.c): if one meets its own, vmmc's spin yields while the
 * rank waits in the DSM (wait.c). Ranks bound to processors of their own
 * never yield: a yield could only hand their processor to other work. */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "dsm/dsm_int.h"

#define CPUS_MAGIC 0x76646d6370757331ull /* "vdmcpus1" */
#define CPUS_WORDS 16                    /* 1024 processors */

typedef struct cpus_pub {
    uint64_t magic;
    uint64_t mask[CPUS_WORDS];
} cpus_pub_t;

static cpus_pub_t pub;

static int popcount_mask(const uint64_t *m)
{
    int n = 0;
    for (int i = 0; i < CPUS_WORDS; i++)
        n += __builtin_popcountll(m[i]);
    return n;
}

static int meets(const uint64_t *a, const uint64_t *b)
{
    for (int i = 0; i < CPUS_WORDS; i++)
        if (a[i] & b[i])
            return 1;
    return 0;
}

int dsm_cpus_publish(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    memset(&pub, 0, sizeof pub);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && c < CPUS_WORDS * 64; c++)
            if (CPU_ISSET(c, &set))
                pub.mask[c / 64] |= 1ull << (c % 64);
    }
    pub.magic = CPUS_MAGIC;
    vmmc_export_params_t ep = {0};
    ep.field_mask = VMMC_EXPORT_PARAM_FLAGS;
    ep.name = "vmmc.dsm.cpus";
    ep.addr = &pub;
    ep.length = sizeof pub;
    ep.flags = VMMC_EXPORT_READ;
    int st = vmmc_export(dsm.ep, &ep, &dsm.cpus_ex);
    return st ? dsm_error_vmmc(st, "vmmc_dsm_init: exporting this rank's processors") : VMMC_OK;
}

int dsm_cpus_shared(int *shared)
{
    *shared = 0;
    if (!popcount_mask(pub.mask))
        return VMMC_OK; /* affinity unknown: keep vmmc's spin */
    uint64_t all[CPUS_WORDS];
    memcpy(all, pub.mask, sizeof all);
    int ranks = 1;
    for (int r = 0; r < dsm.n; r++) {
        if (r == dsm.me || !dsm.same_clock || !dsm.same_clock[r])
            continue;
        vmmc_proxy_t *px;
        cpus_pub_t p;
        int st = vmmc_import(dsm.ep, r, "vmmc.dsm.cpus", -1, &px);
        if (st)
            return dsm_error_vmmc(st, "vmmc_dsm_init: importing a rank's processors");
        st = vmmc_fetch(px, 0, &p, sizeof p);
        vmmc_unimport(px);
        if (st)
            return dsm_error_vmmc(st, "vmmc_dsm_init: reading a rank's processors");
        if (p.magic != CPUS_MAGIC)
            return dsm_error(VMMC_ERR_PROTOCOL,
                             "vmmc_dsm_init: rank %d published no processor mask", r);
        if (!meets(p.mask, pub.mask))
            continue;
        ranks++;
        for (int i = 0; i < CPUS_WORDS; i++)
            all[i] |= p.mask[i];
    }
    *shared = ranks > 1;
    if (dsm_cfg.debug)
        fprintf(stderr,
                "vmmc dsm: rank %d: %d ranks (this one included) may run on its %d "
                "processors: vmmc's spin %s while the rank waits\n",
                dsm.me, ranks, popcount_mask(all), *shared ? "yields" : "does not yield");
    return VMMC_OK;
}
