/* Suite "fm" (bench_fm*.c): what its files share. bench_fm.c holds the
 * suite, its handlers and rank 1's server; bench_fm_drive.c rank 0's
 * measurements; bench_fm_copy.c the copy ceilings measured in the job. */
#ifndef VMMC_BENCH_FM_H
#define VMMC_BENCH_FM_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "vmmc/fm.h"

#define MAX_REPS 1000
#define MAX_SIZE ((size_t)16 << 20)

enum { H_CTL = 1, H_DATA = 2, H_GDATA = 3, H_ACK = 4 };
enum { OP_PINGPONG = 1, OP_GPINGPONG, OP_SPINGPONG, OP_BLOCKPP, OP_STREAM, OP_STREAM_MALLOC,
       OP_COPY1, OP_COPY2, OP_QUIT };

typedef struct ctl {
    uint64_t op, n, count, seq;
} ctl_t;

typedef struct fb {
    bench_ctx_t *c;
    fm_t *fm;
    int me, peer;
    char *ubuf; /* receive buffer: communication memory */
    char *mbuf; /* receive buffer: malloc() memory */
    char *dst;  /* the one the data handlers use now */
    char *src;  /* send buffer: communication memory */
    char *hsrc; /* send buffer: malloc() memory */
    char *sp;   /* the one send_data uses now */
    volatile uint64_t got;     /* data messages handled */
    volatile uint64_t acks;
    ctl_t cmd;
    uint64_t cmd_base; /* data messages handled before the command arrived */
    volatile int have_cmd;
    int err;
    /* copy2_bw, FM's ceiling from VMMC_FM_SPLIT on (see copy2()): each
     * rank's go/done words, and the peer's memory mapped here. */
    char *ctl;                /* own page: word 0 go (rank 1), word 8 done (rank 0) */
    char *peer_ctl, *peer_buf; /* rank 0: rank 1's ctl and cbuf; rank 1: rank 0's ctl and cbuf */
    /* The ceilings' own buffer (rank 0 copies from it, rank 1 into it), the
     * size of ubuf/src but another allocation: an allocation is mapped by
     * one export at a time, and FM's placement keys ubuf and src. */
    char *cbuf;
    vmmc_export_t *ex[2];
    vmmc_proxy_t *px[2];
    uint64_t seq2;
} fb_t;

/* The suite's state: one per rank process. */
extern fb_t fb;

/* bench_fm.c */
/* gather: 0 = fm_send(), 1 = header piece + payload piece, 2 = one piece */
int fb_send_data(size_t n, int gather);
/* Poll (or wait) until *ctr reaches @target. */
int fb_wait_for(volatile uint64_t *ctr, uint64_t target, int block);
/* Rank 0: send rank 1 a command. */
int fb_command(uint64_t op, size_t n, long count);

/* bench_fm_drive.c: rank 0 measures and reports. */
int fb_drive(void);

/* bench_fm_copy.c: the copy ceilings, both ranks (rank 0 drives). */
int fb_copy1_run(size_t n, long count);
int fb_copy2_run(size_t n, long count);
/* Export this rank's side of the ceilings and map the peer's: 0, or -1 (no
 * ceiling measured in this suite; a note says why). */
int fb_copy2_setup(vmmc_ep_t *ep);
void fb_copy2_teardown(vmmc_ep_t *ep);

#endif
