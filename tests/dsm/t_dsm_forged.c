/* Messages that break the protocol, sent by ranks of the job: every one is
 * dropped and counted (vmmc_dsm_stats().bad_messages), none changes a
 * minipage, a lock or the barrier. 3 ranks, homes spread (the default).
 *
 * The program is built from the library's sources so that it can send raw
 * messages through the DSM's own imports (dsm.px[], the internal header).
 * Rank 2 sends rank 0 and rank 1 messages of no type, out-of-range fields,
 * bytes with a control message, a manager's messages (grants, lock grant,
 * barrier release, CREATE) it may not send, rank 0's messages (lock, WHERE)
 * to rank 1, requests to a rank that is not the minipage's home, WHEREs of
 * no request and from a rank that is not the home, acknowledgements and
 * DONEs nobody asked for. Rank 0, the allocator, sends rank 1 CREATEs that
 * must be refused: a large minipage out of the area or in a view other than
 * 0, a small one out of its page, for a rank that does not exist, for a
 * page rank 1 is not the home of, and over a live minipage of rank 1's.
 * Each receiver waits until it counted what it was sent, then the ranks run
 * a lock-protected counter and their own counters in one page, and check
 * every value, the live minipages' bytes, and that nothing else was
 * dropped. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dsm/dsm_int.h"
#include "dsm_test.h"

#define ROUNDS 200
#define NBIG 4
#define WAIT_S 30.0

typedef struct tab {
    long *cnt;        /* under lock 1 */
    long *slot[3];    /* each rank's own, small minipages of one page */
    char *big[NBIG];  /* whole pages, rank 0's pattern */
} tab_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void forge(int to, uint64_t imm, size_t off, size_t len)
{
    static const char junk[16] = "forged bytes";
    int st = vmmc_send_imm(dsm.px[to], off, len ? junk : NULL, len, VMMC_SEND_NOTIFY, imm);
    if (st)
        DT_FAIL("sending a forged message to rank %d: %s", to, vmmc_strerror(st));
}

/* A free page (no allocation reaches the area's last pages) whose home is @h. */
static size_t free_page(int h)
{
    for (size_t p = dsm.npages - 1; p > dsm.npages - 8; p--)
        if (dsm_home_page(p) == h)
            return p;
    DT_FAIL("no free page homed at rank %d", h);
}

static uint32_t id_of(size_t page, unsigned view)
{
    return (uint32_t)(page * dsm.views + view);
}

/* Where an allocation is: its page and view. */
static void locate(const void *p, size_t *page, unsigned *view)
{
    size_t a = (size_t)((const char *)p - (const char *)dsm.base);
    *view = (unsigned)(a / dsm.size);
    *page = (a % dsm.size) / DSM_PAGE;
}

int main(void)
{
    DT_OK(vmmc_dsm_init(NULL));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    if (n != 3 || !dsm.spread || dsm.page_mode) {
        if (me == 0)
            printf("SKIP: needs 3 ranks, homes spread and minipages (VMMC_DSM_MANAGERS=all, "
                   "VMMC_DSM_PAGE=0)\n");
        DT_OK(vmmc_dsm_finalize());
        return 77;
    }
    tab_t *t = NULL;
    if (me == 0) {
        t = vmmc_dsm_malloc(sizeof *t);
        t->cnt = vmmc_dsm_malloc(sizeof(long));
        for (int r = 0; r < 3; r++)
            t->slot[r] = vmmc_dsm_malloc(sizeof(long));
        for (int b = 0; b < NBIG; b++) {
            t->big[b] = vmmc_dsm_malloc(DSM_PAGE);
            for (size_t i = 0; i < DSM_PAGE; i++)
                t->big[b][i] = (char)(b * 31 + i);
        }
        if (!t->cnt || !t->slot[2] || !t->big[NBIG - 1])
            DT_FAIL("vmmc_dsm_malloc: %s", vmmc_dsm_last_error());
        *t->cnt = 0;
        for (int r = 0; r < 3; r++)
            *t->slot[r] = 0;
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&t, 0));
    vmmc_dsm_stats_t s0, s;
    DT_OK(vmmc_dsm_stats(&s0));
    DT_OK(vmmc_dsm_barrier()); /* every rank counts from here before anyone forges */
    const uint32_t ids = (uint32_t)(dsm.npages * dsm.views);
    const size_t last = (dsm.npages - 1) * DSM_PAGE; /* an unused page's bytes */
    const uint32_t free0 = id_of(free_page(0), 0), free1 = id_of(free_page(1), 0),
                   free2 = id_of(free_page(2), 0);
    int expect = 0;
    if (me == 2) {
        for (int to = 0; to < 2; to++) {
            uint32_t mine = to == 0 ? free0 : free1;
            forge(to, 0, 0, 0);                                       /* no type */
            forge(to, 63, 0, 0);                                      /* beyond the last */
            forge(to, dsm_imm(M_REQ_R, 2, mine, 0), last, 8);         /* bytes, control */
            forge(to, dsm_imm(M_REQ_R, 2, ids, 0), 0, 0);             /* id out of range */
            forge(to, dsm_imm(M_INV, 1000, free0, 0), 0, 0);          /* rank out of range */
            forge(to, dsm_imm(M_GRANT_W, (unsigned)to, free0, 0), 0, 0); /* not its home */
            forge(to, dsm_imm(M_LOCK_GRANT, (unsigned)to, 1, 0), 0, 0);  /* rank 0's */
            forge(to, dsm_imm(M_BAR_GO, 0, 0, 0), 0, 0);              /* rank 0's */
            forge(to, dsm_imm(M_CREATE, 2, mine, 0), 0, 0);           /* rank 0's */
        }
        forge(1, dsm_imm(M_LOCK, 2, 1, 0), 0, 0);                     /* for rank 0 only */
        forge(1, dsm_imm(M_WHERE, 2, free1, (uint32_t)M_REQ_R << 16), 0, 0); /* (the same) */
        forge(1, dsm_imm(M_REQ_R, 2, free0, 0), 0, 0);                /* rank 1 not its home */
        forge(0, dsm_imm(M_WHERE, 2, free2, 0), 0, 0);                /* of no request */
        forge(0, dsm_imm(M_WHERE, 2, free1, (uint32_t)M_REQ_R << 16), 0, 0); /* not the home */
        forge(0, dsm_imm(M_ACK, 2, free0, 0), 0, 0);                  /* nobody asked */
        forge(0, dsm_imm(M_DONE, 2, free0, 0), 0, 0);                 /* (the same) */
    }
    if (me == 0) {
        /* a live minipage homed at rank 1 */
        size_t page = 0;
        unsigned view = 0;
        int b = 0;
        for (; b < NBIG; b++) {
            locate(t->big[b], &page, &view);
            if (dsm_home_page(page) == 1)
                break;
        }
        if (b == NBIG)
            DT_FAIL("none of %d consecutive pages is homed at rank 1", NBIG);
        size_t p1 = free_page(1);
        unsigned large = 1u << 6;
        forge(1, dsm_imm(M_CREATE, large, id_of(p1, 1), 1), 0, 0);        /* view 1 */
        forge(1, dsm_imm(M_CREATE, large, id_of(p1, 0), 0x3fffff), 0, 0); /* past the end */
        forge(1, dsm_imm(M_CREATE, 0, id_of(p1, 0), 255 | 255 << 8), 0, 0); /* out of page */
        forge(1, dsm_imm(M_CREATE, 5, id_of(p1, 0), 0), 0, 0);        /* no rank 5 */
        forge(1, dsm_imm(M_CREATE, 0, free2, 0), 0, 0);               /* rank 1 not home */
        forge(1, dsm_imm(M_CREATE, 0, id_of(page, view), 0), 0, 0);   /* over a live one */
    }
    expect = me == 0 ? 9 + 4 : me == 1 ? 9 + 3 + 6 : 0;

    /* The messages travel while we look: wait until all were counted. */
    double t0 = now_s();
    for (;;) {
        DT_OK(vmmc_dsm_stats(&s));
        if ((long long)(s.bad_messages - s0.bad_messages) >= expect)
            break;
        if (now_s() - t0 > WAIT_S)
            DT_FAIL("after %.0f s, %llu of the %d forged messages sent here were dropped",
                    WAIT_S, (unsigned long long)(s.bad_messages - s0.bad_messages), expect);
        usleep(1000);
    }
    DT_OK(vmmc_dsm_barrier());

    /* The protocol is intact: locks, a page of three ranks' counters. */
    for (int i = 0; i < ROUNDS; i++) {
        DT_OK(vmmc_dsm_lock(1));
        (*t->cnt)++;
        DT_OK(vmmc_dsm_unlock(1));
        (*t->slot[me])++;
    }
    DT_OK(vmmc_dsm_barrier());
    DT_EQ(*t->cnt, 3 * ROUNDS);
    for (int r = 0; r < 3; r++)
        DT_EQ(*t->slot[r], ROUNDS);
    for (int b = 0; b < NBIG; b++)
        for (size_t i = 0; i < DSM_PAGE; i++)
            if (t->big[b][i] != (char)(b * 31 + i))
                DT_FAIL("page object %d byte %zu is %d, not %d", b, i, t->big[b][i],
                        (char)(b * 31 + i));
    DT_OK(vmmc_dsm_barrier());
    DT_OK(vmmc_dsm_stats(&s));
    DT_EQ(s.bad_messages - s0.bad_messages, expect);
    DT_PASS("forged messages dropped and counted; locks, counters and pages intact");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
