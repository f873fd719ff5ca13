/* Live counters: the file each endpoint publishes, and what reads it.
 *
 * Each endpoint keeps a copy of its counters (vmmc_counter_get: the core's,
 * then each transport's) in a small shared-memory file that processes of the
 * same user can map read-only, as Aeron's counters file does:
 *   /dev/shm/vmmc-cnt.<uid>.<pid>.<n>     (n: the endpoint's number in the process)
 * The control thread refreshes it every VMMC_COUNTERS_PERIOD under a
 * sequence lock; nothing on the data path writes it. The file is created
 * 0600 and removed when the endpoint closes; a file whose process is gone (a
 * crash) is removed by the next reader (vmmc_counters_published, `vmmc info
 * --counters`), which tells a reused pid by the process start time.
 *
 * Layout (native byte order: the file never leaves the host): the header,
 * then count entries of {char name[CNT_NAME]; uint64_t value;}. */
#ifndef VMMC_CORE_COUNTERS_H
#define VMMC_CORE_COUNTERS_H

#include <stdint.h>

#define CNT_FILE_PREFIX "vmmc-cnt."
#define CNT_DIR "/dev/shm"
#define CNT_MAGIC 0x31544e43434d4d56ull /* "VMMCCNT1" */
#define CNT_VERSION 1
#define CNT_NAME 48
#define CNT_MAX_ENTRIES 512

typedef struct cnt_header {
    uint64_t magic;
    uint32_t version;
    uint32_t header_bytes;   /* sizeof(cnt_header_t) */
    uint32_t count;          /* entries that follow */
    uint32_t name_bytes;     /* CNT_NAME */
    int32_t pid, rank, size, index;
    uint64_t start_time;     /* the process's start time (clock ticks since boot, /proc/PID/stat) */
    _Atomic uint64_t seq;    /* odd while the values are being written */
    _Atomic uint64_t updated_ns; /* CLOCK_REALTIME of the last refresh */
} cnt_header_t;

typedef struct cnt_entry {
    char name[CNT_NAME];
    _Atomic uint64_t value;
} cnt_entry_t;

/* The start time of process @pid (field 22 of /proc/PID/stat), or 0. */
uint64_t vmmc_cnt_start_time(int pid);

#endif
