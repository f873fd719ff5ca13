/* RMA and atomics inside the provider: what ofi_rma_peer.c, ofi_rma.c and
 * ofi_atomic.c share.
 *
 * Target side. An endpoint exports a region to peers the first time one asks
 * for it (vmmc_export_on_demand, prefix "ofi.mr."): "ofi.mr.<key>" is the
 * region itself (readable with FI_REMOTE_READ), "ofi.mr.<key>.d" a small
 * read-only descriptor (vofi_mrd_t) that tells the initiator the address the
 * region starts at in its own addressing (its virtual address with
 * FI_MR_VIRT_ADDR, else the registration's offset), its length and access.
 * Writes with data notify into the endpoint's notification queue, which its
 * progress turns into receive completions. An endpoint with FI_RMA_EVENT and
 * a remote-write counter (its own, or the region's, bound before a peer first
 * asks for the region) also exports "ofi.mr.<key>.e", the same memory
 * notifying into a second queue, and says so in the descriptor: initiators send their plain writes
 * through it, notified, and its progress counts them (remote-write counters
 * of the endpoint and of the region).
 *
 * Initiator side. The first operation to (peer, key) imports both and reads
 * the descriptor (a bounded wait, vofi_set.import_ms); the proxy is cached
 * per endpoint. Operations are posted to the endpoint's vmmc completion
 * queue, one record (vofi_rop_t) per vmmc operation, from a pool as deep as
 * that queue, so a post never finds the queue full unless the pool is empty.
 */
#ifndef VMMC_OFI_RMA_PRIV_H
#define VMMC_OFI_RMA_PRIV_H

#include "ofi/ofi.h"

#define VOFI_RMA_DEPTH 8192  /* vmmc operations in flight per endpoint */
#define VOFI_RMA_NDEPTH 1024 /* notifications waiting for progress */
#define VOFI_RMA_BUCKETS 256
#define VOFI_MR_PREFIX "ofi.mr."
#define VOFI_MRD_MAGIC 0x3144524d49464f56ull /* "VOFIMRD1" */

/* The descriptor a target exports beside each region (all little-endian
 * host words: both ends run on machines vmmc connects, x86-64). */
typedef struct vofi_mrd {
    uint64_t magic;
    uint64_t key;
    uint64_t base;   /* the address of the region's first byte for initiators */
    uint64_t len;
    uint64_t access; /* FI_REMOTE_READ / FI_REMOTE_WRITE */
    uint64_t flags;  /* VOFI_MRD_* */
} vofi_mrd_t;
enum { VOFI_MRD_EVENTS = 1 }; /* plain writes go through "ofi.mr.<key>.e" */

/* One endpoint's export of one region (on the region's list). */
struct vofi_mr_exp {
    struct vofi_mr_exp *next;
    vofi_ep_t *ep;
    vmmc_export_t *ex, *exd, *exe; /* region, descriptor, events (or NULL) */
    vofi_mrd_t d; /* exported as "ofi.mr.<key>.d" */
};

/* A peer's region, imported (cached per endpoint by (peer, key)). */
struct vofi_rproxy {
    struct vofi_rproxy *next;
    int peer;
    int stale;        /* the target withdrew it: import again on next use */
    uint64_t key;
    vmmc_proxy_t *px;
    vmmc_proxy_t *pxe; /* VOFI_MRD_EVENTS: the same region, notifying */
    vofi_mrd_t d;
};

/* One vmmc operation in flight; the first of an fi operation's records is
 * its parent and holds the fi context. */
typedef struct vofi_rop {
    struct vofi_rop *parent;
    struct vofi_rop *next_free;
    struct vofi_rproxy *rp;
    void *result;       /* fetching atomics: where this element's old value goes */
    uint8_t esize;      /* its width (4 or 8) */
    /* parent only */
    uint8_t fence;      /* a write: complete after the peer confirmed delivery */
    uint32_t left;      /* vmmc operations not completed yet */
    uint32_t resv;      /* records reserved for elements not taken yet */
    int peer;
    int err, vst;       /* the first failure: positive FI_E*, vmmc status */
    void *context;
    uint64_t flags;     /* completion flags | FI_COMPLETION when one is wanted */
    vofi_cntr_t *cntr;
} vofi_rop_t;

typedef struct vofi_rma {
    vmmc_cq_t *ncq;              /* notifications of writes with data */
    vmmc_cq_t *ecq;              /* FI_RMA_EVENT: notifications of plain writes */
    _Atomic int nexp;            /* exports made by this endpoint */
    vofi_rop_t *pool;
    vofi_rop_t *free;
    size_t nfree;
    struct vofi_rproxy *bucket[VOFI_RMA_BUCKETS];
} vofi_rma_t;

/* What an operation needs of the region. */
enum { VOFI_NEED_READ = 1, VOFI_NEED_WRITE = 2 };

/* The region @p key of the peer at @p a, imported on first use, with the
 * offset of [addr, addr + len) in it. Lock held. Returns 0, or a negative
 * FI_E*; *@p late is the vmmc status when that error is the operation's
 * outcome (to be reported as an error completion: refused key or access,
 * dead peer, timeout), 0 when the call was wrong (unknown address, out of
 * bounds: returned to the caller). */
int vofi_rma_resolve(vofi_ep_t *ep, fi_addr_t a, uint64_t key, uint64_t addr, size_t len,
                     int need, int *peer, struct vofi_rproxy **rp, size_t *off, int *late);

/* The parent record of an operation of @p n vmmc operations, with n - 1
 * more reserved for vofi_rop_next(), or NULL when fewer are free (the caller
 * returns -FI_EAGAIN). Lock held for all of these. */
vofi_rop_t *vofi_rop_get(vofi_ep_t *ep, size_t n);
/* The next element's record (after the parent, which is element 0). */
vofi_rop_t *vofi_rop_next(vofi_ep_t *ep, vofi_rop_t *p);
/* Posting stopped: @p e (a record taken but not posted, or NULL) and the
 * elements after it, @p unposted in all, end with status @p vst; the
 * operation completes (with that error) once the posted ones have. */
void vofi_rop_abort(vofi_ep_t *ep, vofi_rop_t *p, vofi_rop_t *e, size_t unposted, int vst);
/* Nothing was posted and nothing is reported (the call returns -FI_EAGAIN). */
void vofi_rop_cancel(vofi_ep_t *ep, vofi_rop_t *p);

/* Flags of a transmit completion: @p what (FI_RMA|FI_WRITE, ...) plus
 * FI_COMPLETION when the endpoint writes one for @p opflags. */
uint64_t vofi_rma_cflags(vofi_ep_t *ep, uint64_t what, uint64_t opflags);
/* Report an operation that ended before anything was posted. Lock held. */
void vofi_rma_fail_now(vofi_ep_t *ep, uint64_t cflags, void *context, vofi_cntr_t *cntr, int err,
                       int vst);
/* vmmc status -> positive FI_E* for an RMA or atomic completion. */
int vofi_rma_err(int vst);
/* The import timeout in milliseconds for vmmc_import. */
int vofi_rma_import_ms(void);

#endif /* VMMC_OFI_RMA_PRIV_H */
