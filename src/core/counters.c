/* Live counters, the writer: each endpoint publishes its counters in a
 * memfd (format and naming in counters.h), refreshed by the control thread
 * every VMMC_COUNTERS_PERIOD. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "util/config.h"

static uint64_t period_ns;
static const vmmc_cfg_entry_t counters_entries[] = {
    {"COUNTERS_PERIOD", "1s", "how often each endpoint refreshes the counters it publishes for "
     "`vmmc info --counters` (0: publish none)", VMMC_CFG_TIME, &period_ns, 0,
     3600000000000ull},
};
VMMC_CONFIG_TABLE(counters_cfg, "core", counters_entries);

struct vmmc_counters {
    cnt_header_t *h;
    size_t len;
    int fd;  /* the memfd: kept open, it is how readers find the counters */
    int tfd; /* the refresh timer */
};

static _Atomic int next_index;

static void refresh(vmmc_ep_t *ep, vmmc_counters_t *c)
{
    cnt_header_t *h = c->h;
    cnt_entry_t *e = (cnt_entry_t *)(h + 1);
    uint64_t s = atomic_load_explicit(&h->seq, memory_order_relaxed);
    atomic_store_explicit(&h->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    const char *name;
    uint64_t v;
    for (uint32_t i = 0; i < h->count; i++)
        if (vmmc_counter_get(ep, (int)i, &name, &v) == VMMC_OK)
            atomic_store_explicit(&e[i].value, v, memory_order_relaxed);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_store_explicit(&h->updated_ns, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
                          memory_order_relaxed);
    atomic_store_explicit(&h->seq, s + 2, memory_order_release);
}

static void on_timer(vmmc_ep_t *ep, int fd, uint32_t events, void *arg)
{
    uint64_t ticks;
    if (read(fd, &ticks, sizeof ticks) != (ssize_t)sizeof ticks)
        return;
    refresh(ep, arg);
}

int vmmc_counters_open(vmmc_ep_t *ep)
{
    if (!period_ns)
        return VMMC_OK;
    int count = 0;
    const char *name;
    uint64_t v;
    while (count < CNT_MAX_ENTRIES && vmmc_counter_get(ep, count, &name, &v) == VMMC_OK)
        count++;
    vmmc_counters_t *c = calloc(1, sizeof *c);
    if (!c)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the published counters");
    c->fd = c->tfd = -1;
    int index = atomic_fetch_add(&next_index, 1);
    char mname[32];
    snprintf(mname, sizeof mname, CNT_MEMFD_NAME "%d", index);
    c->len = sizeof(cnt_header_t) + (size_t)count * sizeof(cnt_entry_t);
    int rc;
    c->fd = memfd_create(mname, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (c->fd < 0) {
        rc = vmmc_error_sys("memfd_create for the published counters");
        goto fail;
    }
    if (ftruncate(c->fd, (off_t)c->len) != 0 ||
        fcntl(c->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        rc = vmmc_error_sys("sizing and sealing the published counters");
        goto fail;
    }
    c->h = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
    if (c->h == MAP_FAILED) {
        c->h = NULL;
        rc = vmmc_error_sys("mapping the published counters");
        goto fail;
    }
    (void)madvise(c->h, c->len, MADV_DONTFORK); /* a child must not write the parent's */
    cnt_header_t *h = c->h;
    h->version = CNT_VERSION;
    h->header_bytes = sizeof *h;
    h->count = (uint32_t)count;
    h->name_bytes = CNT_NAME;
    h->pid = (int32_t)getpid();
    h->rank = ep->rank;
    h->size = ep->size;
    h->index = index;
    cnt_entry_t *e = (cnt_entry_t *)(h + 1);
    for (int i = 0; i < count; i++)
        if (vmmc_counter_get(ep, i, &name, &v) == VMMC_OK)
            snprintf(e[i].name, CNT_NAME, "%s", name);
    refresh(ep, c);
    atomic_thread_fence(memory_order_release);
    h->magic = CNT_MAGIC; /* last: a reader sees a whole header or none */
    c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (c->tfd < 0) {
        rc = vmmc_error_sys("timerfd for the published counters");
        goto fail;
    }
    struct itimerspec its = {0};
    its.it_interval.tv_sec = (time_t)(period_ns / 1000000000ull);
    its.it_interval.tv_nsec = (long)(period_ns % 1000000000ull);
    its.it_value = its.it_interval;
    if (timerfd_settime(c->tfd, 0, &its, NULL) != 0) {
        rc = vmmc_error_sys("timerfd_settime for the published counters");
        goto fail;
    }
    if ((rc = vmmc_ctl_watch(ep, c->tfd, on_timer, c)) != VMMC_OK)
        goto fail;
    ep->published = c;
    return VMMC_OK;
fail:
    if (c->tfd >= 0)
        close(c->tfd);
    if (c->h)
        munmap(c->h, c->len);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    return rc;
}

void vmmc_counters_close(vmmc_ep_t *ep)
{
    vmmc_counters_t *c = ep->published;
    if (!c)
        return;
    ep->published = NULL;
    close(c->tfd);
    munmap(c->h, c->len);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

void vmmc_counters_forked(vmmc_ep_t *ep)
{
    vmmc_counters_t *c = ep->published;
    if (c && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}
