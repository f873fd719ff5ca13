/* shm transport internals shared by its files (shm.c: control channel and
 * data; shm_inbox.c: notification channels). */
#ifndef VMMC_TRANSPORT_SHM_INT_H
#define VMMC_TRANSPORT_SHM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "transport/shm/shm.h"
#include "util/store.h"

extern const int vmmc_tl_slot_shm; /* our slot in the registry (generated) */
extern const vmmc_tl_ops_t vmmc_tl_shm;

#define SHM_MAX_FDS 3 /* descriptors one control message may carry */

/* The receiver's status page: one per endpoint, sealed so that senders can
 * map it only read-only. Senders read `sleeping` to decide whether a
 * notification must also write the receiver's eventfd. */
#define SHM_STATUS_MAGIC 0x73746174u
typedef struct shm_status {
    uint32_t magic;
    int32_t pid;
    uint32_t nrec;             /* records per notification ring */
    uint32_t pad;
    uint64_t ring_bytes;       /* size of each ring segment */
    _Alignas(64) _Atomic uint32_t sleeping;
} shm_status_t;

/* One notification record is one cache line whose last word is its
 * sequence number (index + 1), written last. */
typedef struct shm_rec {
    vmmc_nrec_t r;
    uint64_t pad;
    _Atomic uint64_t seq;
    uint64_t pad2;
} shm_rec_t;
_Static_assert(sizeof(shm_rec_t) == 64, "a notification record is one cache line");

/* The slot of record number @i in a ring of @n: a mask for a power of two
 * (VMMC_NOTIFY_QUEUE's default, 256), a division only for other sizes. A
 * 64-bit division costs tens of cycles, and a notification crossed three. */
static inline uint32_t shm_ring_slot(uint64_t i, uint32_t n)
{
    if (__builtin_expect((n & (n - 1)) == 0, 1))
        return (uint32_t)(i & (n - 1));
    return (uint32_t)(i % n);
}

/* A notification ring: its own memfd segment, shared by the receiver and ONE
 * sender. `tail` is the receiver's published consumption point; the receiver
 * keeps its own copy and never trusts the shared one. */
typedef struct shm_ring {
    _Alignas(64) _Atomic uint64_t tail;
    _Alignas(64) shm_rec_t rec[];
} shm_ring_t;

/* Receiver side of one sender's ring. */
typedef struct shm_inring {
    int fd;                    /* the segment (kept to answer a repeated HELLO) */
    int handle;                /* the sender's peer handle */
    shm_ring_t *ring;
    uint64_t tail;             /* private consumption point */
} shm_inring_t;

/* Rings we poll, in HELLO order: chunks of pointers that never move, so the
 * progress thread reads them while the control thread appends. */
#define SHM_ACTIVE_CHUNK 256
#define SHM_ACTIVE_CHUNKS 256

typedef struct shm_ep {
    pthread_mutex_t lock;      /* peers' incoming connections (in_fd) */
    int listen_fd;
    int status_fd;
    shm_status_t *status;      /* our status page (mapped read/write here only) */
    uint32_t nrec;
    size_t ring_bytes;
    shm_inring_t **_Atomic active[SHM_ACTIVE_CHUNKS];
    _Atomic int nactive;
} shm_ep_t;

typedef struct shm_peer {
    int out_fd;                /* our connection to the peer */
    int pend_fd;               /* a connection whose HELLO was sent and not answered
                                * yet (its connect timed out): the next connect waits
                                * on it; under the core peer's lock */
    int in_fd;                 /* the peer's connection to us */
    shm_status_t *status;      /* the peer's status page, mapped read-only */
    shm_ring_t *ring;          /* our ring at the peer */
    size_t ring_bytes;
    uint32_t nrec;
    int evfd;
    shm_inring_t *in;          /* the peer's ring here (receiver side), or NULL */
    uint64_t head;             /* producer state, under prod_lock */
    uint64_t tail_cache;
    atomic_flag prod_lock;
} shm_peer_t;

struct iovec;
/* shm_iov.c: the ops table's putv (regions written with process_vm_writev). */
int vmmc_shm_putv(vmmc_tl_proxy_t *px, size_t off, const struct iovec *iov, int iovcnt, int notify,
                  uint64_t imm);

/* shm_inbox.c */
int shm_inbox_open(vmmc_ep_t *ep, shm_ep_t *s);
void shm_inbox_close(shm_ep_t *s);
/* The ring segment for the sender of handle @h (created on its first
 * HELLO, kept in @sp); starts polling it. Returns the segment's descriptor
 * (owned by @s) or an error. */
int shm_inbox_ring_for(vmmc_ep_t *ep, shm_ep_t *s, shm_peer_t *sp, int h, int *fd);
/* Sender side: map the peer's status page (read-only) and our ring in it.
 * Consumes neither descriptor. */
int shm_inbox_attach(shm_peer_t *sp, int rank, int status_fd, int ring_fd);
void shm_inbox_detach(shm_peer_t *sp);
int shm_wake_peer(vmmc_ep_t *ep, shm_peer_t *sp);
int shm_signal(vmmc_ep_t *ep, vmmc_tl_peer_t *p);
int vmmc_shm_put_pvw(vmmc_tl_proxy_t *px, size_t off, const void *src, size_t len, int notify,
                     uint64_t imm);
int vmmc_shm_get(vmmc_tl_proxy_t *px, size_t off, void *dst, size_t len);
int vmmc_shm_addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why);
int vmmc_shm_reach(vmmc_ep_t *ep, const char *card, int same_host);

#endif
