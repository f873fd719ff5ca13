/* Completion queues: every operation posted with a queue completes into it
 * exactly once, with its context, op, peer, status, length and value; a
 * queue of depth D refuses the (D+1)th outstanding or unpolled operation
 * with VMMC_ERR_AGAIN and loses nothing; vmmc_cq_wait times out with 0;
 * vmmc_cq_fd becomes readable for epoll; an export given a queue turns its
 * notifications into VMMC_OP_NOTIFY completions, in send order. Also
 * vmmc_fetch_async. */
#include <sys/epoll.h>
#include <unistd.h>

#include "conf.h"

#define L ((size_t)256 << 10)
#define DEPTH 16
#define NOTES 500

static vmmc_ep_t *ep;
static int me;

static int ctx_id(void *ctx) { return (int)(intptr_t)ctx; }

/* Take exactly @p n completions; check each against @p op and the
 * context's slot in @p seen (set once). */
static void take(vmmc_cq_t *cq, int n, vmmc_op_t op, unsigned char *seen, int nseen)
{
    vmmc_completion_t c[8];
    double t0 = vt_now();
    for (int got = 0; got < n;) {
        int k = vmmc_cq_wait(cq, c, 8, 100);
        VT_CHECK(k >= 0 && k <= 8);
        for (int i = 0; i < k; i++) {
            int id = ctx_id(c[i].context);
            if (c[i].status != VMMC_OK)
                VT_FAIL("[%s] completion %d: %s (%s)", conf_transport(), id,
                        vmmc_strerror(c[i].status), c[i].error ? c[i].error : "?");
            if (c[i].op != op || c[i].peer != 1 - me || id < 0 || id >= nseen || seen[id]++)
                VT_FAIL("[%s] completion op %d peer %d context %d: unexpected or twice",
                        conf_transport(), c[i].op, c[i].peer, id);
        }
        got += k;
        if (got > n)
            VT_FAIL("[%s] %d completions for %d operations", conf_transport(), got, n);
        if (vt_now() - t0 > conf_timeout())
            VT_FAIL("[%s] %d of %d completions", conf_transport(), got, n);
    }
}

int main(void)
{
    ep = conf_init(2);
    me = vmmc_rank(ep);
    vmmc_cq_t *cq, *ncq = NULL;
    VT_OK(vmmc_cq_open(ep, DEPTH, &cq));
    conf_region_t reg;
    vmmc_export_t *ex = NULL;
    if (me == 1) {
        VT_OK(vmmc_cq_open(ep, 2 * NOTES, &ncq)); /* never full here */
        conf_region_alloc(ep, &reg, CONF_MEM, L);
        conf_fill(reg.p, L, 7, 0);
        vmmc_export_params_t p = {0};
        p.field_mask = VMMC_EXPORT_PARAM_FLAGS | VMMC_EXPORT_PARAM_CQ;
        p.name = "cq.data";
        p.addr = reg.p;
        p.length = L;
        p.flags = VMMC_EXPORT_READ;
        p.cq = ncq;
        p.cq_context = (void *)(intptr_t)4242;
        VT_OK(vmmc_export(ep, &p, &ex));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        vmmc_proxy_t *px = conf_import(ep, 1, "cq.data");
        /* Nothing posted: a wait times out empty. */
        vmmc_completion_t c[4];
        VT_STATUS(0, vmmc_cq_poll(cq, c, 4));
        VT_STATUS(0, vmmc_cq_wait(cq, c, 4, 50));
        unsigned char *src = malloc(L), *dst = calloc(DEPTH, 4096);
        unsigned char seen[DEPTH * 4] = {0};
        /* Sends: depth D accepted, D+1 refused until polled. */
        conf_fill(src, L, 9, 0);
        for (int i = 0; i < DEPTH; i++)
            VT_OK(vmmc_send_cq(px, (size_t)i * 4096 + 2048, src + i * 4096, 4096, 0, 0, cq,
                               (void *)(intptr_t)i));
        VT_STATUS(VMMC_ERR_AGAIN, vmmc_send_cq(px, 0, src, 8, 0, 0, cq, (void *)(intptr_t)99));
        /* The queue's descriptor is readable while completions wait. */
        int epfd = epoll_create1(0), fd = vmmc_cq_fd(cq);
        VT_CHECK(epfd >= 0 && fd >= 0);
        struct epoll_event ev = {.events = EPOLLIN}, out;
        VT_CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
        VT_CHECK(epoll_wait(epfd, &out, 1, (int)(conf_timeout() * 1000)) == 1);
        take(cq, DEPTH, VMMC_OP_SEND, seen, DEPTH);
        /* Fetches: read back what the sends wrote. */
        memset(seen, 0, sizeof seen);
        for (int i = 0; i < DEPTH; i++)
            VT_OK(vmmc_fetch_cq(px, (size_t)i * 4096 + 2048, dst + i * 4096, 4096, cq,
                                (void *)(intptr_t)i));
        take(cq, DEPTH, VMMC_OP_FETCH, seen, DEPTH);
        VT_CHECK(memcmp(dst, src, (size_t)DEPTH * 4096) == 0);
        /* Atomics: old values 0 .. D - 1 in some order, each once. */
        memset(seen, 0, sizeof seen);
        uint64_t zero = 0;
        VT_OK(vmmc_send(px, L - 8, &zero, 8, 0));
        for (int i = 0; i < DEPTH; i++)
            VT_OK(vmmc_atomic_cq(px, L - 8, VMMC_ATOMIC_ADD, 8, 1, 0, cq, (void *)(intptr_t)i));
        unsigned char olds[DEPTH] = {0};
        for (int got = 0; got < DEPTH;) {
            int k = vmmc_cq_wait(cq, c, 4, (int)(conf_timeout() * 1000));
            VT_CHECK(k > 0);
            for (int i = 0; i < k; i++) {
                VT_CHECK(c[i].op == VMMC_OP_ATOMIC && c[i].status == VMMC_OK);
                VT_CHECK(c[i].value < DEPTH && !olds[c[i].value]++);
                VT_CHECK(!seen[ctx_id(c[i].context)]++);
            }
            got += k;
        }
        /* Asynchronous fetch with a request. */
        vmmc_request_t rq;
        memset(dst, 0, 4096);
        int rc = vmmc_fetch_async(px, 2048, dst, 4096, &rq);
        if (rc == VMMC_INPROGRESS)
            rc = vmmc_request_wait(&rq, (int)(conf_timeout() * 1000));
        VT_OK(rc);
        VT_CHECK(memcmp(dst, src, 4096) == 0);
        /* Refused posts leave nothing behind. */
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_send_cq(px, L, src, 1, 0, 0, cq, NULL));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_fetch_cq(px, L - 1, dst, 2, cq, NULL));
        VT_STATUS(0, vmmc_cq_wait(cq, c, 4, 50));
        /* Notified sends into the export that has a queue. */
        for (uint64_t i = 1; i <= NOTES; i++)
            VT_OK(vmmc_send_imm(px, (size_t)i * 8, &i, 8, VMMC_SEND_NOTIFY, i));
        close(epfd);
        free(src);
        free(dst);
    } else {
        /* Notifications become completions, in send order, with the imm. */
        vmmc_completion_t c[16];
        uint64_t next = 1;
        double t0 = vt_now();
        while (next <= NOTES) {
            int k = vmmc_cq_wait(ncq, c, 16, 100);
            VT_CHECK(k >= 0);
            for (int i = 0; i < k; i++, next++) {
                if (c[i].op != VMMC_OP_NOTIFY || c[i].status != VMMC_OK || c[i].peer != 0 ||
                    c[i].export_ != ex || ctx_id(c[i].context) != 4242 || c[i].value != next ||
                    c[i].offset != (size_t)next * 8 || c[i].length != 8)
                    VT_FAIL("[%s] notification completion %llu: op %d peer %d value %llu "
                            "offset %zu length %zu", conf_transport(), (unsigned long long)next,
                            c[i].op, c[i].peer, (unsigned long long)c[i].value, c[i].offset,
                            c[i].length);
                uint64_t v;
                memcpy(&v, reg.p + c[i].offset, 8);
                VT_CHECK(v == next); /* the data is in place before */
            }
            if (vt_now() - t0 > conf_timeout())
                VT_FAIL("[%s] %llu of %d notification completions", conf_transport(),
                        (unsigned long long)next - 1, NOTES);
        }
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_cq_close(cq));
    if (ncq) {
        VT_OK(vmmc_unexport(ex)); /* the queue outlives what completes into it */
        VT_OK(vmmc_cq_close(ncq));
    }
    conf_ok(me, "completions exactly once with their contexts");
    VT_OK(vmmc_finalize(ep));
    return 0;
}
