/* VMMC_STATS: an endpoint's counters written at vmmc_finalize, as UCX's
 * UCX_STATS_DEST does, so that a run shows what it refused, retransmitted
 * and woke without a tool attached to it. One line a counter:
 *   vmmc.stats rank=R pid=P NAME=VALUE
 * Nothing is written on the data path; the counters are what
 * vmmc_counter_get() reads at any time. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

/* Expand %r (rank) and %p (pid) in @pat into @out. */
static void expand(const char *pat, int rank, int pid, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *c = pat; *c && o + 1 < cap; c++) {
        if (c[0] == '%' && (c[1] == 'r' || c[1] == 'p')) {
            int n = snprintf(out + o, cap - o, "%d", c[1] == 'r' ? rank : pid);
            if (n < 0 || (size_t)n >= cap - o)
                break;
            o += (size_t)n;
            c++;
        } else {
            out[o++] = *c;
        }
    }
    out[o] = 0;
}

void vmmc_stats_dump(vmmc_ep_t *ep)
{
    const char *dest = vmmc_core_cfg.stats;
    if (!dest || !*dest)
        return;
    FILE *f;
    char path[4096];
    if (!strcmp(dest, "stdout")) {
        f = stdout;
    } else if (!strcmp(dest, "stderr")) {
        f = stderr;
    } else {
        expand(dest, ep->rank, (int)ep->pid, path, sizeof path);
        f = fopen(path, "a");
        if (!f) {
            vmmc_warn("VMMC_STATS: cannot open %s: %m", path);
            return;
        }
    }
    const char *name;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &name, &v) == VMMC_OK; i++)
        fprintf(f, "vmmc.stats rank=%d pid=%d %s=%llu\n", ep->rank, (int)ep->pid, name,
                (unsigned long long)v);
    if (f == stdout || f == stderr)
        fflush(f);
    else
        fclose(f);
}
