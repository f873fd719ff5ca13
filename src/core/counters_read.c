/* Live counters, the reader: the counters memfd of every endpoint of this
 * user's running processes (counters.h), found through /proc/<pid>/fd and
 * read under the writer's sequence lock. The file is input from another
 * process: every field is checked before it is used. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"

/* A non-negative decimal number filling @s, or -1. */
static long number(const char *s, const char *stop)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 0 || v > 0x3fffffff || (stop ? strcmp(end, stop) : *end))
        return -1;
    if (s[0] == '+' || s[0] == '-' || s[0] == ' ')
        return -1;
    return v;
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

/* One counters memfd, open as @path in process @pid: 1 reported, 0 skipped. */
static int read_one(const char *path, int pid, int index, vmmc_counter_set_fn fn, void *arg)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0; /* closed meanwhile */
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid()) {
        close(fd);
        return 0;
    }
    size_t len = (size_t)st.st_size, max = sizeof(cnt_header_t) + CNT_MAX_ENTRIES * sizeof(cnt_entry_t);
    if (len < sizeof(cnt_header_t) || len > max) {
        close(fd);
        if (len)
            fprintf(stderr, "vmmc: %s (pid %d): %zu bytes is not a counters file; skipped\n", path,
                    pid, len);
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
    if (h->magic != CNT_MAGIC)
        goto out; /* not yet whole: being created */
    if (h->pid != pid)
        goto out; /* a copy a child of fork() still holds: its parent reports it */
    if (h->version != CNT_VERSION || h->header_bytes != sizeof(cnt_header_t) ||
        h->name_bytes != CNT_NAME || count > CNT_MAX_ENTRIES ||
        sizeof *h + count * sizeof(cnt_entry_t) > len || h->index != index || (seq2 & 1)) {
        fprintf(stderr, "vmmc: %s (pid %d) is malformed or never still; skipped\n", path, pid);
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

typedef struct {
    int pid, index;
    char path[320]; /* /proc/<pid>/fd/<fd> */
} found_t;

static int by_pid(const void *a, const void *b)
{
    const found_t *x = a, *y = b;
    return x->pid != y->pid ? (x->pid > y->pid) - (x->pid < y->pid)
                            : (x->index > y->index) - (x->index < y->index);
}

/* The counters descriptors of process @pid, appended to @f. */
static void scan(int pid, found_t **f, size_t *n, size_t *cap)
{
    char dir[48];
    snprintf(dir, sizeof dir, "/proc/%d/fd", pid);
    DIR *d = opendir(dir);
    if (!d)
        return; /* gone, or not ours */
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (number(de->d_name, NULL) < 0)
            continue;
        char link[128];
        ssize_t l = readlinkat(dirfd(d), de->d_name, link, sizeof link - 1);
        if (l <= 0)
            continue;
        link[l] = 0;
        size_t pl = strlen(CNT_LINK_PREFIX);
        if (strncmp(link, CNT_LINK_PREFIX, pl))
            continue;
        long index = number(link + pl, " (deleted)");
        if (index < 0)
            continue;
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 16;
            found_t *nf = realloc(*f, nc * sizeof *nf);
            if (!nf)
                break;
            *f = nf;
            *cap = nc;
        }
        found_t *e = &(*f)[(*n)++];
        e->pid = pid;
        e->index = (int)index;
        snprintf(e->path, sizeof e->path, "%s/%s", dir, de->d_name);
    }
    closedir(d);
}

int vmmc_counters_published(int pid, vmmc_counter_set_fn fn, void *arg)
{
    if (pid < 0 || !fn)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_counters_published: %s",
                          pid < 0 ? "negative pid" : "NULL callback");
    found_t *f = NULL;
    size_t n = 0, cap = 0;
    if (pid) {
        scan(pid, &f, &n, &cap);
    } else {
        DIR *d = opendir("/proc");
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            long p = number(de->d_name, NULL);
            if (p > 0)
                scan((int)p, &f, &n, &cap);
        }
        if (d)
            closedir(d);
    }
    if (n)
        qsort(f, n, sizeof *f, by_pid);
    int reported = 0;
    for (size_t i = 0; i < n; i++)
        reported += read_one(f[i].path, f[i].pid, f[i].index, fn, arg);
    free(f);
    return reported;
}
