/* Buffer ownership in the core: a source may be reused the moment
 * vmmc_send() returns, or the moment an asynchronous send's request
 * completes. Rank 1 sends thousands of messages of mixed sizes (8 B .. 1 MiB
 * by default) to rank 0 from ONE source buffer, which it overwrites with the
 * next message's bytes right after each send returns (or completes): with
 * vmmc_send, vmmc_send_imm + notification, vmmc_send_async, and
 * vmmc_send_async + notification, from vmmc_mem_alloc() memory and from
 * malloc() memory, into an export in vmmc_mem_alloc() memory (mapped: a
 * memcpy) and one in malloc() memory (a kernel copy). Without notification a
 * flag word follows the data through the same export; with one, the handler
 * checks the data (it must be in place when the handler runs) and that
 * notifications come once each, in order. The receiver checks every byte,
 * poisons the slot and acknowledges it; the sender reuses a slot only after
 * its acknowledgement. Both ranks draw the same sequence of sizes and modes.
 * Usage: t_integrity [messages] [largest message] */
#include <stdio.h>
#include <string.h>

#include "vtest.h"

#define K 4       /* slots per export: messages in flight */
#define HDR 16u   /* seq, size */
#define SEED 0x1d7e5eedull

enum { M_SYNC, M_SYNC_NOTIFY, M_ASYNC, M_ASYNC_NOTIFY, NMODES };
static const char *const mode_name[NMODES] = {"vmmc_send", "vmmc_send_imm+notify",
                                              "vmmc_send_async", "vmmc_send_async+notify"};

typedef struct plan {
    size_t size;
    int mode, heap_dst, heap_src;
} plan_t;

static vmmc_ep_t *ep;
static long nmsg;
static size_t maxmsg = (size_t)1 << 20, slot_bytes;
static uint8_t *dst[2];                /* receiver: exports in library / malloc memory */
static vmmc_export_t *dex[2];
static plan_t *plan;
static uint8_t *notified;              /* receiver: handler saw message i (checked) */
static long last_notified = -1, notifications, bad, bad_later;
static volatile uint64_t ack_word;     /* sender: messages rank 0 has checked */

static inline uint64_t seed(uint64_t seq)
{
    uint64_t x = (seq + 1) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    return x ^ (x >> 29);
}

/* Message seq: header (seq, size), then word j of the payload = seed + j * K. */
static void fill(uint8_t *b, size_t n, uint64_t seq, size_t size)
{
    uint64_t h[2] = {seq, size}, s0 = seed(seq);
    memcpy(b, h, HDR);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t w = s0 + (uint64_t)(j / 8) * 0x165667B19E3779F9ull;
        memcpy(b + HDR + j, &w, 8);
    }
    if (j < n) {
        uint64_t w = s0 + (uint64_t)(j / 8) * 0x165667B19E3779F9ull;
        memcpy(b + HDR + j, &w, n - j);
    }
}

/* First wrong byte of message seq at b (header included), or -1. */
static long first_bad(const uint8_t *b, uint64_t seq, size_t size)
{
    uint64_t h[2];
    memcpy(h, b, HDR);
    if (h[0] != seq || h[1] != size)
        return 0;
    uint64_t s0 = seed(seq);
    for (size_t j = 0; j < size; j += 8) {
        uint64_t w = s0 + (uint64_t)(j / 8) * 0x165667B19E3779F9ull, g = 0;
        size_t c = size - j < 8 ? size - j : 8;
        memcpy(&g, b + HDR + j, c);
        if (memcmp(&g, &w, c))
            return (long)(HDR + j);
    }
    return -1;
}

static void check_msg(uint64_t seq, const char *where)
{
    const plan_t *p = &plan[seq];
    const uint8_t *b = dst[p->heap_dst] + (seq % K) * slot_bytes;
    long at = first_bad(b, seq, p->size);
    if (at < 0)
        return;
    /* The next message's payload there: the source was read after the
     * send had returned and the buffer had been refilled. */
    int later = 0;
    if (at >= (long)HDR) {
        size_t j = ((size_t)at - HDR) & ~(size_t)7, c = p->size - j < 8 ? p->size - j : 8;
        uint64_t w = seed(seq + 1) + (uint64_t)(j / 8) * 0x165667B19E3779F9ull;
        later = !memcmp(b + HDR + j, &w, c);
    }
    if (bad < 5)
        fprintf(stderr, "message %llu (%zu bytes, %s, %s source, %s export) %s: byte %ld is "
                "wrong\n", (unsigned long long)seq, p->size, mode_name[p->mode],
                p->heap_src ? "malloc" : "vmmc_mem_alloc", p->heap_dst ? "malloc" : "library",
                where, at);
    bad++;
    bad_later += later;
}

static void on_notify(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    int which = (int)(intptr_t)arg;
    if (n->sender != 1 || n->offset % slot_bytes || n->length < HDR)
        VT_FAIL("notification from rank %d for [%zu, +%zu) of export %d", n->sender, n->offset,
                n->length, which);
    uint64_t seq;
    memcpy(&seq, dst[which] + n->offset, 8);
    if ((long)seq <= last_notified || (long)seq >= nmsg || notified[seq] ||
        (plan[seq].mode != M_SYNC_NOTIFY && plan[seq].mode != M_ASYNC_NOTIFY) ||
        plan[seq].heap_dst != which || n->offset != (seq % K) * slot_bytes ||
        n->length != HDR + plan[seq].size)
        VT_FAIL("notification %ld (offset %zu, %zu bytes, export %d) names message %llu after "
                "%ld: out of order, twice, or not that message's", notifications, n->offset,
                n->length, which, (unsigned long long)seq, last_notified);
    if (plan[seq].mode == M_SYNC_NOTIFY && n->imm != ~seq)
        VT_FAIL("message %llu: immediate 0x%llx", (unsigned long long)seq,
                (unsigned long long)n->imm);
    check_msg(seq, "when its handler ran");
    notified[seq] = 1;
    last_notified = (long)seq;
    notifications++;
}

static void make_plan(void)
{
    unsigned long long st = SEED;
    plan = calloc((size_t)nmsg, sizeof *plan);
    VT_CHECK(plan != NULL);
    for (long i = 0; i < nmsg; i++) {
        plan_t *p = &plan[i];
        switch (vt_rand(&st) % 8) {
        case 0:
            p->size = 8 + (size_t)(vt_rand(&st) % 4089);
            break;
        case 1:
        case 2: /* around the inline limit of asynchronous sends (16 KiB) */
            p->size = (12u << 10) + (size_t)(vt_rand(&st) % (52u << 10));
            break;
        case 3:
            p->size = maxmsg;
            break;
        default:
            p->size = (64u << 10) + (size_t)(vt_rand(&st) % (maxmsg - (64u << 10) + 1));
            break;
        }
        p->mode = (int)(vt_rand(&st) % NMODES);
        p->heap_dst = (int)((i / 50) & 1);
        p->heap_src = (int)((i / 20) & 1);
    }
}

static void sender(void)
{
    vmmc_proxy_t *px[2];
    VT_OK(vmmc_import(ep, 0, "lib", 10000, &px[0]));
    VT_OK(vmmc_import(ep, 0, "heap", 10000, &px[1]));
    uint8_t *src[2];
    VT_OK(vmmc_mem_alloc(ep, HDR + maxmsg, (void **)&src[0]));
    src[1] = malloc(HDR + maxmsg);
    VT_CHECK(src[1] != NULL);
    fill(src[0], plan[0].size, 0, plan[0].size);
    fill(src[1], plan[0].size, 0, plan[0].size);
    double end = vt_now() + 120;
    for (long i = 0; i < nmsg; i++) {
        const plan_t *p = &plan[i];
        /* Slot i % K is free once message i - K was checked. */
        while ((long)__atomic_load_n(&ack_word, __ATOMIC_ACQUIRE) < i - K + 1) {
            VT_CHECK(vmmc_wait(ep, 10) >= 0);
            if (vt_now() > end)
                VT_FAIL("rank 0 acknowledged %llu of %ld messages",
                        (unsigned long long)ack_word, nmsg);
        }
        uint8_t *b = src[p->heap_src];
        size_t off = (size_t)(i % K) * slot_bytes, len = HDR + p->size;
        vmmc_request_t req;
        int st;
        switch (p->mode) {
        case M_SYNC:
            VT_OK(vmmc_send(px[p->heap_dst], off, b, len, 0));
            break;
        case M_SYNC_NOTIFY:
            VT_OK(vmmc_send_imm(px[p->heap_dst], off, b, len, VMMC_SEND_NOTIFY, ~(uint64_t)i));
            break;
        default:
            st = vmmc_send_async(px[p->heap_dst], off, b, len,
                                 p->mode == M_ASYNC_NOTIFY ? VMMC_SEND_NOTIFY : 0, &req);
            if (st == VMMC_INPROGRESS)
                st = vmmc_request_wait(&req, 60000);
            VT_OK(st);
            break;
        }
        /* The source is ours again: the next message goes into it now. */
        if (i + 1 < nmsg) {
            const plan_t *q = &plan[i + 1];
            fill(b, p->size > q->size ? p->size : q->size, (uint64_t)i + 1, q->size);
            if (q->heap_src != p->heap_src)
                fill(src[q->heap_src], q->size, (uint64_t)i + 1, q->size);
        }
        if (p->mode == M_SYNC || p->mode == M_ASYNC) {
            /* The flag follows the data through the same export. */
            uint64_t flag = (uint64_t)i + 1;
            VT_OK(vmmc_send(px[p->heap_dst], (size_t)K * slot_bytes + (size_t)(i % K) * 8, &flag,
                            8, 0));
            VT_OK(vmmc_signal(ep, 0));
        }
    }
    while ((long)__atomic_load_n(&ack_word, __ATOMIC_ACQUIRE) < nmsg) {
        VT_CHECK(vmmc_wait(ep, 10) >= 0);
        if (vt_now() > end)
            VT_FAIL("rank 0 acknowledged %llu of %ld messages", (unsigned long long)ack_word, nmsg);
    }
    VT_OK(vmmc_mem_free(ep, src[0]));
    free(src[1]);
}

static void receiver(void)
{
    vmmc_proxy_t *pack;
    VT_OK(vmmc_import(ep, 1, "ack", 10000, &pack));
    double end = vt_now() + 120;
    for (long i = 0; i < nmsg; i++) {
        const plan_t *p = &plan[i];
        uint8_t *b = dst[p->heap_dst] + (size_t)(i % K) * slot_bytes;
        if (p->mode == M_SYNC || p->mode == M_ASYNC) {
            const uint64_t *flag =
                (const uint64_t *)(dst[p->heap_dst] + (size_t)K * slot_bytes) + i % K;
            while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != (uint64_t)i + 1) {
                VT_CHECK(vmmc_wait(ep, 10) >= 0);
                if (vt_now() > end)
                    VT_FAIL("message %ld did not arrive", i);
            }
            check_msg((uint64_t)i, "when its flag came");
        } else {
            while (!notified[i]) {
                VT_CHECK(vmmc_wait(ep, 10) >= 0);
                if (vt_now() > end)
                    VT_FAIL("message %ld was not notified (%ld notifications)", i, notifications);
            }
        }
        memset(b, 0xEE, HDR + p->size);
        uint64_t a = (uint64_t)i + 1;
        VT_OK(vmmc_send(pack, 0, &a, sizeof a, VMMC_SEND_NOTIFY));
    }
    long want = 0;
    for (long i = 0; i < nmsg; i++)
        want += plan[i].mode == M_SYNC_NOTIFY || plan[i].mode == M_ASYNC_NOTIFY;
    printf("%ld messages checked (%ld notified, in order, once each)\n", nmsg, notifications);
    if (bad)
        VT_FAIL("%ld of %ld messages were corrupted (%ld held the next message's bytes)", bad, nmsg,
                bad_later);
    VT_CHECK(notifications == want);
}

static void on_ack(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e, (void)n, (void)arg; /* the word is in place; waking the sender is enough */
}

int main(int argc, char **argv)
{
    nmsg = argc > 1 ? atol(argv[1]) : 3000;
    if (argc > 2)
        maxmsg = (size_t)atol(argv[2]);
    VT_CHECK(nmsg > 0 && maxmsg >= (64u << 10));
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 2)
        VT_SKIP("needs 2 ranks");
    int me = vmmc_rank(ep);
    slot_bytes = (HDR + maxmsg + 63) & ~(size_t)63;
    make_plan();
    if (me == 0) {
        size_t len = (size_t)K * slot_bytes + K * 8;
        notified = calloc((size_t)nmsg, 1);
        VT_OK(vmmc_mem_alloc(ep, len, (void **)&dst[0]));
        dst[1] = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
        VT_CHECK(notified && dst[1]);
        memset(dst[1], 0, len);
        const char *names[2] = {"lib", "heap"};
        for (int w = 0; w < 2; w++) {
            vmmc_export_params_t pa = {0};
            pa.field_mask = VMMC_EXPORT_PARAM_HANDLER;
            pa.name = names[w];
            pa.addr = dst[w];
            pa.length = len;
            pa.handler = on_notify;
            pa.handler_arg = (void *)(intptr_t)w;
            VT_OK(vmmc_export(ep, &pa, &dex[w]));
        }
    } else {
        vmmc_export_params_t pa = {0};
        pa.field_mask = VMMC_EXPORT_PARAM_HANDLER;
        pa.name = "ack";
        pa.addr = (void *)&ack_word;
        pa.length = sizeof ack_word;
        pa.handler = on_ack;
        vmmc_export_t *ex;
        VT_OK(vmmc_export(ep, &pa, &ex));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1)
        sender();
    else
        receiver();
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_OK(vmmc_unexport(dex[0]));
        VT_OK(vmmc_unexport(dex[1]));
        VT_OK(vmmc_mem_free(ep, dst[0]));
        free(dst[1]);
        free(notified);
    }
    free(plan);
    VT_OK(vmmc_finalize(ep));
    return 0;
}
