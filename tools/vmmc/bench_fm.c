/* Suite "fm": Fast Messages 2.x (vmmc/fm.h) between two ranks on distinct
 * cores. Rank 0 drives and reports; rank 1 serves the commands it sends over
 * FM itself. Every handler reads the whole message into a user buffer with
 * fm_receive(), as an upper layer would.
 *
 * Metrics (size in bytes):
 *   fm_lat          us      one-way latency = ping-pong / 2, both sides polling
 *                           fm_extract(); reference vmmc/memalloc_lat
 *   fm_stream_lat   us      the same with begin_message + one piece +
 *                           end_message instead of fm_send(); reference fm/fm_lat
 *   fm_gather_lat   us      the same with each message sent as a 24-byte header
 *                           piece (its own buffer) plus a payload piece (from the
 *                           data buffer, aligned as in the one-piece case) and
 *                           read back the same way; reference fm/fm_stream_lat
 *                           (1.00 = free gather)
 *   fm_block_lat    us      8 B ping-pong with both sides in fm_extract_wait()
 *                           (spin, then sleep); reference fm/fm_lat
 *   fm_n_half       B       N1/2 from the fm_lat curve; reference
 *                           vmmc/memalloc_n_half (full runs)
 *   fm_n_half_stream B      N1/2 from the fm_bw (streaming) curve, as the FM
 *                           papers define it (full runs)
 *   fm_n_half_stream_copy B the same from fm_bw_malloc (the copying path,
 *                           whose peak is lower; full runs)
 *   fm_msg_rate     Mmsg/s  rank 0 streams messages, rank 1 extracts them
 *   fm_send_overhead ns     time per fm_send() while streaming (rank 0's view)
 *   fm_bw           GB/s    streaming bandwidth, message size = size, the
 *                           handler receiving into vmmc_mem_alloc() memory
 *                           (large messages are placed there directly, and
 *                           from 32 KiB both ranks copy: see docs/fm.md);
 *                           bounded by its ceiling measured the same way
 *                           in this job, fm/copy_best_bw (without the
 *                           mappings: the vmmc suite's copy2_bw or copy_bw)
 *   copy2_bw        GB/s    the two-core copy FM's split path does (both
 *                           ranks copy half of each message, a go/done
 *                           handshake per message), repetitions alternating
 *                           with fm_bw's; reference vmmc/copy2_bw
 *   copy_best_bw    GB/s    per repetition the better of copy2_bw and one
 *                           core's copy (the same stream, flag and ack as
 *                           fm_bw, by memcpy into the receiver's mapped
 *                           buffer): FM's split adapts, so this is its
 *                           ceiling; reference vmmc/copy_bw
 *   fm_bw_vs_vmmc   GB/s    the fm_bw figure against vmmc/memalloc_bw
 *   fm_bw_malloc_src GB/s   the same with the sender's data in malloc()
 *                           memory: placed, but the sender copies all of it
 *                           (16 KiB and up); reference fm/fm_bw
 *   fm_bw_malloc    GB/s    the same into malloc() memory (copied out of the
 *                           ring); reference fm/fm_bw
 *
 * Send and receive buffers are vmmc_mem_alloc() memory unless named
 * otherwise. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_fm.h"

fb_t fb;

static void h_ctl(fm_stream_t *s, int sender, void *arg)
{
    if (fm_receive(&fb.cmd, s, sizeof fb.cmd) == (ssize_t)sizeof fb.cmd) {
        fb.cmd_base = fb.got; /* data sent after the command may be handled in the same extract */
        fb.dst = fb.cmd.op == OP_STREAM_MALLOC ? fb.mbuf : fb.ubuf;
        fb.have_cmd = 1;
    }
}

static void h_data(fm_stream_t *s, int sender, void *arg)
{
    if (fm_receive(fb.dst, s, MAX_SIZE) < 0)
        fb.err = 1;
    fb.got++;
}

static void h_gdata(fm_stream_t *s, int sender, void *arg)
{
    char hdr[24];
    if (fm_receive(hdr, s, sizeof hdr) < 0 || fm_receive(fb.dst, s, MAX_SIZE) < 0)
        fb.err = 1;
    fb.got++;
}

static void h_ack(fm_stream_t *s, int sender, void *arg) { fb.acks++; }

int fb_send_data(size_t n, int gather)
{
    if (!gather)
        return fm_send(fb.fm, fb.peer, H_DATA, fb.sp, n);
    fm_stream_t *s;
    int rc = fm_begin_message(fb.fm, fb.peer, n, gather == 1 ? H_GDATA : H_DATA, &s);
    if (rc)
        return rc;
    if (gather == 2)
        rc = fm_send_piece(s, fb.sp, n);
    else {
        /* An upper layer's header struct, then the user's buffer: the
         * payload is as aligned as in the one-piece case. */
        static char hdr[24];
        size_t h = n < sizeof hdr ? n : sizeof hdr;
        if ((rc = fm_send_piece(s, hdr, h)) == 0 && h < n)
            rc = fm_send_piece(s, fb.sp, n - h);
    }
    int rc2 = fm_end_message(s);
    return rc ? rc : rc2;
}

int fb_wait_for(volatile uint64_t *ctr, uint64_t target, int block)
{
    while (*ctr < target) {
        int rc = block ? fm_extract_wait(fb.fm, FM_EXTRACT_ALL, 20000) : fm_extract(fb.fm, FM_EXTRACT_ALL);
        if (rc < 0 || (block && rc == 0)) {
            bench_note(fb.c, "fm: waiting failed: %s (%s)", vmmc_strerror(rc ? rc : VMMC_ERR_TIMEOUT),
                       vmmc_last_error());
            return -1;
        }
        if (fb.err)
            return -1;
    }
    return 0;
}

/* Rank 1: serve commands until OP_QUIT. */
static int fb_serve(void)
{
    for (;;) {
        while (!fb.have_cmd)
            if (fm_extract_wait(fb.fm, FM_EXTRACT_ALL, -1) < 0)
                return -1;
        fb.have_cmd = 0;
        ctl_t c = fb.cmd;
        int gather = c.op == OP_GPINGPONG ? 1 : c.op == OP_SPINGPONG ? 2 : 0;
        int block = c.op == OP_BLOCKPP;
        switch (c.op) {
        case OP_PINGPONG:
        case OP_GPINGPONG:
        case OP_SPINGPONG:
        case OP_BLOCKPP:
            for (uint64_t i = 0; i < c.count; i++) {
                if (fb_wait_for(&fb.got, fb.cmd_base + i + 1, block) || fb_send_data(c.n, gather))
                    return -1;
            }
            break;
        case OP_COPY1:
        case OP_COPY2:
            if (!fb.peer_buf ||
                (c.op == OP_COPY1 ? fb_copy1_run(c.n, (long)c.count) : fb_copy2_run(c.n, (long)c.count)))
                return -1;
            break;
        case OP_STREAM:
        case OP_STREAM_MALLOC:
            if (fb_wait_for(&fb.got, fb.cmd_base + c.count, 0) || fm_send_4(fb.fm, fb.peer, H_ACK, 0, 0, 0, 0))
                return -1;
            break;
        case OP_QUIT:
            return 0;
        default:
            return -1;
        }
    }
}

int fb_command(uint64_t op, size_t n, long count)
{
    ctl_t c = {op, n, (uint64_t)count, 0};
    int rc = fm_send(fb.fm, fb.peer, H_CTL, &c, sizeof c);
    if (rc)
        bench_note(fb.c, "fm: control message failed: %s", vmmc_last_error());
    return rc;
}

static int run_fm(bench_ctx_t *c)
{
    memset((void *)&fb, 0, sizeof fb);
    fb.c = c;
    fb.me = c->rank;
    fb.peer = 1 - c->rank;
    if (c->reps > MAX_REPS)
        c->reps = MAX_REPS;
    int rc = fm_init(c->ep, NULL, &fb.fm);
    if (rc) {
        bench_note(c, "fm: fm_init failed: %s", vmmc_last_error());
        return -1;
    }
    if (vmmc_mem_alloc(c->ep, MAX_SIZE, (void **)&fb.ubuf) != VMMC_OK)
        fb.ubuf = NULL;
    if (vmmc_mem_alloc(c->ep, MAX_SIZE, (void **)&fb.src) != VMMC_OK)
        fb.src = NULL;
    fb.mbuf = malloc(MAX_SIZE);
    fb.hsrc = malloc(MAX_SIZE);
    fb.dst = fb.ubuf;
    fb.sp = fb.src;
    int ok = fb.ubuf && fb.mbuf && fb.src && fb.hsrc;
    if (ok) {
        memset(fb.src, 0x5a, MAX_SIZE);
        memset(fb.hsrc, 0x5a, MAX_SIZE);
        memset(fb.mbuf, 0, MAX_SIZE);
        ok = fm_register_handler(fb.fm, H_CTL, h_ctl, NULL) == H_CTL &&
             fm_register_handler(fb.fm, H_DATA, h_data, NULL) == H_DATA &&
             fm_register_handler(fb.fm, H_GDATA, h_gdata, NULL) == H_GDATA &&
             fm_register_handler(fb.fm, H_ACK, h_ack, NULL) == H_ACK;
    }
    if (ok)
        fb_copy2_setup(c->ep);
    if (ok && vmmc_barrier(c->ep) != VMMC_OK)
        ok = 0;
    if (ok) {
        if (fb.me == 0) {
            ok = fb_drive() == 0;
            if (fb_command(OP_QUIT, 0, 0))
                ok = 0;
        } else {
            ok = fb_serve() == 0;
        }
    }
    if (ok)
        vmmc_barrier(c->ep);
    if (ok)
        fm_finalize(fb.fm);
    fb_copy2_teardown(c->ep);
    if (fb.ubuf)
        vmmc_mem_free(c->ep, fb.ubuf);
    if (fb.src)
        vmmc_mem_free(c->ep, fb.src);
    free(fb.mbuf);
    free(fb.hsrc);
    return ok ? 0 : -1;
}

BENCH_SUITE(fm_suite, "fm", "Fast Messages: latency, gather, message rate, bandwidth, N1/2", 2,
            run_fm);
