/* Live counters: the file each endpoint publishes, and what reads it.
 *
 * Each endpoint keeps a copy of its counters (vmmc_counter_get: the core's,
 * then each transport's) in a small memfd named "vmmc-cnt.<n>" (n: the
 * endpoint's number in the process), as Aeron keeps its counters file. It
 * has no name in any file system: another process of the same user reaches
 * it as /proc/<pid>/fd/<fd> (readlink: "/memfd:vmmc-cnt.<n> (deleted)"), and
 * it vanishes with the endpoint or with the process, a crash included, so
 * nothing is ever left behind. It is sealed against shrinking and growing,
 * so nobody can make the owner's mapping fault. The control thread refreshes
 * it every VMMC_COUNTERS_PERIOD under a sequence lock; nothing on the data
 * path writes it.
 *
 * Layout (native byte order: the file never leaves the host): the header,
 * then count entries of {char name[CNT_NAME]; uint64_t value;}. */
#ifndef VMMC_CORE_COUNTERS_H
#define VMMC_CORE_COUNTERS_H

#include <stdint.h>

#include "core/core.h"

#define CNT_MEMFD_NAME "vmmc-cnt."
#define CNT_LINK_PREFIX "/memfd:vmmc-cnt."
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
    _Atomic uint64_t seq;    /* odd while the values are being written */
    _Atomic uint64_t updated_ns; /* CLOCK_REALTIME of the last refresh */
} cnt_header_t;

typedef struct cnt_entry {
    char name[CNT_NAME];
    _Atomic uint64_t value;
} cnt_entry_t;

/* In a child of fork(): close the copy of the descriptor (async-signal-safe),
 * so the child does not appear to publish its parent's counters. */
void vmmc_counters_forked(vmmc_ep_t *ep);

#endif
