/* One-hop reads: a rank that faults for reading on a minipage whose owner
 * it knows (the rank that last sent it a copy) asks that owner straight
 * away (REQ_D). The owner serves it if it still owns the minipage and is
 * not in the middle of handing it over, and remembers the reader in its
 * *direct set*; otherwise it answers NOTOWN and the reader asks the manager.
 * The manager never hears of these copies, so every step that takes the
 * owner's copy or makes it writable goes through the owner first: before
 * it gives the minipage up (FWD_W), lets it be invalidated (INV), opens it
 * for writing (GRANT_W) or lets its chunk grow, the owner invalidates its
 * direct readers itself (DINV, DACK) and only then takes the step. The
 * manager serialises those steps per minipage, so at most one is pending
 * here per minipage; while it is, REQ_D is answered NOTOWN. (Lock held.) */
#include <stdlib.h>

#include "dsm/dsm_int.h"

typedef struct pend {
    struct pend *next;
    uint32_t head;
    int cont, target;
    uint64_t a, b;
    uint64_t waiting; /* readers whose DACK is missing */
} pend_t;

static pend_t *pends;

static pend_t **find(uint32_t head)
{
    pend_t **pp = &pends;
    while (*pp && (*pp)->head != head)
        pp = &(*pp)->next;
    return pp;
}

int dsm_direct_busy(uint32_t head)
{
    return *find(head) != NULL;
}

int dsm_direct_hold(uint32_t head, int cont, int target, uint64_t a, uint64_t b, uint64_t keep)
{
    if (!(dsm.acc[head] & ACC_OWNER))
        return 0;
    uint64_t d = dsm.dset[head] & ~keep;
    dsm.dset[head] = 0;
    if (!d)
        return 0;
    pend_t *p = malloc(sizeof *p);
    if (!p) {
        dsm_break("out of memory for an invalidation in progress");
        return 1;
    }
    *p = (pend_t){pends, head, cont, target, a, b, d};
    pends = p;
    for (int r = 0; r < dsm.n; r++)
        if (d & (1ull << r))
            dsm_post(r, dsm_imm(M_DINV, (unsigned)dsm.me, head, 0));
    return 1;
}

void dsm_on_dack(int src, uint64_t imm)
{
    pend_t **pp = find(IMM_ID(imm));
    pend_t *p = *pp;
    if (!p || !(p->waiting & (1ull << src))) {
        dsm_bad_msg(src, imm, "an acknowledgement nobody waits for");
        return;
    }
    p->waiting &= ~(1ull << src);
    if (p->waiting)
        return;
    *pp = p->next;
    pend_t c = *p;
    free(p);
    dsm_proto_resume(c.cont, c.head, c.target, c.a, c.b);
}

void dsm_direct_free_all(void)
{
    while (pends) {
        pend_t *nx = pends->next;
        free(pends);
        pends = nx;
    }
}
