/* The allocation calls and the requests an application makes of the
 * manager (malloc, free, push, prefetch), and the answers to them. */
#include <stdio.h>
#include <string.h>

#include "dsm/dsm_int.h"

static size_t pending_n16; /* the allocation in flight (dsm.api held) */

static int check(const char *fn)
{
    if (!dsm.active)
        return dsm_error(VMMC_ERR_ENDPOINT, "%s: the DSM is not initialised", fn);
    return VMMC_OK;
}

/* Post one request to @dest (rank 0, or -1: the home of the minipage the
 * request names) and wait until *@done (lock dropped while sending). */
static int ask(int dest, uint64_t imm, int *done)
{
    int st = VMMC_OK;
    pthread_mutex_lock(&dsm.lock);
    *done = 0;
    dsm_post(dest >= 0 ? dest : dsm_route(IMM_ID(imm)), imm);
    dsm_unlock_flush();
    pthread_mutex_lock(&dsm.lock);
    while (!*done && st == VMMC_OK)
        st = dsm_wait_locked(1);
    dsm_unlock();
    return st;
}

/* MALLOC_REP (lock held): the new minipage is this rank's, writable. */
static void on_malloc_rep(uint64_t rep)
{
    unsigned status = (unsigned)(rep >> 6) & 15;
    int extends = (int)(rep >> 10) & 1;
    unsigned view = (unsigned)(rep >> 11) & 127;
    size_t off = (size_t)(rep >> 18);
    dsm.malloc_rep = rep;
    dsm.malloc_done = 1;
    dsm_wake();
    if (status != MREP_OK || dsm.page_mode)
        return;
    size_t n16 = pending_n16;
    if (view >= dsm.views || off + n16 > dsm.size) {
        dsm_break("protocol error: the manager placed an allocation outside the area");
        return;
    }
    uint32_t head = (uint32_t)((off / DSM_PAGE) * dsm.views + view);
    if (extends) {
        /* copies this rank gave out directly would miss the new bytes */
        if (!dsm_direct_hold(head, CONT_EXTEND, 0, off, n16, 0))
            dsm_extend_apply(head, off, n16);
        return;
    }
    dsm.ext[head] = (dsm_ext_t){(uint32_t)n16, (uint16_t)(off % DSM_PAGE), 0};
    memset(dsm.priv + off, 0, n16); /* space freed before may hold old bytes */
    dsm_set_acc(head, ACC_W);
    dsm.acc[head] |= ACC_OWNER;
    dsm.hint[head] = 0;
    dsm.dset[head] = 0;
    dsm_post(dsm_home(head), dsm_imm(M_DONE, (unsigned)dsm.me, head, 0));
}

/* A chunk's minipage grows by @n16 bytes at @off (lock held); it is this
 * rank's alone now: open for writing again. */
void dsm_extend_apply(uint32_t head, size_t off, size_t n16)
{
    dsm_ext_t *e = &dsm.ext[head];
    e->len = (uint32_t)(off % DSM_PAGE + n16 - e->off);
    memset(dsm.priv + off, 0, n16);
    if ((dsm.acc[head] & ACC_MASK) != ACC_W)
        dsm_set_acc(head, ACC_W);
    dsm_post(dsm_home(head), dsm_imm(M_DONE, (unsigned)dsm.me, head, 0));
}

void dsm_on_reply(int src, uint64_t imm)
{
    (void)src;
    switch (IMM_TYPE(imm)) {
    case M_MALLOC_REP:
        on_malloc_rep(imm);
        return;
    case M_FREE_REP:
        dsm.free_status = (int)IMM_AUX(imm);
        dsm.free_done = 1;
        break;
    case M_PUSH_REP:
        dsm.push_status = (int)IMM_AUX(imm);
        dsm.push_done = 1;
        break;
    }
    dsm_wake();
}

void *vmmc_dsm_malloc_chunk(size_t n, int chunk)
{
    if (check("vmmc_dsm_malloc") != VMMC_OK)
        return NULL;
    if (chunk < -1 || chunk > DSM_MAX_CHUNK) {
        dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_malloc_chunk: chunk %d is not in 0..%d", chunk,
                  DSM_MAX_CHUNK);
        return NULL;
    }
    if (n > dsm.size) {
        dsm_error(VMMC_ERR_NOMEM,
                  "vmmc_dsm_malloc: %zu bytes is more than the whole shared area (%zu bytes; "
                  "VMMC_DSM_SIZE raises it)",
                  n, dsm.size);
        return NULL;
    }
    pthread_mutex_lock(&dsm.api);
    pending_n16 = ((n ? n : 1) + DSM_ALIGN - 1) & ~(size_t)(DSM_ALIGN - 1);
    uint64_t imm = (uint64_t)M_MALLOC | (uint64_t)(chunk + 1) << 6 | (uint64_t)n << 22;
    int st = ask(dsm_manager(), imm, &dsm.malloc_done);
    uint64_t rep = dsm.malloc_rep;
    pthread_mutex_unlock(&dsm.api);
    if (st != VMMC_OK)
        return NULL;
    unsigned status = (unsigned)(rep >> 6) & 15;
    if (status != MREP_OK) {
        if (dsm.page_mode)
            dsm_error(VMMC_ERR_NOMEM,
                      "vmmc_dsm_malloc: no room for %zu bytes: page mode hands out the %zu-byte "
                      "area once (VMMC_DSM_SIZE raises it)",
                      n, dsm.size);
        else
            dsm_error(VMMC_ERR_NOMEM,
                      "vmmc_dsm_malloc: no room for %zu bytes in the %zu-byte shared area "
                      "(VMMC_DSM_SIZE raises it; a page holds at most VMMC_DSM_VIEWS=%u "
                      "minipages, VMMC_DSM_VIEWS raises that)",
                      n, dsm.size, dsm.views);
        return NULL;
    }
    unsigned view = (unsigned)(rep >> 11) & 127;
    size_t off = (size_t)(rep >> 18);
    return dsm_app_addr(view, off);
}

void *vmmc_dsm_malloc(size_t n)
{
    return vmmc_dsm_malloc_chunk(n, -1);
}

void vmmc_dsm_free(void *p)
{
    if (!p || check("vmmc_dsm_free") != VMMC_OK)
        return;
    uint32_t id;
    size_t in_page;
    if (dsm_addr_id(p, &id, &in_page) != 0) {
        dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_free: %p is not in the shared area", p);
        fprintf(stderr, "vmmc dsm: rank %d: %s (ignored)\n", dsm.me, vmmc_dsm_last_error());
        return;
    }
    pthread_mutex_lock(&dsm.api);
    int st = ask(dsm.page_mode ? dsm_manager() : -1, dsm_imm(M_FREE, (unsigned)dsm.me, id, (uint32_t)in_page), &dsm.free_done);
    int status = dsm.free_status;
    pthread_mutex_unlock(&dsm.api);
    if (st == VMMC_OK && status != 0) {
        dsm_error(VMMC_ERR_INVALID,
                  "vmmc_dsm_free: %p is not an allocation of vmmc_dsm_malloc (or was freed)", p);
        fprintf(stderr, "vmmc dsm: rank %d: %s (ignored)\n", dsm.me, vmmc_dsm_last_error());
    }
}

int vmmc_dsm_push(void *p)
{
    int st = check("vmmc_dsm_push");
    if (st)
        return st;
    uint32_t id;
    if (dsm_addr_id(p, &id, NULL) != 0)
        return dsm_error(VMMC_ERR_INVALID, "vmmc_dsm_push: %p is not in the shared area", p);
    pthread_mutex_lock(&dsm.api);
    st = ask(-1, dsm_imm(M_PUSH, (unsigned)dsm.me, id, 0), &dsm.push_done);
    int status = dsm.push_status;
    pthread_mutex_unlock(&dsm.api);
    if (st == VMMC_OK && status != 0)
        return dsm_error(VMMC_ERR_NOT_FOUND, "vmmc_dsm_push: %p is in no allocation", p);
    return st;
}

int vmmc_dsm_prefetch(void *p, int write)
{
    int st = check("vmmc_dsm_prefetch");
    if (st)
        return st;
    return dsm_acquire(p, write, 0);
}
