/* Counters of this rank (vmmc_dsm_stats) and the request-delay histogram. */
#include <time.h>

#include "dsm/dsm_int.h"

uint64_t dsm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void dsm_stats_delay(uint64_t ns)
{
    atomic_fetch_add(&dsm.st_delay_sum, ns);
    atomic_fetch_add(&dsm.st_delay_count, 1);
    uint64_t m = atomic_load(&dsm.st_delay_max);
    while (ns > m && !atomic_compare_exchange_weak(&dsm.st_delay_max, &m, ns))
        ;
    uint64_t us = ns / 1000;
    unsigned b = 0;
    while (b < 15 && us >= (1ull << b)) /* bucket b: us < 2^b */
        b++;
    atomic_fetch_add(&dsm.st_hist[b], 1);
}

int vmmc_dsm_stats(vmmc_dsm_stats_t *s)
{
    if (!s)
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_stats: NULL");
    if (!dsm.active)
        return dsm_error(VMMC_ERR_ENDPOINT, "vmmc_dsm_stats: the DSM is not initialised");
    s->read_faults = atomic_load(&dsm.st_read_faults);
    s->write_faults = atomic_load(&dsm.st_write_faults);
    s->requests_served = atomic_load(&dsm.st_served);
    s->invalidations = atomic_load(&dsm.st_inval);
    s->forwards = atomic_load(&dsm.st_forwards);
    s->bytes_in = atomic_load(&dsm.st_bytes_in);
    s->delay_ns_sum = atomic_load(&dsm.st_delay_sum);
    s->delay_ns_max = atomic_load(&dsm.st_delay_max);
    s->delay_count = atomic_load(&dsm.st_delay_count);
    for (int i = 0; i < 16; i++)
        s->delay_hist[i] = atomic_load(&dsm.st_hist[i]);
    return VMMC_OK;
}
