/* The manager: the directory and the protocol that keeps one writer or
 * many readers per minipage (sequential consistency). Each minipage has a
 * home (dsm_home(): page mod ranks, or rank 0 with VMMC_DSM_MANAGERS=1)
 * that holds its entry and runs every step on it; rank 0 places
 * allocations and tells the home (CREATE), the home tells it when the space
 * is free again (RELEASE). A request for an id the home holds no entry of
 * (a later page of a large allocation, placed at its first page's home)
 * goes to rank 0 (WHERE), which sends it on to the right home.
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
    for (size_t k = 1; k < npg; k++)
        mgr.lpage[page + k] = (uint32_t)page + 1;
    return m;
}

void dsm_mp_delete(dsm_mp_t *m)
{
    mgr.mp[m->head] = NULL;
    for (size_t k = 1; k < m->npg; k++)
        mgr.lpage[m->page + k] = 0;
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
    mgr.lpage = calloc(dsm.npages, sizeof *mgr.lpage);
    if (!mgr.mp || !mgr.lpage)
        goto nomem;
    if (dsm.me == dsm_manager()) {
        mgr.pages = calloc(dsm.npages, sizeof *mgr.pages);
        mgr.chunk_head = calloc(DSM_MAX_CHUNK + 1, sizeof *mgr.chunk_head);
        mgr.remote = calloc((ids + 7) / 8, 1);
        if (!mgr.pages || !mgr.chunk_head || !mgr.remote)
            goto nomem;
    }
    mgr.cur_small = mgr.cur_chunk = dsm.npages;
    dsm.mgr = &mgr;
    if (dsm.page_mode) {
        /* every page is a unit from the start, owned by rank 0 */
        for (size_t p = 0; p < dsm.npages; p++)
            if (dsm_home_page(p) == dsm.me && !dsm_mp_new((uint32_t)p, 0, p, 1, 0, DSM_PAGE, 0))
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
    free(mgr.lpage);
    free(mgr.pages);
    free(mgr.remote);
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
    if (mgr.mp[raw] || dsm.page_mode)
        return mgr.mp[raw];
    if (view == 0 && mgr.lpage[page])
        return mgr.mp[(size_t)(mgr.lpage[page] - 1) * dsm.views];
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
        if (dsm.me == dsm_manager()) {
            dsm_alloc_release(m->head); /* deletes m */
        } else {
            dsm_post(dsm_manager(), dsm_imm(M_RELEASE, (unsigned)dsm.me, m->head, 0));
            dsm_mp_delete(m);
        }
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

static void serve_request(dsm_req_t r);

/* Rank 0: a request for @r.raw that no entry of @from (a home, or rank 0
 * itself) resolves. A later page of a large allocation goes on to the home
 * of its first page; anything else is no minipage. */
static void locate(dsm_req_t r, int from)
{
    uint32_t head;
    dsm_mp_t *m = dsm_mgr_resolve(r.raw);
    if (m && from != dsm.me) {
        serve_request(r);
        return;
    }
    int home = dsm_alloc_locate(r.raw, &head) == 0 ? dsm_home(head) : -1;
    if (home < 0 || home == from || home == dsm.me) {
        reply_status(&r, 1);
        return;
    }
    dsm_post(home, dsm_imm(r.type, (unsigned)r.rank, r.raw, r.aux));
}

void dsm_mgr_where(int src, uint64_t imm)
{
    unsigned t = IMM_AUX(imm) >> 16;
    if (t != M_REQ_R && t != M_REQ_W && t != M_PUSH && t != M_FREE) {
        dsm_bad_msg(src, imm, "a WHERE of no request type");
        return;
    }
    if (src != dsm_home(IMM_ID(imm)) || src == dsm.me) {
        dsm_bad_msg(src, imm, "a WHERE from a rank that is not the home of that id");
        return;
    }
    dsm_req_t r = {NULL, t, IMM_RANK(imm), IMM_ID(imm), IMM_AUX(imm) & 0xffff};
    locate(r, src);
}

void dsm_mgr_request(int src, uint64_t imm)
{
    /* rank 0 sends on requests for others (WHERE): the rank field says whose */
    dsm_req_t r = {NULL, IMM_TYPE(imm), src == dsm_manager() ? IMM_RANK(imm) : src,
                   IMM_ID(imm), IMM_AUX(imm)};
    if (r.type == M_FREE && dsm.page_mode) {
        if (dsm.me != dsm_manager()) {
            dsm_bad_msg(src, imm, "a page-mode free to a rank that does not place allocations");
            return;
        }
        /* page mode hands out space once (docs/dsm.md): check the pointer */
        size_t off = (size_t)r.raw * DSM_PAGE + r.aux;
        reply_status(&r, r.raw < dsm.npages && off < mgr.bump ? 0 : 1);
        return;
    }
    if (!dsm_mgr_resolve(r.raw)) {
        if (src == dsm_manager() && dsm.me != dsm_manager())
            reply_status(&r, 1); /* rank 0 sent it here: nobody holds it */
        else if (dsm.me != dsm_manager())
            dsm_post(dsm_manager(),
                     dsm_imm(M_WHERE, (unsigned)r.rank, r.raw, r.type << 16 | (r.aux & 0xffff)));
        else
            locate(r, dsm.me);
        return;
    }
    serve_request(r);
}

static void serve_request(dsm_req_t r)
{
    dsm_mp_t *m = dsm_mgr_resolve(r.raw);
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

/* Busy until the allocating rank opened it: nothing overtakes its view. */
void dsm_mgr_malloc_busy(dsm_mp_t *m, int rank)
{
    m->busy = 1;
    m->cur = (dsm_req_t){NULL, M_MALLOC, rank, m->head, 0};
    m->phase = 2;
    m->done_mask = bit(rank);
}

void dsm_mgr_malloc(int src, uint64_t imm)
{
    unsigned c1 = (unsigned)(imm >> 6) & 0xffff;
    size_t n = (size_t)(imm >> 22);
    uint64_t rep;
    int remote = 0;
    int st = dsm_alloc_place(src, n, c1 ? (int)c1 - 1 : -1, &rep, &remote);
    if (remote)
        return; /* the home answers once it made the entry */
    if (st == MREP_OK && !dsm.page_mode) {
        size_t off = (size_t)(rep >> 18);
        unsigned view = (unsigned)(rep >> 11) & 127;
        dsm_mp_t *m = dsm_mgr_resolve((uint32_t)((off / DSM_PAGE) * dsm.views + view));
        if (m)
            dsm_mgr_malloc_busy(m, src);
    }
    dsm_post(src, rep);
}

/* CREATE (rank 0 -> the home): rank field = requester (bits 0-5), large
 * (bit 6), npg - 1 bits 22-24 (bits 7-9); id = head; aux = a small
 * minipage's offset / 16 (bits 0-7) and length / 16 - 1 (bits 8-15), or a
 * large one's npg - 1 bits 0-21. The home makes the entry, busy until the
 * allocating rank's DONE, and answers it with the MALLOC_REP. */
void dsm_mgr_create_msg(int src, uint64_t imm)
{
    unsigned rf = (unsigned)(imm >> 6) & 1023, aux = IMM_AUX(imm);
    int rank = (int)(rf & 63), large = (rf >> 6) & 1;
    uint32_t head = IMM_ID(imm);
    size_t page = head / dsm.views;
    unsigned view = head % dsm.views;
    if (src != dsm_manager() || dsm.page_mode || rank >= dsm.n || dsm_home(head) != dsm.me) {
        dsm_bad_msg(src, imm, "a CREATE not from the allocator or to the wrong home");
        return;
    }
    size_t npg = 1, off = 0, len;
    if (large) {
        npg = ((size_t)(rf >> 7) << 22 | aux) + 1;
        len = npg * DSM_PAGE;
        if (view != 0 || npg < 2 || page + npg > dsm.npages) {
            dsm_bad_msg(src, imm, "a CREATE of a large minipage out of the area");
            return;
        }
    } else {
        off = (size_t)(aux & 255) * DSM_ALIGN;
        len = ((size_t)((aux >> 8) & 255) + 1) * DSM_ALIGN;
        if (off + len > DSM_PAGE || (aux >> 16)) {
            dsm_bad_msg(src, imm, "a CREATE of a minipage out of its page");
            return;
        }
    }
    /* nothing of this rank's may lie there already */
    for (size_t k = 0; k < npg; k++) {
        int clash = mgr.lpage[page + k] != 0;
        for (unsigned v = 0; v < dsm.views && !clash; v++)
            clash = (k > 0 || large || v == view) && mgr.mp[(page + k) * dsm.views + v];
        if (clash) {
            dsm_bad_msg(src, imm, "a CREATE over a live minipage");
            return;
        }
    }
    dsm_mp_t *m = dsm_mp_new(head, view, page, npg, (uint16_t)off, (uint32_t)len, rank);
    if (!m) { /* no memory for the entry: the space goes back */
        dsm_post(dsm_manager(), dsm_imm(M_RELEASE, (unsigned)dsm.me, head, 0));
        dsm_post(rank, dsm_rep_imm(MREP_NOSPACE, 0, 0, page * DSM_PAGE));
        return;
    }
    dsm_mgr_malloc_busy(m, rank);
    dsm_post(rank, dsm_rep_imm(MREP_OK, 0, view, page * DSM_PAGE + off));
}
