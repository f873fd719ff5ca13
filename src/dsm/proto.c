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
    if (t == M_FWD_W)
        dsm_set_acc(head, ACC_NONE);
    else if (head_acc(head) == ACC_W)
        dsm_set_acc(head, ACC_R);
    size_t off, len;
    bytes_of(head, &off, &len);
    dsm_post_data(
        rq, dsm_imm(t == M_FWD_W ? M_DATA_W : M_DATA_R, (unsigned)dsm.me, head, t == M_FWD_PUSH),
        off, len);
    atomic_fetch_add(&dsm.st_served, 1);
}

static void raise_to(uint32_t head, int acc)
{
    if (head_acc(head) < acc)
        dsm_set_acc(head, acc);
    answered(head);
    dsm_post(dsm_manager(), dsm_imm(M_DONE, (unsigned)dsm.me, head, 0));
    pthread_cond_broadcast(&dsm.cond);
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
    raise_to(head, IMM_TYPE(imm) == M_DATA_W ? ACC_W : ACC_R);
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
    raise_to(head, IMM_TYPE(imm) == M_GRANT_W ? ACC_W : ACC_R);
}

void dsm_on_inval(int src, uint64_t imm)
{
    (void)src;
    uint32_t head = IMM_ID(imm);
    if (head_acc(head) != ACC_NONE) {
        dsm_set_acc(head, ACC_NONE);
        atomic_fetch_add(&dsm.st_inval, 1);
    }
    dsm_post(dsm_manager(), dsm_imm(M_ACK, (unsigned)dsm.me, head, 0));
}

void dsm_on_nack(int src, uint64_t imm)
{
    (void)src;
    uint32_t raw = IMM_ID(imm);
    dsm.acc[raw] = (uint8_t)((dsm.acc[raw] | ACC_NACK) & ~ACC_INFLIGHT);
    pthread_cond_broadcast(&dsm.cond);
}
