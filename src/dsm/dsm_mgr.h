/* The directory and the allocator's tables. Every rank keeps the entries of
 * the minipages it is home of (mp, lpage); rank 0 also places allocations
 * (pages, chunks, remote). Shared by manager.c (the protocol) and alloc.c
 * (placement). Lock held throughout. */
#ifndef VMMC_DSM_MGR_H
#define VMMC_DSM_MGR_H

#include "dsm/dsm_int.h"

typedef struct dsm_req {
    struct dsm_req *next;
    unsigned type; /* M_REQ_R, M_REQ_W, M_PUSH, M_FREE */
    int rank;
    uint32_t raw;
    uint32_t aux;
} dsm_req_t;

typedef struct dsm_mp {
    uint32_t head;      /* id = first page * views + view */
    unsigned view;
    size_t page, npg;   /* pages it covers */
    uint16_t off;       /* offset in its first page */
    uint32_t len;       /* bytes */
    int owner;
    int owner_w;        /* the owner may write */
    uint64_t copyset;   /* ranks holding a copy, the owner included */
    int busy;
    dsm_req_t cur;      /* the request being served */
    int phase;          /* 1: waiting for acks, 2: waiting for dones */
    uint64_t ack_mask, done_mask;
    dsm_req_t *q_head, *q_tail;
    int chunk;          /* -1 or the chunk id */
    int nalloc;         /* allocations in it */
    uint64_t starts[DSM_PAGE / DSM_ALIGN / 64]; /* chunk: where they start */
} dsm_mp_t;

enum { PG_FREE = 0, PG_SMALL, PG_LARGE };

typedef struct dsm_page {
    uint8_t kind;
    uint8_t used_views;  /* PG_SMALL: views handed out */
    uint16_t fill;       /* PG_SMALL: bytes handed out */
    uint16_t live;       /* PG_SMALL: minipages alive */
    uint32_t head_page;  /* PG_LARGE: first page of the allocation */
} dsm_page_t;

struct dsm_mgr {
    dsm_mp_t **mp;       /* npages * views: entries of minipages homed here, at their head */
    uint32_t *lpage;     /* npages: later pages of a large minipage homed here: head page + 1 */
    /* rank 0 only: placement */
    dsm_page_t *pages;
    uint8_t *remote;     /* bit per head: placed at another home, not yet released */
    size_t cur_chunk;    /* spread: page chunks go to (a page homed on rank 0; npages: none) */
    size_t rover;        /* where the next search for free pages starts */
    size_t cur_small;    /* page small allocations go to (npages: none) */
    uint32_t *chunk_head;/* chunk id -> head + 1 (0: none) */
    size_t bump;         /* page mode: next free byte */
    size_t pages_used;
};

dsm_mp_t *dsm_mp_new(uint32_t head, unsigned view, size_t page, size_t npg, uint16_t off,
                     uint32_t len, int owner);
void dsm_mp_delete(dsm_mp_t *m);
dsm_mp_t *dsm_mgr_resolve(uint32_t raw);
void dsm_mgr_malloc_busy(dsm_mp_t *m, int rank); /* busy until the allocator's DONE */

#endif
