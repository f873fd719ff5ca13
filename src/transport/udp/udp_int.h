/* udp transport internals shared by its files: udp.c (the data path:
 * receive callback, control queue, put/get/flush/signal) and udp_peer.c
 * (the endpoint: socket, address, the link's start, peers and the
 * handshake of peers that reach us first). */
#ifndef VMMC_TRANSPORT_UDP_INT_H
#define VMMC_TRANSPORT_UDP_INT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/transport.h"
#include "transport/udp/link.h"

/* Messages on the link (vmmc_udp_rec_t.kind). */
enum {
    K_WRITE = 1, K_CTL = 2, K_GET_REQ = 3, K_GET_REP = 4, K_GET_ERR = 5, K_SIGNAL = 6,
    /* The first message to a peer that may not know us: our address (the
     * receiver learns our link secret and wire id from it, checks the
     * datagram's tag with them, and accepts us if it listens). */
    K_HELLO = 7,
    /* A remote atomic: executed by the receiver's progress thread
     * (vmmc_tl_deliver_atomic), answered like a read. */
    K_ATOMIC_REQ = 8
};

#define GET_CHUNK (1u << 20) /* remote reads are answered 1 MiB at a time */

extern int vmmc_udp_cfg_sync; /* VMMC_UDP_SYNC */

typedef struct get_req {
    uint64_t id;
    int rank;
    uint8_t *dst;
    size_t len, got;
    int status;      /* VMMC_INPROGRESS until done */
    struct get_req *next;
} get_req_t;

typedef struct get_wire {
    uint64_t id, off, len;
    uint32_t export_id, gen;
    uint64_t token[2];
} get_wire_t;

typedef struct atomic_wire {
    uint64_t id, off, operand, compare;
    uint32_t export_id, gen;
    uint64_t token[2];
    uint8_t op, size, fetch, pad[5];
} atomic_wire_t;

typedef struct udp_rx {
    uint64_t msg_off;  /* offset of the current write's first fragment */
    int msg_ok;        /* every fragment of it was applied */
    size_t ctl_len;
    union {
        vmmc_ctl_msg_t m;
        uint8_t b[sizeof(vmmc_ctl_msg_t)];
    } ctl;
} udp_rx_t;

/* What the transport keeps per peer registered in the link (made when it
 * is registered, never moved). */
typedef struct udp_peer {
    /* The link's datagram count right after our last write to it (a signal
     * right behind a write rides on it, see udp_signal). */
    _Atomic uint32_t wrote_at;
    /* One write to it at a time, all its datagrams: the receiver takes a
     * write's extent (its notification's offset and length) from its first
     * and last datagram, so two threads' writes must not interleave there
     * (a sender waiting for the window lets go of the link's peer lock). */
    pthread_mutex_t txlock;
    udp_rx_t rx;       /* progress thread only */
} udp_peer_t;

#define UDP_PEER_CHUNK 256
#define UDP_PEER_CHUNKS (VMMC_PEERS_MAX / UDP_PEER_CHUNK)

/* Control messages wait here until the window has room: ctl_send is called
 * with core locks held (ep->lock), so it must never wait for the progress
 * thread, which may itself need those locks to apply incoming data. */
typedef struct ctl_q {
    vmmc_ctl_msg_t m;
    int rank;
    struct ctl_q *next;
} ctl_q_t;
#define CTL_QUEUE_MAX 4096

/* Peers accepted by the progress thread, announced by the control thread. */
typedef struct ann_q {
    int peer;
    struct ann_q *next;
} ann_q_t;

typedef struct udp_ep {
    vmmc_ep_t *ep;
    vmmc_udp_link_t *link;           /* set once (start_lock), then read freely */
    pthread_mutex_t start_lock;
    int fd;                          /* bound socket until the link adopts it */
    int lo_fd;                       /* the same port on 127.0.0.1 (see loopback_job) */
    int lo;                          /* a job on this host: peers reached on 127.0.0.1 */
    uint8_t token[VMMC_UDP_TOKEN_SIZE];
    uint32_t uid;                    /* our wire id (uid= in the address) */
    udp_peer_t **_Atomic peers[UDP_PEER_CHUNKS]; /* by handle */
    pthread_mutex_t lock;            /* gets, peers table */
    pthread_cond_t cond;
    get_req_t *gets;
    uint64_t next_get;
    /* Authenticated writes the core refused, by reason (stale export or
     * generation, wrong capability token, out of bounds, other), and
     * malformed control messages: progress thread only writes them. */
    _Atomic uint64_t refused[4], ctl_bad;
    /* Handshakes refused: malformed, not from the address it names, bad
     * tag, or the core refused the peer (it does not listen). */
    _Atomic uint64_t hello_refused;
    pthread_mutex_t qlock;           /* control queue, announcements */
    ctl_q_t *qhead, **qtail;
    int qlen;
    ann_q_t *ann;
    int ann_fd;                      /* eventfd the control thread watches */
    /* Notifications of writes applied by the receiving thread, until the
     * core takes them (udp_drain); at most the endpoint's notify_queue, then
     * notifying writes wait in the link (which holds the sender back). */
    pthread_mutex_t nlock;
    vmmc_nrec_t *nq;
    size_t nq_n, nq_cap;
    _Atomic size_t nq_count;
    /* Threads of this endpoint blocked waiting for a peer (window room,
     * a delivery report, a read's reply). While there are any, the
     * receiving thread moves this queue into the core's (vmmc_tl_drain)
     * instead of holding notifying writes back: the peer may be blocked
     * the same way, waiting for them to be taken. */
    _Atomic int waiting;
} udp_ep_t;

extern const int vmmc_tl_slot_udp; /* our slot in the registry (generated) */
extern const vmmc_tl_ops_t vmmc_tl_udp;

static inline udp_ep_t *U(vmmc_ep_t *ep)
{
    return VMMC_TL_STATE(ep, udp);
}

/* The transport's state of handle @h (registered in the link), or NULL. */
static inline udp_peer_t *udp_peer_of(udp_ep_t *u, uint32_t h)
{
    if (h >= VMMC_PEERS_MAX)
        return NULL;
    udp_peer_t **c = atomic_load_explicit(&u->peers[h / UDP_PEER_CHUNK], memory_order_acquire);
    return c ? __atomic_load_n(&c[h % UDP_PEER_CHUNK], __ATOMIC_ACQUIRE) : NULL;
}

/* The link's callbacks: udp_rx.c (deliver, waiting) and udp.c (tick). */
int vmmc_udp__deliver(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec, const void *data,
                      size_t len);
void vmmc_udp__tick(void *arg);
void vmmc_udp__waiting(void *arg, int begin);
void vmmc_udp__gets_fail(udp_ep_t *u, int rank, int status);
/* udp_rx.c: the ops table's drain and arm. */
int vmmc_udp__drain(vmmc_ep_t *ep, void (*push)(vmmc_ep_t *ep, const vmmc_nrec_t *rec));
int vmmc_udp__arm(vmmc_ep_t *ep);

/* udp_peer.c: endpoint and peers */
int vmmc_udp__ep_open(vmmc_ep_t *ep, char *card, size_t cap);
int vmmc_udp__addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why);
int vmmc_udp__addr_whole(const char *card, size_t len);
int vmmc_udp__reach(vmmc_ep_t *ep, const char *card, int same_host);
int vmmc_udp__pick_addr(const char *want, struct sockaddr_storage *ss, socklen_t *len);
/* The udp part of a (checked) address: where, the link secret, the wire id;
 * -1 if it has none. */
int vmmc_udp__parse_card(const char *card, struct sockaddr_storage *ss, socklen_t *len,
                         uint8_t tok[VMMC_UDP_TOKEN_SIZE], uint32_t *uid);
int vmmc_udp__same_sockaddr(const struct sockaddr_storage *a, socklen_t al,
                            const struct sockaddr *b, socklen_t bl);
int vmmc_udp__ep_start(vmmc_ep_t *ep);
void vmmc_udp__ep_close(vmmc_ep_t *ep);
int vmmc_udp__listen(vmmc_ep_t *ep);
int vmmc_udp__peer_connect(vmmc_ep_t *ep, vmmc_tl_peer_t *peer, int timeout_ms);
void vmmc_udp__peer_dead(vmmc_ep_t *ep, vmmc_tl_peer_t *peer);

#endif
