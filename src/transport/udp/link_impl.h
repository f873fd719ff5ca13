/* Private state of the UDP link, shared by link.c (set-up, send side) and
 * link_rx.c (receive, deliver, acknowledge) and link_progress.c (the
 * progress thread: timers, retransmit, liveness, sleeping). */
#ifndef VMMC_UDP_LINK_IMPL_H
#define VMMC_UDP_LINK_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "transport/udp/link.h"

enum { PEER_NONE = 0, PEER_ALIVE = 1, PEER_DEAD = 2, PEER_GONE = 3 };
enum { DOWN_TIMEOUT = 0, DOWN_KILLED = 1, DOWN_BYE = 2, DOWN_REFUSED = 3 }; /* why a peer went down */

#define RX_BATCH 16     /* datagrams per recvmmsg in the progress loop */
#define RX_BATCH_NESTED 4
#define RX_GROW 8       /* datagrams in one pass that make it receive in batches from then on */
/* Buffers before that: two, so that a pass that gets fewer than it asked
 * for knows the socket is empty without a second system call. */
#define RX_FIRST 2
#define TX_BATCH 16     /* datagrams per sendmmsg */
#define SACK_BITS 64

typedef struct txslot {
    /* cap bytes (vmmc_udp__slot_buf), kept once allocated: the payload at
     * VMMC_UDP_HDR_SIZE, the header (of variable length) right before it. */
    uint8_t *buf;
    uint32_t cap;
    uint32_t plen;       /* payload length */
    uint32_t pcrc;       /* CRC32C of the payload */
    vmmc_udp_hdr_t hdr;  /* re-stamped with current acks on every (re)send */
    uint64_t sent_ns, first_ns;
    uint32_t retx;
    uint8_t sacked;
} txslot_t;

typedef struct rxslot {
    uint8_t *buf;        /* cap bytes (vmmc_udp__slot_buf), kept once allocated */
    uint32_t cap;
    uint8_t present;
    uint32_t cur;        /* F_MULTI: payload offset of the first record not yet delivered */
    vmmc_udp_hdr_t hdr;  /* payload at buf + hdr.hlen */
} rxslot_t;

typedef struct peer {
    uint32_t rid;          /* its wire id (src of its datagrams; set at add) */
    uint32_t idx;          /* its index */
    pthread_mutex_t lock;  /* tx state, state, published acks */
    pthread_cond_t cond;   /* window space, acks, death */
    int state;
    int going_down, down_why;           /* owner being told / reason (lock) */
    struct sockaddr_storage addr;
    socklen_t alen;
    vmmc_udp_key_t txk, rxk;            /* keys of the links to and from the peer */
    uint64_t ctl_tx;                    /* control counter sent last (lock) */
    uint64_t ctl_rx;                    /* highest control counter received (receive owner) */

    /* Send side (lock). Sequence numbers start at 1; 32-bit serial. */
    uint32_t snd_una, snd_nxt, peer_wnd;
    txslot_t *tx;                       /* window slots, index seq % window */
    uint64_t srtt, rttvar, rto;         /* ns */
    int have_rtt;
    /* Loss recovery (link_ack.c): rack_ns, the latest send time of a
     * datagram known delivered (RACK: what was sent well before it and is
     * still unacknowledged is lost); progress_ns, when new data was last
     * acknowledged or first sent (the tail-loss probe's clock); probed, a
     * probe is out; acked_since_rto, the backoff is only for silence;
     * rto_ns, when the retransmission timeout last fired; sacked_ns, when
     * a datagram was last selectively acknowledged. */
    uint64_t rack_ns, progress_ns, min_rtt, probe_ns, rto_ns, sacked_ns;
    int probed, acked_since_rto;
    unsigned backoff;                   /* timeouts in a row without an ack */
    uint64_t last_tx_ns;
    uint64_t unacked_since;             /* first_ns of the oldest unacked */

    /* Acks as last published by the progress thread (lock). dlv_pub: last
     * seq handed to the receive callback (travels in imm of ACK/KEEPALIVE/BYE). */
    uint32_t ack_pub, dlv_pub;
    uint64_t sack_pub;
    /* Send side (lock): last seq the peer reported delivered; the peer said
     * its receiver is busy (advertised window 0). */
    uint32_t peer_dlv;
    int peer_busy;
    int busy_pub;                       /* we tell the peer we are busy (lock) */

    /* Receive side: progress thread only. rcv_nxt = next seq not yet
     * received in order; dlv_nxt = next to deliver (== rcv_nxt except while
     * a callback sends from the progress thread). Ring of window+1 slots
     * holds [dlv_nxt, dlv_nxt + window). */
    uint32_t rcv_nxt, dlv_nxt;
    uint32_t rx_hi;                     /* highest seq stored out of order (sacks) */
    rxslot_t *rx;
    int ack_pending;
    uint64_t ack_owed_ns;               /* acks published but not sent since (under lock) */
    uint32_t ack_sent;                  /* cumulative ack of the last ACK sent (under lock) */
    _Atomic uint64_t busy_until;        /* receiver refused: retry delivery then */
    unsigned busy_streak;               /* refusals in a row (retry backoff) */
    _Atomic uint64_t last_rx_ns;
    /* The open batch (link_batch.c, under lock): bat_n small messages
     * gathered as records in the slot of seq snd_nxt, which is not taken
     * (snd_nxt does not move) until the batch is closed; bat_len payload
     * bytes so far, bat_crc their CRC32C, bat_since when it was opened. */
    uint32_t bat_n, bat_len, bat_crc;
    uint64_t bat_since;
    vmmc_udp_counters_t c;              /* send-side counters (under lock) */
} peer_t;

/* Wire id -> index + 1 (open addressing, insert-only, at most half full).
 * Sized to the peers registered: when it would pass half, a table twice as
 * large replaces it, and the old one stays readable (a reader may still
 * hold it) until the link closes; all of them together are smaller than
 * the current one. */
typedef struct rid_tab {
    uint32_t cap;            /* a power of two */
    struct rid_tab *old;     /* the table this one replaced */
    _Atomic uint64_t e[];    /* (wire id << 32) | (index + 1); 0: empty */
} rid_tab_t;

struct vmmc_udp_link {
    vmmc_udp_link_params_t p;
    vmmc_udp_bindings_t b;
    int fd, evfd;
    uint32_t window, ring;               /* ring = window + 1 */
    uint32_t dgram, payload;             /* max datagram, max payload */
    /* Coalescing (link_batch.c): how long a batch may stay open (0: off),
     * the largest payload of a batch, and how many peers have one open
     * (lets the progress thread and polls skip the scan when none has). */
    uint64_t coalesce_ns;
    uint32_t bat_max;
    atomic_uint batches_open;
    /* Peers by index: chunks of LINK_CHUNK pointers, each peer allocated
     * when it is registered and never moved (the progress thread walks them
     * without a lock); indexes below hi may exist. rids: wire id -> index
     * (rid_tab_t), read without a lock. Writers hold add_lock. */
    peer_t *_Atomic *_Atomic *chunks;
    uint32_t nchunks;
    _Atomic uint32_t hi;
    struct rid_tab *_Atomic rids;
    uint32_t nrids;
    pthread_mutex_t add_lock;
    pthread_t thread;
    int thread_started;
    atomic_int stop, closing;
    /* The application polls (vmmc_udp_link_poll, from vmmc_progress): while
     * it keeps doing so, the progress thread stays off the socket, so that a
     * datagram does not wake it onto the poller's CPU. app_polls counts the
     * polls (the progress thread only looks whether it changed); app_idle:
     * the application is about to sleep (vmmc_udp_link_idle), take the
     * socket back at once; skipping: the progress thread sleeps without the
     * socket. */
    _Atomic uint64_t app_polls;
    atomic_int app_idle, skipping;
    /* When the progress thread's current sleep ends (0: it is not asleep):
     * an application poll that leaves a delayed ACK owed wakes it if that
     * sleep would outlast the ACK's delay by far (link_progress.c). */
    _Atomic uint64_t sleep_until;
    uint64_t seen_polls;                 /* progress thread: app_polls when it last looked */
    /* Until when the progress thread keeps polling after answering a
     * request (vmmc_udp_link_linger; 0: no request answered lately). */
    _Atomic uint64_t linger_until;
    uint64_t recheck_ns;                 /* progress thread: current look-back interval */
    /* Delayed ACKs owed (peers with ack_owed_ns set): lets a poll skip the
     * scan when none is. */
    atomic_uint acks_owed;
    /* Receive side: whoever holds rx_lock (the progress thread, or a thread
     * in vmmc_udp_link_poll) owns the receive state of every peer, the
     * receive buffers and the bindings' recvmmsg/next_due. */
    pthread_mutex_t rx_lock;

    /* Progress thread receive buffers (outer and nested passes). */
    /* Buffers of dgram bytes each, made as needed (vmmc_udp__rx_bufs): the
     * outer passes use RX_FIRST until a pass finds RX_GROW datagrams
     * waiting, then RX_BATCH; the nested ones RX_BATCH_NESTED from their
     * first use. Entries [0, RX_BATCH) are the outer passes', the rest the
     * nested ones'. */
    uint8_t *rxbufs[RX_BATCH + RX_BATCH_NESTED];
    unsigned rx_outer, rx_nested;        /* how many of each are ready */
    struct sockaddr_storage rxaddr[RX_BATCH + RX_BATCH_NESTED];
    struct iovec rxiov[RX_BATCH + RX_BATCH_NESTED];
    struct mmsghdr rxmsg[RX_BATCH + RX_BATCH_NESTED];
    /* Receive owner: some peer had acknowledgements to publish; data waits
     * in a reorder ring for delivery (stored by a nested pass, or refused
     * by a busy receiver); the last application poll received something (a
     * burst may be arriving: receive in batches). */
    int acks_pending, rx_backlog, rx_streak;
    int ack_now;                         /* a keep-alive asks for the ACKs at once */
    /* The receive callback has room again (vmmc_udp_link_retry): the receive
     * owner ends every peer's busy back-off and offers held data at once. */
    atomic_int retry;
    /* The receive callback refused data since the last retry: only then
     * does a retry wake the progress thread (a drain that finds nothing
     * held back costs no wake-up, no context switch). */
    atomic_int held;

    vmmc_udp_counters_t c;               /* receive owner's counters, and peers_dead */
};

/* Counters (vmmc_udp_link_counters() sums them). Most have a single writer
 * and need no locked instruction on the data path: the receive owner's
 * (rx_*, delivered_*, drop_*, deliver_busy) are in the link, the send side's
 * (tx_*, retransmits, acks, ...) in each peer, written under p->lock. Readers
 * use relaxed loads. */
#define CNT(l, f, n) __atomic_fetch_add(&(l)->c.f, (uint64_t)(n), __ATOMIC_RELAXED)
#define CNT_ADD1(x, n) \
    __atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (uint64_t)(n), __ATOMIC_RELAXED)
#define CNT_RX(l, f, n) CNT_ADD1((l)->c.f, n) /* receive owner only */
#define CNT_TX(p, f, n) CNT_ADD1((p)->c.f, n) /* under p->lock */

#define LINK_CHUNK 64u

/* The peer of index @i, or NULL if its chunk does not exist. */
static inline peer_t *vmmc_udp__peer(const vmmc_udp_link_t *l, uint32_t i)
{
    if (i >= l->p.max_peers)
        return NULL;
    peer_t *_Atomic *c = atomic_load_explicit(&l->chunks[i / LINK_CHUNK], memory_order_acquire);
    return c ? atomic_load_explicit(&c[i % LINK_CHUNK], memory_order_acquire) : NULL;
}
/* Walk every peer slot that exists (registered or not: check state). */
#define FOR_PEERS(l, i, p)                                                                  \
    for (uint32_t i = 0, hi_ = atomic_load_explicit(&(l)->hi, memory_order_acquire); i < hi_; \
         i++)                                                                               \
        for (peer_t *p = vmmc_udp__peer(l, i); p; p = NULL)

/* The index of the peer whose wire id is @rid; 0 if none. */
static inline int vmmc_udp__rid_find(const vmmc_udp_link_t *l, uint32_t rid, uint32_t *id)
{
    const rid_tab_t *t = atomic_load_explicit(&l->rids, memory_order_acquire);
    uint32_t m = t->cap - 1, i = (rid * 0x9E3779B1u) & m;
    for (;;) {
        uint64_t e = atomic_load_explicit(&t->e[i], memory_order_acquire);
        if (!e)
            return 0;
        if ((uint32_t)(e >> 32) == rid) {
            *id = (uint32_t)e - 1;
            return 1;
        }
        i = (i + 1) & m;
    }
}

/* link.c */
int vmmc_udp__xmit(vmmc_udp_link_t *l, peer_t *p, txslot_t **slots, unsigned n, uint64_t now);
void vmmc_udp__send_ctl(vmmc_udp_link_t *l, uint32_t id, peer_t *p, uint8_t type);
void vmmc_udp__peer_down(vmmc_udp_link_t *l, uint32_t id, int state, int why);
/* The delayed ACK owed to @p is no longer owed (sent, or carried by data).
 * Caller holds p->lock. */
static inline void vmmc_udp__ack_paid(vmmc_udp_link_t *l, peer_t *p)
{
    if (p->ack_owed_ns) {
        p->ack_owed_ns = 0;
        atomic_fetch_sub_explicit(&l->acks_owed, 1, memory_order_relaxed);
    }
}

/* Make *@buf (of *@cap bytes) hold at least @need bytes (at most l->dgram):
 * 0, or -1 without memory (the old buffer stays). Slot buffers are sized to
 * what they carry, a power of two from 256 bytes up to the largest datagram,
 * and kept: a peer that exchanges small messages holds a window of small
 * buffers, not of 63 KiB ones; a stream of large ones grows each slot once. */
int vmmc_udp__slot_grow(const vmmc_udp_link_t *l, uint8_t **buf, uint32_t *cap, size_t need);
static inline int vmmc_udp__slot_buf(const vmmc_udp_link_t *l, uint8_t **buf, uint32_t *cap,
                                     size_t need)
{
    if (__builtin_expect(need <= *cap, 1))
        return 0;
    return vmmc_udp__slot_grow(l, buf, cap, need);
}

/* Have @want receive buffers ready for the outer (@nested 0) or nested
 * passes; returns how many are (0 without memory). Receive owner. */
unsigned vmmc_udp__rx_bufs(vmmc_udp_link_t *l, int nested, unsigned want);
void vmmc_udp__wake_sleep(vmmc_udp_link_t *l, uint64_t su); /* once per published sleep */

/* Is the calling thread the receive owner of @l (holds rx_lock)? */
int vmmc_udp__rx_owner(const vmmc_udp_link_t *l);

/* Time elapsed since @t. Other threads stamp times after the progress thread
 * read its clock, so @t may be later than @now: that counts as no time. */
static inline uint64_t since(uint64_t now, uint64_t t)
{
    return now > t ? now - t : 0;
}

/* link_ack.c (caller holds p->lock) */
/* Process the ack fields of a datagram from @p that passed every other
 * check; -1 if it acknowledges data never sent (then nothing changed). */
int vmmc_udp__on_ack(vmmc_udp_link_t *l, peer_t *p, const vmmc_udp_hdr_t *h, uint64_t now);
/* Run @p's retransmission, probe and report timers; returns @next or an
 * earlier deadline. */
uint64_t vmmc_udp__loss_timers(vmmc_udp_link_t *l, peer_t *p, uint64_t now, uint64_t next);

/* The link's time settings (link.c). */
extern uint64_t vmmc_udp_cfg_ack_delay, vmmc_udp_cfg_poll_quiet, vmmc_udp_cfg_poll_recheck;

/* link_rx.c (the receive owner only) */
/* Receive until the socket is empty (bounded per call); returns datagrams.
 * @nested: from inside a callback, so data is stored, never delivered.
 * @one: take a single datagram and return (an application poll that found
 * nothing last time). */
int vmmc_udp__rx_pass(vmmc_udp_link_t *l, int nested, int one);
/* Publish the acknowledgements owed to every peer; send those due (all of
 * them with @force), leave the others to vmmc_udp__owed_acks(). */
void vmmc_udp__send_acks(vmmc_udp_link_t *l, int force, uint64_t now);
/* Send the delayed ACKs whose time has come; returns the next such time. */
uint64_t vmmc_udp__owed_acks(vmmc_udp_link_t *l, uint64_t now);
/* The selective-ack bits of what @p holds above rcv_nxt. */
uint64_t vmmc_udp__sack_bits(vmmc_udp_link_t *l, peer_t *p);

/* link_batch.c (caller holds p->lock) */
/* Send @p's open batch now, if it has one. */
void vmmc_udp__batch_close(vmmc_udp_link_t *l, peer_t *p, uint64_t now);
/* Close the batches open longer than the coalescing bound; returns @next
 * or the earliest time another one must close. */
uint64_t vmmc_udp__batch_timer(vmmc_udp_link_t *l, peer_t *p, uint64_t now, uint64_t next);
/* Close every open batch (no lock held). */
void vmmc_udp__batch_push_all(vmmc_udp_link_t *l);
/* The coalescing settings (link.c). */
extern uint64_t vmmc_udp_cfg_coalesce, vmmc_udp_cfg_coalesce_max;

/* link_progress.c */
void *vmmc_udp__progress_main(void *arg);
/* One nested pass from the progress thread itself (a callback that sends
 * waits for window space): receive and store, acknowledge, run timers. */
void vmmc_udp__progress_nested(vmmc_udp_link_t *l, uint64_t max_wait_ns);

#endif
