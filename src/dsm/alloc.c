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
 * allocations are packed one after the other and space is not reused. */
#include <stdlib.h>

#include "dsm/dsm_mgr.h"

static uint64_t rep_imm(unsigned status, int extends, unsigned view, size_t off)
{
    return (uint64_t)M_MALLOC_REP | (uint64_t)(status & 15) << 6 |
           (uint64_t)(extends ? 1 : 0) << 10 | (uint64_t)(view & 127) << 11 | (uint64_t)off << 18;
}

/* First run of @npg free pages from the rover on; dsm.npages if none. */
static size_t find_free(dsm_mgr_t *g, size_t npg)
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
    *rep = rep_imm(MREP_OK, 1, m->view, m->page * DSM_PAGE + at);
    return 0;
}

int dsm_alloc_place(int rank, size_t n, int chunk, uint64_t *rep)
{
    dsm_mgr_t *g = dsm.mgr;
    if (n == 0)
        n = 1;
    size_t n16 = (n + DSM_ALIGN - 1) & ~(size_t)(DSM_ALIGN - 1);
    if (n16 > dsm.size) {
        *rep = rep_imm(MREP_TOOBIG, 0, 0, 0);
        return MREP_TOOBIG;
    }
    if (dsm.page_mode) {
        if (g->bump + n16 > dsm.size) {
            *rep = rep_imm(MREP_NOSPACE, 0, 0, 0);
            return MREP_NOSPACE;
        }
        *rep = rep_imm(MREP_OK, 0, 0, g->bump);
        g->bump += n16;
        return MREP_OK;
    }
    if (n16 <= DSM_PAGE) {
        if (chunk >= 0 && extend_chunk(g, rank, n16, chunk, rep) == 0)
            return MREP_OK;
        size_t p = g->cur_small;
        if (p >= dsm.npages || g->pages[p].used_views >= dsm.views ||
            g->pages[p].fill + n16 > DSM_PAGE) {
            p = find_free(g, 1);
            if (p >= dsm.npages) {
                *rep = rep_imm(MREP_NOSPACE, 0, 0, 0);
                return MREP_NOSPACE;
            }
            g->pages[p] = (dsm_page_t){PG_SMALL, 0, 0, 0, 0};
            g->cur_small = p;
            g->pages_used++;
        }
        dsm_page_t *pg = &g->pages[p];
        unsigned view = pg->used_views;
        unsigned off = pg->fill;
        dsm_mp_t *m = dsm_mp_new((uint32_t)(p * dsm.views + view), view, p, 1, (uint16_t)off,
                                 (uint32_t)n16, rank);
        if (!m) {
            *rep = rep_imm(MREP_NOSPACE, 0, 0, 0);
            return MREP_NOSPACE;
        }
        pg->used_views++;
        pg->fill = (uint16_t)(off + n16);
        pg->live++;
        if (chunk >= 0) {
            m->chunk = chunk;
            unsigned slot = off / DSM_ALIGN;
            m->starts[slot / 64] |= 1ull << (slot % 64);
            g->chunk_head[chunk] = m->head + 1;
        }
        *rep = rep_imm(MREP_OK, 0, view, p * DSM_PAGE + off);
        return MREP_OK;
    }
    size_t npg = (n16 + DSM_PAGE - 1) / DSM_PAGE;
    size_t p = find_free(g, npg);
    if (p >= dsm.npages) {
        *rep = rep_imm(MREP_NOSPACE, 0, 0, 0);
        return MREP_NOSPACE;
    }
    if (!dsm_mp_new((uint32_t)(p * dsm.views), 0, p, npg, 0, (uint32_t)n16, rank)) {
        *rep = rep_imm(MREP_NOSPACE, 0, 0, 0);
        return MREP_NOSPACE;
    }
    for (size_t k = 0; k < npg; k++)
        g->pages[p + k] = (dsm_page_t){PG_LARGE, 0, 0, 0, (uint32_t)p};
    g->pages_used += npg;
    *rep = rep_imm(MREP_OK, 0, 0, p * DSM_PAGE);
    return MREP_OK;
}

void dsm_alloc_release(uint32_t head)
{
    dsm_mgr_t *g = dsm.mgr;
    dsm_mp_t *m = g->mp[head];
    if (!m)
        return;
    if (m->chunk >= 0 && g->chunk_head[m->chunk] == head + 1)
        g->chunk_head[m->chunk] = 0;
    dsm_page_t *pg = &g->pages[m->page];
    if (pg->kind == PG_SMALL) {
        if (--pg->live == 0) {
            *pg = (dsm_page_t){PG_FREE, 0, 0, 0, 0};
            if (g->cur_small == m->page)
                g->cur_small = dsm.npages;
            g->pages_used--;
        }
    } else {
        for (size_t k = 0; k < m->npg; k++)
            g->pages[m->page + k] = (dsm_page_t){PG_FREE, 0, 0, 0, 0};
        g->pages_used -= m->npg;
    }
    dsm_mp_delete(m);
}
