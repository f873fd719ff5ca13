/* The fabric transport's internals, shared by its files: fabric.c (the
 * endpoint: provider, address, peers, the ops table), fab_progress.c (the
 * progress thread, the receive queue, failed peers), fab_cq.c (sends, their
 * completions, waits for answers), fab_rx.c (what arrives:
 * writes applied through the core, control messages, reads, replies, the
 * notification queue), fab_rma.c (the message data path: put, get, flush),
 * fab_rdma.c (the RMA data path), fab_atomic.c (the provider's atomics),
 * fab_mr.c and fab_nslot.c (what an exporter grants: registrations,
 * notification slots) and fab_accept.c (peers that reach us first: HELLO,
 * refusals); docs/fabric.md lists them all. */
#ifndef VMMC_TRANSPORT_FABRIC_INT_H
#define VMMC_TRANSPORT_FABRIC_INT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "transport/fabric/fab_cache.h"
#include "transport/transport.h"

/* Messages (fab_hdr_t.kind). */
enum {
    F_WRITE = 1,    /* data into export id/gen (token) at off; flags F_FIRST/LAST/NOTIFY/HEADLAST */
    F_CTL = 2,      /* one vmmc_ctl_msg_t */
    F_GET_REQ = 3,  /* read len bytes at off of export id/gen; answered by GET_REP or GET_ERR */
    F_GET_REP = 4,  /* id, off = position in the answer, data */
    F_GET_ERR = 5,  /* id, imm = the (negative) status */
    F_FLUSH = 6,    /* id: answered by FLUSH_ACK once everything before it was applied */
    F_FLUSH_ACK = 7,
    F_SIGNAL = 8,   /* wake the endpoint */
    F_PING = 9,     /* nothing: a waiting requester's probe (a dead peer fails the send) */
    F_BYE = 10,     /* the sender's endpoint closes: it has left */
    F_NOTE = 11,    /* notification of an RMA write before it: export id/gen (token), off, len, imm */
    F_HELLO = 12,   /* first message to a peer that is not a rank: the sender's address (data) */
    F_REFUSE = 13,  /* answer to a HELLO the receiver refused (imm: FAB_REFUSE_*) */
    F_SEQACK = 14,  /* id: the receiver handled every message of ours numbered below it */
    F_NSRETIRE = 15,  /* id: our notification slot for you is retired: no more CQ data on it */
    F_NSRETIRED = 16, /* id: that slot: none of our CQ data on it follows this message */
};
enum { F_FIRST = 1, F_LAST = 2, F_NOTIFY = 4, F_HEADLAST = 8 };
/* Why a HELLO was refused (the REFUSE's imm). A HELLO's imm is the whole
 * secret of the address its sender connected to; a REFUSE for another
 * endpoint echoes it in token[0] (where the provider names no source, the
 * connector knows by it whose answer this is). */
enum { FAB_REFUSE_NOT_LISTENING = 0, FAB_REFUSE_NOT_OURS = 1 };

/* Every message starts with this header (host byte order: hosts of one job
 * share endianness, as for udp). */
typedef struct fab_hdr {
    uint8_t kind, flags;
    uint16_t pad;
    uint32_t export_id;
    uint32_t gen;
    uint32_t seq;   /* per sender and receiver: the receiver handles them in this order */
    uint64_t token[2];
    uint64_t off;   /* where this piece goes (writes), its place in the answer (replies) */
    uint64_t len;   /* a read's length */
    uint64_t imm;   /* a notification's immediate, or a status */
    uint64_t id;    /* request id (replies echo it) */
    /* who sends, for a receiver that does not know the connection yet (the
     * provider names no source until the sender is in its address vector):
     * the sender's handle there and the secret of its address (fsec=) */
    int32_t src;
    /* the receiver's secret as the sender knows it (the low half of fsec=
     * of the address it sent to): a message sent to an address that another
     * endpoint has taken since (a port used again after an endpoint closed)
     * is known there and dropped, not taken as meant for it */
    uint32_t dst;
    uint64_t sec;
} fab_hdr_t;

/* Payload per message at most: writes and read answers are cut into
 * pieces of this size, each one received into one posted buffer. */
#define FAB_CHUNK (64u * 1024)
/* Pieces of one write sent from the caller's buffer under way at once. */
#define FAB_ZC_MAX 16
#define FAB_RXBUF (sizeof(fab_hdr_t) + FAB_CHUNK)
#define FAB_NRX 32 /* receive buffers posted */
/* held[]: FAB_NRX messages and remote CQ data waiting for its turn (or
 * for room in the notification queue): FAB_HELD_MAX entries at most */
#define FAB_HELD_MAX 65536

/* A message being sent: freed when its completion comes. */
typedef struct fab_tx {
    struct fi_context2 ctx; /* first: the completion's op_context */
    const fab_reg_t *reg;   /* its registration (FI_MR_LOCAL), held until it completes */
    const fab_reg_t *reg2;  /* a message sent from the caller's buffer: that one's */
    int peer;
    int rma;                /* an RMA write or read: a refusal by the target fails only it */
    /* waited for (fab_rma.c): VMMC_INPROGRESS until its completion stores
     * the status; FAB_ABANDONED when the waiter gave up (the completion frees it) */
    _Atomic int wstat;
    int waited;
    size_t len;
    _Alignas(16) unsigned char buf[];
} fab_tx_t;

#define FAB_ABANDONED 2 /* neither VMMC_INPROGRESS (1) nor a status */

/* Remote atomics (fab_atomic.c): vmmc_atomic_op_t 1 .. 19, and the six
 * word types; which of the provider's forms it offers for each. */
#define FAB_AT_OPS 20
#define FAB_AT_TYPES 6
#define FAB_AT_WRITE 1   /* fi_atomic */
#define FAB_AT_FETCH 2   /* fi_fetch_atomic */
#define FAB_AT_COMPARE 4 /* fi_compare_atomic */

/* An import with direct access (proxy_setup; px->tl_priv): where the region
 * is for fi_write/fi_read. */
typedef struct fab_rpx {
    uint64_t key;
    uint64_t base; /* the address of offset 0 (FI_MR_VIRT_ADDR), else 0 */
    uint32_t nslot; /* the exporter's notification slot for us (fab_nslot.c), 0: none */
    int readable;   /* the export has VMMC_EXPORT_READ (its region FI_REMOTE_READ) */
} fab_rpx_t;

/* Remote CQ data of a notifying RMA write (fab_nslot.c, fab_rdma.c), 64 bits:
 *   [63:54] slot  [53:46] check  [45:36] seq  [35:22] offset  [21:8] length - 1  [7:0] imm
 * slot and check: the exporter's notification slot (the import reply's
 * nslot: FAB_NSLOT_VALID | check << 16 | slot); seq: the low bits of the
 * sender's next message number to the target (the target handles the
 * notification after every message sent before it); offset, length and
 * imm: the notification's (the provider reports no length: measured 0). */
#define FAB_CQD_SLOTS 1024
#define FAB_NSLOT_VALID 0x80000000u
#define FAB_CQD_OFF_MAX (1u << 14) /* offsets below 16 KiB */
#define FAB_CQD_LEN_MAX (1u << 14) /* lengths 1 .. 16 KiB */
#define FAB_CQD_IMM_MAX (1u << 8)  /* immediates below 256 */
#define FAB_CQD_SEQ_MASK 0x3ffu
/* A receiver acknowledges every FAB_SEQACK_EVERY messages it handled from
 * a peer (F_SEQACK); a sender carries a notification as CQ data only while
 * fewer than FAB_CQD_WINDOW of its messages may be unhandled at the target,
 * so that the sequence field (10 bits) never wraps: the target's
 * serial-number comparison (fab_rx.c) is exact within half its range. */
#define FAB_SEQACK_EVERY 64u
#define FAB_CQD_WINDOW 256u
#define FAB_CQD_SLOT(d) ((unsigned)((d) >> 54) & (FAB_CQD_SLOTS - 1u))
#define FAB_CQD_CHECK(d) ((uint8_t)((d) >> 46))
#define FAB_CQD_SEQ(d) ((uint32_t)((d) >> 36) & FAB_CQD_SEQ_MASK)
#define FAB_CQD_OFF(d) (((d) >> 22) & (FAB_CQD_OFF_MAX - 1))
#define FAB_CQD_LEN(d) ((((d) >> 8) & (FAB_CQD_LEN_MAX - 1)) + 1)
#define FAB_CQD_IMM(d) ((d) & (FAB_CQD_IMM_MAX - 1))

static inline int fab_cqd_fits(uint32_t nslot, size_t off, size_t len, uint64_t imm)
{
    return (nslot & FAB_NSLOT_VALID) && off < FAB_CQD_OFF_MAX && len && len <= FAB_CQD_LEN_MAX &&
           imm < FAB_CQD_IMM_MAX;
}

/* Everything but the sequence number (the sender adds it as it posts). */
static inline uint64_t fab_cqd_make(uint32_t nslot, size_t off, size_t len, uint64_t imm)
{
    return (uint64_t)(nslot & (FAB_CQD_SLOTS - 1u)) << 54 | (uint64_t)((nslot >> 16) & 0xff) << 46 |
           (uint64_t)off << 22 | (uint64_t)(len - 1) << 8 | imm;
}

/* One (export, importer) grant's notification slot (fab_nslot.c). */
typedef struct fab_nslot {
    uint32_t export_id, gen;
    uint64_t token[2]; /* the import's capability token (what its NOTE would carry) */
    int importer;      /* its peer handle */
    uint8_t check;     /* random: what its CQ data must carry */
    uint8_t used;
    /* retired after CQ data with a wrong check (a forger guessing it): its
     * importer is told (F_NSRETIRE) and stops using it; once it says so
     * (F_NSRETIRED, after the last CQ data it posted on the slot), every CQ
     * data naming the slot is refused */
    uint8_t state; /* FAB_NS_LIVE, FAB_NS_RETIRING, FAB_NS_RETIRED */
    uint8_t told;  /* F_NSRETIRE is sent (or being sent): not again */
} fab_nslot_t;
enum { FAB_NS_LIVE = 0, FAB_NS_RETIRING = 1, FAB_NS_RETIRED = 2 };

/* An export registered for a peer's direct access (fab_mr.c). */
typedef struct fab_xmr {
    uint32_t export_id, gen;
    struct fid_mr *mr;
    uint64_t key;
    int *ranks;          /* the importers it was granted to that still import */
    int nranks, cap;
    struct fab_xmr *next;
} fab_xmr_t;

typedef struct fab_rxb {
    struct fi_context2 ctx;
    _Alignas(16) unsigned char buf[FAB_RXBUF];
} fab_rxb_t;

/* A request waiting for its answer (a read, a flush). */
typedef struct fab_wait {
    uint64_t id;
    int peer;
    uint8_t *dst;
    size_t len, got;
    int status; /* VMMC_INPROGRESS until done */
    struct fab_wait *next;
} fab_wait_t;

typedef struct fab_peer {
    fi_addr_t fa;            /* in the address vector, or FI_ADDR_NOTAVAIL */
    pthread_mutex_t txlock;  /* one write's pieces at a time */
    pthread_mutex_t seqlock; /* numbering and posting one message */
    uint32_t tx_seq;
    /* a write went as messages, which the receiver's thread applies later:
     * the next RMA operation to this peer flushes first (the provider
     * orders only the messages' arrival before it, not their application) */
    _Atomic int msg_writes;
    _Atomic int tx_out;      /* operations under way (providers that resend: fab_wait.c) */
    /* receive side (progress thread only) */
    uint32_t rx_seq;         /* the next one to handle */
    /* send side: the peer handled our messages numbered below this
     * (F_SEQACK): notifications go as remote CQ data only while fewer than
     * FAB_CQD_WINDOW of ours may be unhandled there (fab_rdma.c) */
    _Atomic uint32_t acked_seq;
    /* that peer's notification slots for us it retired (F_NSRETIRE): our
     * notifications to those imports go as NOTE messages (set and read
     * under seqlock) */
    uint64_t ns_retired[FAB_CQD_SLOTS / 64];
    uint64_t msg_off;
    int msg_ok;
    /* open world (fab_accept.c): we sent it our HELLO (a refusal is taken
     * only then), or it reached us with its own (none to send) */
    _Atomic int hello;
    uint32_t dsec;           /* the low half of its fsec= (our headers' dst) */
} fab_peer_t;

#define FAB_PEER_CHUNK 256
#define FAB_PEER_CHUNKS (VMMC_PEERS_MAX / FAB_PEER_CHUNK)

typedef struct fab_ep {
    vmmc_ep_t *ep;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *txcq, *rxcq;
    struct fid_ep *fep;
    /* the CQs' wait set where the provider gives no fd per CQ (fab_wait.c) */
    struct fid_wait *ws;
    int txfd, rxfd;          /* the CQs' wait fds (FI_WAIT_FD), or the set's and -1 */
    /* The provider makes datagrams reliable itself (rxd, fab_wait.c): it
     * resends on timers that run only when its queues are read, so the
     * progress thread's next sleep is timed (nap_ms; 0: untimed); and it
     * drops a send past its transmit queue without a word (1.17), so at most
     * FAB_TX_WINDOW operations are under way to a peer (its tx_out) and
     * tx_cap on the endpoint (tx_out_all) */
    int resends;
    int tx_cap;
    _Atomic int tx_out_all;
    _Atomic int nap_ms;
    /* the provider's fi_cq_readfrom names no sender (rxd: 0 for every one):
     * the sender's claim in the header (rank and secret) says who */
    int nosrc;
    int wakefd;              /* eventfd: wake the progress thread */
    int hw;                  /* the provider offloads in hardware (not tcp/udp/sockets) */
    /* RMA path (fab_rma.c): the provider has FI_RMA and orders writes, reads
     * and sends after one another, and VMMC_FABRIC_RMA allows it */
    int rma;
    int virt_addr;           /* FI_MR_VIRT_ADDR: remote addresses are virtual addresses */
    size_t inject;           /* the provider's inject_size */
    size_t max_msg;          /* its max_msg_size: one RMA operation at most */
    size_t iov_limit;        /* its tx iov_limit: pieces of one message */
    pthread_mutex_t mrlock;  /* mrs */
    fab_xmr_t *mrs;          /* exports registered for direct access */
    /* notifications as remote CQ data (fab_nslot.c): the provider carries
     * 8 bytes of it and VMMC_FABRIC_CQ_DATA allows it (on the RMA path) */
    int cq_data;
    /* remote atomics as the provider's (fab_atomic.c): it has FI_ATOMIC, on
     * the RMA path, and VMMC_FABRIC_ATOMIC allows it; which operation and
     * type in which form (FAB_AT_*), as fi_query_atomic answered */
    int atomics;
    uint8_t at_valid[FAB_AT_OPS][FAB_AT_TYPES];
    pthread_mutex_t nslock;  /* nslots */
    fab_nslot_t *nslots;     /* FAB_CQD_SLOTS, made at the first grant */
    size_t addrlen;
    uint64_t sec;            /* fsec= of our address */
    pthread_t thread;
    int thread_up;
    _Atomic int stop;
    /* the core's peer table is filled (ep_start ran): receiving waits for it,
     * or a rank's first message could come before we know the rank */
    _Atomic int started;
    fab_rxb_t *rx;           /* FAB_NRX posted buffers */
    /* FI_MR_LOCAL (the provider needs it, or VMMC_FABRIC_MR_LOCAL): local
     * buffers are registered through the translation cache (fab_cache.h) */
    fab_cache_t *cache;
    const fab_reg_t *rx_reg;
    /* Received, not handled yet, in arrival order: a message completes
     * after later ones when the provider fetched it (rendezvous), so each
     * waits here for its number; and all of a sender's wait while the
     * notification queue is full. */
    struct fi_cq_data_entry *held;
    int *held_peer;
    int nheld;
    int held_cap;            /* held[]'s size (grows with remote CQ data: fab_rx.c) */
    int busy;                /* the last try found the notification queue full */
    /* One thread at a time reads the receive queue and handles what it
     * holds (rx, held, busy): the progress thread, or a thread that drives
     * the endpoint itself (vmmc_progress), which then needs no wake. */
    pthread_mutex_t rxlock;
    fab_peer_t **_Atomic peers[FAB_PEER_CHUNKS];
    /* fi_addr -> handle (the AV is a table: fi_addr is an index) */
    int *by_fa;
    size_t by_fa_cap;
    pthread_mutex_t lock;    /* peers, by_fa, waits */
    pthread_cond_t cond;
    fab_wait_t *waits;
    uint64_t next_id;
    /* notifications of applied writes until the core takes them */
    pthread_mutex_t nlock;
    vmmc_nrec_t *nq;
    size_t nq_n, nq_cap;
    _Atomic size_t nq_count;
    _Atomic int waiting;     /* threads waiting for a peer (see vmmc_fab__waiting) */
    /* Waited RMA operations (fab_rdma.c wait_tx): bumped when one completes;
     * a waiter that stopped spinning sleeps on it (futex) while
     * tx_sleepers > 0 tells the completing thread to wake it. */
    _Atomic uint32_t tx_seq;
    _Atomic int tx_sleepers;
    _Atomic uint64_t c_tx, c_rx, c_tx_again, c_refused, c_unknown, c_bad, c_tx_err;
    _Atomic uint64_t c_not_ours; /* sent to an endpoint that had our address before */
    _Atomic uint64_t c_rx_polled; /* receive-queue reads by a polling thread that took something */
    _Atomic uint64_t c_rma_writes, c_rma_reads, c_rma_refused, c_rma_regions;
    _Atomic uint64_t c_rma_regions_closed; /* closed as their last importer left */
    _Atomic uint64_t c_rma_atomics;        /* atomics posted as the provider's */
    _Atomic uint64_t c_zcopy;              /* messages sent from the caller's buffer */
    _Atomic uint64_t c_ns_retired;         /* notification slots retired after a forgery */
    _Atomic uint64_t c_ns_told;            /* F_NSRETIRE messages sent for them */
    /* open world (fab_accept.c) */
    int ann_fd;              /* eventfd: new peers to announce (the control thread) */
    struct fab_ann *ann;     /* their queue (lock) */
    struct fab_known *known; /* peers that reached us by HELLO: secret -> handle (lock) */
    size_t nknown, known_cap;
    int nrefused;            /* addresses put into the AV only to refuse them (bounded) */
    _Atomic uint64_t c_refusals_sent, c_refused_by_peer;
    _Atomic uint64_t c_naps, c_wakes; /* the progress thread's sleeps: timed out, woken */
    /* notifications taken from remote CQ data; CQ data dropped (no such
     * slot, a wrong check, not its importer's, the held queue full) */
    _Atomic uint64_t c_notes_cqd, c_bad_cqd;
} fab_ep_t;

extern const int vmmc_tl_slot_fabric;
extern const vmmc_tl_ops_t vmmc_tl_fabric;

static inline fab_ep_t *F(vmmc_ep_t *ep)
{
    return VMMC_TL_STATE(ep, fabric);
}

static inline fab_peer_t *fab_peer_of(fab_ep_t *f, int h)
{
    if (h < 0 || h >= VMMC_PEERS_MAX)
        return NULL;
    fab_peer_t **c = atomic_load_explicit(&f->peers[h / FAB_PEER_CHUNK], memory_order_acquire);
    return c ? __atomic_load_n(&c[h % FAB_PEER_CHUNK], __ATOMIC_ACQUIRE) : NULL;
}

/* fab_dl.c: libfabric's functions (the rest are inline calls through its
 * objects' operation tables), loaded by vmmc_fab__dl_load. */
struct vmmc_fab_dl {
    int ok;
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                   struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    uint32_t (*version)(void); /* the library's own version (FI_VERSION), not the headers' */
};
extern struct vmmc_fab_dl vmmc_fab_dl;
int vmmc_fab__dl_load(void);
#define fi_getinfo (*vmmc_fab_dl.getinfo)
#define fi_freeinfo (*vmmc_fab_dl.freeinfo)
#define fi_dupinfo (*vmmc_fab_dl.dupinfo)
#define fi_fabric (*vmmc_fab_dl.fabric)
#define fi_strerror (*vmmc_fab_dl.strerror)
#define fi_version (*vmmc_fab_dl.version)

/* fabric.c */
fab_peer_t *vmmc_fab__peer(fab_ep_t *f, int h, int *status);
/* The same, NULL with the core's error in *status if the peer is dead. */
fab_peer_t *vmmc_fab__peer_live(fab_ep_t *f, int h, int *status);
int vmmc_fab__reach(vmmc_ep_t *ep, const char *card, int same_host);
/* fab_accept.c: peers that reach an endpoint first (vmmc_listen). */
int vmmc_fab__listen(vmmc_ep_t *ep);
/* The handle a received message (@buf, @len; provider source @src) comes
 * from, or FAB_RX_DROP (counted; the buffer goes back to receiving): a
 * HELLO from a new address is accepted or refused here, a REFUSE taken. */
#define FAB_RX_DROP (-1)
int vmmc_fab__rx_source(fab_ep_t *f, fi_addr_t src, const void *buf, size_t len);
/* Peer @h is not a rank: send our HELLO first (once). */
int vmmc_fab__hello(fab_ep_t *f, int h);
void vmmc_fab__accept_close(fab_ep_t *f);
int vmmc_fab__handle_of(fab_ep_t *f, fi_addr_t fa);
int vmmc_fab__handle_claimed(fab_ep_t *f, int h, uint64_t sec);
/* The secret (fsec=) of address card @card into *@sec; 0 if it has none. */
int vmmc_fab__card_sec(const char *card, uint64_t *sec);
/* fab_wait.c: the CQs and their wait object; the progress thread's sleep */
int vmmc_fab__cq_open(fab_ep_t *f);  /* txcq, rxcq (and the wait set they need) */
int vmmc_fab__cq_fds(fab_ep_t *f);   /* txfd, rxfd: after fi_enable */
void vmmc_fab__cq_close(fab_ep_t *f);
void vmmc_fab__active(fab_ep_t *f);  /* the progress thread found work */
/* a send or RMA operation went to the provider; one to peer handle @h
 * completed (its window place is given back) */
void vmmc_fab__posted(fab_ep_t *f);
void vmmc_fab__completed(fab_ep_t *f, int h);
/* Providers that resend: take a place in the send windows of @p and of
 * the endpoint (@p NULL: the endpoint's only) before posting an operation
 * with a completion (0: one of them is full, the operation waits as if the
 * provider had no room); give it back if the post failed. Elsewhere
 * always 1. */
int vmmc_fab__window_take(fab_ep_t *f, fab_peer_t *p);
void vmmc_fab__window_give(fab_ep_t *f, fab_peer_t *p);
#define FAB_TX_WINDOW 64
/* The progress thread's sleep: 1 if something woke it, 0 if it timed out
 * or did not sleep. */
int vmmc_fab__sleep(fab_ep_t *f, int started);
/* fab_progress.c */
int vmmc_fab__start(fab_ep_t *f);
void vmmc_fab__stop(fab_ep_t *f);
void vmmc_fab__kick(fab_ep_t *f);
/* Fail @peer with @why, reported by the progress thread (any thread). */
void vmmc_fab__note_failed(fab_ep_t *f, int peer, const char *why);
/* The progress thread, or a thread handling what the receive queue held
 * (vmmc_fab__poll): neither may wait for a peer. */
int vmmc_fab__on_progress_thread(const fab_ep_t *f);
/* Read the receive queue from the caller's thread (vmmc_progress) unless
 * another thread reads it now. */
void vmmc_fab__poll(fab_ep_t *f);
/* fab_cq.c */
/* Send @hdr + @data (@len) to peer @h; returns once the provider took it (a
 * copy: the caller's buffers are free). @nonblock: VMMC_ERR_AGAIN instead
 * of waiting for room. */
int vmmc_fab__send(fab_ep_t *f, int h, const fab_hdr_t *hdr, const void *data, size_t len,
                   int nonblock);
/* Post a message whose data is sent from @data itself (no copy): *@txp is
 * the operation to wait for (vmmc_fab__wait_tx) before @data is reused. */
int vmmc_fab__send_zc(fab_ep_t *f, int h, const fab_hdr_t *hdr, const void *data, size_t len,
                      int nonblock, fab_tx_t **txp);
int vmmc_fab__sendv(fab_ep_t *f, int h, const fab_hdr_t *hdr, const struct iovec *iov, int n,
                    size_t len, int nonblock);
void vmmc_fab__waiting(fab_ep_t *f, int begin);
/* Wait for @w (registered with vmmc_fab__wait_add) to finish. */
uint64_t vmmc_fab__wait_add(fab_ep_t *f, fab_wait_t *w);
int vmmc_fab__wait_done(fab_ep_t *f, fab_wait_t *w);
void vmmc_fab__waits_fail(fab_ep_t *f, int peer, int status);
/* Tell every peer we sent to that this endpoint closes (best effort). */
void vmmc_fab__goodbye(fab_ep_t *f);
extern uint64_t vmmc_fab_cfg_send_timeout; /* VMMC_FABRIC_SEND_TIMEOUT, ns */
extern uint64_t vmmc_fab_cfg_spin;         /* VMMC_FABRIC_SPIN, ns */
extern uint64_t vmmc_fab_cfg_zcopy;        /* VMMC_FABRIC_ZCOPY, bytes */
extern int64_t vmmc_fab_cfg_tx_size;       /* VMMC_FABRIC_TX_SIZE (0: the provider's) */

/* fab_prov.c: the settings, and which provider. */
extern const char *vmmc_fab_cfg_mode; /* VMMC_FABRIC: auto, yes, no */
extern int vmmc_fab_cfg_mr_local;     /* VMMC_FABRIC_MR_LOCAL */
extern int vmmc_fab_cfg_rma;          /* VMMC_FABRIC_RMA */
extern int vmmc_fab_cfg_cq_data;      /* VMMC_FABRIC_CQ_DATA */
extern const char *vmmc_fab_cfg_atomic; /* VMMC_FABRIC_ATOMIC: auto, yes, no */
/* Whether to ask the provider for FI_ATOMIC (VMMC_FABRIC_ATOMIC, and for
 * auto: it runs atomics in software on the target's processor). */
int vmmc_fab__atomic_wanted(const char *prov_name);
/* What the RMA path needs ordered: writes after writes and sends (a put's
 * data before a later one's), sends after writes (a notification, a flush,
 * an atomic's request after the data), reads after writes and sends. */
#define FAB_RMA_ORDER (FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAW | FI_ORDER_RAW | FI_ORDER_RAS)
#define FAB_RMA_CAPS (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

int vmmc_fab__soft_provider(const char *name); /* over the host's network stack: no offload */
int vmmc_fab__rdma_hardware(void);             /* an RDMA device on this host */
int vmmc_fab__forced(void);                    /* VMMC_TRANSPORT=fabric or VMMC_FABRIC=yes */
/* The provider to use (fi_freeinfo it), or NULL with the error set: with an
 * ordered RMA path if it has one (and VMMC_FABRIC_RMA), else messages. */
struct fi_info *vmmc_fab__pick(void);
void vmmc_fab__prov_word(const char *name, char *out, size_t cap); /* ';' as '+' */
/* Release a finished send (its registration, its buffer); a waited one
 * gets status @st instead (its waiter frees it). */
void vmmc_fab__tx_done(fab_ep_t *f, fab_tx_t *tx, int st);
void vmmc_fab__tx_free(fab_ep_t *f, fab_tx_t *tx);
/* Read send completions; how many. */
int vmmc_fab__tx_progress(fab_ep_t *f);
/* The peer's error if the core declared it dead, else VMMC_OK. */
int vmmc_fab__peer_error(fab_ep_t *f, int h);
/* fab_mr.c: exports registered for direct access */
void vmmc_fab__export_grant(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, vmmc_ctl_msg_t *rep);
void vmmc_fab__export_end(vmmc_ep_t *ep, uint32_t export_id, uint32_t gen);
void vmmc_fab__export_release(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, uint32_t export_id,
                              uint32_t gen);
void vmmc_fab__mrs_close(fab_ep_t *f);
/* fab_nslot.c: notification slots (remote CQ data) */
uint32_t vmmc_fab__nslot_grant(fab_ep_t *f, int importer, const vmmc_ctl_msg_t *rep);
void vmmc_fab__nslot_end(fab_ep_t *f, uint32_t export_id, uint32_t gen);
/* @importer's slot of the export only (-1: every importer's, as nslot_end) */
void vmmc_fab__nslot_release(fab_ep_t *f, uint32_t export_id, uint32_t gen, int importer);
void vmmc_fab__nslots_close(fab_ep_t *f);
/* @peer says it posts no more CQ data on @slot (F_NSRETIRED). */
void vmmc_fab__nslot_retired(fab_ep_t *f, int peer, uint32_t slot);
int vmmc_fab__nslot_owner(fab_ep_t *f, uint64_t data);
int vmmc_fab__nslot_note(fab_ep_t *f, uint64_t data, int peer, fab_hdr_t *h);
/* fab_rx.c */
int vmmc_fab__rx(fab_ep_t *f, int peer, fab_peer_t *p, const void *buf, size_t len);
/* A notifying write's remote CQ data @data from @peer (its slot's
 * importer): due (1) once the messages sent before it were handled; then
 * handled as a NOTE message: 0 done (queued, refused or dropped, counted),
 * 1 not now (the notification queue is full). */
int vmmc_fab__rx_cqd_due(const fab_peer_t *p, uint64_t data);
int vmmc_fab__rx_cqd(fab_ep_t *f, int peer, uint64_t data);
/* Message @peer's rx_seq was handled: count it (and acknowledge, F_SEQACK). */
void vmmc_fab__rx_handled(fab_ep_t *f, int peer, fab_peer_t *p);
/* A completion of remote CQ data read from the queue: into held[] (its
 * sender named by its slot), or dropped and counted. */
void vmmc_fab__rx_cqd_hold(fab_ep_t *f, const struct fi_cq_data_entry *e);
/* Room in held[] for the next read of the receive queue (it may grow). */
int vmmc_fab__rx_room(fab_ep_t *f);
int vmmc_fab__drain(vmmc_ep_t *ep, void (*push)(vmmc_ep_t *ep, const vmmc_nrec_t *rec));
/* fab_rma.c */
int vmmc_fab__ctl_send(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, const vmmc_ctl_msg_t *msg,
                       const int *fds, int nfds);
int vmmc_fab__proxy_setup(vmmc_tl_proxy_t *px, const vmmc_ctl_msg_t *m, const int *fds, int nfds);
int vmmc_fab__put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int flags,
                  uint64_t imm);
int vmmc_fab__putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt, int flags,
                   uint64_t imm);
int vmmc_fab__get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len);
void vmmc_fab__proxy_release(vmmc_tl_proxy_t *px);
/* the message path's gather put, whatever the import */
int vmmc_fab__putv_msg(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt,
                       int flags, uint64_t imm);
/* fab_rdma.c: the RMA path of imports with direct access */
int vmmc_fab__rma_put(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int flags,
                      uint64_t imm);
int vmmc_fab__rma_putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt,
                       int flags, uint64_t imm);
int vmmc_fab__rma_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len);
/* One operation's post (fab_rdma.c): @issue posts it (fi_write, fi_read,
 * fi_atomic ...) and gives the provider's answer; vmmc_fab__post_op retries
 * while the provider has no room (drives it, bounded by
 * VMMC_FABRIC_SEND_TIMEOUT, ends on a dead peer), counts it in @count once
 * posted; @what and @len name it in errors. */
typedef ssize_t (*fab_issue_fn)(fab_ep_t *f, fab_peer_t *p, const fab_rpx_t *r, fab_tx_t *tx,
                                void *arg);
int vmmc_fab__post_op(fab_ep_t *f, vmmc_tl_proxy_t *px, fab_peer_t *p, fab_tx_t *tx,
                      int nonblock, fab_issue_fn issue, void *arg, _Atomic uint64_t *count,
                      const char *what, size_t len);
/* Writes of ours that went as messages applied before an RMA operation. */
int vmmc_fab__after_messages(vmmc_tl_proxy_t *px);
/* An RMA operation's state, with @copy bytes of buffer; @waited: its
 * poster waits for it (vmmc_fab__wait_tx, which frees it: @n bytes at
 * @from, in its buffer, are copied to @to first if it succeeded). */
fab_tx_t *vmmc_fab__tx_new(fab_ep_t *f, int h, size_t copy, int waited);
int vmmc_fab__wait_tx(fab_ep_t *f, fab_tx_t *tx, int h, const void *from, void *to, size_t n);
/* @buf registered through the cache where the provider needs it: *@desc. */
int vmmc_fab__local_reg(fab_ep_t *f, fab_tx_t *tx, const void *buf, size_t len,
                        uint64_t access, void **desc);
/* fab_atomic.c: remote atomics as the provider's (VMMC_TL_DECLINED: the
 * core's control message instead) */
void vmmc_fab__atomic_setup(fab_ep_t *f);
int vmmc_fab__atomic(vmmc_tl_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                     uint64_t compare, int fetch, uint64_t *old);
int vmmc_fab__flush(vmmc_ep_t *ep);
int vmmc_fab__flush_peer(vmmc_ep_t *ep, vmmc_tl_peer_t *peer);
int vmmc_fab__signal(vmmc_ep_t *ep, vmmc_tl_peer_t *peer);

#endif
