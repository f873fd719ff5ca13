/* Stress: every rank writes random-size, random-offset messages with
 * notifications into every other rank, for a fixed time, in blocking mode
 * (more processes than cores must not spin). Each receiver's handler checks
 * every byte and order, then returns a credit by writing into the sender's
 * exported ack array from inside the handler. Even ranks export library
 * memory (mapped path), odd ranks malloc memory (process_vm_writev path).
 *
 * usage: t_stress [seconds]   (default 10) */
#include <string.h>
#include <unistd.h>

#include "vtest.h"

#define K 4             /* outstanding messages per (sender, receiver) */
#define SLOT (64 << 10) /* bytes per message slot */
#define DONE UINT64_MAX

static vmmc_ep_t *ep;
static int me, n;
static unsigned char *data;       /* [sender][K][SLOT] */
static uint64_t *acks;            /* [receiver]: messages acked by receiver */
static vmmc_proxy_t **pdata, **packs;
static uint64_t *expect_seq, *bytes_in;
static int done_from, errors;

static unsigned char pat(int s, uint64_t seq, size_t i)
{
    return (unsigned char)(s * 31 + seq * 7 + i * 13 + (i >> 7));
}

static void on_data(vmmc_ep_t *e, const vmmc_notification_t *nt, void *arg)
{
    (void)e;
    (void)arg;
    int s = nt->sender;
    uint64_t seq = nt->imm;
    if (seq == DONE) {
        done_from++;
        return;
    }
    if (seq != expect_seq[s]) {
        fprintf(stderr, "rank %d: from %d got seq %llu, expected %llu\n", me, s,
                (unsigned long long)seq, (unsigned long long)expect_seq[s]);
        errors++;
    }
    expect_seq[s] = seq + 1;
    size_t slot_off = ((size_t)s * K + seq % K) * SLOT;
    if (nt->offset < slot_off || nt->offset + nt->length > slot_off + SLOT) {
        errors++;
        return;
    }
    const unsigned char *b = data + nt->offset;
    for (size_t i = 0; i < nt->length; i++) {
        if (b[i] != pat(s, seq, i)) {
            fprintf(stderr, "rank %d: from %d seq %llu byte %zu wrong\n", me, s,
                    (unsigned long long)seq, i);
            errors++;
            break;
        }
    }
    bytes_in[s] += nt->length;
    /* Return the credit: acks[me] at the sender = seq + 1. Sends from a
     * handler are allowed. */
    uint64_t a = seq + 1;
    VT_OK(vmmc_send(packs[s], (size_t)me * 8, &a, 8, 0));
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    me = vmmc_rank(ep);
    n = vmmc_size(ep);
    size_t dlen = (size_t)n * K * SLOT;
    if (me % 2 == 0)
        VT_OK(vmmc_mem_alloc(ep, dlen, (void **)&data));
    else
        VT_CHECK((data = calloc(1, dlen)) != NULL);
    VT_CHECK((acks = calloc((size_t)n, 8)) != NULL);
    expect_seq = calloc((size_t)n, 8);
    bytes_in = calloc((size_t)n, 8);
    pdata = calloc((size_t)n, sizeof *pdata);
    packs = calloc((size_t)n, sizeof *packs);
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
    p.name = "data";
    p.addr = data;
    p.length = dlen;
    p.handler = on_data;
    vmmc_export_t *e1, *e2;
    VT_OK(vmmc_export(ep, &p, &e1));
    p.name = "acks";
    p.addr = acks;
    p.length = (size_t)n * 8;
    p.field_mask = 0;
    VT_OK(vmmc_export(ep, &p, &e2));
    for (int r = 0; r < n; r++) {
        if (r == me)
            continue;
        VT_OK(vmmc_import(ep, r, "data", 10000, &pdata[r]));
        VT_OK(vmmc_import(ep, r, "acks", 10000, &packs[r]));
    }
    VT_OK(vmmc_barrier(ep));

    unsigned long long seed = 0x9e3779b97f4a7c15ull * (unsigned long long)(me + 1);
    unsigned char *src = malloc(SLOT);
    uint64_t *sent = calloc((size_t)n, 8), total = 0, bytes_out = 0;
    double t0 = vt_now();
    while (vt_now() - t0 < seconds) {
        int r = (int)(vt_rand(&seed) % (unsigned)n);
        if (r == me)
            continue;
        /* Wait for a credit, serving our own handlers meanwhile. */
        while (sent[r] - __atomic_load_n(&acks[r], __ATOMIC_ACQUIRE) >= K) {
            int rc = vmmc_wait(ep, 5000);
            if (rc < 0)
                VT_FAIL("wait for credits from rank %d: %s", r, vmmc_strerror(rc));
        }
        uint64_t seq = sent[r];
        size_t len = vt_rand(&seed) % 8 == 0 ? 1 + vt_rand(&seed) % SLOT : 1 + vt_rand(&seed) % 256;
        size_t off = vt_rand(&seed) % (SLOT - len + 1);
        for (size_t i = 0; i < len; i++)
            src[i] = pat(me, seq, i);
        size_t dst = ((size_t)me * K + seq % K) * SLOT + off;
        VT_OK(vmmc_send_imm(pdata[r], dst, src, len, VMMC_SEND_NOTIFY, seq));
        sent[r]++;
        total++;
        bytes_out += len;
    }
    /* Drain: all our messages acknowledged, then tell everyone we are done,
     * and keep serving until everyone told us the same. */
    for (int r = 0; r < n; r++)
        while (r != me && __atomic_load_n(&acks[r], __ATOMIC_ACQUIRE) != sent[r])
            VT_CHECK(vmmc_wait(ep, 5000) >= 0);
    for (int r = 0; r < n; r++)
        if (r != me)
            VT_OK(vmmc_send_imm(pdata[r], 0, src, 0, VMMC_SEND_NOTIFY, DONE));
    while (done_from < n - 1)
        VT_CHECK(vmmc_wait(ep, 5000) >= 0);
    VT_OK(vmmc_barrier(ep));
    uint64_t in = 0;
    for (int r = 0; r < n; r++)
        in += bytes_in[r];
    printf("rank %d: sent %llu messages (%llu bytes), received %llu bytes, %d errors\n", me,
           (unsigned long long)total, (unsigned long long)bytes_out, (unsigned long long)in, errors);
    VT_CHECK(errors == 0);
    VT_CHECK(total > 0);
    for (int r = 0; r < n; r++) {
        if (r == me)
            continue;
        VT_OK(vmmc_unimport(pdata[r]));
        VT_OK(vmmc_unimport(packs[r]));
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    if (me % 2)
        free(data);
    free(acks);
    free(expect_seq);
    free(bytes_in);
    free(pdata);
    free(packs);
    free(src);
    free(sent);
    return 0;
}
