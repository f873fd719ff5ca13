/* Fast Messages, sending side: credits and the control words a rank writes
 * into its peers' regions (credits, credit requests, placement
 * descriptors), and waiting for ring space.
 *
 * Credits: the sender may have at most R bytes (its ring at the receiver) in
 * flight: head - credit <= R, where credit is the receiver's consumed count
 * that the receiver writes into our memory. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "fm/fm_send.h"

VMMC_COLD int fm_peer_dead(fm_t *fm, fm_peer_t *p)
{
    p->sdead = 1;
    return vmmc_error(VMMC_ERR_PEER_DEAD, "fm: rank %d died; cannot send to it", p->rank);
}

/* Write a remote control word (credit or credit request) into @p's region. */
int fm_ctrl_write(fm_t *fm, fm_peer_t *p, size_t off, uint64_t v)
{
    if (p->map) {
        atomic_store_explicit((_Atomic uint64_t *)(p->map + off), v, memory_order_release);
        return VMMC_OK;
    }
    int st = vmmc_send(p->px, off, &v, sizeof v, 0);
    if (st == VMMC_ERR_PEER_DEAD)
        p->sdead = 1;
    return st;
}

int fm_send_request_credit(fm_t *fm, fm_peer_t *p)
{
    if (p->req && p->req_credit == p->credit)
        return VMMC_OK; /* already asked at this credit level */
    p->req++;
    p->req_credit = p->credit;
    FM_CNT(fm, FM_C_CREDIT_REQ, 1);
    int st = fm_ctrl_write(fm, p, FM_REQ_OFF, p->req);
    if (st == VMMC_OK && p->px)
        vmmc_signal(fm->ep, p->rank);
    return st;
}

/* Used by the receive side to give credits back (fm_progress.c). */
int fm_send_credit(fm_t *fm, fm_peer_t *p, uint64_t consumed)
{
    int st = fm_ctrl_write(fm, p, FM_CREDIT_OFF, consumed);
    if (st == VMMC_OK && p->px)
        vmmc_signal(fm->ep, p->rank);
    return st;
}

/* Used by the receive side to post a placement descriptor (fm_zrecv.c): the
 * words first, the sequence number last, so a sender never reads a
 * half-written one (and re-checks the sequence after reading, since the
 * next descriptor may overwrite this one while it reads). */
int fm_send_desc(fm_t *fm, fm_peer_t *p, uint64_t msg, uint64_t off, uint64_t len,
                 const vmmc_mkey_t *key, uint64_t pull)
{
    if (VMMC_UNLIKELY(!fm_peer_ready(p)) && fm_peer_step(fm, p) != VMMC_OK)
        return VMMC_ERR_AGAIN; /* not connected to it yet: its sender stops waiting */
    uint64_t d[FM_D_WORDS] = {0};
    d[FM_D_SEQ] = ++p->dseq;
    d[FM_D_MSG] = (msg & 0xffffffffu) | pull << 32;
    d[FM_D_OFF] = off;
    d[FM_D_LEN] = len;
    if (key)
        memcpy(&d[FM_D_KEY], key->opaque, sizeof key->opaque);
    FM_CNT(fm, FM_C_ZC_POST, 1);
    if (p->map) {
        _Atomic uint64_t *w = (_Atomic uint64_t *)(p->map + FM_DESC_OFF);
        atomic_store_explicit(&w[FM_D_SEQ], 0, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        for (int i = 1; i < FM_D_WORDS; i++)
            atomic_store_explicit(&w[i], d[i], memory_order_relaxed);
        atomic_store_explicit(&w[FM_D_SEQ], d[FM_D_SEQ], memory_order_release);
        return VMMC_OK;
    }
    int st = vmmc_send(p->px, FM_DESC_OFF + 8, &d[1], sizeof d - 8, 0);
    if (st == VMMC_OK)
        st = vmmc_send(p->px, FM_DESC_OFF, &d[0], 8, 0);
    if (st == VMMC_ERR_PEER_DEAD)
        p->sdead = 1;
    return st;
}

/* Wait until @need bytes of credit are there: extract our own receive side
 * meanwhile (so two ranks sending to each other cannot deadlock), then sleep
 * in vmmc_wait(); the receiver's credit write and signal wake us. */
VMMC_COLD int fm_wait_space(fm_t *fm, fm_peer_t *p, uint64_t *need_io, size_t cap,
                                uint64_t *skip)
{
    int st = VMMC_OK;
    unsigned iter = 0;
    FM_CNT(fm, FM_C_CREDIT_WAIT, 1);
    atomic_store_explicit(&p->swaiting, 1, memory_order_relaxed);
    for (;;) {
        *need_io = next_need(p, cap, skip);
        if (has_space(p, *need_io))
            break;
        atomic_store_explicit(&p->swait_credit, p->credit, memory_order_release);
        if ((st = fm_send_request_credit(fm, p)) != VMMC_OK)
            break;
        fm_rlock(fm);
        fm->in_extract = 1;
        int n = fm_extract_locked(fm, p->paymax);
        fm->in_extract = 0;
        fm_runlock(fm);
        if (n < 0) {
            st = n;
            break;
        }
        if (VMMC_UNLIKELY(fm_peer_closed(p))) { /* it closed the channel */
            st = fm_peer_stale(fm, p);
            break;
        }
        /* Now and then, even while other senders keep us busy: is it alive? */
        if (p->px && (++iter & 63) == 0 && vmmc_peer_alive(fm->ep, p->rank) == 0) {
            st = fm_peer_dead(fm, p);
            break;
        }
        if (n > 0)
            continue;
        *need_io = next_need(p, cap, skip);
        if (has_space(p, *need_io))
            break;
        int w = vmmc_wait(fm->ep, 20);
        if (w < 0 && w != VMMC_ERR_PEER_DEAD) {
            st = w;
            break;
        }
        /* (PEER_DEAD from vmmc_wait may be about another rank: check ours.) */
        if (p->px && w <= 0 && vmmc_peer_alive(fm->ep, p->rank) == 0) {
            st = fm_peer_dead(fm, p);
            break;
        }
    }
    atomic_store_explicit(&p->swaiting, 0, memory_order_relaxed);
    return st;
}

VMMC_COLD int fm_send_again(fm_t *fm, fm_peer_t *p)
{
    FM_CNT(fm, FM_C_AGAIN, 1);
    if (VMMC_UNLIKELY(fm_peer_closed(p)))
        return fm_peer_stale(fm, p);
    fm_send_request_credit(fm, p);
    if (p->px && (__atomic_load_n(&fm->cnt[FM_C_AGAIN], __ATOMIC_RELAXED) & 63) == 0 && vmmc_peer_alive(fm->ep, p->rank) == 0)
        return fm_peer_dead(fm, p);
    return VMMC_ERR_AGAIN;
}

int fm_write_skip(fm_t *fm, fm_peer_t *p, uint64_t skip)
{
    uint64_t off = p->head & (p->R - 1);
    uint64_t w0 = (uint64_t)FM_F_SKIP << 16;
    uint64_t w1 = (uint64_t)p->seq;
    if (p->map) {
        char *h = p->map + FM_CTRL + off;
        *(uint64_t *)h = w0;
        atomic_store_explicit((_Atomic uint64_t *)(h + 8), w1, memory_order_release);
    } else {
        uint64_t w[2] = {w0, w1};
        int st = vmmc_send(p->px, FM_CTRL + off, w, sizeof w, VMMC_SEND_HEAD_LAST);
        if (st != VMMC_OK) {
            if (st == VMMC_ERR_PEER_DEAD)
                p->sdead = 1;
            return st;
        }
    }
    p->head += skip;
    p->seq = fm_seq_next(p->seq);
    return VMMC_OK;
}
