/* Placement of allocations (the manager's side of vmmc_dsm_malloc).
 *
 * Minipage mode: a small allocation (up to a page) becomes a minipage in
 * the page small allocations currently fill, reached through the next view
 * of that page; a page takes minipages until it is full or every view is
 * used, then the next free page is taken. Allocations of the same chunk go
 * into one minipage while it is the last of its page, its allocator is its
 * only holder (so nobody has a copy that would miss the new bytes) and the
 * page has room. A larger allocation takes whole free pages of its own,
 * through view 0, and is one minipage. A page returns to the free pool when
 * its last minipage is freed.
 *
 * Page mode: the unit is the page and every page exists from the start;
 * allocations are packed one after the other and space is not reused.
 *
 * Homes spread over the ranks (VMMC_DSM_MANAGERS=all): a minipage whose
 * page is homed elsewhere is announced to its home (CREATE), which answers
 * the allocating rank; rank 0 remembers it as remote until the home
 * releases it. Chunks grow only while rank 0 holds their entry, so they go
 * to pages homed on rank 0 (a page of their own, cur_chunk). */
#include <stdlib.h>

#include "dsm/dsm_mgr.h"

uint64_t dsm_rep_imm(unsigned status, int extends, unsigned view, size_t off)
{
    return (uint64_t)M_MALLOC_REP | (uint64_t)(status & 15) << 6 |
           (uint64_t)(extends ? 1 : 0) << 10 | (uint64_t)(view & 127) << 11 | (uint64_t)off << 18;
}

static int remote_bit(dsm_mgr_t *g, uint32_t head, int set)
{
    int was = (g->remote[head / 8] >> (head % 8)) & 1;
    if (set > 0)
        g->remote[head / 8] |= (uint8_t)(1u << (head % 8));
    else if (set == 0)
        g->remote[head / 8] &= (uint8_t)~(1u << (head % 8));
    return was;
}

/* The entry of a new minipage: here if rank 0 is its home, else at its
 * home (CREATE). NULL and *remote = 0: no memory. */
static dsm_mp_t *place_mp(int rank, uint32_t head, unsigned view, size_t page, size_t npg,
                          unsigned off, size_t n16, int *remote)
{
    if (dsm_home(head) == dsm.me)
        return dsm_mp_new(head, view, page, npg, (uint16_t)off, (uint32_t)n16, rank);
    unsigned rf;
    uint32_t aux;
    if (npg > 1) {
        rf = (unsigned)rank | 1u << 6 | (unsigned)((npg - 1) >> 22) << 7;
        aux = (uint32_t)((npg - 1) & 0x3fffff);
    } else {
        rf = (unsigned)rank;
        aux = (uint32_t)(off / DSM_ALIGN | (n16 / DSM_ALIGN - 1) << 8);
    }
    dsm_post(dsm_home(head), dsm_imm(M_CREATE, rf, head, aux));
    remote_bit(dsm.mgr, head, 1);
    *remote = 1;
    return NULL;
}

/* First run of @npg free pages from the rover on (@home0: one page homed
 * on rank 0); dsm.npages if none. */
static size_t find_free(dsm_mgr_t *g, size_t npg, int home0)
{
    size_t n = dsm.npages;
    if (npg > n)
        return n;
    for (size_t tries = 0, p = g->rover % n; tries < n; tries++, p = (p + 1) % n) {
        if (p + npg > n)
            continue;
        size_t k = 0;
        while (k < npg && g->pages[p + k].kind == PG_FREE)
            k++;
        if (k == npg && home0 && dsm_home_page(p) != dsm.me)
            continue;
        if (k == npg) {
            g->rover = p + npg;
            return p;
        }
        tries += k;
        p += k;
    }
    return n;
}

static int extend_chunk(dsm_mgr_t *g, int rank, size_t n16, int chunk, uint64_t *rep)
{
    uint32_t h1 = g->chunk_head[chunk];
    if (!h1)
        return -1;
    dsm_mp_t *m = g->mp[h1 - 1];
    if (!m || m->busy || m->owner != rank || !m->owner_w || m->copyset != (1ull << rank) ||
        m->npg != 1)
        return -1;
    dsm_page_t *pg = &g->pages[m->page];
    if (pg->fill != m->off + m->len || pg->fill + n16 > DSM_PAGE)
        return -1;
    unsigned at = pg->fill;
    m->len += (uint32_t)n16;
    pg->fill = (uint16_t)(pg->fill + n16);
    unsigned slot = at / DSM_ALIGN;
    m->starts[slot / 64] |= 1ull << (slot % 64);
    m->nalloc++;
    *rep = dsm_rep_imm(MREP_OK, 1, m->view, m->page * DSM_PAGE + at);
    return 0;
}

int dsm_alloc_place(int rank, size_t n, int chunk, uint64_t *rep, int *remote)
{
    dsm_mgr_t *g = dsm.mgr;
    if (n == 0)
        n = 1;
    size_t n16 = (n + DSM_ALIGN - 1) & ~(size_t)(DSM_ALIGN - 1);
    if (n16 > dsm.size) {
        *rep = dsm_rep_imm(MREP_TOOBIG, 0, 0, 0);
        return MREP_TOOBIG;
    }
    if (dsm.page_mode) {
        if (g->bump + n16 > dsm.size) {
            *rep = dsm_rep_imm(MREP_NOSPACE, 0, 0, 0);
            return MREP_NOSPACE;
        }
        *rep = dsm_rep_imm(MREP_OK, 0, 0, g->bump);
        g->bump += n16;
        return MREP_OK;
    }
    if (n16 <= DSM_PAGE) {
        if (chunk >= 0 && extend_chunk(g, rank, n16, chunk, rep) == 0)
            return MREP_OK;
        /* chunks grow at rank 0 only: with homes spread, on pages of their own */
        size_t *cur = chunk >= 0 && dsm.spread ? &g->cur_chunk : &g->cur_small;
        size_t p = *cur;
        if (p >= dsm.npages || g->pages[p].used_views >= dsm.views ||
            g->pages[p].fill + n16 > DSM_PAGE) {
            p = find_free(g, 1, cur == &g->cur_chunk);
            if (p >= dsm.npages) {
                *rep = dsm_rep_imm(MREP_NOSPACE, 0, 0, 0);
                return MREP_NOSPACE;
            }
            g->pages[p] = (dsm_page_t){PG_SMALL, 0, 0, 0, 0};
            *cur = p;
            g->pages_used++;
        }
        dsm_page_t *pg = &g->pages[p];
        unsigned view = pg->used_views;
        unsigned off = pg->fill;
        dsm_mp_t *m = place_mp(rank, (uint32_t)(p * dsm.views + view), view, p, 1, off, n16,
                               remote);
        if (!m && !*remote) {
            *rep = dsm_rep_imm(MREP_NOSPACE, 0, 0, 0);
            return MREP_NOSPACE;
        }
        pg->used_views++;
        pg->fill = (uint16_t)(off + n16);
        pg->live++;
        if (chunk >= 0 && m) {
            m->chunk = chunk;
            unsigned slot = off / DSM_ALIGN;
            m->starts[slot / 64] |= 1ull << (slot % 64);
            g->chunk_head[chunk] = m->head + 1;
        }
        *rep = dsm_rep_imm(MREP_OK, 0, view, p * DSM_PAGE + off);
        return MREP_OK;
    }
    size_t npg = (n16 + DSM_PAGE - 1) / DSM_PAGE;
    size_t p = find_free(g, npg, 0);
    if (p >= dsm.npages) {
        *rep = dsm_rep_imm(MREP_NOSPACE, 0, 0, 0);
        return MREP_NOSPACE;
    }
    if (!place_mp(rank, (uint32_t)(p * dsm.views), 0, p, npg, 0, n16, remote) && !*remote) {
        *rep = dsm_rep_imm(MREP_NOSPACE, 0, 0, 0);
        return MREP_NOSPACE;
    }
    for (size_t k = 0; k < npg; k++)
        g->pages[p + k] = (dsm_page_t){PG_LARGE, 0, 0, 0, (uint32_t)p};
    g->pages_used += npg;
    *rep = dsm_rep_imm(MREP_OK, 0, 0, p * DSM_PAGE);
    return MREP_OK;
}

/* The space of the minipage whose head is @head returns to the pool. */
static void unplace(dsm_mgr_t *g, uint32_t head)
{
    size_t page = head / dsm.views;
    dsm_page_t *pg = &g->pages[page];
    if (pg->kind == PG_SMALL) {
        if (--pg->live == 0) {
            *pg = (dsm_page_t){PG_FREE, 0, 0, 0, 0};
            if (g->cur_small == page)
                g->cur_small = dsm.npages;
            if (g->cur_chunk == page)
                g->cur_chunk = dsm.npages;
            g->pages_used--;
        }
    } else {
        size_t k = 0;
        while (page + k < dsm.npages && g->pages[page + k].kind == PG_LARGE &&
               g->pages[page + k].head_page == page)
            g->pages[page + k++] = (dsm_page_t){PG_FREE, 0, 0, 0, 0};
        g->pages_used -= k;
    }
}

void dsm_alloc_release(uint32_t head)
{
    dsm_mgr_t *g = dsm.mgr;
    dsm_mp_t *m = g->mp[head];
    if (!m)
        return;
    if (m->chunk >= 0 && g->chunk_head[m->chunk] == head + 1)
        g->chunk_head[m->chunk] = 0;
    unplace(g, head);
    dsm_mp_delete(m);
}

int dsm_alloc_release_remote(uint32_t head)
{
    dsm_mgr_t *g = dsm.mgr;
    if (dsm.page_mode || !remote_bit(g, head, 0))
        return -1;
    unplace(g, head);
    return 0;
}

int dsm_alloc_locate(uint32_t raw, uint32_t *head)
{
    dsm_mgr_t *g = dsm.mgr;
    size_t page = raw / dsm.views;
    if (dsm.page_mode || raw % dsm.views || g->pages[page].kind != PG_LARGE)
        return -1;
    *head = g->pages[page].head_page * dsm.views;
    return 0;
}

int dsm_route(uint32_t id)
{
    uint32_t head;
    if (dsm.mgr && dsm.mgr->pages && dsm_alloc_locate(id, &head) == 0)
        return dsm_home(head);
    return dsm_home(id);
}

void dsm_mgr_release_msg(int src, uint64_t imm)
{
    uint32_t head = IMM_ID(imm);
    if (src != dsm_home(head) || dsm_alloc_release_remote(head) != 0)
        dsm_bad_msg(src, imm, "a RELEASE of no minipage that rank is home of");
}
