/* Fast Messages after fork(): a child holds a copy of every channel of its
 * parent, but not the memory those channels' rings live in (the core maps
 * vmmc_mem_alloc() regions and imports MADV_DONTFORK, so they are absent in
 * the child) and none of its threads. Anything the child did with the copy
 * would speak for the parent, or fault on the missing rings. So the child
 * handler (fm_channel.c) marks every channel, and every call on a marked
 * channel fails with VMMC_ERR_ENDPOINT before it reads or writes a ring:
 *
 *  - sends: each peer's connection state becomes FM_PC_FORKED, which the
 *    send paths already test (a peer not READY goes the slow way, where
 *    fm_peer_step() refuses it), and each send stream carries the error
 *    (a message open at fork() fails at its next piece or its end). The
 *    short send path pays nothing;
 *  - receiving, handlers, counters and the rest test the mark at entry;
 *  - fm_finalize() / fm_channel_close() drop the child's copy (its heap
 *    memory and handler stacks) without a word to the core or a peer, and
 *    return VMMC_OK, as vmmc_finalize() does for an inherited endpoint.
 *
 * The child has one thread: the marked channel is single-threaded from then
 * on (locks another thread held at fork() are never taken again). */
#include "fm/fm_int.h"

void fm_fork_mark(fm_t *fm)
{
    fm->forked = 1;
    fm->mt = 0;
    fm->cur_rs = NULL; /* fm_receive()'s fast path: no running handler */
    for (int r = 0, n = fm_nslots(fm); fm->peers && r < n; r++) {
        fm_peer_t *p = fm_peer_at(fm, r);
        if (!p)
            continue;
        atomic_store_explicit(&p->conn, FM_PC_FORKED, memory_order_relaxed);
        atomic_store_explicit(&p->sdead, 0, memory_order_relaxed);
        p->map = NULL;
        p->ss.err = VMMC_ERR_ENDPOINT;
        p->ss.zc = 0;
        p->ss.olive = 0;
        p->ss.pk_open = 0;
    }
}

VMMC_COLD int fm_forked_error(const fm_t *fm, const char *who)
{
    return vmmc_error(VMMC_ERR_ENDPOINT, "%s: FM channel %d belongs to the parent process "
                      "(inherited through fork()); open a channel on an endpoint of this process",
                      who, fm->channel);
}
