/* RMA through the provider as an application sees it (two processes, see
 * ofi_pair.h): writes and reads of many sizes and offsets checked at the
 * target's memory, gather and scatter, writes with data that reach the
 * target's receive CQ and remote-write counters, inject, delivery complete,
 * fence, selective completion and counters; the errors: out of bounds,
 * access the region does not grant, forged, stale and closed keys, a dead
 * peer; addressing by offset with keys the application chose.
 * `t_ofi_rma [scenario-substring]`. */
#include "ofi_pair.h"

#define BIG (1u << 20)

static struct fid_cntr *wcntr, *rcntr, *rwcntr;

/* Counters for FI_WRITE and FI_READ, and for FI_REMOTE_WRITE. */
static int bind_cntrs(op_side_t *s)
{
    struct fi_cntr_attr a = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
    OP_CALL(fi_cntr_open(s->domain, &a, &wcntr, NULL));
    OP_CALL(fi_cntr_open(s->domain, &a, &rcntr, NULL));
    OP_CALL(fi_cntr_open(s->domain, &a, &rwcntr, NULL));
    OP_CALL(fi_ep_bind(s->ep, &wcntr->fid, FI_WRITE));
    OP_CALL(fi_ep_bind(s->ep, &rcntr->fid, FI_READ));
    OP_CALL(fi_ep_bind(s->ep, &rwcntr->fid, FI_REMOTE_WRITE));
    return 0;
}

static op_cfg_t cfg_rma(void)
{
    op_cfg_t c = op_cfg_default();
    c.caps = FI_MSG | FI_RMA | FI_ATOMIC;
    c.pre_enable = bind_cntrs;
    return c;
}

/* What one side tells the other of a region. */
typedef struct rinfo {
    uint64_t key, addr, len;
} rinfo_t;

static struct fid_mr *reg(op_side_t *s, void *buf, size_t len, uint64_t access, uint64_t rkey)
{
    struct fid_mr *mr = NULL;
    OP_CALL(fi_mr_reg(s->domain, buf, len, access, 0, rkey, 0, &mr, NULL));
    return mr;
}

static int virt(op_side_t *s)
{
    return (s->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
}

/* Send ours, receive the peer's. */
static rinfo_t swap(op_side_t *s, struct fid_mr *mr, void *buf, size_t len)
{
    rinfo_t me = {fi_mr_key(mr), virt(s) ? (uint64_t)(uintptr_t)buf : 0, len}, peer;
    op_oob_send(s, &me, sizeof me);
    op_oob_recv(s, &peer, sizeof peer);
    return peer;
}

/* The counters close after the endpoint bound to them and before the
 * domain: close the endpoint here (the harness skips it then). */
static void close_cntrs(op_side_t *s)
{
    op_barrier(s);
    OP_CALL(fi_close(&s->ep->fid));
    s->ep = NULL;
    OP_CALL(fi_close(&wcntr->fid));
    OP_CALL(fi_close(&rcntr->fid));
    OP_CALL(fi_close(&rwcntr->fid));
}

/* ------------------------------------------------------------------------ */

/* Rank 0 writes and reads rank 1's region; rank 1 checks its memory. */
static int sc_rw(op_side_t *s, void *arg)
{
    (void)arg;
    char *buf = calloc(1, BIG);
    OP_CHECK(buf);
    struct fid_mr *mr = reg(s, buf, BIG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    rinfo_t p = swap(s, mr, buf, BIG);
    uint64_t writes = 0, reads = 0;
    if (s->rank == 0) {
        char *src = malloc(BIG), *dst = malloc(BIG);
        OP_CHECK(src && dst);
        static const size_t lens[] = {0, 1, 7, 64, 4096, 65539, BIG / 2, BIG};
        static const size_t offs[] = {0, 5, 4096, 1000};
        char ctx[2];
        for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
            for (size_t j = 0; j < sizeof offs / sizeof offs[0]; j++) {
                size_t len = lens[i], off = offs[j];
                if (off + len > BIG)
                    continue;
                uint64_t seed = i * 10 + j;
                op_fill(src, len, seed);
                OP_POST(s, "fi_write", fi_write(s->ep, src, len, NULL, s->peer, p.addr + off,
                                                p.key, &ctx[0]));
                op_ent_t e = op_wait_ok(s, s->txcq, &ctx[0], "write");
                OP_CHECK(e.e.flags == (FI_RMA | FI_WRITE));
                writes++;
                memset(dst, 0, len);
                OP_POST(s, "fi_read", fi_read(s->ep, dst, len, NULL, s->peer, p.addr + off,
                                              p.key, &ctx[1]));
                e = op_wait_ok(s, s->txcq, &ctx[1], "read");
                OP_CHECK(e.e.flags == (FI_RMA | FI_READ));
                reads++;
                OP_VERIFY(dst, len, seed, 0, "read back");
            }
        /* Several writes in flight at once, completed in any order. */
        char many[16];
        for (int k = 0; k < 16; k++)
            OP_POST(s, "fi_write", fi_write(s->ep, src + k * 4096, 4096, NULL, s->peer,
                                            p.addr + (uint64_t)k * 4096, p.key, &many[k]));
        for (int k = 0; k < 16; k++)
            op_wait_ok(s, s->txcq, &many[k], "one of 16 writes");
        writes += 16;
        /* Gather and scatter: 3 pieces each way. */
        op_fill(src, 3000, 77);
        struct iovec wv[3] = {{src, 1000}, {src + 1000, 1}, {src + 1001, 1999}};
        OP_POST(s, "fi_writev",
                fi_writev(s->ep, wv, NULL, 3, s->peer, p.addr + 100, p.key, &ctx[0]));
        op_wait_ok(s, s->txcq, &ctx[0], "writev");
        writes++;
        memset(dst, 0, 3000);
        struct iovec rv[3] = {{dst, 10}, {dst + 10, 2900}, {dst + 2910, 90}};
        OP_POST(s, "fi_readv", fi_readv(s->ep, rv, NULL, 3, s->peer, p.addr + 100, p.key, &ctx[1]));
        op_wait_ok(s, s->txcq, &ctx[1], "readv");
        reads++;
        OP_VERIFY(dst, 3000, 77, 0, "readv after writev");
        /* Delivery complete, fence, inject: then the whole region. */
        op_fill(src, BIG, 99);
        struct iovec v = {src, BIG / 2};
        struct fi_rma_iov r = {p.addr, BIG / 2, p.key};
        struct fi_msg_rma m = {&v, NULL, 1, s->peer, &r, 1, &ctx[0], 0};
        OP_POST(s, "fi_writemsg", fi_writemsg(s->ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION));
        op_wait_ok(s, s->txcq, &ctx[0], "writemsg delivery complete");
        v.iov_base = src + BIG / 2;
        r.addr = p.addr + BIG / 2;
        m.context = &ctx[1];
        OP_POST(s, "fi_writemsg", fi_writemsg(s->ep, &m, FI_FENCE | FI_COMPLETION));
        op_wait_ok(s, s->txcq, &ctx[1], "writemsg fence");
        writes += 2;
        OP_POST(s, "fi_inject_write",
                fi_inject_write(s->ep, src + 8, 8, s->peer, p.addr + 8, p.key));
        writes++;
        op_expect_none(s, s->txcq, 0.2, "fi_inject_write");
        OP_CHECK(fi_cntr_read(wcntr) == writes);
        OP_CHECK(fi_cntr_read(rcntr) == reads);
        OP_CHECK(fi_cntr_readerr(wcntr) == 0 && fi_cntr_readerr(rcntr) == 0);
        free(src);
        free(dst);
    }
    op_barrier(s);
    if (s->rank == 0)
        op_oob_send(s, &writes, sizeof writes);
    if (s->rank == 1) {
        OP_VERIFY(buf, BIG, 99, 0, "the target's region after all writes");
        op_oob_recv(s, &writes, sizeof writes);
        /* Counted at the target with FI_RMA_EVENT (a secondary capability
         * the provider may grant unasked), else not at all. */
        if (s->info->caps & FI_RMA_EVENT)
            op_wait_cntr(s, rwcntr, writes, "remote writes");
        OP_CHECK(fi_cntr_read(rwcntr) == ((s->info->caps & FI_RMA_EVENT) ? writes : 0));
    }
    op_barrier(s);
    OP_CALL(fi_close(&mr->fid));
    free(buf);
    close_cntrs(s);
    return 0;
}

/* Writes with data: the target's receive CQ and remote-write counter. */
static int sc_data(op_side_t *s, void *arg)
{
    (void)arg;
    char *buf = calloc(1, 65536);
    OP_CHECK(buf);
    struct fid_mr *mr = reg(s, buf, 65536, FI_REMOTE_WRITE, 0);
    rinfo_t p = swap(s, mr, buf, 65536);
    static const uint64_t data[3] = {0x0123456789abcdefull, 42, ~0ull};
    if (s->rank == 0) {
        char src[4096], ctx[2];
        op_fill(src, sizeof src, 5);
        OP_POST(s, "fi_writedata", fi_writedata(s->ep, src + 10, 100, NULL, data[0], s->peer,
                                                p.addr + 10, p.key, &ctx[0]));
        op_wait_ok(s, s->txcq, &ctx[0], "writedata");
        OP_POST(s, "fi_inject_writedata", fi_inject_writedata(s->ep, src + 200, 16, data[1],
                                                              s->peer, p.addr + 200, p.key));
        struct iovec v = {src + 1000, 3000};
        struct fi_rma_iov r = {p.addr + 1000, 3000, p.key};
        struct fi_msg_rma m = {&v, NULL, 1, s->peer, &r, 1, &ctx[1], data[2]};
        OP_POST(s, "fi_writemsg", fi_writemsg(s->ep, &m, FI_REMOTE_CQ_DATA | FI_COMPLETION));
        op_wait_ok(s, s->txcq, &ctx[1], "writemsg with data");
        op_expect_none(s, s->txcq, 0.1, "inject with data");
    } else {
        static const size_t lens[3] = {100, 16, 3000}, offs[3] = {10, 200, 1000};
        for (int i = 0; i < 3; i++) {
            op_ent_t e = op_wait_ok(s, s->rxcq, NULL, "remote write with data");
            OP_CHECK(e.e.flags == (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA));
            if (e.e.data != data[i] || e.e.len != lens[i])
                OP_FAIL("completion %d: data 0x%llx len %zu, expected 0x%llx len %zu", i,
                        (unsigned long long)e.e.data, e.e.len, (unsigned long long)data[i],
                        lens[i]);
            /* The bytes are in place when the completion is read. */
            OP_VERIFY(buf + offs[i], lens[i], 5, offs[i], "bytes of a write with data");
        }
        op_wait_cntr(s, rwcntr, 3, "remote-write counter");
        OP_CHECK(fi_cntr_read(rwcntr) == 3);
    }
    op_barrier(s);
    OP_CALL(fi_close(&mr->fid));
    free(buf);
    close_cntrs(s);
    return 0;
}

/* FI_RMA_EVENT: every remote write counts at the target, on the endpoint's
 * counter and on the region's; only the one with data makes a CQ entry. */
static int sc_events(op_side_t *s, void *arg)
{
    (void)arg;
    char *buf = calloc(1, 65536);
    OP_CHECK(buf);
    struct fid_mr *mr = reg(s, buf, 65536, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    struct fid_cntr *mrc;
    struct fi_cntr_attr a = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
    OP_CALL(fi_cntr_open(s->domain, &a, &mrc, NULL));
    OP_CALL(fi_mr_bind(mr, &mrc->fid, FI_REMOTE_WRITE));
    OP_EXPECT(-FI_EBUSY, fi_mr_bind(mr, &mrc->fid, FI_REMOTE_WRITE));
    OP_EXPECT(-FI_EINVAL, fi_mr_bind(mr, &mrc->fid, FI_REMOTE_READ));
    rinfo_t p = swap(s, mr, buf, 65536);
    if (s->rank == 0) {
        char src[8192], ctx;
        op_fill(src, sizeof src, 21);
        for (int i = 0; i < 5; i++) {
            OP_POST(s, "fi_write", fi_write(s->ep, src + i * 1000, 1000, NULL, s->peer,
                                            p.addr + (uint64_t)i * 1000, p.key, &ctx));
            op_wait_ok(s, s->txcq, &ctx, "counted write");
        }
        OP_POST(s, "fi_inject_write", fi_inject_write(s->ep, src + 5000, 8, s->peer,
                                                      p.addr + 5000, p.key));
        struct iovec v[2] = {{src + 5008, 992}, {src + 6000, 1000}};
        OP_POST(s, "fi_writev", fi_writev(s->ep, v, NULL, 2, s->peer, p.addr + 5008, p.key, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "counted writev");
        OP_POST(s, "fi_writedata", fi_writedata(s->ep, src + 7000, 1000, NULL, 7, s->peer,
                                                p.addr + 7000, p.key, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "counted writedata");
    } else {
        op_wait_cntr(s, rwcntr, 8, "remote writes on the endpoint's counter");
        op_wait_cntr(s, mrc, 8, "remote writes on the region's counter");
        op_ent_t e = op_wait_ok(s, s->rxcq, NULL, "the write with data");
        OP_CHECK(e.e.data == 7 && e.e.len == 1000);
        op_expect_none(s, s->rxcq, 0.1, "plain writes");
        OP_VERIFY(buf, 8000, 21, 0, "counted writes");
        OP_CHECK(fi_cntr_read(rwcntr) == 8 && fi_cntr_read(mrc) == 8);
    }
    op_barrier(s);
    OP_CALL(fi_close(&mr->fid));
    OP_CALL(fi_close(&mrc->fid));
    free(buf);
    close_cntrs(s);
    return 0;
}

/* Wrong calls are refused at once; refused access ends in an error
 * completion; neither crashes nor moves a byte. */
static int sc_errors(op_side_t *s, void *arg)
{
    (void)arg;
    enum { LEN = 8192 };
    char *rw = calloc(1, LEN), *ro = calloc(1, LEN), *wo = calloc(1, LEN), *gone = calloc(1, LEN);
    OP_CHECK(rw && ro && wo && gone);
    memset(ro, 0x5a, LEN);
    struct fid_mr *mrw = reg(s, rw, LEN, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    struct fid_mr *mro = reg(s, ro, LEN, FI_REMOTE_READ, 0);
    struct fid_mr *mwo = reg(s, wo, LEN, FI_REMOTE_WRITE, 0);
    struct fid_mr *mgone = reg(s, gone, LEN, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    rinfo_t prw = swap(s, mrw, rw, LEN), pro = swap(s, mro, ro, LEN);
    rinfo_t pwo = swap(s, mwo, wo, LEN), pgone = swap(s, mgone, gone, LEN);
    /* A region that was used, then closed: its cached import goes stale. */
    if (s->rank == 1)
        op_barrier(s);
    char src[64], ctx;
    memset(src, 0xee, sizeof src);
    if (s->rank == 0) {
        OP_POST(s, "fi_write", fi_write(s->ep, src, 8, NULL, s->peer, pgone.addr, pgone.key, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "write before the region closes");
        op_barrier(s);
    }
    /* A new region, likely in the closed one's slot, on the same memory. */
    struct fid_mr *magain = NULL;
    uint64_t again = 0;
    if (s->rank == 1) {
        OP_CALL(fi_close(&mgone->fid));
        magain = reg(s, gone, LEN, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
        again = fi_mr_key(magain);
        op_oob_send(s, &again, sizeof again);
    } else {
        op_oob_recv(s, &again, sizeof again);
        OP_CHECK(again != pgone.key);
    }
    op_barrier(s);
    if (s->rank == 0) {
        /* Out of bounds: past the end, before the start, wrapping. */
        OP_EXPECT(-FI_EINVAL, fi_write(s->ep, src, 64, NULL, s->peer, prw.addr + LEN - 63,
                                       prw.key, &ctx));
        OP_EXPECT(-FI_EINVAL, fi_read(s->ep, src, 1, NULL, s->peer, prw.addr + LEN, prw.key, &ctx));
        if (virt(s))
            OP_EXPECT(-FI_EINVAL,
                      fi_read(s->ep, src, 8, NULL, s->peer, prw.addr - 1, prw.key, &ctx));
        OP_EXPECT(-FI_EINVAL, fi_write(s->ep, src, 2, NULL, s->peer, ~0ull, prw.key, &ctx));
        OP_EXPECT(-FI_EINVAL, fi_inject_write(s->ep, src, 2, s->peer, prw.addr + LEN - 1,
                                              prw.key));
        /* Access the region does not grant. */
        OP_POST(s, "write into read-only",
                fi_write(s->ep, src, 8, NULL, s->peer, pro.addr, pro.key, &ctx));
        op_wait_err(s, s->txcq, &ctx, FI_EACCES, "write into a read-only region");
        OP_POST(s, "read of write-only",
                fi_read(s->ep, src, 8, NULL, s->peer, pwo.addr, pwo.key, &ctx));
        op_wait_err(s, s->txcq, &ctx, FI_EACCES, "read of a write-only region");
        OP_CHECK(fi_inject_write(s->ep, src, 8, s->peer, pro.addr, pro.key) < 0);
        /* Forged keys: each bit of the key matters. */
        for (int bit = 0; bit < 64; bit += 7) {
            uint64_t k = prw.key ^ (1ull << bit);
            OP_POST(s, "forged", fi_write(s->ep, src, 8, NULL, s->peer, prw.addr, k, &ctx));
            op_wait_err(s, s->txcq, &ctx, FI_EACCES, "write with a forged key");
        }
        /* The closed region: refused, cached import or not, though a new
         * region covers the same memory; the new one's key works. */
        char other[8];
        memset(other, 0x77, sizeof other);
        OP_POST(s, "closed", fi_write(s->ep, other, 8, NULL, s->peer, pgone.addr + 16, pgone.key,
                                      &ctx));
        op_wait_err(s, s->txcq, &ctx, FI_EACCES, "write into a closed region");
        OP_POST(s, "again", fi_write(s->ep, src, 8, NULL, s->peer, pgone.addr + 8, again, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "write into the new region");
        OP_POST(s, "closed", fi_read(s->ep, src, 8, NULL, s->peer, pgone.addr, pgone.key, &ctx));
        op_wait_err(s, s->txcq, &ctx, FI_EACCES, "read of a closed region");
        /* The endpoint still works. */
        OP_POST(s, "fi_write", fi_write(s->ep, src, 8, NULL, s->peer, prw.addr, prw.key, &ctx));
        op_wait_ok(s, s->txcq, &ctx, "write after the errors");
        OP_CHECK(fi_cntr_readerr(wcntr) > 0 && fi_cntr_readerr(rcntr) > 0);
    }
    op_barrier(s);
    if (s->rank == 1) {
        for (int i = 0; i < LEN; i++)
            if ((unsigned char)ro[i] != 0x5a || wo[i] != 0)
                OP_FAIL("byte %d of a refused region changed", i);
        for (int i = 0; i < 8; i++)
            OP_CHECK((unsigned char)rw[i] == 0xee);
        for (int i = 8; i < LEN; i++)
            OP_CHECK(rw[i] == 0);
        for (int i = 0; i < 16; i++)
            OP_CHECK((unsigned char)gone[i] == 0xee);
        for (int i = 16; i < LEN; i++)
            OP_CHECK(gone[i] == 0); /* the old key's write never landed */
        OP_CALL(fi_close(&magain->fid));
    }
    OP_CALL(fi_close(&mrw->fid));
    OP_CALL(fi_close(&mro->fid));
    OP_CALL(fi_close(&mwo->fid));
    if (s->rank == 0)
        OP_CALL(fi_close(&mgone->fid));
    free(rw);
    free(ro);
    free(wo);
    free(gone);
    close_cntrs(s);
    return 0;
}

#define FLOOD 20000

/* Selective completion: only operations with FI_COMPLETION report. */
static int sc_selective(op_side_t *s, void *arg)
{
    (void)arg;
    char *buf = calloc(1, 4096);
    OP_CHECK(buf);
    struct fid_mr *mr = reg(s, buf, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    rinfo_t p = swap(s, mr, buf, 4096);
    if (s->rank == 0) {
        char src[64], ctx[2];
        op_fill(src, sizeof src, 3);
        struct iovec v = {src, 64};
        struct fi_rma_iov r = {p.addr, 64, p.key};
        struct fi_msg_rma m = {&v, NULL, 1, s->peer, &r, 1, &ctx[0], 0};
        OP_POST(s, "fi_writemsg", fi_writemsg(s->ep, &m, 0));
        op_wait_cntr(s, wcntr, 1, "write without FI_COMPLETION");
        op_expect_none(s, s->txcq, 0.1, "write without FI_COMPLETION");
        m.context = &ctx[1];
        OP_POST(s, "fi_writemsg", fi_writemsg(s->ep, &m, FI_COMPLETION));
        op_wait_ok(s, s->txcq, &ctx[1], "write with FI_COMPLETION");
        OP_CHECK(fi_cntr_read(wcntr) == 2);
        /* More writes in flight than the provider keeps: -FI_EAGAIN until
         * progress completes some, none lost, none reported. */
        static uint64_t vals[FLOOD];
        uint64_t eagain = 0;
        for (uint64_t i = 0; i < FLOOD; i++) {
            vals[i] = i;
            v.iov_base = &vals[i];
            v.iov_len = 8;
            r.addr = p.addr + 64 + (i % 64) * 8;
            r.len = 8;
            ssize_t rc;
            double end = op_now() + OP_TIMEOUT;
            while ((rc = fi_writemsg(s->ep, &m, 0)) == -FI_EAGAIN) {
                eagain++;
                OP_CHECK(op_now() < end);
                fi_cntr_read(wcntr); /* progresses the endpoint */
            }
            OP_EXPECT(0, rc);
        }
        op_wait_cntr(s, wcntr, 2 + FLOOD, "flood of writes");
        op_expect_none(s, s->txcq, 0.1, "flood of writes");
        printf("     flood: %d writes, -FI_EAGAIN %llu times\n", FLOOD, (unsigned long long)eagain);
    }
    op_barrier(s);
    if (s->rank == 1) {
        OP_VERIFY(buf, 64, 3, 0, "selective writes");
        for (uint64_t k = 0; k < 64; k++) {
            uint64_t w;
            memcpy(&w, buf + 64 + k * 8, 8);
            if (w != (FLOOD - 1 - k) / 64 * 64 + k)
                OP_FAIL("word %llu after the flood is %llu", (unsigned long long)k,
                        (unsigned long long)w);
        }
    }
    OP_CALL(fi_close(&mr->fid));
    free(buf);
    close_cntrs(s);
    return 0;
}

/* Without FI_MR_VIRT_ADDR and FI_MR_PROV_KEY: offsets and chosen keys. */
static int sc_offsets(op_side_t *s, void *arg)
{
    (void)arg;
    OP_CHECK(!virt(s));
    char *buf = calloc(1, 4096);
    OP_CHECK(buf);
    uint64_t mykey = 1000 + (uint64_t)s->rank;
    struct fid_mr *mr = reg(s, buf, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE, mykey);
    OP_CHECK(fi_mr_key(mr) == mykey);
    struct fid_mr *dup = NULL;
    OP_EXPECT(-FI_ENOKEY, fi_mr_reg(s->domain, buf, 16, FI_REMOTE_READ, 0, mykey, 0, &dup, NULL));
    rinfo_t p = swap(s, mr, buf, 4096);
    OP_CHECK(p.key == 1001 - (uint64_t)s->rank && p.addr == 0);
    char src[100], dst[100], ctx;
    op_fill(src, sizeof src, 11 + (uint64_t)s->rank);
    OP_POST(s, "fi_write", fi_write(s->ep, src, 100, NULL, s->peer, 500, p.key, &ctx));
    op_wait_ok(s, s->txcq, &ctx, "write at an offset");
    OP_POST(s, "fi_read", fi_read(s->ep, dst, 100, NULL, s->peer, 500, p.key, &ctx));
    op_wait_ok(s, s->txcq, &ctx, "read at an offset");
    OP_VERIFY(dst, 100, 11 + (uint64_t)s->rank, 0, "read at an offset");
    OP_EXPECT(-FI_EINVAL, fi_read(s->ep, dst, 100, NULL, s->peer, 4000, p.key, &ctx));
    op_barrier(s);
    OP_VERIFY(buf + 500, 100, 11 + (uint64_t)(1 - s->rank), 0, "the peer's write");
    OP_CALL(fi_close(&mr->fid));
    free(buf);
    close_cntrs(s);
    return 0;
}

/* A peer that died: error completions, never a hang. Rank 0 leaves without
 * the harness's closing barrier (its peer is gone). */
static int sc_dead(op_side_t *s, void *arg)
{
    (void)arg;
    char *buf = calloc(1, 4096);
    OP_CHECK(buf);
    struct fid_mr *mr = reg(s, buf, 4096, FI_REMOTE_READ | FI_REMOTE_WRITE, 0);
    rinfo_t p = swap(s, mr, buf, 4096);
    char src[64] = {0}, ctx;
    if (s->rank == 1) {
        op_barrier(s);
        _exit(0);
    }
    OP_POST(s, "fi_write", fi_write(s->ep, src, 8, NULL, s->peer, p.addr, p.key, &ctx));
    op_wait_ok(s, s->txcq, &ctx, "write while the peer lives");
    op_barrier(s);
    char c;
    OP_CHECK(read(s->fd, &c, 1) == 0); /* the peer has exited */
    usleep(100000);
    ssize_t r = fi_write(s->ep, src, 8, NULL, s->peer, p.addr, p.key, &ctx);
    if (r == 0)
        op_wait_err(s, s->txcq, &ctx, FI_EIO, "write to a dead peer");
    else
        OP_CHECK(r == -FI_EIO);
    r = fi_read(s->ep, src, 8, NULL, s->peer, p.addr, p.key, &ctx);
    if (r == 0)
        op_wait_err(s, s->txcq, &ctx, FI_EIO, "read from a dead peer");
    else
        OP_CHECK(r == -FI_EIO);
    printf("ok   dead (rank 0 alone)\n");
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv)
{
    op_tally_t t = {0};
    op_cfg_t c = cfg_rma();
    if (op_want(argc, argv, "rw"))
        op_tally(&t, op_run("rw", &c, sc_rw, NULL));
    if (op_want(argc, argv, "data"))
        op_tally(&t, op_run("data", &c, sc_data, NULL));
    op_cfg_t ev = cfg_rma();
    ev.caps |= FI_RMA_EVENT;
    if (op_want(argc, argv, "events"))
        op_tally(&t, op_run("events", &ev, sc_events, NULL));
    if (op_want(argc, argv, "errors"))
        op_tally(&t, op_run("errors", &c, sc_errors, NULL));
    op_cfg_t sel = cfg_rma();
    sel.tx_bind = FI_SELECTIVE_COMPLETION;
    if (op_want(argc, argv, "selective"))
        op_tally(&t, op_run("selective", &sel, sc_selective, NULL));
    op_cfg_t off = cfg_rma();
    off.mr_mode = 0;
    if (op_want(argc, argv, "offsets"))
        op_tally(&t, op_run("offsets", &off, sc_offsets, NULL));
    /* A dead peer is seen at once on shm; over udp only after the link's
     * keep-alive gives up, which the udp variant does not wait for. */
    const char *tr = getenv("VMMC_TRANSPORT");
    if (op_want(argc, argv, "dead") && !(tr && !strcmp(tr, "udp")))
        op_tally(&t, op_run("dead", &c, sc_dead, NULL));
    return op_tally_exit(&t);
}
