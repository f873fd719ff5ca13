/* A full completion queue holds back only its own exports' notifications.
 *
 * Rank 0 exports A into a queue of depth 2 that it leaves unpolled, B with
 * a handler, and C into a second queue. Rank 1 sends NOTES notified writes
 * to each, interleaved A, B, C. While A's queue stays full, B's handler and
 * C's queue must get all theirs, in order; then polling A's queue one
 * completion at a time yields all of A's, in order, with their offsets and
 * immediates (each poll lets the next waiting one in, before an atomic
 * posted to that queue can take the slot). Counted: exactly
 * NOTES - 2 waited. A second round leaves records waiting in A's backlog
 * while A is unexported and its queue closed: nothing leaks (ASan), nothing
 * hangs.
 *
 * usage (under vmmc run -n 2): t_cq_backlog */
#include <string.h>

#include "vtest.h"

#define NOTES 50
#define MORE 10
#define SLOT 64

static vmmc_ep_t *ep;
static int b_seen, b_bad;

static void on_b(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e, (void)arg;
    if (n->imm != (uint64_t)b_seen || n->offset != (size_t)b_seen * SLOT || n->sender != 1)
        b_bad++;
    b_seen++;
}

static uint64_t counter(const char *want)
{
    const char *name;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &name, &v) == VMMC_OK; i++)
        if (!strcmp(name, want))
            return v;
    VT_FAIL("no counter %s", want);
}

int main(void)
{
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    static char bufs[3][NOTES * SLOT + MORE * SLOT];
    vmmc_cq_t *qa = NULL, *qc = NULL;
    vmmc_export_t *xa = NULL, *xb = NULL, *xc = NULL;
    int ctx_a, ctx_c;
    uint64_t waited0 = 0;
    if (me == 0) {
        waited0 = counter("notifications_waited");
        VT_OK(vmmc_cq_open(ep, 2, &qa));
        VT_OK(vmmc_cq_open(ep, 64, &qc));
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_CQ, .name = "A",
                                  .addr = bufs[0], .length = sizeof bufs[0], .cq = qa,
                                  .cq_context = &ctx_a};
        VT_OK(vmmc_export(ep, &p, &xa));
        p.name = "C", p.addr = bufs[2], p.cq = qc, p.cq_context = &ctx_c;
        VT_OK(vmmc_export(ep, &p, &xc));
        p = (vmmc_export_params_t){.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "B",
                                   .addr = bufs[1], .length = sizeof bufs[1], .handler = on_b};
        VT_OK(vmmc_export(ep, &p, &xb));
    }
    VT_OK(vmmc_barrier(ep));
    vmmc_proxy_t *pa = NULL, *pb = NULL, *pc = NULL, *pr = NULL;
    static uint64_t word[8];
    if (me == 1) {
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS,
                                  .flags = VMMC_EXPORT_READ, .name = "R", .addr = word,
                                  .length = sizeof word};
        vmmc_export_t *xr;
        VT_OK(vmmc_export(ep, &p, &xr));
        VT_OK(vmmc_import(ep, 0, "A", 5000, &pa));
        VT_OK(vmmc_import(ep, 0, "B", 5000, &pb));
        VT_OK(vmmc_import(ep, 0, "C", 5000, &pc));
        for (int i = 0; i < NOTES; i++) {
            char rec[SLOT];
            memset(rec, 'a' + i % 26, sizeof rec);
            VT_OK(vmmc_send_imm(pa, (size_t)i * SLOT, rec, SLOT, VMMC_SEND_NOTIFY, (uint64_t)i));
            VT_OK(vmmc_send_imm(pb, (size_t)i * SLOT, rec, SLOT, VMMC_SEND_NOTIFY, (uint64_t)i));
            VT_OK(vmmc_send_imm(pc, (size_t)i * SLOT, rec, SLOT, VMMC_SEND_NOTIFY, (uint64_t)i));
        }
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_OK(vmmc_import(ep, 1, "R", 5000, &pr));
        /* B and C get everything while A's queue stays full. */
        int c_seen = 0;
        double t0 = vt_now();
        while (b_seen < NOTES || c_seen < NOTES) {
            if (vt_now() - t0 > 30)
                VT_FAIL("after 30 s B's handler ran %d times and C's queue had %d of %d: held "
                        "back behind A's full queue", b_seen, c_seen, NOTES);
            vmmc_completion_t c[8];
            int n = vmmc_cq_poll(qc, c, 8);
            VT_CHECK(n >= 0);
            for (int i = 0; i < n; i++, c_seen++) {
                VT_CHECK(c[i].op == VMMC_OP_NOTIFY && c[i].status == VMMC_OK);
                VT_CHECK(c[i].context == &ctx_c && c[i].export_ == xc && c[i].peer == 1);
                if (c[i].value != (uint64_t)c_seen || c[i].offset != (size_t)c_seen * SLOT)
                    VT_FAIL("C: completion %d carries imm %llu, offset %zu", c_seen,
                            (unsigned long long)c[i].value, c[i].offset);
            }
            if (n == 0)
                VT_CHECK(vmmc_wait(ep, 10) >= 0);
        }
        VT_CHECK(b_bad == 0);
        /* Every A record beyond the queue's 2 slots waited in its backlog. */
        for (t0 = vt_now(); counter("notifications_waited") - waited0 < NOTES - 2;) {
            if (vt_now() - t0 > 30)
                VT_FAIL("only %llu of A's notifications reached its backlog",
                        (unsigned long long)(counter("notifications_waited") - waited0));
            VT_CHECK(vmmc_wait(ep, 10) >= 0);
        }
        VT_CHECK(counter("notifications_waited") - waited0 == NOTES - 2);
        printf("B: %d handler calls, C: %d completions while A's queue was full; %llu waited\n",
               b_seen, c_seen, (unsigned long long)(counter("notifications_waited") - waited0));
        /* A: all of them, in order, one per poll; a freed slot goes to the
         * next waiting notification, not to a new operation. */
        for (int a_seen = 0; a_seen < NOTES;) {
            if (a_seen < NOTES - 2)
                VT_STATUS(VMMC_ERR_AGAIN,
                          vmmc_atomic_cq(pr, 0, VMMC_ATOMIC_ADD, 8, 1, 0, qa, NULL));
            vmmc_completion_t c;
            int n = vmmc_cq_wait(qa, &c, 1, 20000);
            if (n != 1)
                VT_FAIL("A: %d of %d completions, then %d (%s)", a_seen, NOTES, n,
                        vmmc_last_error());
            VT_CHECK(c.op == VMMC_OP_NOTIFY && c.status == VMMC_OK && c.context == &ctx_a);
            VT_CHECK(c.export_ == xa && c.peer == 1 && c.length == SLOT);
            if (c.value != (uint64_t)a_seen || c.offset != (size_t)a_seen * SLOT)
                VT_FAIL("A: completion %d carries imm %llu, offset %zu (out of order)", a_seen,
                        (unsigned long long)c.value, c.offset);
            VT_CHECK(bufs[0][c.offset] == 'a' + a_seen % 26);
            a_seen++;
        }
        vmmc_completion_t c;
        VT_CHECK(vmmc_cq_poll(qa, &c, 1) == 0);
        /* Room again: an operation posts and completes. */
        int ctx_r;
        VT_OK(vmmc_atomic_cq(pr, 0, VMMC_ATOMIC_ADD, 8, 5, 0, qa, &ctx_r));
        VT_CHECK(vmmc_cq_wait(qa, &c, 1, 20000) == 1);
        VT_CHECK(c.op == VMMC_OP_ATOMIC && c.status == VMMC_OK && c.context == &ctx_r);
        printf("A: %d completions in order after polling\n", NOTES);
    }
    /* Round two: A's backlog still holds records when A goes away. */
    if (me == 0)
        waited0 = counter("notifications_waited");
    VT_OK(vmmc_barrier(ep));
    if (me == 1)
        for (int i = 0; i < MORE; i++) {
            char rec[SLOT] = {0};
            VT_OK(vmmc_send_imm(pa, (size_t)(NOTES + i) * SLOT, rec, SLOT, VMMC_SEND_NOTIFY, 0));
        }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        uint64_t w0 = waited0;
        for (double t0 = vt_now(); counter("notifications_waited") - w0 < MORE - 2;) {
            if (vt_now() - t0 > 30)
                VT_FAIL("round two: %llu waited",
                        (unsigned long long)(counter("notifications_waited") - w0));
            VT_CHECK(vmmc_wait(ep, 10) >= 0);
        }
        VT_STATUS(VMMC_ERR_BUSY, vmmc_cq_close(qa)); /* A still notifies into it */
        VT_OK(vmmc_unexport(xa));
        VT_OK(vmmc_cq_close(qa));
        VT_OK(vmmc_unexport(xb));
        VT_OK(vmmc_unexport(xc));
        VT_OK(vmmc_cq_close(qc));
        printf("t_cq_backlog: ok\n");
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
