/* Live counters, the reader: every counters file of this user's running
 * processes (counters.h), read under the writer's sequence lock, and the
 * files of processes that are gone removed. A file is input from another
 * process: every field is checked before it is used. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"

/* "vmmc-cnt.<uid>.<pid>.<n>" with our uid: 0 and the pid and n, or -1. */
static int parse_name(const char *name, int *pid, int *index)
{
    char want[40];
    snprintf(want, sizeof want, CNT_FILE_PREFIX "%u.", (unsigned)getuid());
    size_t wl = strlen(want);
    if (strncmp(name, want, wl))
        return -1;
    char *end;
    errno = 0;
    long p = strtol(name + wl, &end, 10);
    if (errno || end == name + wl || *end != '.' || p <= 0 || p > 0x3fffffff)
        return -1;
    const char *s = end + 1;
    long n = strtol(s, &end, 10);
    if (errno || end == s || *end || n < 0 || n > 0x3fffffff)
        return -1;
    *pid = (int)p;
    *index = (int)n;
    return 0;
}

static int alive(int pid, uint64_t start_time)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 0;
    uint64_t now = vmmc_cnt_start_time(pid);
    return !now || !start_time || now == start_time; /* unreadable: assume alive */
}

/* Read the whole file at once (never a mapping: a file truncated under a
 * reader must not crash it). */
static ssize_t read_file(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* One file: 1 reported, 0 skipped or removed. */
static int read_one(const char *name, int pid, int index, vmmc_counter_set_fn fn, void *arg)
{
    char path[300];
    snprintf(path, sizeof path, CNT_DIR "/%s", name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0; /* gone meanwhile, or not a regular file of ours */
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
        close(fd);
        return 0;
    }
    size_t len = (size_t)st.st_size, max = sizeof(cnt_header_t) + CNT_MAX_ENTRIES * sizeof(cnt_entry_t);
    if (len < sizeof(cnt_header_t) || len > max) {
        close(fd);
        if (!alive(pid, 0))
            unlink(path);
        else if (len)
            fprintf(stderr, "vmmc: %s: %zu bytes is not a counters file; skipped\n", path, len);
        return 0;
    }
    char *buf = malloc(len);
    const char **names = calloc(CNT_MAX_ENTRIES, sizeof *names);
    uint64_t *values = calloc(CNT_MAX_ENTRIES, sizeof *values);
    int reported = 0;
    if (!buf || !names || !values)
        goto out;
    const cnt_header_t *h = (const cnt_header_t *)buf;
    const cnt_entry_t *e = (const cnt_entry_t *)(h + 1);
    uint64_t seq2 = 1;
    for (int tries = 0; tries < 100; tries++) {
        /* The writer's sequence lock: the copy is whole when the number
         * before it is even and unchanged after it. */
        if (read_file(fd, buf, len) != (ssize_t)len)
            goto out;
        if (pread(fd, &seq2, sizeof seq2, (off_t)offsetof(cnt_header_t, seq)) != sizeof seq2)
            goto out;
        uint64_t seq1 = atomic_load_explicit(&((cnt_header_t *)buf)->seq, memory_order_relaxed);
        if (seq1 == seq2 && !(seq1 & 1))
            break;
        seq2 = 1;
    }
    uint32_t count = h->count;
    if (h->magic != CNT_MAGIC || h->version != CNT_VERSION ||
        h->header_bytes != sizeof(cnt_header_t) || h->name_bytes != CNT_NAME ||
        count > CNT_MAX_ENTRIES || sizeof *h + count * sizeof(cnt_entry_t) > len ||
        h->pid != pid || h->index != index || (seq2 & 1)) {
        if (!alive(pid, 0))
            unlink(path);
        else if (h->magic == CNT_MAGIC) /* no magic yet: being created */
            fprintf(stderr, "vmmc: %s is malformed or never still; skipped\n", path);
        goto out;
    }
    if (!alive(pid, h->start_time)) {
        unlink(path);
        goto out;
    }
    for (uint32_t i = 0; i < count; i++) {
        cnt_entry_t *w = (cnt_entry_t *)&e[i];
        w->name[CNT_NAME - 1] = 0; /* our copy */
        names[i] = w->name;
        values[i] = atomic_load_explicit(&w->value, memory_order_relaxed);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t upd = atomic_load_explicit(&((cnt_header_t *)h)->updated_ns, memory_order_relaxed);
    vmmc_counter_set_t set = {.pid = pid, .index = index, .rank = h->rank, .size = h->size,
                              .age_s = now > upd ? (double)(now - upd) * 1e-9 : 0,
                              .count = (int)count, .names = names, .values = values};
    fn(&set, arg);
    reported = 1;
out:
    close(fd);
    free(buf);
    free(names);
    free(values);
    return reported;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int vmmc_counters_published(int pid, vmmc_counter_set_fn fn, void *arg)
{
    if (pid < 0 || !fn)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_counters_published: %s",
                          pid < 0 ? "negative pid" : "NULL callback");
    DIR *d = opendir(CNT_DIR);
    if (!d)
        return 0; /* no /dev/shm: nobody publishes */
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int p, idx;
    while ((de = readdir(d)) != NULL) {
        if (parse_name(de->d_name, &p, &idx) != 0 || (pid && p != pid))
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn)
                break;
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(de->d_name)))
            break;
        n++;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    int reported = 0;
    for (size_t i = 0; i < n; i++) {
        if (parse_name(names[i], &p, &idx) == 0)
            reported += read_one(names[i], p, idx, fn, arg);
        free(names[i]);
    }
    free(names);
    return reported;
}
