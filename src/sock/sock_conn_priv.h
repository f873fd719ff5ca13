/* An upgraded connection's private state: the rings (sock_ring.c), the conn
 * (sock_conn.c, sock_conn_io.c), the way back to TCP (sock_revert.c).
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

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sock/sock.h"

#define SOCK_CACHELINE 64

enum {
    SOCK_HDR_TAIL = 0,
    SOCK_HDR_CREDIT = 1 * SOCK_CACHELINE,
    SOCK_HDR_FIN_AT = 2 * SOCK_CACHELINE,
    SOCK_HDR_FLAGS = 2 * SOCK_CACHELINE + 8,
    SOCK_HDR_WANT_CREDIT = 3 * SOCK_CACHELINE,
    SOCK_HDR_WANT_DATA = 4 * SOCK_CACHELINE,
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

#endif /* VMMC_SOCK_CONN_PRIV_H */
