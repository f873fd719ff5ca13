/* Tiny and huge transfers: 1, 7, 8, 16, 4095, 4096, 4097 bytes and 1 MiB, at
 * the start of a region, one byte in (unaligned) and flush with its end, into
 * heap memory (copy path) and a whole allocation (mapped on shm), by
 * synchronous and asynchronous notified sends; then one 64 MiB send, read
 * back whole with vmmc_fetch.
 *
 * Rank 0 sends; rank 1's handler checks every byte of each transfer when its
 * notification runs and acknowledges it, so the next one cannot overwrite it
 * first. Guard bytes around both regions are checked at the end. */
#include "conf.h"

#define SMALL_REGION ((size_t)2 << 20)
#define HUGE ((size_t)64 << 20)

static const size_t sizes[] = {1, 7, 8, 16, 4095, 4096, 4097, 1 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define NCASES ((int)(2 * NSIZES * 3 + 1)) /* the last: HUGE at 0 of region 1 */

typedef struct {
    int reg;
    size_t off, len;
} xfer_t;

static const size_t reg_len[2] = {SMALL_REGION + 3, HUGE + 5};

static xfer_t xfer(int c)
{
    if (c == NCASES - 1)
        return (xfer_t){1, 0, HUGE};
    int reg = c / (int)(NSIZES * 3), s = (c / 3) % (int)NSIZES, where = c % 3;
    size_t len = sizes[s];
    size_t off = where == 0 ? 0 : where == 1 ? 1 : reg_len[reg] - len;
    return (xfer_t){reg, off, len};
}

static vmmc_ep_t *ep;
static conf_region_t reg[2];
static vmmc_export_t *rex[2];
static vmmc_proxy_t *ack_px;
static int done; /* receiver: transfers checked */

static void on_xfer(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    xfer_t x = xfer(done);
    if (done >= NCASES || n->export_ != rex[x.reg] || n->offset != x.off || n->length != x.len)
        VT_FAIL("[%s] notification %d: %zu bytes at %zu; expected %zu at %zu of region %d",
                conf_transport(), done, n->length, n->offset, x.len, x.off, x.reg);
    conf_check(reg[x.reg].p + x.off, x.len, (uint64_t)done + 1, x.off,
               "transfer %d: %zu bytes at %zu of region %d", done, x.len, x.off, x.reg);
    done++;
    uint64_t v = (uint64_t)done;
    VT_OK(vmmc_send(ack_px, 0, &v, sizeof v, 0));
}

int main(void)
{
    ep = conf_init(2);
    int me = vmmc_rank(ep);
    conf_region_t ack;
    if (me == 1) {
        conf_region_alloc(ep, &reg[0], CONF_HEAP, reg_len[0]);
        conf_region_alloc(ep, &reg[1], CONF_MEM, reg_len[1]);
        rex[0] = conf_export(ep, &reg[0], "small", VMMC_EXPORT_READ, on_xfer, NULL);
        rex[1] = conf_export(ep, &reg[1], "huge", VMMC_EXPORT_READ, on_xfer, NULL);
    } else {
        conf_region_alloc(ep, &ack, CONF_MEM, 64);
        conf_export(ep, &ack, "ack", VMMC_EXPORT_READ, NULL, NULL);
    }
    VT_OK(vmmc_barrier(ep));
    vmmc_proxy_t *px[2] = {0};
    if (me == 0) {
        px[0] = conf_import(ep, 1, "small");
        px[1] = conf_import(ep, 1, "huge");
    } else {
        ack_px = conf_import(ep, 0, "ack");
    }
    VT_OK(vmmc_barrier(ep)); /* the handler needs ack_px */
    double t0 = vt_now();
    if (me == 0) {
        unsigned char *src = malloc(HUGE);
        VT_CHECK(src != NULL);
        for (int c = 0; c < NCASES; c++) {
            xfer_t x = xfer(c);
            conf_fill(src, x.len, (uint64_t)c + 1, x.off);
            if (c % 2) {
                vmmc_request_t rq;
                int rc = vmmc_send_async(px[x.reg], x.off, src, x.len, VMMC_SEND_NOTIFY, &rq);
                if (rc == VMMC_INPROGRESS)
                    rc = vmmc_request_wait(&rq, (int)(conf_timeout() * 1000));
                VT_OK(rc);
            } else {
                VT_OK(vmmc_send(px[x.reg], x.off, src, x.len, VMMC_SEND_NOTIFY));
            }
            CONF_POLL(ep, conf_load(ack.p) == (uint64_t)c + 1, "the acknowledgement");
        }
        /* Read the 64 MiB back whole. */
        unsigned char *back = malloc(HUGE + 2 * CONF_GUARD);
        VT_CHECK(back != NULL);
        memset(back, CONF_GUARD_BYTE, HUGE + 2 * CONF_GUARD);
        VT_OK(vmmc_fetch(px[1], 0, back + CONF_GUARD, HUGE));
        conf_check(back + CONF_GUARD, HUGE, (uint64_t)NCASES, 0, "64 MiB read back");
        for (size_t i = 0; i < CONF_GUARD; i++)
            VT_CHECK(back[i] == CONF_GUARD_BYTE && back[CONF_GUARD + HUGE + i] == CONF_GUARD_BYTE);
        free(back);
        free(src);
    } else {
        CONF_WAIT(ep, done == NCASES, "every transfer");
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        conf_guard_check(&reg[0]);
        conf_guard_check(&reg[1]);
    }
    conf_ok(me, "%d transfers of 1 byte .. 64 MiB whole (%.2f s)", NCASES, vt_now() - t0);
    VT_OK(vmmc_finalize(ep));
    return 0;
}
