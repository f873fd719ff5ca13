/* The fabric transport's notification slots: a notifying RMA put whose
 * notification fits 64 bits of remote CQ data is one fi_writedata, not a
 * write and a NOTE message (fab_rdma.c).
 *
 * Exporter side: when an export is granted to a peer for direct access
 * (fab_mr.c, export_grant), the (export, importer) grant also gets a slot
 * here: {export id, generation, the import's capability token, importer,
 * an 8-bit random check}. The slot's number and check travel in the import
 * reply (vmmc_ctl_msg_t.nslot); the importer puts them into the CQ data of
 * its notifying writes (fab_int.h: FAB_CQD_*). Slots are freed when their
 * export ends (export_end).
 *
 * Target side: the provider names no sender for a remote write's
 * completion (tcp;ofi_rxm 1.17 reports source 0 whoever wrote), so the slot
 * says who: a completion whose slot is not in use or whose check does not
 * match is dropped and counted (fabric.bad_cq_data) before it is held; one
 * that passes is the slot's importer's and is then handled as the NOTE
 * message would be (fab_rx.c: the core checks export, generation, token,
 * bounds). What the check does not stop by itself: a peer that holds a key
 * of ours (it imported something) may forge the CQ data of another
 * importer's slot and pass the 8-bit check once in 256 tries; it then
 * queues a notification the core accepted for that export, in the other
 * importer's name. So the first wrong check retires the slot: its importer
 * is told (F_NSRETIRE) and sends that import's notifications as NOTE
 * messages from then on; it answers (F_NSRETIRED) after the last CQ data it
 * posted on the slot, and from that answer on every CQ data naming the slot
 * is refused, whatever its check. A forger gets the guesses that arrive
 * before that answer (a round trip), each one in 256, per slot; a slot's
 * importer keeps its notifications (as messages). VMMC_FABRIC_CQ_DATA=no
 * closes the door entirely. */
#include "transport/fabric/fab_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* The slot for @rep's export granted to @importer (the same one again for
 * a repeated grant); its word for the reply, 0 when there is none. */
uint32_t vmmc_fab__nslot_grant(fab_ep_t *f, int importer, const vmmc_ctl_msg_t *rep)
{
    if (!f->cq_data)
        return 0;
    uint32_t word = 0;
    pthread_mutex_lock(&f->nslock);
    if (!f->nslots)
        f->nslots = calloc(FAB_CQD_SLOTS, sizeof *f->nslots);
    int free_at = -1;
    for (int i = 0; f->nslots && i < FAB_CQD_SLOTS; i++) {
        fab_nslot_t *s = &f->nslots[i];
        if (!s->used) {
            if (free_at < 0)
                free_at = i;
            continue;
        }
        if (s->export_id == rep->export_id && s->gen == rep->gen && s->importer == importer &&
            s->token[0] == rep->token[0] && s->token[1] == rep->token[1]) {
            /* a retired slot is not handed out again: that import's
             * notifications stay NOTE messages (an importer takes a slot
             * it is given as live, fab_rma.c) */
            if (s->state == FAB_NS_LIVE)
                word = FAB_NSLOT_VALID | (uint32_t)s->check << 16 | (uint32_t)i;
            free_at = -1;
            break;
        }
    }
    if (!word && free_at >= 0) {
        fab_nslot_t *s = &f->nslots[free_at];
        uint8_t check;
        if (getrandom(&check, 1, 0) == 1) {
            s->export_id = rep->export_id;
            s->gen = rep->gen;
            s->token[0] = rep->token[0];
            s->token[1] = rep->token[1];
            s->importer = importer;
            s->check = check;
            s->used = 1;
            word = FAB_NSLOT_VALID | (uint32_t)check << 16 | (uint32_t)free_at;
        }
    }
    pthread_mutex_unlock(&f->nslock);
    return word; /* none free: that importer's notifications stay NOTE messages */
}

void vmmc_fab__nslot_release(fab_ep_t *f, uint32_t export_id, uint32_t gen, int importer)
{
    pthread_mutex_lock(&f->nslock);
    for (int i = 0; f->nslots && i < FAB_CQD_SLOTS; i++)
        if (f->nslots[i].used && f->nslots[i].export_id == export_id &&
            f->nslots[i].gen == gen && (importer < 0 || f->nslots[i].importer == importer))
            memset(&f->nslots[i], 0, sizeof f->nslots[i]);
    pthread_mutex_unlock(&f->nslock);
}

void vmmc_fab__nslot_end(fab_ep_t *f, uint32_t export_id, uint32_t gen)
{
    vmmc_fab__nslot_release(f, export_id, gen, -1);
}

void vmmc_fab__nslots_close(fab_ep_t *f)
{
    pthread_mutex_lock(&f->nslock);
    free(f->nslots);
    f->nslots = NULL;
    pthread_mutex_unlock(&f->nslock);
}

/* Who sent CQ data @data: its slot's importer, or -1 (no such slot, the
 * check does not match, the slot is retired). A wrong check retires the
 * slot: its importer is told, once (again only if that send failed). */
int vmmc_fab__nslot_owner(fab_ep_t *f, uint64_t data)
{
    unsigned slot = FAB_CQD_SLOT(data);
    int who = -1, tell = -1;
    pthread_mutex_lock(&f->nslock);
    fab_nslot_t *s = f->nslots && f->nslots[slot].used ? &f->nslots[slot] : NULL;
    if (s && s->state != FAB_NS_RETIRED && s->check == FAB_CQD_CHECK(data)) {
        who = s->importer;
    } else if (s && s->state != FAB_NS_RETIRED) {
        if (s->state == FAB_NS_LIVE)
            atomic_fetch_add_explicit(&f->c_ns_retired, 1, memory_order_relaxed);
        s->state = FAB_NS_RETIRING;
        if (!s->told) {
            s->told = 1;
            tell = s->importer;
        }
    }
    pthread_mutex_unlock(&f->nslock);
    if (tell >= 0) {
        /* (our progress thread: never blocks; not sent now, the next wrong
         * check tries again, and the slot meanwhile takes right ones only) */
        fab_hdr_t h = {.kind = F_NSRETIRE, .id = slot};
        if (vmmc_fab__send(f, tell, &h, NULL, 0, 1) == VMMC_OK) {
            atomic_fetch_add_explicit(&f->c_ns_told, 1, memory_order_relaxed);
        } else {
            pthread_mutex_lock(&f->nslock);
            s = f->nslots ? &f->nslots[slot] : NULL;
            if (s && s->used && s->importer == tell && s->state == FAB_NS_RETIRING)
                s->told = 0;
            pthread_mutex_unlock(&f->nslock);
        }
        vmmc_debug("fabric: CQ data with a wrong check for notification slot %u (rank %d's): "
                   "slot retired", slot, tell);
    }
    return who;
}

void vmmc_fab__nslot_retired(fab_ep_t *f, int peer, uint32_t slot)
{
    if (slot >= FAB_CQD_SLOTS)
        return;
    pthread_mutex_lock(&f->nslock);
    fab_nslot_t *s = f->nslots ? &f->nslots[slot] : NULL;
    if (s && s->used && s->importer == peer && s->state == FAB_NS_RETIRING)
        s->state = FAB_NS_RETIRED;
    pthread_mutex_unlock(&f->nslock);
}

/* The NOTE message @data from @peer stands for (export, generation, token,
 * offset, length, immediate) into @h: 0, or -1 when its slot ended since,
 * or is not @peer's. */
int vmmc_fab__nslot_note(fab_ep_t *f, uint64_t data, int peer, fab_hdr_t *h)
{
    unsigned slot = FAB_CQD_SLOT(data);
    int rc = -1;
    memset(h, 0, sizeof *h);
    pthread_mutex_lock(&f->nslock);
    const fab_nslot_t *s = f->nslots ? &f->nslots[slot] : NULL;
    if (s && s->used && s->importer == peer && s->check == FAB_CQD_CHECK(data) &&
        s->state != FAB_NS_RETIRED) {
        h->kind = F_NOTE;
        h->export_id = s->export_id;
        h->gen = s->gen;
        h->token[0] = s->token[0];
        h->token[1] = s->token[1];
        h->off = FAB_CQD_OFF(data);
        h->len = FAB_CQD_LEN(data);
        h->imm = FAB_CQD_IMM(data);
        rc = 0;
    }
    pthread_mutex_unlock(&f->nslock);
    return rc;
}
