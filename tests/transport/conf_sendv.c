/* Gather sends: vmmc_sendv's pieces land one after another from the offset,
 * exactly as one send of their concatenation would: zero-length pieces,
 * 1 .. 64 KiB pieces, 1 and VMMC_IOV_MAX pieces, at the start, unaligned and
 * flush with the end, into heap memory and a whole allocation (mapped on
 * shm); with VMMC_SEND_NOTIFY one notification with the imm, the offset and
 * the total length, after all of it. Refused, writing nothing: a total past
 * the end, a total that overflows size_t, too many pieces, a negative count,
 * no array. */
#include "conf.h"

#define L ((size_t)(1 << 20) + 5)
#define NCASE 24

typedef struct {
    int n;
    size_t len[VMMC_IOV_MAX], total, off;
} gather_t;

/* Case @p c for a region of @p len bytes. */
static gather_t gather(int c, size_t len)
{
    gather_t g = {0};
    g.n = c % 4 == 0 ? 1 : c % 4 == 1 ? VMMC_IOV_MAX : 2 + (int)(conf_hash((uint64_t)c) % 9);
    size_t cap = c % 3 == 2 ? (g.n == VMMC_IOV_MAX ? 8192 : 65536) : 300;
    for (int i = 0; i < g.n; i++) {
        g.len[i] = i % 5 == 3 ? 0 : 1 + conf_hash((uint64_t)c * 100 + (uint64_t)i) % cap;
        g.total += g.len[i];
    }
    g.off = c % 3 == 0 ? 0 : c % 3 == 1 ? 1 + conf_hash((uint64_t)c) % 1000 : len - g.total;
    return g;
}

static vmmc_proxy_t *ack_px;
static conf_region_t reg[2];
static vmmc_export_t *rex[2];
static int done;

static void on_gather(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    int x = done / NCASE, c = done % NCASE;
    gather_t g = gather(c, L);
    if (n->export_ != rex[x] || n->offset != g.off || n->length != g.total ||
        n->imm != (uint64_t)done + 1)
        VT_FAIL("[%s] notification %d: %zu bytes at %zu imm %llu; expected %zu at %zu",
                conf_transport(), done, n->length, n->offset, (unsigned long long)n->imm,
                g.total, g.off);
    conf_check(reg[x].p + g.off, g.total, (uint64_t)done + 1, 0, "gather %d (%d pieces)", done,
               g.n);
    done++;
    uint64_t v = (uint64_t)done;
    VT_OK(vmmc_send(ack_px, 0, &v, sizeof v, 0));
}

int main(void)
{
    vmmc_ep_t *ep = conf_init(2);
    int me = vmmc_rank(ep);
    conf_region_t ack;
    vmmc_proxy_t *px[2] = {0};
    if (me == 1) {
        conf_region_alloc(ep, &reg[0], CONF_HEAP, L);
        conf_region_alloc(ep, &reg[1], CONF_MEM, L);
        rex[0] = conf_export(ep, &reg[0], "g.heap", VMMC_EXPORT_READ, on_gather, NULL);
        rex[1] = conf_export(ep, &reg[1], "g.mem", VMMC_EXPORT_READ, on_gather, NULL);
        ack_px = conf_import(ep, 0, "g.ack");
    } else {
        conf_region_alloc(ep, &ack, CONF_MEM, 64);
        conf_export(ep, &ack, "g.ack", VMMC_EXPORT_READ, NULL, NULL);
        px[0] = conf_import(ep, 1, "g.heap");
        px[1] = conf_import(ep, 1, "g.mem");
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        unsigned char *src = malloc(L);
        vmmc_iov_t iov[VMMC_IOV_MAX + 1];
        for (int k = 0; k < 2 * NCASE; k++) {
            gather_t g = gather(k % NCASE, L);
            /* The pieces are cut from a pattern whose bytes are placed by
             * their position in the whole: contiguous landing is checked. */
            conf_fill(src, g.total, (uint64_t)k + 1, 0);
            size_t at = 0;
            for (int i = 0; i < g.n; i++) {
                /* Pieces live apart in memory: each is copied to its own place. */
                unsigned char *piece = malloc(g.len[i] + 1);
                memcpy(piece, src + at, g.len[i]);
                iov[i].base = piece;
                iov[i].len = g.len[i];
                at += g.len[i];
            }
            VT_OK(vmmc_sendv(px[k / NCASE], g.off, iov, g.n, VMMC_SEND_NOTIFY, (uint64_t)k + 1));
            for (int i = 0; i < g.n; i++)
                free((void *)iov[i].base);
            CONF_POLL(ep, conf_load(ack.p) == (uint64_t)k + 1, "the acknowledgement");
        }
        /* Refusals. */
        unsigned char b[8] = {0};
        for (int i = 0; i <= VMMC_IOV_MAX; i++)
            iov[i] = (vmmc_iov_t){b, 1};
        VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[0], 0, iov, VMMC_IOV_MAX + 1, 0, 0));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[0], 0, iov, -1, 0, 0));
        VT_STATUS(VMMC_ERR_INVALID, vmmc_sendv(px[0], 0, NULL, 2, 0, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_sendv(px[0], L - 1, iov, 2, VMMC_SEND_NOTIFY, 0));
        VT_STATUS(VMMC_ERR_BOUNDS, vmmc_sendv(px[1], L, iov, 1, 0, 0));
        iov[0] = (vmmc_iov_t){b, SIZE_MAX / 2 + 1};
        iov[1] = (vmmc_iov_t){b, SIZE_MAX / 2 + 1};
        iov[2] = (vmmc_iov_t){b, 1};
        int rc = vmmc_sendv(px[0], 0, iov, 3, 0, 0); /* the total wraps to 1 */
        VT_CHECK(rc == VMMC_ERR_BOUNDS || rc == VMMC_ERR_INVALID);
        VT_OK(vmmc_sendv(px[1], L - 1, iov + 2, 1, 0, 0)); /* the last byte */
        VT_OK(vmmc_sendv(px[1], L, iov + 2, 0, 0, 0));
        free(src);
    } else {
        CONF_WAIT(ep, done == 2 * NCASE, "every gather send");
    }
    VT_OK(vmmc_barrier(ep));
    VT_CHECK(vmmc_progress(ep) >= 0);
    if (me == 1) {
        VT_CHECK(done == 2 * NCASE); /* nothing notified for a refused one */
        for (int x = 0; x < 2; x++)
            conf_guard_check(&reg[x]);
    }
    conf_ok(me, "%d gather sends landed contiguously; refusals wrote nothing", 2 * NCASE);
    VT_OK(vmmc_finalize(ep));
    return 0;
}
