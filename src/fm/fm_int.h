/* Fast Messages: private state shared by every file of src/fm.
 *
 * Wire format. Rank A exports one region per sender B ("fm.ring.<B>"):
 *
 *   [0, 64)     credit word: bytes B has consumed of A's ring at B (written by B)
 *   [64, 128)   credit request counter (written by B: "return my credits")
 *   [128, 192)  placement descriptor for A's current message to B (written by B)
 *   [192, 256)  offer word of A's split copy to B (A offers and revokes, B claims)
 *   [256, 256+R) the ring B writes packets into
 *
 * so everything B writes to A goes into one import and stays in order. Ring
 * positions are absolute byte counts; R is a power of two (offset = pos & (R-1)).
 * A packet starts on a 64-byte line: word0 = handler | flags << 16, word1 =
 * seq | len << 32, then len payload bytes; it occupies align64(16 + len) bytes. word1 is written
 * last (release): the receiver takes a packet when word1's seq is the one it
 * expects. A packet never wraps: if it does not fit before the end, a SKIP
 * packet fills the rest. Consuming a packet zeroes word1 of every line it
 * covered, so stale payload can never look like a header.
 *
 * Zero-copy (fm_zsend.c, fm_zrecv.c): a message whose bound is at least
 * VMMC_FM_ZCOPY, to a peer whose ring is mapped, carries ZC on its first
 * packet. When its handler asks fm_receive() for more than the packets at
 * hand hold, into vmmc_mem_alloc() memory, the receiver writes a descriptor
 * (message number, message offset, length, memory key) into the sender's
 * region; the sender attaches the key and copies the rest of the message
 * straight into the handler's buffer, then puts a DIRECT packet (header only,
 * len = bytes placed) into the ring. The ring still says, in order, where
 * every byte of the message is, so the descriptor is only advice: bytes the
 * sender sent before it saw the descriptor travel in ordinary packets. A
 * descriptor of length 0 says "not into this buffer": the sender, which
 * waits a little for a descriptor after the first packet, stops waiting.
 *
 * Split copy: when the piece that follows the first packet lies in the
 * sender's vmmc_mem_alloc() memory too, the first packet carries an OFFER
 * (the piece's message offset, an offer number and a memory key for it,
 * after the payload). The receiver may then copy the front of the piece
 * itself (the descriptor's pull length), straight from the sender's memory
 * into the handler's buffer, while the sender copies the rest: both cores
 * copy. Who may read the sender's memory is decided on one word, the offer
 * word in the sender's region (FM_OFFER_OFF: offer number << 2 | state):
 *
 *   sender, before publishing the offer:   OFFERED
 *   receiver, before it reads one byte:    CAS OFFERED -> CLAIMED (else no pull)
 *   receiver, after its last byte:         DONE
 *   sender, before the send call returns:  CAS OFFERED -> REVOKED; if that
 *                                          fails, wait for DONE (or a dead peer)
 *
 * so no path lets the receiver read the piece after the send returned, and
 * messages without an offer pay nothing. The receiver claims before it posts
 * a descriptor with a pull length; the sender takes the pull up only if
 * nothing of the piece went out yet, and confirms that by flagging its next
 * DIRECT packet PULLED: that packet then covers the pulled bytes plus its
 * own. Any other next packet means the sender had moved on (it stopped
 * waiting for the descriptor): the pulled bytes are void, and the packets
 * that follow write the same bytes again (the sender's buffer does not
 * change before DONE, so both copies agree). */
#ifndef VMMC_FM_INT_H
#define VMMC_FM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "util/log.h"
#include "vmmc/fm.h"

#define FM_HDR 16u
#define FM_CTRL 256u
#define FM_LINE 64u
#define FM_CREDIT_OFF 0u
#define FM_REQ_OFF 64u
#define FM_DESC_OFF 128u
#define FM_OFFER_OFF 192u
/* In the offer line, written by the importer (the peer) only: nonzero once
 * the peer closed its side of the channel (fm_peer.c). */
#define FM_CLOSED_OFF 200u

/* The offer word: offer number << 2 | one of these. */
enum { FM_O_REVOKED, FM_O_OFFERED, FM_O_CLAIMED, FM_O_DONE };
static inline uint64_t fm_oword(uint64_t oseq, unsigned state) { return oseq << 2 | state; }

/* Descriptor words (FM_DESC_OFF): seq (written last), message number (low
 * 32 bits) | pull length << 32, message offset, length (0: none), memory key. */
enum { FM_D_SEQ, FM_D_MSG, FM_D_OFF, FM_D_LEN, FM_D_KEY, FM_D_WORDS = FM_D_KEY + 4 };
/* Length 0 with this offset: "not into a buffer this time" (a handler
 * reading small pieces), which unlike "none" says nothing of later messages. */
#define FM_DESC_NOT_NOW 1u

/* Messages whose bound is at most this are assembled in a local staging
 * packet and copied into a mapped ring in one go: the reader polling the
 * header line then loses the line once per message, not once per piece. */
#define FM_STAGE_MAX 1024u

#define FM_F_FIRST 1u
#define FM_F_LAST 2u
#define FM_F_SKIP 4u
/* The smallest rest of a message worth placing directly. */
#define FM_ZC_POST_MIN 4096u
/* A placed message's first packet carries at least its first bytes, this
 * many: a handler that reads a header before the payload finds it there. */
#define FM_ZC_LEAD 64u
#define FM_F_ZC 8u      /* first packet: the sender will look for a descriptor */
#define FM_F_DIRECT 16u /* no payload: len bytes were placed in the posted buffer */
#define FM_F_OFFER 32u  /* first packet: an offer follows the payload (split copy) */
#define FM_F_PULLED 64u /* DIRECT: the receiver's pulled bytes come first */
/* An offer: message offset of the piece, offer number, a memory key for it. */
#define FM_OFFER_BYTES (16u + (unsigned)sizeof(vmmc_mkey_t))
#define FM_PULL_MAX ((uint64_t)1 << 30)
#define FM_SPLIT_PIECE_MIN 8192u /* smallest piece worth splitting */

/* Ring bytes of a packet with @len payload bytes and @flags. */
static inline uint64_t fm_slot(uint64_t len, unsigned flags)
{
    if (flags & FM_F_DIRECT)
        return 64u;
    if (flags & FM_F_OFFER)
        return (((len + 7u) & ~(uint64_t)7u) + 16u + FM_OFFER_BYTES + 63u) & ~(uint64_t)63u;
    return (len + 16u + 63u) & ~(uint64_t)63u;
}

/* memcpy for the short pieces of gather/scatter (headers, small payloads):
 * overlapping fixed-size moves instead of a library call. */
static inline void fm_copy(void *dst, const void *src, size_t n)
{
    char *d = dst;
    const char *s = src;
    if (n > 32) {
        memcpy(d, s, n);
    } else if (n >= 16) {
        uint64_t a, b, c, e;
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, 8);
        memcpy(&c, s + n - 16, 8);
        memcpy(&e, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + 8, &b, 8);
        memcpy(d + n - 16, &c, 8);
        memcpy(d + n - 8, &e, 8);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n) {
        char a = s[0], b = s[n / 2], c = s[n - 1];
        d[0] = a;
        d[n / 2] = b;
        d[n - 1] = c;
    }
}

static inline uint64_t fm_align64(uint64_t x) { return (x + FM_LINE - 1) & ~(uint64_t)(FM_LINE - 1); }
static inline uint32_t fm_seq_next(uint32_t s) { return s + 1 ? s + 1 : 1; }

/* Counters (index into fm->cnt; names in fm.c). */
enum {
    FM_C_MSG_SENT,
    FM_C_PKT_SENT,
    FM_C_BYTES_SENT,
    FM_C_MSG_RECV,
    FM_C_PKT_RECV,
    FM_C_BYTES_RECV,
    FM_C_INLINE,
    FM_C_SUSPEND,
    FM_C_UNKNOWN,
    FM_C_DRAINED,
    FM_C_CREDIT_WAIT,
    FM_C_AGAIN,
    FM_C_CREDIT_RET,
    FM_C_CREDIT_REQ,
    FM_C_PROTOCOL,
    FM_C_MAPPED,
    FM_C_ZC_MSG,
    FM_C_ZC_SENT,
    FM_C_ZC_RECV,
    FM_C_ZC_POST,
    FM_C_ZC_WAIT,
    FM_C_SPLIT_SENT,
    FM_C_SPLIT_RECV,
    FM_C_SPLIT_VOID,
    FM_C_RINGS,
    FM_C_RING_BYTES,
    FM_C_RING_REFUSED,
    FM_C_COUNT
};

typedef struct fm_ctx fm_ctx_t;

enum { FM_SEND = 1, FM_RECV = 2 };
enum { FM_R_IDLE, FM_R_ACTIVE, FM_R_DRAIN };

struct fm_stream {
    struct fm *fm;
    struct fm_peer *peer;
    int kind;
    int err;
    /* send side */
    int open;
    int nb;           /* never wait (FM_NONBLOCK or opened in a handler) */
    uint16_t handler;
    uint8_t first;
    size_t bound, sent;
    char *pk;         /* payload of the packet being filled */
    size_t pk_len, pk_cap;
    int pk_open;      /* a packet is being filled */
    int staged;       /* ... in the staging packet although the ring is mapped */
    int zc;           /* the message may be placed directly (ZC) */
    char *zdst;       /* attached descriptor: where message offset zM lands */
    uint64_t zM, zN;  /* its range of the message */
    uint64_t zpend;   /* bytes placed, not yet announced by a DIRECT packet */
    int zc_waited;    /* the sender waited for the descriptor (once a message) */
    int zc_probe;     /* flagged, but the receiver did not place lately: no waiting */
    int zretry;       /* a descriptor whose buffer is still being mapped: */
    vmmc_mkey_t zkey; /* ... its key and range, tried again at packet boundaries */
    uint64_t zkM, zkN;
    int offer;        /* split copy: the first packet offers [ooff, +okey's length) */
    int olive;        /* ... offer number oseq is out: settle it before the call returns */
    vmmc_mkey_t okey;
    uint64_t ooff;
    uint64_t oseq;
    uint64_t opulled; /* taken up: the receiver copies these; flag the next DIRECT */
    /* receive side */
    const char *rp;   /* payload of the current packet, NULL when consumed */
    size_t rlen, rpos;
    int rlast;
    int rdirect;      /* the current packet is a DIRECT one */
    size_t rslot;     /* ring bytes the current packet occupies */
    int inline_run;
    uint64_t mbase;   /* message offset of the current packet's first byte */
    int rzc;          /* the message is ZC */
    int zstate;       /* ZC: 0 may post a descriptor, 1 posted, 2 never (said "none") */
    char *zbuf;       /* posted buffer for message offsets [zM, zM + zN) */
    const char *roffer; /* the first packet's offer of a split copy (in the ring), or NULL */
    uint64_t zpull;   /* bytes pulled into zbuf, valid once a PULLED packet confirms them */
};

typedef struct fm_peer {
    struct fm *fm;
    int rank;
    /* --- sending to this peer --- */
    vmmc_proxy_t *px;           /* NULL for ourselves (and until connected) */
    char *map;                  /* peer's region for us, mapped (or local); NULL: vmmc_send */
    uint64_t R;                 /* ring bytes at the peer */
    size_t paymax;              /* largest payload we put in one packet */
    uint64_t head;              /* bytes written into the peer's ring */
    uint32_t seq;
    uint64_t credit;            /* cached: bytes the peer consumed */
    _Atomic uint64_t *credit_word; /* where the peer writes it (our memory) */
    uint64_t req;               /* credit requests sent */
    uint64_t req_credit;        /* credit value when we last asked */
    atomic_int sdead;           /* known dead (set by senders and by the receive side) */
    char *staging;              /* packet assembly (unmapped, or short messages) */
    uint64_t pk_pos;            /* ring position of the packet being filled */
    uint64_t smsg;              /* messages begun (first packets published) */
    atomic_int slock;           /* FM_THREADS: the send side of this peer */
    _Atomic uintptr_t sowner;   /* ... held by this thread */
    atomic_int swaiting;        /* a sender waits for this peer's credits */
    _Atomic uint64_t swait_credit; /* ... and the credit it saw then */
    uint64_t dseen;             /* descriptor seq last read */
    int zc_ok;                  /* its handlers took placement lately (start: yes) */
    unsigned zc_skip;           /* large messages to send plainly before probing again */
    unsigned zc_miss;           /* "none" answers (or timeouts) in a row, at most 5 */
    atomic_int has_ring;        /* ctrl, ring, rR, credit_word are set (release; fm_ring.c;
                                 * here in a hole, so the struct keeps its 1024 bytes) */
    const char *split_nokey;    /* last send piece that could not be keyed */
    uint64_t oseq;              /* split-copy offers made to it */
    unsigned bad_desc_warned;   /* descriptors whose key was too short */
    fm_stream_t ss;
    /* --- receiving from this peer --- */
    char *ring;                 /* our ring for this sender */
    char *ctrl;                 /* its control lines */
    uint64_t rR;
    uint64_t tail;              /* bytes consumed */
    uint32_t rseq;              /* expected seq at tail */
    uint64_t returned;          /* tail value last given back */
    uint64_t req_seen;
    int req_pending;
    uint64_t rmsg;              /* messages begun by this sender (first packets seen) */
    uint64_t dseq;              /* descriptors posted to it */
    uint64_t seen;              /* progress hook's look-ahead position */
    uint32_t seen_seq;
    int rstate;
    int rdead;                  /* sender died and its ring is empty */
    int broken;                 /* malformed packet: ring abandoned */
    fm_ctx_t *ctx;
    fm_stream_t rs;
    /* --- connecting (last: the hot fields above keep their lines) --- */
    atomic_int conn;            /* FM_PC_*: its region for us imported (fm_peer.c) */
    atomic_int cbusy;           /* one thread at a time connects */
    vmmc_export_t *xexp;        /* our ring for it, once made (fm_ring.c) */
} fm_peer_t;

/* The peers that have a ring here, in the order their rings were made: what
 * extract and the progress hook poll (fm_ring.c). Entries are appended
 * under xlock and never removed; a full array is copied into a larger one,
 * and the old one is kept (readers may hold it) until the channel closes. */
typedef struct fm_act {
    struct fm_act *prev;        /* the array this one replaced */
    int cap;
    fm_peer_t *p[];
} fm_act_t;

/* fm_peer_t::conn: a peer's region for us is imported when first needed. px, map, R,
 * paymax and staging are valid once READY is seen (acquire). FORKED: the
 * channel is a copy inherited through fork() (fm_fork.c): never ready, and
 * connecting fails with VMMC_ERR_ENDPOINT. */
enum { FM_PC_NONE, FM_PC_PENDING, FM_PC_READY, FM_PC_FORKED };

/* Peers beyond the job: handle h >= size is entry (h - size) % FM_XCHUNK of
 * chunk (h - size) / FM_XCHUNK; chunks are added, never moved. */
#define FM_XCHUNK 256
#define FM_XCHUNKS 256

typedef struct fm_hentry {
    fm_handler_t fn;
    void *arg;
    int warned;
} fm_hentry_t;

struct fm {
    vmmc_ep_t *ep;
    int rank, size;
    unsigned flags;
    uint64_t ring_size;
    size_t packet_size;
    uint64_t credit_batch;
    size_t stack_size;
    uint64_t zc_min;            /* VMMC_FM_ZCOPY (0: never) */
    uint64_t zc_wait_ns;        /* VMMC_FM_ZCOPY_WAIT */
    const char *zc_nokey;       /* last receive buffer that could not be keyed */
    uint64_t split_min;         /* VMMC_FM_SPLIT (0: never) */
    int64_t pull_budget;        /* bytes the running extract may still process */
    uint64_t pulled;            /* ... of which the handler it runs just copied */
    int max_handlers;
    fm_hentry_t *handlers;
    fm_peer_t *peers;
    _Atomic(fm_act_t *) act;    /* peers with a ring here (fm_ring.c) */
    _Atomic int nact;
    atomic_int rlock;           /* receive side: extract vs the progress hook */
    int in_extract;
    int in_handler;
    fm_stream_t *cur_rs;        /* stream of the running handler */
    fm_ctx_t *cur_ctx;          /* context running now (NULL: caller's stack) */
    void *main_sp;              /* extractor's saved context */
    fm_ctx_t *ctx_free;         /* pool */
    fm_ctx_t *ctx_all;
    unsigned rr;                /* round-robin start */
    int mt;                     /* FM_THREADS: several threads may call FM */
    _Atomic uintptr_t rx_owner; /* thread holding rlock (the extractor) */
    int ndead;                  /* ranks known dead */
    double last_dead_check;
    unsigned empty_polls;
    int unmapped;               /* peers written with vmmc_send (their transport, e.g. udp,
                                 * lands data only when someone drives it) */
    uint64_t cnt[FM_C_COUNT];
    /* --- the channel (last: the hot fields above keep their lines) --- */
    int channel;                /* this channel's id */
    int listed;                 /* in the endpoint's table: its progress hook serves us */
    struct fm_ep *fep;          /* the endpoint's channel table (fm_channel.c) */
    int open_wait_ms;           /* a send waits this long for a peer to open the channel */
    int collective;             /* fm_init(): every rank has the channel open, so even a
                                 * non-blocking send waits for its first connection */
    int forked;                 /* inherited through fork(): every call fails (fm_fork.c) */
    /* --- peers beyond the job's ranks (fm_xpeer.c) --- */
    _Atomic int nslots;         /* peer slots: size + the highest such handle seen + 1 */
    int demand;                 /* ring names registered with vmmc_export_on_demand() */
    uint64_t self_hash;         /* hash of this endpoint's address (ring names) */
    pthread_mutex_t xlock;      /* creating one */
    _Atomic(fm_peer_t *) *xdir[FM_XCHUNKS];
};

/* Counters: plain adds, or atomic ones when several threads use FM. */
#define FM_CNT(f, i, v)                                                             \
    do {                                                                            \
        if (VMMC_UNLIKELY((f)->mt))                                                 \
            __atomic_fetch_add(&(f)->cnt[i], (uint64_t)(v), __ATOMIC_RELAXED);      \
        else                                                                        \
            (f)->cnt[i] += (uint64_t)(v);                                           \
    } while (0)

static inline uintptr_t fm_self(void) { return (uintptr_t)pthread_self(); }

/* Is the calling thread running a handler of @fm, or inside its extract?
 * (in_handler and in_extract describe the thread that holds rlock.) */
static inline int fm_owns_rx(const struct fm *fm)
{
    /* Only the rlock holder writes in_handler/in_extract: read them after
     * making sure that is this thread. */
    return !fm->mt || atomic_load_explicit(&fm->rx_owner, memory_order_relaxed) == fm_self();
}
static inline int fm_in_handler(const struct fm *fm)
{
    return fm_owns_rx(fm) && fm->in_handler;
}
static inline int fm_busy(const struct fm *fm)
{
    return fm_owns_rx(fm) && (fm->in_handler || fm->in_extract);
}

/* fm_ctx.c: handler contexts on pooled stacks. */
int fm_ctx_get(struct fm *fm, fm_ctx_t **c);
void fm_ctx_put(struct fm *fm, fm_ctx_t *c);
void fm_ctx_free_all(struct fm *fm);
/* Run @c (start or resume) until it yields or its handler returns.
 * Returns 1 if the handler returned (the context is then idle). */
int fm_ctx_resume(struct fm *fm, fm_ctx_t *c);
/* From inside a context: give control back to the extractor. */
void fm_ctx_yield(struct fm *fm);
void fm_ctx_assign(fm_ctx_t *c, fm_peer_t *p, fm_handler_t fn, void *arg);

/* fm_recv.c, fm_progress.c */
int fm_extract_locked(struct fm *fm, size_t max_bytes);
int fm_hook_poll(void *arg);
int fm_hook_arm(void *arg);
int fm_dead_check(struct fm *fm);
void fm_rlock(struct fm *fm);
void fm_runlock(struct fm *fm);

/* fm.c */
int fm_setup_params(struct fm *fm, const fm_params_t *pa);
int fm_cfg_channels(void);

/* fm_channel.c: the channels of an endpoint, their progress hook. */
int fm_channel_reserve(struct fm *fm);
int fm_channel_list(struct fm *fm);
void fm_channel_release(struct fm *fm);

/* fm_peer.c: connecting to a peer on this channel. */
void fm_ring_name(const struct fm *fm, int importer, char *buf, size_t cap);
int fm_peer_self(struct fm *fm, fm_peer_t *p);
int fm_peer_step(struct fm *fm, fm_peer_t *p);
/* How fm_peer_connect() waits: extracting this channel meanwhile (a blocking
 * send), not at all (VMMC_ERR_AGAIN), or without running handlers. */
enum { FM_CONNECT_WAIT, FM_CONNECT_NB, FM_CONNECT_QUIET };
int fm_peer_connect(struct fm *fm, fm_peer_t *p, int how);
VMMC_COLD int fm_peer_stale(struct fm *fm, fm_peer_t *p);
void fm_peer_tell_closed(struct fm *fm, fm_peer_t *p);
static inline int fm_peer_ready(fm_peer_t *p)
{
    return atomic_load_explicit(&p->conn, memory_order_acquire) == FM_PC_READY;
}
/* Has the peer closed its side of this channel? (It wrote our region.) */
static inline int fm_peer_closed(const fm_peer_t *p)
{
    return atomic_load_explicit((const _Atomic uint64_t *)(p->ctrl + FM_CLOSED_OFF),
                                memory_order_acquire) != 0;
}

/* fm_xpeer.c: peers beyond the job's ranks (open-world endpoints). */
static inline fm_peer_t *fm_peer_at(const struct fm *fm, int h)
{
    if (VMMC_LIKELY(h < fm->size))
        return &fm->peers[h];
    unsigned x = (unsigned)(h - fm->size);
    _Atomic(fm_peer_t *) *c = __atomic_load_n(&fm->xdir[x / FM_XCHUNK], __ATOMIC_ACQUIRE);
    return c ? atomic_load_explicit(&c[x % FM_XCHUNK], memory_order_acquire) : NULL;
}
static inline int fm_nslots(const struct fm *fm)
{
    return atomic_load_explicit(&fm->nslots, memory_order_acquire);
}
int fm_xpeer_get(struct fm *fm, int h, fm_peer_t **out, const char *who);
void fm_xpeer_free_all(struct fm *fm, int local);
uint64_t fm_addr_hash(const void *a, size_t n);

/* fm_ring.c: a peer's ring here, made when it is first needed (the peer
 * imports it, or we first send to the peer: its credits come back there). */
void fm_peer_base(struct fm *fm, fm_peer_t *p, int h);
int fm_ring_make_locked(struct fm *fm, fm_peer_t *p); /* caller holds xlock */
int fm_peer_ring(struct fm *fm, fm_peer_t *p);
static inline int fm_peer_has_ring(fm_peer_t *p)
{
    return atomic_load_explicit(&p->has_ring, memory_order_acquire);
}
/* Release @p's ring (its export and memory). */
void fm_ring_free(struct fm *fm, fm_peer_t *p);
void fm_act_free_all(struct fm *fm);
static inline int fm_act_n(const struct fm *fm)
{
    return atomic_load_explicit(&((struct fm *)fm)->nact, memory_order_acquire);
}
/* The active array, to be loaded after fm_act_n(): it holds at least that many. */
static inline fm_act_t *fm_act(const struct fm *fm)
{
    return atomic_load_explicit(&((struct fm *)fm)->act, memory_order_acquire);
}
/* Let peers' first imports make their rings; and stop that (at close). */
int fm_demand_register(struct fm *fm);
void fm_demand_remove(struct fm *fm);
void fm_export_name(const struct fm *fm, int h, char *buf, size_t cap);
void fm_import_name(const struct fm *fm, const fm_peer_t *p, char *buf, size_t cap);

/* fm_fork.c: a channel inherited through fork(). */
void fm_fork_mark(struct fm *fm);
VMMC_COLD int fm_forked_error(const struct fm *fm, const char *who);

/* fm_credit.c */
int fm_send_request_credit(struct fm *fm, fm_peer_t *p);
int fm_send_credit(struct fm *fm, fm_peer_t *p, uint64_t consumed);
/* Post a placement descriptor for @p's current message (len 0: none). */
int fm_send_desc(struct fm *fm, fm_peer_t *p, uint64_t msg, uint64_t off, uint64_t len,
                 const vmmc_mkey_t *key, uint64_t pull);

#endif
