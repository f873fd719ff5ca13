/* The split-copy offer from the receiver's side, played by hand: rank 0 does
 * not extract; it watches rank 1's offer word through FM's own mapping and
 * claims each offer as a receiver would before reading the sender's memory.
 *   1. It holds the claim for 300 ms, then ends it: rank 1's send call must
 *      not return before (the word reads DONE, never CLAIMED, when it does).
 *   2. It claims and then leaves the job without ending the claim: rank 1's
 *      call must end with VMMC_ERR_PEER_DEAD, not hang, not succeed.
 * A third offer is revoked: rank 0 claims too late and must fail. Rank 0
 * answers each offer's message with "not this time" (no buffer), so the
 * sender does not wait for one. */
#include <stdio.h>
#include <unistd.h>

#include "fm/fm_int.h"
#include "fm_test.h"

#define MSG (64u << 10)

static _Atomic uint64_t *offer_word(fm_t *fm, int sender_side)
{
    /* The sender reads its own region; the receiver its mapping of it. */
    return (_Atomic uint64_t *)(sender_side ? fm->peers[0].ctrl + FM_OFFER_OFF
                                            : fm->peers[1].map + FM_OFFER_OFF);
}

/* Rank 0: wait for offer @n to be OFFERED, claim it if @take, and answer
 * message @n: "not into a buffer this time". */
static void claim(fm_t *fm, uint64_t n, int take)
{
    _Atomic uint64_t *w = offer_word(fm, 0);
    double end = vt_now() + 30;
    uint64_t o;
    while ((o = atomic_load(w)) != fm_oword(n, FM_O_OFFERED)) {
        if (vt_now() > end)
            VT_FAIL("offer %llu never came (word 0x%llx)", (unsigned long long)n,
                    (unsigned long long)o);
    }
    if (take)
        VT_CHECK(atomic_compare_exchange_strong(w, &o, fm_oword(n, FM_O_CLAIMED)));
    VT_OK(fm_send_desc(fm, &fm->peers[1], n, FM_DESC_NOT_NOW, 0, NULL, 0));
}

static int send_big(fm_t *fm, uint8_t *src)
{
    fm_stream_t *s;
    int st = fm_begin_message(fm, 0, MSG, 1, &s);
    if (st != VMMC_OK)
        return st;
    st = fm_send_piece(s, src, MSG);
    int st2 = fm_end_message(s);
    return st ? st : st2;
}

int main(void)
{
    vt_require_transport();
    if (vt_remote())
        VT_SKIP("split copies need shared memory");
    vmmc_ep_t *ep;
    fm_t *fm;
    ft_open(&ep, &fm, NULL);
    if (vmmc_size(ep) != 2)
        VT_SKIP("needs 2 ranks");
    int me = vmmc_rank(ep);
    /* (Rings are made on first use: connect now, to see whether they map.) */
    VT_OK(fm_peer_connect(fm, &fm->peers[1 - me], FM_CONNECT_WAIT));
    if (!fm->peers[1 - me].map)
        VT_SKIP("the rings are not mapped here");
    uint8_t *src;
    VT_OK(vmmc_mem_alloc(ep, MSG, (void **)&src));
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        _Atomic uint64_t *w = offer_word(fm, 1);
        /* 1: held for 300 ms, then ended. */
        VT_OK(send_big(fm, src));
        VT_CHECK(atomic_load(w) == fm_oword(1, FM_O_DONE));
        /* 3: not claimed in time: revoked before the call returned. */
        VT_OK(send_big(fm, src));
        VT_CHECK(atomic_load(w) == fm_oword(2, FM_O_REVOKED));
        VT_OK(vmmc_barrier(ep));
        /* 2: claimed, never ended; the receiver leaves. */
        int st = send_big(fm, src);
        if (st != VMMC_ERR_PEER_DEAD)
            VT_FAIL("a send whose offer a dead rank had claimed returned %d (%s)", st,
                    vmmc_strerror(st));
        VT_CHECK(atomic_load(w) == fm_oword(3, FM_O_CLAIMED));
        printf("rank 1: waited for the claim's end, was revoked, and got PEER_DEAD\n");
        fflush(stdout);
        _exit(0); /* (the job is broken by design: no finalize) */
    }
    claim(fm, 1, 1);
    usleep(300000);
    atomic_store(offer_word(fm, 0), fm_oword(1, FM_O_DONE));
    /* Offer 2 is revoked by the time the sender's call returned: wait until
     * it is, and then a claim must fail. */
    claim(fm, 2, 0);
    _Atomic uint64_t *w = offer_word(fm, 0);
    double end = vt_now() + 30;
    while (atomic_load(w) != fm_oword(2, FM_O_REVOKED)) {
        if (vt_now() > end)
            VT_FAIL("offer 2 was not revoked (word 0x%llx)", (unsigned long long)atomic_load(w));
        usleep(100);
    }
    uint64_t o = fm_oword(2, FM_O_OFFERED);
    VT_CHECK(!atomic_compare_exchange_strong(w, &o, fm_oword(2, FM_O_CLAIMED)));
    VT_OK(vmmc_barrier(ep));
    claim(fm, 3, 1);
    usleep(100000);
    printf("rank 0: leaving with offer 3 claimed\n");
    fflush(stdout);
    _exit(0);
}
