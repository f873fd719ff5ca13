/* Live counters, the writer: each endpoint publishes its counters in a
 * shared-memory file (format and naming in counters.h), refreshed by the
 * control thread every VMMC_COUNTERS_PERIOD. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "util/config.h"

static uint64_t period_ns;
static const vmmc_cfg_entry_t counters_entries[] = {
    {"COUNTERS_PERIOD", "1s", "how often each endpoint refreshes the counters it publishes in "
     "/dev/shm for `vmmc info --counters` (0: publish none)", VMMC_CFG_TIME, &period_ns, 0,
     3600000000000ull},
};
VMMC_CONFIG_TABLE(counters_cfg, "core", counters_entries);

struct vmmc_counters {
    char path[128];
    cnt_header_t *h;
    size_t len;
    int tfd;
    pid_t owner;
};

static _Atomic int next_index;

uint64_t vmmc_cnt_start_time(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    /* The command name may hold spaces and ')': fields start after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++; /* the space before field 3 */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

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

/* Create the file exclusively; a leftover of ours (a dead process whose pid
 * we now have) is replaced. */
static int create_file(const char *path)
{
    for (int tries = 0; tries < 2; tries++) {
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
        struct stat st;
        if (lstat(path, &st) != 0 || st.st_uid != getuid() || !S_ISREG(st.st_mode))
            return -1;
        unlink(path);
    }
    return -1;
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
    c->tfd = -1;
    c->owner = getpid();
    int index = atomic_fetch_add(&next_index, 1);
    snprintf(c->path, sizeof c->path, CNT_DIR "/" CNT_FILE_PREFIX "%u.%d.%d", (unsigned)getuid(),
             (int)c->owner, index);
    c->len = sizeof(cnt_header_t) + (size_t)count * sizeof(cnt_entry_t);
    int rc, fd = create_file(c->path);
    if (fd < 0) {
        rc = vmmc_error_sys("creating %s", c->path);
        goto fail;
    }
    if (ftruncate(fd, (off_t)c->len) != 0) {
        rc = vmmc_error_sys("sizing %s", c->path);
        goto fail_file;
    }
    c->h = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c->h == MAP_FAILED) {
        c->h = NULL;
        rc = vmmc_error_sys("mapping %s", c->path);
        goto fail_file;
    }
    close(fd);
    fd = -1;
    (void)madvise(c->h, c->len, MADV_DONTFORK); /* a child must not write the parent's */
    cnt_header_t *h = c->h;
    h->version = CNT_VERSION;
    h->header_bytes = sizeof *h;
    h->count = (uint32_t)count;
    h->name_bytes = CNT_NAME;
    h->pid = (int32_t)c->owner;
    h->rank = ep->rank;
    h->size = ep->size;
    h->index = index;
    h->start_time = vmmc_cnt_start_time((int)c->owner);
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
        goto fail_file;
    }
    struct itimerspec its = {0};
    its.it_interval.tv_sec = (time_t)(period_ns / 1000000000ull);
    its.it_interval.tv_nsec = (long)(period_ns % 1000000000ull);
    its.it_value = its.it_interval;
    if (timerfd_settime(c->tfd, 0, &its, NULL) != 0) {
        rc = vmmc_error_sys("timerfd_settime for the published counters");
        goto fail_file;
    }
    if ((rc = vmmc_ctl_watch(ep, c->tfd, on_timer, c)) != VMMC_OK)
        goto fail_file;
    ep->published = c;
    return VMMC_OK;
fail_file:
    if (fd >= 0)
        close(fd);
    unlink(c->path);
fail:
    if (c->tfd >= 0)
        close(c->tfd);
    if (c->h)
        munmap(c->h, c->len);
    free(c);
    return rc;
}

void vmmc_counters_close(vmmc_ep_t *ep)
{
    vmmc_counters_t *c = ep->published;
    if (!c)
        return;
    ep->published = NULL;
    if (c->owner == getpid()) /* never the parent's file from a child */
        unlink(c->path);
    close(c->tfd);
    munmap(c->h, c->len);
    free(c);
}
