/* An upgraded connection's private state: the rings (sock_ring.c), the conn
 * (sock_conn.c, sock_conn_io.c, sock_conn_ready.c), the way back to TCP
 * (sock_revert.c).
 *
 * Each side exports its RECEIVE ring: one vmmc_mem_alloc() allocation that
 * holds a header, then the ring's data. Every header word is written by the
 * PEER only (this side only reads its own header), each on its own cache
 * line:
 *
 *   tail         bytes the peer's writer has put into this ring (in total)
 *   credit       bytes of MY sends the peer's reader has consumed (in total)
 *   fin_at/flags FIN: the peer's writer is done after fin_at bytes; RST
 *   want_credit  a counter the peer's writer bumps when it blocks for room
 *   want_data    a counter the peer's reader bumps before it sleeps
 *
 * The words only ever grow (the two "want" counters are compared with the
 * last value seen, never cleared), so no word has two writers. Everything
 * read from the header is hostile: sock_conn.c checks each value against what
 * this side knows before it uses it. */
#ifndef VMMC_SOCK_CONN_PRIV_H
#define VMMC_SOCK_CONN_PRIV_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sock/sock.h"
#include "util/clock.h"

#define SOCK_CACHELINE 64
/* How long a reader waits for a dead peer's last bytes still in flight
 * (sock_conn_io.c, dead_settle) before it reads the end of the stream. */
#define SOCK_DEAD_GRACE_MS 200

enum {
    SOCK_HDR_TAIL = 0,
    SOCK_HDR_CREDIT = 1 * SOCK_CACHELINE,
    SOCK_HDR_FIN_AT = 2 * SOCK_CACHELINE,
    SOCK_HDR_FLAGS = 2 * SOCK_CACHELINE + 8,
    SOCK_HDR_WANT_CREDIT = 3 * SOCK_CACHELINE,
    SOCK_HDR_WANT_DATA = 4 * SOCK_CACHELINE,
    /* posted receives (sock_zcopy.c): written by the peer's reader */
    SOCK_HDR_POST = 5 * SOCK_CACHELINE,        /* seq << 32 | bytes (0: withdrawn) */
    SOCK_HDR_DIR_ACK = 5 * SOCK_CACHELINE + 8, /* last direct record it took */
    /* ... and by the peer's writer: its last direct record */
    SOCK_HDR_DIR_SEQ = 6 * SOCK_CACHELINE,     /* the posting it served */
    SOCK_HDR_DIR_AT = 6 * SOCK_CACHELINE + 8,  /* ring position of the bytes */
    SOCK_HDR_DIR_LEN = 6 * SOCK_CACHELINE + 16,/* bytes placed */
    SOCK_HDR_DIR_DONE = 6 * SOCK_CACHELINE + 24,/* last posting it is done with */
    SOCK_HDR_SIZE = 8 * SOCK_CACHELINE /* data starts here */
};

enum { SOCK_RING_FIN = 1u << 0, SOCK_RING_RST = 1u << 1 };

/* ------------------------------------------------------------------------ */
/* sock_ring.c: one side's receive ring (exported) and its view of the
 * peer's (imported). */

typedef struct sock_rx_ring {
    vmmc_ep_t *ep;
    uint8_t *mem;              /* the allocation: header, then data */
    uint8_t *data;
    uint64_t size;             /* bytes of data */
    vmmc_export_t *ex;
    char name[SOCK_RING_NAME_MAX];
} sock_rx_ring_t;

typedef struct sock_tx_ring {
    vmmc_ep_t *ep;
    int peer;
    vmmc_proxy_t *px;
    uint8_t *map;              /* the peer's allocation mapped (shm), or NULL */
    uint64_t size;             /* bytes of the peer's ring data */
} sock_tx_ring_t;

/* Allocate and export a ring of @p size bytes under a random name, importable
 * only by @p peer when >= 0. vmmc status. */
int sock_rx_open(sock_rx_ring_t *r, vmmc_ep_t *ep, uint64_t size, int peer);
/* Withdraw the export and free the memory (idempotent). */
void sock_rx_close(sock_rx_ring_t *r);
/* A header word of my ring (written by the peer), read with acquire. */
static inline uint64_t sock_rx_word(const sock_rx_ring_t *r, int off)
{
    return __atomic_load_n((const uint64_t *)(const void *)(r->mem + off), __ATOMIC_ACQUIRE);
}
/* Copy @p len bytes at stream position @p pos out of my ring into @p iov
 * (skipping @p skip bytes of the iovec first); NULL iov discards. */
void sock_rx_copy(const sock_rx_ring_t *r, uint64_t pos, size_t len, const struct iovec *iov,
                  int iovcnt, size_t skip);
/* Read @p len bytes at stream position @p pos into @p dst. */
void sock_rx_read(const sock_rx_ring_t *r, uint64_t pos, void *dst, size_t len);

/* Import the peer's ring @p name (at most @p timeout_ms), map it when the
 * transport allows. @p size: what the peer said its ring holds (checked
 * against the import's length). vmmc status. */
int sock_tx_open(sock_tx_ring_t *t, vmmc_ep_t *ep, int peer, const char *name, uint64_t size,
                 int timeout_ms);
void sock_tx_close(sock_tx_ring_t *t);
/* Put @p len bytes of @p iov (from byte @p skip of it) at stream position
 * @p pos of the peer's ring (the caller made sure there is room). vmmc
 * status. */
int sock_tx_put(sock_tx_ring_t *t, uint64_t pos, const struct iovec *iov, int iovcnt,
                size_t skip, size_t len);
/* Put bytes from a file (pread at @p off) at @p pos: bytes read, or -1/errno. */
ssize_t sock_tx_put_file(sock_tx_ring_t *t, uint64_t pos, int fd, off_t off, size_t len);
/* Write a header word of the peer's ring (release store when mapped). */
int sock_tx_word(sock_tx_ring_t *t, int off, uint64_t v);
/* Read back @p len bytes at stream position @p pos of the peer's ring (my
 * own bytes it has not consumed: the revert). vmmc status. */
int sock_tx_fetch(sock_tx_ring_t *t, uint64_t pos, void *dst, size_t len);
/* Make every write so far land in the peer's memory (udp: vmmc_fence). */
int sock_tx_fence(sock_tx_ring_t *t);


/* ------------------------------------------------------------------------ */
/* the conn (sock_conn.c, sock_conn_io.c, sock_revert.c) */

enum {
    C_ATTACHED = 1 << 0,  /* the peer's ring is imported: sends go there */
    C_PEER_FIN = 1 << 1,  /* the peer's FIN is in my ring (fin_at) */
    C_RESET = 1 << 2,     /* reset: the peer's RST, or a protocol error */
    C_DEAD = 1 << 3,      /* the TCP side ended without a FIN: the peer died */
    C_FIN_SENT = 1 << 4,  /* my FIN is in the peer's ring */
    C_SHUT_RD = 1 << 5,
    C_REV_SENT = 1 << 6,  /* I sent REVERT: my ring is dropped */
    C_REV_PEER = 1 << 7,  /* the peer's REVERT came: it must be answered */
    C_TX_TCP = 1 << 8,    /* my bytes go on the TCP stream now */
    C_RX_TCP = 1 << 9,    /* my bytes come from the TCP stream (abandoned upgrade) */
    C_REV_ACKED = 1 << 10,/* the peer's REVERT_ACK came */
    C_RETIRED = 1 << 11,  /* back on the kernel for good (mode KERNEL) */
    C_WATCHED = 1 << 12,  /* the sock thread watches the TCP side */
    C_EPIPE = 1 << 13,    /* the peer can read no more (its RST or death) */
    C_FIN_WANT = 1 << 14, /* shutdown(SHUT_WR) before the ACK: FIN once attached */
    C_VOID_SENT = 1 << 15 /* the one send after the peer's end went (as TCP's) */
};

struct sock_conn {
    sock_t *s;
    sock_ctx_t *ctx;
    vmmc_ep_t *ep;
    int peer;                  /* vmmc peer handle, -1 before attach */
    _Atomic int st;            /* C_* */
    pthread_mutex_t tcp_lock;  /* reading records from the TCP side */
    sock_rx_ring_t rx;
    sock_tx_ring_t tx;

    /* receive side (under s->rx_lock) */
    uint64_t head;             /* bytes of my ring consumed */
    _Atomic uint64_t tail;     /* last checked tail */
    uint64_t credit_pub;       /* last head published in the peer's credit */
    uint64_t want_credit_seen; /* last want_credit counter answered */
    _Atomic uint64_t want_data_seq; /* my reader's sleeps, published in the peer's ring */
    uint64_t fin_at;
    int dead_settled;          /* the peer's end without a FIN was waited out */

    /* send side (under s->tx_lock) */
    _Atomic uint64_t sent;     /* bytes put in the peer's ring */
    uint64_t credit;           /* last checked credit */
    uint64_t want_data_seen;
    _Atomic uint64_t want_credit_seq; /* my writer's waits for room */
    uint8_t *lbuf;             /* detached: bytes waiting for the ACK */
    size_t llen;
    uint64_t rev_a, rev_b;     /* the peer's REVERT */
    const char *rev_why;       /* "fork" (this side began it) or "peer" */

    _Atomic uint64_t nsent, nrecv; /* bytes through vmmc (info) */

    /* posted receives (sock_zcopy.c). Receive side, under rx_lock: */
    vmmc_export_t *zex;        /* the window: redirectable, ZC_SLOTS postings */
    uint8_t *zmem;
    size_t zlen;
    uint32_t zpost;            /* last posting's sequence */
    uint32_t ztaken;           /* last direct record taken */
    int zposted;               /* a posting is installed (zreq) */
    uint32_t zdoubt;           /* a posting withdrawn with nothing placed that the
                                  writer may still write (0: none) */
    int zoff;                  /* the window could not be made: never post */
    uint8_t *zbuf;             /* the posted buffer */
    size_t zwant;              /* its bytes */
    vmmc_request_t zreq;
    uint8_t *spill;            /* a record's bytes not yet read */
    size_t spill_off;
    _Atomic size_t spill_len;
    /* send side, under tx_lock: */
    vmmc_proxy_t *zpx;         /* the peer's window, imported at its first posting */
    uint32_t zseen;            /* last posting served or declined */
    uint32_t zpub;             /* last direct record published */
    int zno;                   /* the window cannot be imported: the ring only */
    char zname[SOCK_RING_NAME_MAX]; /* the peer's window name */
    _Atomic uint64_t zrecv, zposts, zsent; /* info: direct bytes in, postings, out */
    _Atomic uint64_t zlate, zwaited; /* records taken from the window after a
                                        withdrawal; withdrawals that waited for one */

    struct sock_conn *next_retired;
};

/* sock_conn_io.c, sock_conn_tx.c: shared by both directions */

/* Bytes a large send or receive moves between two publications of its tail
 * or credit: a quarter of the ring, at least 16 KiB, at most 256 KiB. */
static inline size_t sock_io_chunk(uint64_t ring)
{
    uint64_t q = ring / 4;
    return (size_t)(q < 16384 ? 16384 : q > 262144 ? 262144 : q);
}

static inline size_t sock_iov_total(const struct iovec *iov, int iovcnt)
{
    size_t t = 0;
    for (int i = 0; i < iovcnt; i++)
        t += iov[i].iov_len;
    return t;
}

/* Milliseconds left before @p deadline (ns; 0 = none): -1 forever. */
static inline int sock_left_ms(uint64_t deadline)
{
    if (!deadline)
        return -1;
    uint64_t now = vmmc_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* A blocked call's next step: SOCK_SPIN_MORE while its spin (VMMC_SOCK_SPIN,
 * from the first call, *spin_end 0) lasts: look again; then the
 * milliseconds it may sleep (-1 forever, 0: its time is up). */
enum { SOCK_SPIN_MORE = -2 };
static inline int sock_spin_left(uint64_t *spin_end, uint64_t deadline)
{
    uint64_t now = vmmc_now_ns();
    if (!*spin_end)
        *spin_end = now + sock_cfg()->spin_ns;
    if (now < *spin_end) {
        __builtin_ia32_pause();
        return SOCK_SPIN_MORE;
    }
    return sock_left_ms(deadline);
}

/* What a call whose time is up returns: the bytes it moved, or EAGAIN. */
static inline ssize_t sock_moved_or_again(size_t n)
{
    if (n)
        return (ssize_t)n;
    errno = EAGAIN;
    return -1;
}

/* sock_conn.c */
int sock_conn_fail(sock_conn_t *c, int bits, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void sock_conn_wake_local(sock_conn_t *c);
/* sock_conn_io.c: tell the reader a new tail or record is there. */
void sock_conn_notify_data(sock_conn_t *c);
int sock_conn_tcp_fd(sock_conn_t *c);
/* Is the TCP side readable with something for on_tcp (non-blocking look)? */
int sock_conn_tcp_pending(sock_conn_t *c);
/* Write all of @p len bytes on the TCP side (poll while full, at most
 * @p timeout_ms): 0 or -1/errno. */
int sock_conn_tcp_write(sock_conn_t *c, const void *buf, size_t len, int timeout_ms);
/* Both directions are on TCP: mode KERNEL. Needs tx_lock and rx_lock held. */
void sock_conn_retire(sock_conn_t *c);
/* Retire if both directions are on TCP (REVERT answered both ways); the
 * locks not held are only tried. */
void sock_conn_maybe_retire(sock_conn_t *c, int have_tx, int have_rx);
void sock_conn_retire_why(sock_conn_t *c, const char *why);
/* Move the detached local buffer into the peer's ring (tx_lock held); once
 * it is empty, a FIN that shutdown() deferred (C_FIN_WANT) follows it. */
int sock_conn_flush_local(sock_conn_t *c);
/* A writer releasing tx_lock: does the local buffer still hold bytes (read
 * with tx_lock held)? Then, once tx_lock is released, sock_conn_tx_after()
 * moves them on if the ACK came meanwhile: the attach (or abandon) could not
 * take tx_lock while the writer held it, and the writer may have looked at
 * the state just before the ACK was handled. */
int sock_conn_tx_owed(sock_conn_t *c);
void sock_conn_tx_after(sock_t *s);
/* The receive side's check of the peer's words: the tail (and FIN) that may
 * be read now; -1 on a protocol error (the conn is reset). */
int sock_conn_rx_poll(sock_conn_t *c, uint64_t *tail);
/* Tell the writer what the reader consumed (rx_lock held). */
void sock_conn_publish_credit(sock_conn_t *c);
/* sock_zcopy.c: posted receives. A reader whose ring is empty posts the
 * piece of its buffer at @p skip (rx_lock held): 1 posted, 0 not (too small,
 * disabled, a record pending), -1 error (conn failed). */
int sock_zc_post(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip,
                 size_t want);
/* Withdraw the posting (a cancel: ring bytes came, timeout, signal, state
 * change). Bytes the writer placed meanwhile are waited for (bounded) and
 * counted: returns them (the posted piece holds them), or -1 (conn failed). */
ssize_t sock_zc_cancel(sock_conn_t *c);
/* Is a direct record or spilled bytes waiting (read before the ring)? */
static inline int sock_zc_pending(const sock_conn_t *c)
{
    return atomic_load(&c->spill_len) != 0 ||
           (uint32_t)__atomic_load_n((const uint64_t *)(const void *)(c->rx.mem + SOCK_HDR_DIR_SEQ),
                                     __ATOMIC_ACQUIRE) != c->ztaken;
}
/* Take a waiting record and give what it (or the spill) holds: bytes given
 * (copied into @p iov from @p skip, at most @p want; with @p peek left in
 * place), or -1 (protocol error: conn reset). @p tail: the ring's checked
 * tail, loaded before. */
ssize_t sock_zc_read(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip,
                     size_t want, int peek, uint64_t tail);
/* Bytes waiting in records and the spill (FIONREAD, no lock). */
size_t sock_zc_unread(const sock_conn_t *c);
/* Writer: a posting is there (its word changed): place up to @p len bytes
 * of @p iov from @p skip straight into the reader's buffer. Bytes placed,
 * 0 (not now: the ring), -1 (conn failed). tx_lock held. */
ssize_t sock_zc_send(sock_conn_t *c, const struct iovec *iov, int iovcnt, size_t skip,
                     size_t len);
/* Has the posting word changed since the writer last looked? */
static inline int sock_zc_posted(const sock_conn_t *c)
{
    return (uint32_t)(__atomic_load_n((const uint64_t *)(const void *)(c->rx.mem + SOCK_HDR_POST),
                                      __ATOMIC_ACQUIRE) >> 32) != c->zseen;
}
/* Withdraw the window (retire, close) / free everything (free_conn). */
void sock_zc_unexport(sock_conn_t *c);
void sock_zc_free(sock_conn_t *c);

/* sock_revert.c: the peer's REVERT{a, b} came (from on_tcp, tcp_lock held). */
void sock_revert_on_peer(sock_conn_t *c, const sock_rec_t *r);
void sock_revert_on_ack(sock_conn_t *c);
/* Answer a REVERT that came (tx_lock and rx_lock held): 0 or -1/errno. */
int sock_revert_answer(sock_conn_t *c);
/* The same from a reader, which holds only rx_lock (taken in order here). */
void sock_revert_answer_rx(sock_conn_t *c);

#endif /* VMMC_SOCK_CONN_PRIV_H */
