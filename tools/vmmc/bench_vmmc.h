/* Suite "vmmc" (bench_vmmc*.c): what its files share. */
#ifndef VMMC_BENCH_VMMC_H
#define VMMC_BENCH_VMMC_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAX_REPS 1000
#define WAIT_LIMIT_NS 20e9 /* a peer silent this long means something broke */
#define MAX_SIZE ((size_t)16 << 20)

enum { SLOT_FLAG = 0, SLOT_ACK = 1, SLOT_GO = 2, SLOT_DONE = 3, SLOT_MAP = 4, SLOT_GO2 = 5,
       SLOT_DONE2 = 6, NSLOTS = 8 };
enum { MODE_POLL, MODE_BLOCK, MODE_EPOLL, MODE_SERVICE };

typedef struct region {
    char *mem;
    size_t len;
    char *map;        /* the peer's region mapped here (floors), or NULL */
    int from_alloc;
    vmmc_export_t *ex;
    vmmc_proxy_t *px; /* the peer's region of the same kind */
} region_t;

typedef struct vb {
    bench_ctx_t *c;
    vmmc_ep_t *ep;
    int me, peer;
    size_t data;      /* bytes of data area in ma and ml */
    region_t ma, ml, nt;
    char *src;        /* send source */
    uint64_t seq;     /* sequence numbers, identical on both ranks */
    uint64_t seq2;    /* copy2_bw's messages, identical on both ranks */
    _Atomic uint64_t notified;
    uint64_t reply_until; /* rank 1: the handler replies while notified <= this */
    int service_mode;
    sem_t done;
    int failed;
    int drive; /* waits call vmmc_progress(): data arrives through it (udp) */
    int raw;   /* measuring a floor: data moves by memcpy into r->map */
} vb_t;

int vb_fail(vb_t *v, const char *what, int rc);
volatile uint64_t *vb_slot(vb_t *v, int k);
size_t vb_slot_off(vb_t *v, int k);
int vb_wait_word(vb_t *v, volatile uint64_t *p, uint64_t val);
int vb_put_word(vb_t *v, int k, uint64_t val);
int vb_quick_skip(vb_t *v, size_t n);
int vb_want(vb_t *v, size_t n);
long vb_iters_for(vb_t *v, size_t n, long base);
int vb_stream(vb_t *v, region_t *r, size_t n, long count);

#define EACH(v, FULL, QUICK, n)                                                              \
    for (size_t n##_i = 0, n;                                                                \
         n##_i < ((v)->c->quick ? sizeof QUICK / sizeof *QUICK : sizeof FULL / sizeof *FULL) && \
         ((n = (v)->c->quick ? QUICK[n##_i] : FULL[n##_i]), 1);                              \
         n##_i++)                                                                            \
        if (vb_want(v, n))

/* bench_vmmc_lat.c: latency and bandwidth; bench_vmmc_notify.c: send
 * overheads, overlap and notifications. */
int vb_test_latency(vb_t *v);
int vb_test_bandwidth(vb_t *v);
int vb_test_overhead(vb_t *v);
int vb_test_async(vb_t *v);
int vb_test_notify(vb_t *v);
/* bench_vmmc_atomic.c: remote atomics and reads. */
int vb_test_atomic(vb_t *v);

#endif
