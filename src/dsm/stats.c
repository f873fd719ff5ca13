/* Counters of this rank (vmmc_dsm_stats) and the request-delay histograms:
 * the faulting side's (request sent -> minipage open) and the serving
 * side's (request arrived -> served, MILLIPAGE's "request delay").
 *
 * The serving side cannot see when a notification arrived, only when its
 * handler starts: the time in between is the wait for its service thread,
 * the part the paper found largest. So the sender stamps each request with
 * its clock at the send (dsm_stamp, in the immediate's spare bits) and the
 * server subtracts it from its own clock; this holds between ranks with
 * one CLOCK_MONOTONIC, i.e. on one host (one kernel: the same boot id), and
 * requests from ranks on other hosts are not counted. On shm a send is the
 * arrival (the bytes are in the receiver's queue when it returns). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsm/dsm_int.h"

uint64_t dsm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void max_of(_Atomic uint64_t *m, uint64_t ns)
{
    uint64_t v = atomic_load(m);
    while (ns > v && !atomic_compare_exchange_weak(m, &v, ns))
        ;
}

static unsigned bucket(uint64_t ns)
{
    uint64_t us = ns / 1000;
    unsigned b = 0;
    while (b < 15 && us >= (1ull << b)) /* bucket b: us < 2^b */
        b++;
    return b;
}

void dsm_stats_delay(uint64_t ns)
{
    atomic_fetch_add(&dsm.st_delay_sum, ns);
    atomic_fetch_add(&dsm.st_delay_count, 1);
    max_of(&dsm.st_delay_max, ns);
    atomic_fetch_add(&dsm.st_hist[bucket(ns)], 1);
}

uint64_t dsm_stamp(uint64_t imm, uint64_t now_ns)
{
    if (!dsm_stamped(IMM_TYPE(imm)))
        return imm;
    uint64_t st = (now_ns >> DSM_STAMP_SHIFT) & DSM_STAMP_MASK;
    return (imm & ((1ull << 42) - 1)) | st << 42;
}

/* A stamped request from @src, whose handler ran from @start_ns to
 * @end_ns (served). */
void dsm_stats_serve(int src, uint64_t imm, uint64_t start_ns, uint64_t end_ns)
{
    if (!dsm_stamped(IMM_TYPE(imm)) || src == dsm.me || !dsm.same_clock || !dsm.same_clock[src])
        return;
    /* the sender's clock, to within one unit, from the 22 bits it sent */
    uint64_t units = start_ns >> DSM_STAMP_SHIFT;
    uint64_t back = (units - IMM_AUX(imm)) & DSM_STAMP_MASK;
    if (back > units)
        return;
    uint64_t sent = ((units - back) << DSM_STAMP_SHIFT) + (1u << (DSM_STAMP_SHIFT - 1));
    uint64_t wait = start_ns > sent ? start_ns - sent : 0;
    uint64_t total = end_ns > sent ? end_ns - sent : 0;
    atomic_fetch_add(&dsm.st_serve_sum, total);
    atomic_fetch_add(&dsm.st_serve_wait_sum, wait);
    atomic_fetch_add(&dsm.st_serve_count, 1);
    max_of(&dsm.st_serve_max, total);
    max_of(&dsm.st_serve_wait_max, wait);
    atomic_fetch_add(&dsm.st_serve_hist[bucket(total)], 1);
}

/* The boot id of this kernel: ranks that have it share CLOCK_MONOTONIC. */
static void boot_id(char *buf, size_t cap)
{
    buf[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f)
        return;
    if (!fgets(buf, (int)cap, f))
        buf[0] = 0;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
}

/* A peer's address is "key=value;" pairs, "host=<boot id>-<netns>;" among
 * them (docs/core.md): the boot id says whether it runs on this kernel. */
int dsm_clock_peers(void)
{
    dsm.same_clock = calloc((size_t)dsm.n, 1);
    if (!dsm.same_clock)
        return dsm_error(VMMC_ERR_NOMEM, "vmmc_dsm_init: out of memory for the tables");
    char me[64];
    boot_id(me, sizeof me);
    size_t ml = strlen(me);
    if (ml == 0)
        return VMMC_OK; /* unknown: count nothing rather than wrong figures */
    for (int r = 0; r < dsm.n; r++) {
        char addr[VMMC_ADDR_MAX + 1];
        size_t len = VMMC_ADDR_MAX;
        if (r == dsm.me || vmmc_peer_addr(dsm.ep, r, addr, &len) != VMMC_OK)
            continue;
        addr[len < VMMC_ADDR_MAX ? len : VMMC_ADDR_MAX] = 0;
        const char *h = strstr(addr, "host=");
        if (h && (h == addr || h[-1] == ';') && !strncmp(h + 5, me, ml) && h[5 + ml] == '-')
            dsm.same_clock[r] = 1;
    }
    return VMMC_OK;
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
    s->serve_ns_sum = atomic_load(&dsm.st_serve_sum);
    s->serve_ns_max = atomic_load(&dsm.st_serve_max);
    s->serve_count = atomic_load(&dsm.st_serve_count);
    s->serve_wait_ns_sum = atomic_load(&dsm.st_serve_wait_sum);
    s->serve_wait_ns_max = atomic_load(&dsm.st_serve_wait_max);
    s->spin_yields = atomic_load(&dsm.st_spin_yields);
    s->bad_messages = atomic_load(&dsm.st_bad_msgs);
    s->wait_timeouts = atomic_load(&dsm.st_wait_timeouts);
    s->messages_sent = atomic_load(&dsm.st_msgs_sent);
    s->polled_waits = atomic_load(&dsm.st_polled_waits);
    s->polled_faults = atomic_load(&dsm.st_polled_faults);
    s->opened_early = atomic_load(&dsm.st_opened_early);
    int q = atomic_load(&dsm.sending);
    s->outbox = q > 0 ? (uint64_t)q : 0;
    for (int i = 0; i < 16; i++)
        s->serve_hist[i] = atomic_load(&dsm.st_serve_hist[i]);
    return VMMC_OK;
}
