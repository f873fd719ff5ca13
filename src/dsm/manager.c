/* The manager (rank 0): the minipage table and the protocol that keeps
 * one writer or many readers per minipage (sequential consistency).
 *
 * A minipage is busy while one request is served: from the moment the
 * manager starts it (invalidations out, or the forward to the owner) until
 * the requester says DONE (its view is open). Requests that arrive
 * meanwhile wait in the minipage's queue, in arrival order; so two
 * transfers of one minipage never overlap and every rank sees its writes
 * in one order. Every message is checked against what the manager expects
 * (the sender, the phase, the minipage); anything else is counted and
 * dropped. Called with dsm.lock held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsm/dsm_mgr.h"

static dsm_mgr_t mgr;

static uint64_t bit(int r)
{
    return 1ull << r;
}

dsm_mp_t *dsm_mp_new(uint32_t head, unsigned view, size_t page, size_t npg, uint16_t off,
                     uint32_t len, int owner)
{
    dsm_mp_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->head = head;
    m->view = view;
    m->page = page;
    m->npg = npg;
    m->off = off;
    m->len = len;
    m->owner = owner;
    m->owner_w = 1;
    m->copyset = bit(owner);
    m->chunk = -1;
    m->nalloc = 1;
    mgr.mp[head] = m;
    return m;
}

void dsm_mp_delete(dsm_mp_t *m)
{
    mgr.mp[m->head] = NULL;
    dsm_req_t *r = m->q_head;
    while (r) {
        dsm_req_t *nx = r->next;
        free(r);
        r = nx;
    }
    free(m);
}

int dsm_mgr_create(void)
{
    size_t ids = dsm.npages * dsm.views;
    mgr.mp = calloc(ids, sizeof *mgr.mp);
    mgr.pages = calloc(dsm.npages, sizeof *mgr.pages);
    mgr.chunk_head = calloc(DSM_MAX_CHUNK + 1, sizeof *mgr.chunk_head);
    if (!mgr.mp || !mgr.pages || !mgr.chunk_head)
        goto nomem;
    mgr.cur_small = dsm.npages;
    dsm.mgr = &mgr;
    if (dsm.page_mode) {
        /* every page is a unit from the start, owned by rank 0 */
        for (size_t p = 0; p < dsm.npages; p++)
            if (!dsm_mp_new((uint32_t)p, 0, p, 1, 0, DSM_PAGE, 0))
                goto nomem;
    }
    return VMMC_OK;
nomem:
    dsm_mgr_destroy();
    return VMMC_ERR_NOMEM;
}

void dsm_mgr_destroy(void)
{
    if (mgr.mp) {
        for (size_t i = 0; i < dsm.npages * dsm.views; i++)
            if (mgr.mp[i])
                dsm_mp_delete(mgr.mp[i]);
    }
    free(mgr.mp);
    free(mgr.pages);
    free(mgr.chunk_head);
    memset(&mgr, 0, sizeof mgr);
    dsm.mgr = NULL;
}

dsm_mp_t *dsm_mgr_resolve(uint32_t raw)
{
    if (raw >= dsm.npages * dsm.views)
        return NULL;
    size_t page = raw / dsm.views;
    unsigned view = raw % dsm.views;
    if (dsm.page_mode)
        return mgr.mp[raw];
    dsm_page_t *pg = &mgr.pages[page];
    if (pg->kind == PG_LARGE)
        return view == 0 ? mgr.mp[(size_t)pg->head_page * dsm.views] : NULL;
    if (pg->kind == PG_SMALL)
        return mgr.mp[raw];
    return NULL;
}

static void start(dsm_mp_t *m, const dsm_req_t *r);

static void reply_status(const dsm_req_t *r, uint32_t status)
{
    unsigned t = r->type == M_PUSH ? M_PUSH_REP : r->type == M_FREE ? M_FREE_REP : M_NACK;
    dsm_post(r->rank, dsm_imm(t, (unsigned)dsm.me, r->raw, status));
}

/* The request in service is over: answer a push, serve the next one. */
static void finish(dsm_mp_t *m)
{
    if (m->cur.type == M_PUSH)
        reply_status(&m->cur, 0);
    uint32_t head = m->head;
    m->busy = 0;
    m->phase = 0;
    while (!m->busy && m->q_head) {
        dsm_req_t *r = m->q_head;
        m->q_head = r->next;
        if (!m->q_head)
            m->q_tail = NULL;
        dsm_req_t copy = *r;
        free(r);
        start(m, &copy); /* may finish (a push nobody needs) and free it */
        if (mgr.mp[head] != m)
            return;
    }
}

static void send_invals(dsm_mp_t *m, uint64_t set)
{
    m->ack_mask = set;
    m->phase = 1;
    for (int r = 0; r < dsm.n; r++)
        if (set & bit(r))
            dsm_post(r, dsm_imm(M_INV, (unsigned)dsm.me, m->head, 0));
}

/* Every copy the request needed gone: hand the minipage over. */
static void invalidated(dsm_mp_t *m)
{
    int rq = m->cur.rank;
    if (m->cur.type == M_FREE) {
        dsm_req_t r = m->cur;
        dsm_req_t *q = m->q_head;
        m->q_head = m->q_tail = NULL;
        dsm_alloc_release(m->head); /* deletes m */
        reply_status(&r, 0);
        while (q) { /* waited for a minipage that is gone */
            dsm_req_t *nx = q->next;
            reply_status(q, 1);
            free(q);
            q = nx;
        }
        return;
    }
    /* M_REQ_W */
    if (m->copyset & bit(rq)) {
        dsm_post(rq, dsm_imm(M_GRANT_W, (unsigned)dsm.me, m->head, 0));
    } else {
        dsm_post(m->owner, dsm_imm(M_FWD_W, (unsigned)rq, m->head, 0));
        atomic_fetch_add(&dsm.st_forwards, 1);
    }
    m->owner = rq;
    m->owner_w = 1;
    m->copyset = bit(rq);
    m->done_mask = bit(rq);
    m->phase = 2;
}

static void start(dsm_mp_t *m, const dsm_req_t *r)
{
    m->busy = 1;
    m->cur = *r;
    m->cur.next = NULL;
    m->ack_mask = m->done_mask = 0;
    int rq = r->rank;
    switch (r->type) {
    case M_REQ_R:
        if (m->copyset & bit(rq)) {
            dsm_post(rq, dsm_imm(M_GRANT_R, (unsigned)dsm.me, m->head, 0));
        } else {
            dsm_post(m->owner, dsm_imm(M_FWD_R, (unsigned)rq, m->head, 0));
            atomic_fetch_add(&dsm.st_forwards, 1);
            m->copyset |= bit(rq);
            m->owner_w = 0;
        }
        m->done_mask = bit(rq);
        m->phase = 2;
        break;
    case M_REQ_W: {
        uint64_t inv = m->copyset & ~bit(rq);
        if (!(m->copyset & bit(rq)))
            inv &= ~bit(m->owner); /* the owner gives the data up itself */
        if (inv)
            send_invals(m, inv);
        else
            invalidated(m);
        break;
    }
    case M_PUSH: {
        uint64_t all = dsm.n == 64 ? ~0ull : bit(dsm.n) - 1;
        uint64_t targets = all & ~m->copyset;
        if (!targets) {
            finish(m);
            return;
        }
        for (int t = 0; t < dsm.n; t++)
            if (targets & bit(t))
                dsm_post(m->owner, dsm_imm(M_FWD_PUSH, (unsigned)t, m->head, 0));
        m->copyset |= targets;
        m->owner_w = 0;
        m->done_mask = targets;
        m->phase = 2;
        break;
    }
    case M_FREE:
        if (m->copyset)
            send_invals(m, m->copyset);
        else
            invalidated(m);
        break;
    default:
        break;
    }
}

static int check_free(dsm_mp_t *m, uint32_t raw, uint32_t off_in_page)
{
    size_t page = raw / dsm.views;
    if (m->chunk >= 0) {
        if (page != m->page || off_in_page % DSM_ALIGN)
            return -1;
        unsigned slot = off_in_page / DSM_ALIGN;
        if (!(m->starts[slot / 64] & (1ull << (slot % 64))))
            return -1;
        return (int)slot;
    }
    return page == m->page && off_in_page == m->off ? 0 : -1;
}

void dsm_mgr_request(int src, uint64_t imm)
{
    dsm_req_t r = {NULL, IMM_TYPE(imm), src, IMM_ID(imm), IMM_AUX(imm)};
    if (r.type == M_FREE && dsm.page_mode) {
        /* page mode hands out space once (docs/dsm.md): check the pointer */
        size_t off = (size_t)r.raw * DSM_PAGE + r.aux;
        reply_status(&r, r.raw < dsm.npages && off < mgr.bump ? 0 : 1);
        return;
    }
    dsm_mp_t *m = dsm_mgr_resolve(r.raw);
    if (!m) {
        reply_status(&r, 1);
        return;
    }
    if (r.type == M_FREE) {
        int slot = check_free(m, r.raw, r.aux & (DSM_PAGE - 1));
        if (slot < 0) {
            reply_status(&r, 1);
            return;
        }
        if (m->chunk >= 0 && m->nalloc > 1) {
            m->starts[slot / 64] &= ~(1ull << (slot % 64));
            m->nalloc--;
            reply_status(&r, 0);
            return;
        }
        r.raw = m->head;
    }
    if (m->busy) {
        dsm_req_t *q = malloc(sizeof *q);
        if (!q) {
            dsm_break("the manager is out of memory for queued requests");
            return;
        }
        *q = r;
        if (m->q_tail)
            m->q_tail->next = q;
        else
            m->q_head = q;
        m->q_tail = q;
        return;
    }
    start(m, &r);
}

static dsm_mp_t *expecting(int src, uint64_t imm, int phase)
{
    uint32_t id = IMM_ID(imm);
    dsm_mp_t *m = id < dsm.npages * dsm.views ? mgr.mp[id] : NULL;
    if (!m || !m->busy || m->phase != phase) {
        dsm_bad_msg(src, imm, "no request of that minipage is at that step");
        return NULL;
    }
    uint64_t mask = phase == 1 ? m->ack_mask : m->done_mask;
    if (!(mask & bit(src))) {
        dsm_bad_msg(src, imm, "the sender was not asked");
        return NULL;
    }
    return m;
}

void dsm_mgr_ack(int src, uint64_t imm)
{
    dsm_mp_t *m = expecting(src, imm, 1);
    if (!m)
        return;
    m->ack_mask &= ~bit(src);
    if (!m->ack_mask)
        invalidated(m);
}

void dsm_mgr_done(int src, uint64_t imm)
{
    dsm_mp_t *m = expecting(src, imm, 2);
    if (!m)
        return;
    m->done_mask &= ~bit(src);
    if (!m->done_mask)
        finish(m);
}

void dsm_mgr_malloc(int src, uint64_t imm)
{
    unsigned c1 = (unsigned)(imm >> 6) & 0xffff;
    size_t n = (size_t)(imm >> 22);
    uint64_t rep;
    int st = dsm_alloc_place(src, n, c1 ? (int)c1 - 1 : -1, &rep);
    if (st == MREP_OK && !dsm.page_mode) {
        /* busy until the allocator opened it: nothing overtakes its view */
        size_t off = (size_t)(rep >> 18);
        unsigned view = (unsigned)(rep >> 11) & 127;
        dsm_mp_t *m = dsm_mgr_resolve((uint32_t)((off / DSM_PAGE) * dsm.views + view));
        if (m) {
            m->busy = 1;
            m->cur = (dsm_req_t){NULL, M_MALLOC, src, m->head, 0};
            m->phase = 2;
            m->done_mask = bit(src);
        }
    }
    dsm_post(src, rep);
}
