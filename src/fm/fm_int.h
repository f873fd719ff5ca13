/* Fast Messages: private state shared by fm.c, fm_send.c, fm_recv.c, fm_ctx.c.
 *
 * Wire format. Rank A exports one region per sender B ("fm.ring.<B>"):
 *
 *   [0, 64)     credit word: bytes B has consumed of A's ring at B (written by B)
 *   [64, 128)   credit request counter (written by B: "return my credits")
 *   [128, 128+R) the ring B writes packets into
 *
 * so everything B writes to A goes into one import and stays in order. Ring
 * positions are absolute byte counts; R is a power of two (offset = pos & (R-1)).
 * A packet starts on a 64-byte line: word0 = handler | flags << 16, word1 =
 * seq | len << 32, then len payload bytes; it occupies align64(16 + len) bytes. word1 is written
 * last (release): the receiver takes a packet when word1's seq is the one it
 * expects. A packet never wraps: if it does not fit before the end, a SKIP
 * packet fills the rest. Consuming a packet zeroes word1 of every line it
 * covered, so stale payload can never look like a header. */
#ifndef VMMC_FM_INT_H
#define VMMC_FM_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "util/log.h"
#include "vmmc/fm.h"

#define FM_HDR 16u
#define FM_CTRL 128u
#define FM_LINE 64u
#define FM_CREDIT_OFF 0u
#define FM_REQ_OFF 64u

/* Messages whose bound is at most this are assembled in a local staging
 * packet and copied into a mapped ring in one go: the reader polling the
 * header line then loses the line once per message, not once per piece. */
#define FM_STAGE_MAX 1024u

#define FM_F_FIRST 1u
#define FM_F_LAST 2u
#define FM_F_SKIP 4u

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
    /* receive side */
    const char *rp;   /* payload of the current packet, NULL when consumed */
    size_t rlen, rpos;
    int rlast;
    int inline_run;
};

typedef struct fm_peer {
    struct fm *fm;
    int rank;
    /* --- sending to this peer --- */
    vmmc_proxy_t *px;           /* NULL for ourselves */
    char *map;                  /* peer's region for us, mapped (or local); NULL: vmmc_send */
    uint64_t R;                 /* ring bytes at the peer */
    size_t paymax;              /* largest payload we put in one packet */
    uint64_t head;              /* bytes written into the peer's ring */
    uint32_t seq;
    uint64_t credit;            /* cached: bytes the peer consumed */
    _Atomic uint64_t *credit_word; /* where the peer writes it (our memory) */
    uint64_t req;               /* credit requests sent */
    uint64_t req_credit;        /* credit value when we last asked */
    int sdead;
    char *staging;              /* packet assembly (unmapped, or short messages) */
    uint64_t pk_pos;            /* ring position of the packet being filled */
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
    uint64_t seen;              /* progress hook's look-ahead position */
    uint32_t seen_seq;
    int rstate;
    int rdead;                  /* sender died and its ring is empty */
    int broken;                 /* malformed packet: ring abandoned */
    fm_ctx_t *ctx;
    fm_stream_t rs;
} fm_peer_t;

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
    int max_handlers;
    fm_hentry_t *handlers;
    fm_peer_t *peers;
    void *mem;                  /* all our rings */
    size_t mem_len;
    vmmc_export_t **exports;
    atomic_int rlock;           /* receive side: extract vs the progress hook */
    int in_extract;
    int in_handler;
    fm_stream_t *cur_rs;        /* stream of the running handler */
    fm_ctx_t *cur_ctx;          /* context running now (NULL: caller's stack) */
    void *main_sp;              /* extractor's saved context */
    fm_ctx_t *ctx_free;         /* pool */
    fm_ctx_t *ctx_all;
    unsigned rr;                /* round-robin start */
    atomic_int swait;           /* rank whose credits a sender waits for, -1 */
    _Atomic uint64_t swait_credit; /* its credit when the wait began */
    int ndead;                  /* ranks known dead */
    double last_dead_check;
    unsigned empty_polls;
    int hook_added;
    uint64_t cnt[FM_C_COUNT];
};

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

/* fm_recv.c */
int fm_extract_locked(struct fm *fm, size_t max_bytes);
int fm_hook_poll(void *arg);
int fm_hook_arm(void *arg);
int fm_dead_check(struct fm *fm);
void fm_rlock(struct fm *fm);
void fm_runlock(struct fm *fm);

/* fm_send.c */
int fm_send_request_credit(struct fm *fm, fm_peer_t *p);
int fm_send_credit(struct fm *fm, fm_peer_t *p, uint64_t consumed);

#endif
