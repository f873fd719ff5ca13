/* Fast Messages, receiving side: posting the handler's buffer for direct
 * placement, and the receiver's half of a split copy (see fm_int.h). */
#include "fm/fm_recv.h"

/* ZC message: the handler wants @want more bytes at @dst than the current
 * packet holds. Post @dst for them if it can take them directly. */
void fm_zc_post(fm_t *fm, fm_peer_t *p, fm_stream_t *s, char *dst, size_t want)
{
    vmmc_mkey_t k;
    uint64_t off = s->mbase + s->rlen;
    if (want < FM_ZC_POST_MIN)
        return;
    /* A handler that receives into malloc() memory usually does so again
     * with the same buffer: remember the last such buffer rather than ask
     * the core (which formats an error) for every message. At worst a
     * buffer later reallocated at that address is not placed into. */
    int st = dst == fm->zc_nokey ? VMMC_ERR_UNSUPPORTED
                                 : vmmc_mem_key(fm->ep, dst, want, p->rank, &k);
    if (st != VMMC_OK) {
        if (st == VMMC_ERR_UNSUPPORTED)
            fm->zc_nokey = dst;
        /* The rest comes in packets. */
        fm_send_desc(fm, p, p->rmsg, 0, 0, NULL, 0);
        s->zstate = 2;
        s->roffer = NULL;
        return;
    }
    /* Split copy (fm_int.h): the sender offered the piece that starts here;
     * copy its front ourselves while the sender copies the rest. We start a
     * cross-core hop earlier than it, so we take a little more. The offer
     * lies in the first packet, valid while that is the current one (mbase
     * 0), and the piece must start where the packet ends. A packet after it
     * means the sender stopped waiting and sends the piece in packets: a
     * pull would be for nothing. Not one byte is read before the offer word
     * in the sender's region (which we write through our mapping of it)
     * says the offer is ours: the sender revokes it before its call returns. */
    void *src = NULL;
    uint64_t pull = 0, w0, ooff, oseq = 0;
    uint32_t nl;
    vmmc_mkey_t okey;
    if (s->roffer && s->mbase == 0 && s->rp && fm->split_min && p->map &&
        (memcpy(&ooff, s->roffer, 8), ooff == off) &&
        !peek_at(p, p->tail + s->rslot, fm_seq_next(p->rseq), &w0, &nl)) {
        memcpy(&oseq, s->roffer + 8, 8);
        memcpy(&okey, s->roffer + 16, sizeof okey);
        uint64_t L = vmmc_mkey_len(&okey);
        if (L > want)
            L = want;
        if (L >= FM_SPLIT_PIECE_MIN) {
            int a = vmmc_mem_attach(fm->ep, p->rank, &okey, 0, &src);
            if (a == VMMC_OK) {
                pull = (L / 2 + 2048) & ~(uint64_t)63;
                if (pull > FM_PULL_MAX)
                    pull = FM_PULL_MAX;
                if (pull >= L)
                    pull = (L / 2) & ~(uint64_t)63;
                /* Copying is processing: no more than the extract call that
                 * runs this handler has left (fm_extract's max_bytes). */
                if ((int64_t)pull > fm->pull_budget)
                    pull = fm->pull_budget > 0 ? (uint64_t)fm->pull_budget & ~(uint64_t)63 : 0;
                if (pull < FM_SPLIT_PIECE_MIN / 2)
                    pull = 0;
                uint64_t o = fm_oword(oseq, FM_O_OFFERED);
                if (pull && (oseq >> 62 ||
                             !atomic_compare_exchange_strong_explicit(
                                 (_Atomic uint64_t *)(p->map + FM_OFFER_OFF), &o,
                                 fm_oword(oseq, FM_O_CLAIMED), memory_order_acq_rel,
                                 memory_order_relaxed)))
                    pull = 0; /* revoked: the sender has moved on */
            } else {
                src = NULL;
                if (a != VMMC_ERR_AGAIN) /* AGAIN: being mapped, ready next time */
                    vmmc_debug("fm: cannot attach rank %d's offered buffer (%s)", p->rank,
                               vmmc_last_error());
            }
        }
    }
    s->roffer = NULL;
    if (fm_send_desc(fm, p, p->rmsg, off, want, &k, pull) == VMMC_OK) {
        s->zstate = 1;
        s->zbuf = dst;
        s->zM = off;
        s->zN = want;
        if (pull) {
            memcpy(dst, src, pull);
            fm->pulled += pull;
            s->zpull = pull; /* counted once the sender's PULLED packet confirms it */
        }
    }
    if (pull) /* our last read of the sender's memory is done */
        atomic_store_explicit((_Atomic uint64_t *)(p->map + FM_OFFER_OFF),
                              fm_oword(oseq, FM_O_DONE), memory_order_release);
    if (src)
        vmmc_mem_detach(fm->ep, src);
}
