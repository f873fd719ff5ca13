/* The holder's side of the protocol (lock held): serve a forwarded request
 * as owner, take a minipage in (data or a grant), give a copy up
 * (invalidation), learn that an address is no minipage (nack).
 *
 * Order of each step: a rank lowers its own access (mprotect) before the
 * bytes leave or the acknowledgement goes, and raises it only once the
 * bytes are in place, so no write is ever lost between two copies. */
#include <string.h>

#include "dsm/dsm_int.h"

/* Pages, count and view of the minipage whose head is @head, as this rank
 * knows it; -1 if it never held it. */
int dsm_ext_pages(uint32_t head, size_t *page, size_t *npg, unsigned *view)
{
    *page = head / dsm.views;
    *view = head % dsm.views;
    if (dsm.page_mode) {
        *npg = 1;
        return 0;
    }
    dsm_ext_t e = dsm.ext[head];
    if (!e.len)
        return -1;
    *npg = ((size_t)e.off + e.len + DSM_PAGE - 1) / DSM_PAGE;
    return 0;
}

static int head_acc(uint32_t head)
{
    return dsm.acc[head] & ACC_MASK;
}

void dsm_set_acc(uint32_t head, int acc)
{
    size_t page, npg;
    unsigned view;
    if (dsm_ext_pages(head, &page, &npg, &view) != 0)
        return;
    dsm_protect(view, page, npg, acc);
    for (size_t k = 0; k < npg; k++) {
        uint8_t *a = &dsm.acc[(page + k) * dsm.views + view];
        *a = (uint8_t)((*a & ~ACC_MASK) | acc);
    }
}

/* An answer came: requests in flight for these pages are over. */
static void answered(uint32_t head)
{
    size_t page, npg;
    unsigned view;
    if (dsm_ext_pages(head, &page, &npg, &view) != 0)
        return;
    for (size_t k = 0; k < npg; k++)
        dsm.acc[(page + k) * dsm.views + view] &= (uint8_t)~ACC_INFLIGHT;
}

static void bytes_of(uint32_t head, size_t *off, size_t *len)
{
    size_t page = head / dsm.views;
    if (dsm.page_mode) {
        *off = page * DSM_PAGE;
        *len = DSM_PAGE;
    } else {
        *off = page * DSM_PAGE + dsm.ext[head].off;
        *len = dsm.ext[head].len;
    }
}

/* Hand the minipage to @rq, who will write it: this rank closes it first. */
static void give(uint32_t head, int rq)
{
    dsm_set_acc(head, ACC_NONE);
    dsm.acc[head] &= (uint8_t)~ACC_OWNER;
    size_t off, len;
    bytes_of(head, &off, &len);
    dsm_post_data(rq, dsm_imm(M_DATA_W, (unsigned)dsm.me, head, 0), off, len);
    atomic_fetch_add(&dsm.st_served, 1);
}

/* A read copy for @rq; @how: 0 asked through the manager, 1 pushed, 2 asked
 * here directly (no DONE to the manager). */
static void lend(uint32_t head, int rq, unsigned how)
{
    if (head_acc(head) == ACC_W)
        dsm_set_acc(head, ACC_R);
    size_t off, len;
    bytes_of(head, &off, &len);
    dsm_post_data(rq, dsm_imm(M_DATA_R, (unsigned)dsm.me, head, how), off, len);
    atomic_fetch_add(&dsm.st_served, 1);
}

void dsm_on_forward(int src, uint64_t imm)
{
    (void)src;
    unsigned t = IMM_TYPE(imm);
    uint32_t head = IMM_ID(imm);
    int rq = IMM_RANK(imm);
    size_t page, npg;
    unsigned view;
    if (rq == dsm.me || head_acc(head) == ACC_NONE ||
        dsm_ext_pages(head, &page, &npg, &view) != 0) {
        dsm_break("protocol error: the manager forwarded a request for minipage %u from "
                  "rank %d to this rank, which does not hold it",
                  head, rq);
        return;
    }
    if (t != M_FWD_W)
        lend(head, rq, t == M_FWD_PUSH);
    else if (!dsm_direct_hold(head, CONT_GIVE, rq, 0, 0, 1ull << rq))
        give(head, rq);
}

void dsm_on_req_d(int src, uint64_t imm)
{
    uint32_t head = IMM_ID(imm);
    size_t page, npg;
    unsigned view;
    if (!dsm_cfg.onehop || src == dsm.me || !(dsm.acc[head] & ACC_OWNER) ||
        head_acc(head) == ACC_NONE || dsm_direct_busy(head) ||
        dsm_ext_pages(head, &page, &npg, &view) != 0) {
        dsm_post(src, dsm_imm(M_NOTOWN, (unsigned)dsm.me, head, 0));
        return;
    }
    dsm.dset[head] |= 1ull << src;
    lend(head, src, 2);
}

static void raise_to(uint32_t head, int acc, int done)
{
    if (head_acc(head) < acc)
        dsm_set_acc(head, acc);
    if (acc == ACC_W)
        dsm.acc[head] |= ACC_OWNER;
    answered(head);
    if (done)
        dsm_post(dsm_home(head), dsm_imm(M_DONE, (unsigned)dsm.me, head, 0));
    dsm_wake();
}

void dsm_on_data(int src, uint64_t imm, size_t off, size_t len)
{
    uint32_t head = IMM_ID(imm);
    size_t page = head / dsm.views;
    int ok = len > 0 && off / DSM_PAGE == page && off + len <= dsm.size;
    if (dsm.page_mode)
        ok = ok && off == page * DSM_PAGE && len == DSM_PAGE;
    else
        ok = ok && len <= UINT32_MAX;
    if (!ok) {
        dsm_bad_msg(src, imm, "minipage bytes at the wrong place");
        return;
    }
    if (!dsm.page_mode)
        dsm.ext[head] = (dsm_ext_t){(uint32_t)len, (uint16_t)(off % DSM_PAGE), 0};
    atomic_fetch_add(&dsm.st_bytes_in, len);
    int w = IMM_TYPE(imm) == M_DATA_W;
    dsm.hint[head] = w ? 0 : (int8_t)(src + 1); /* the sender of a read copy owns it */
    raise_to(head, w ? ACC_W : ACC_R, IMM_AUX(imm) != 2);
}

void dsm_on_grant(int src, uint64_t imm)
{
    uint32_t head = IMM_ID(imm);
    size_t page, npg;
    unsigned view;
    if (dsm_ext_pages(head, &page, &npg, &view) != 0) {
        dsm_bad_msg(src, imm, "a grant of a minipage this rank never held");
        return;
    }
    if (IMM_TYPE(imm) == M_GRANT_R)
        raise_to(head, ACC_R, 1);
    else if (!dsm_direct_hold(head, CONT_OPEN_W, 0, 0, 0, 1ull << dsm.me))
        raise_to(head, ACC_W, 1);
}

/* Give the copy up at the manager's word (lock held). */
static void inval_now(uint32_t head)
{
    if (head_acc(head) != ACC_NONE) {
        dsm_set_acc(head, ACC_NONE);
        atomic_fetch_add(&dsm.st_inval, 1);
    }
    dsm.acc[head] &= (uint8_t)~ACC_OWNER;
    dsm_post(dsm_home(head), dsm_imm(M_ACK, (unsigned)dsm.me, head, 0));
}

void dsm_on_inval(int src, uint64_t imm)
{
    (void)src;
    uint32_t head = IMM_ID(imm);
    if (!dsm_direct_hold(head, CONT_ACK, 0, 0, 0, 0))
        inval_now(head);
}

/* The owner's direct invalidation of a copy it gave this rank. */
void dsm_on_dinv(int src, uint64_t imm)
{
    uint32_t head = IMM_ID(imm);
    if (!(dsm.acc[head] & ACC_OWNER) && head_acc(head) != ACC_NONE) {
        dsm_set_acc(head, ACC_NONE);
        atomic_fetch_add(&dsm.st_inval, 1);
    }
    dsm_post(src, dsm_imm(M_DACK, (unsigned)dsm.me, head, 0));
}

void dsm_on_notown(int src, uint64_t imm)
{
    (void)src;
    uint32_t head = IMM_ID(imm);
    dsm.hint[head] = 0; /* ask the manager next time */
    dsm.acc[head] &= (uint8_t)~ACC_INFLIGHT;
    dsm_wake();
}

void dsm_proto_resume(int cont, uint32_t head, int target, uint64_t a, uint64_t b)
{
    switch (cont) {
    case CONT_GIVE:
        give(head, target);
        break;
    case CONT_ACK:
        inval_now(head);
        break;
    case CONT_OPEN_W:
        raise_to(head, ACC_W, 1);
        break;
    case CONT_EXTEND:
        dsm_extend_apply(head, (size_t)a, (size_t)b);
        break;
    }
}

void dsm_on_nack(int src, uint64_t imm)
{
    (void)src;
    uint32_t raw = IMM_ID(imm);
    dsm.acc[raw] = (uint8_t)((dsm.acc[raw] | ACC_NACK) & ~ACC_INFLIGHT);
    dsm_wake();
}
