/* The UDP reliable link: exactly-once, in-order datagram messages between
 * endpoints over one UDP socket each.
 *
 * An endpoint opens a link (one socket, one progress thread) and adds its
 * peers by index (the job rank) with their address and link token. Messages
 * sent to a peer are fragmented into datagrams (up to VMMC_UDP_DGRAM_SIZE),
 * numbered per peer, acknowledged cumulatively and selectively, retransmitted
 * after an RTT-estimated timeout (RFC 6298, with a floor and exponential
 * backoff) or after three later datagrams were acknowledged, and delivered
 * to the receive callback exactly once and in order. Memory per peer is
 * bounded by the window (VMMC_UDP_WINDOW datagrams each way).
 *
 * A peer that sends nothing (not even keep-alives) for VMMC_UDP_PEER_TIMEOUT,
 * or leaves a datagram unacknowledged that long, is declared dead: every later
 * send to it fails with VMMC_ERR_PEER_DEAD, and blocked senders wake up.
 *
 * Every received datagram is checked (size, magic, version, CRC32C, known
 * peer at its registered address, token, sequence window, ack sanity);
 * anything wrong is dropped and counted (vmmc_udp_link_counters()).
 *
 * Threading: all functions are thread-safe. The receive callback runs in the
 * progress thread, or in a thread calling vmmc_udp_link_poll(); one call at
 * a time, in order per peer. */
#ifndef VMMC_UDP_LINK_H
#define VMMC_UDP_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/udp/fault.h"
#include "transport/udp/wire.h"

typedef struct vmmc_udp_link vmmc_udp_link_t;

/* What travels with each fragment of a message. */
typedef struct vmmc_udp_rec {
    uint8_t kind;     /* opaque to the link: the layer above's message type */
    uint8_t flags;    /* VMMC_UDP_F_FIRST/LAST (set by the link), NOTIFY */
    uint32_t region;  /* 0: the link's control channel */
    uint32_t gen;     /* region generation (carried, not interpreted) */
    uint8_t token[VMMC_UDP_TOKEN_SIZE]; /* capability (region != 0) */
    uint64_t offset;  /* of this fragment's first byte in the region */
    uint64_t imm;
} vmmc_udp_rec_t;

/* Receive callback: one fragment of a message, in order.
 * Context: the link's progress thread or a vmmc_udp_link_poll() caller, one
 * at a time; @data is valid only during the call.
 * It may call vmmc_udp_link_send() (also to the same peer); it must not
 * close the link. Returns 0 when the fragment is consumed, or nonzero when
 * the receiver cannot take it now (e.g. no room): the link keeps it, stops
 * delivering from that peer, and offers it again VMMC_UDP_BUSY_RETRY later
 * (doubling while it stays busy, up to 64 times that); the peer's window then
 * fills, which holds the sender back. */
typedef int (*vmmc_udp_deliver_fn)(void *arg, uint32_t peer, const vmmc_udp_rec_t *rec,
                                   const void *data, size_t len);
/* Optional capability check for an authenticated DATA datagram addressed to
 * region != 0, before it is accepted into the sequence: return 0 to accept,
 * nonzero to drop it (counted in drop_bad_token) without any state change.
 * The sender retransmits a refused datagram until the peer timeout, so only
 * refuse what the authenticated peer can never have meant (the transport
 * itself accepts every authenticated datagram and refuses bad writes when it
 * applies them). Progress thread; must not block. */
typedef int (*vmmc_udp_accept_fn)(void *arg, uint32_t peer, uint32_t region, uint32_t gen,
                                  const uint8_t token[VMMC_UDP_TOKEN_SIZE]);
/* A datagram came from a wire id no registered peer has (@h decoded, not
 * yet authenticated; @dgram is the whole datagram). The callback may
 * register the sender (vmmc_udp_link_add_peer_id, after checking the tag
 * with vmmc_udp_link_auth_from) and return 0 with its index in *@id; any
 * other return drops the datagram (counted in drop_unknown_peer). Receive
 * owner (progress thread or a poller); must not block. */
typedef int (*vmmc_udp_unknown_fn)(void *arg, const vmmc_udp_hdr_t *h, const uint8_t *dgram,
                                   const struct sockaddr *from, socklen_t fromlen, uint32_t *id);
/* A peer was declared dead. @clean: 0 it fell silent (or was killed), 1 it
 * said goodbye, VMMC_UDP_DOWN_REFUSED it refused us (an authenticated
 * refusal answered our handshake: it does not listen). Progress thread. */
#define VMMC_UDP_DOWN_REFUSED 2
typedef void (*vmmc_udp_dead_fn)(void *arg, uint32_t peer, int clean);
/* A thread other than the receive owner starts (@begin 1) or ends (0)
 * waiting in the link for a peer: window room, acknowledgements or a
 * delivery report. The start is called without any link lock held, so the
 * layer above may make room for what the peer sends us meanwhile (the peer
 * may itself be waiting for that: see udp.c); the end may be called with a
 * link lock held, and must not block. */
typedef void (*vmmc_udp_waiting_fn)(void *arg, int begin);

typedef struct vmmc_udp_link_params {
    uint32_t self;                 /* this endpoint's wire id (src of its datagrams) */
    uint32_t max_peers;            /* peer indexes are 0 .. max_peers-1 */
    const struct sockaddr *bind_addr; /* address to bind (port 0: any) */
    socklen_t bind_len;
    int adopt_fd;                  /* nonzero: use @fd, a bound UDP socket (owned by the
                                    * link once open succeeds) */
    int fd;
    /* This endpoint's link secret: random, private to the job (published
     * to the other ranks through the bootstrap). With each peer's secret it
     * gives the keys that authenticate every datagram (wire.h). */
    uint8_t token[VMMC_UDP_TOKEN_SIZE];
    vmmc_udp_deliver_fn deliver;
    vmmc_udp_accept_fn accept;     /* NULL: accept every region token */
    vmmc_udp_dead_fn dead;         /* may be NULL */
    vmmc_udp_waiting_fn waiting;   /* may be NULL */
    vmmc_udp_unknown_fn unknown;   /* may be NULL: datagrams of unknown peers are dropped */
    /* Called by the progress thread on every pass (after receiving and the
     * timers), e.g. to send queued messages without blocking
     * (vmmc_udp_link_send_ex with nonblock). May be NULL. */
    void (*tick)(void *arg);
    void *arg;
    /* Socket bindings; NULL: plain system calls, or the fault injector if
     * VMMC_UDP_FAULT is set. The link owns (destroys) them. */
    const vmmc_udp_bindings_t *bindings;
} vmmc_udp_link_params_t;

/* Open the socket and start the progress thread. */
int vmmc_udp_link_open(const vmmc_udp_link_params_t *p, vmmc_udp_link_t **out);
/* Flush outstanding data (up to @timeout_ms), say goodbye, stop, free. */
void vmmc_udp_link_close(vmmc_udp_link_t *l, int timeout_ms);

/* Receive from the calling thread (if no other thread is receiving right
 * now): delivers what arrived, acknowledges it. Never blocks; returns the
 * number of fragments delivered. Lets a thread that polls anyway skip the
 * progress thread's wake-up. */
int vmmc_udp_link_poll(vmmc_udp_link_t *l);

/* VMMC_UDP_RPC_SPIN: how long a remote read or atomic receives its answer
 * with vmmc_udp_link_poll() itself before it sleeps. */
extern uint64_t vmmc_udp_cfg_rpc_spin;

/* The receive callback answered a request (a remote read or atomic):
 * the progress thread, if it is the one receiving, keeps polling the socket
 * for VMMC_UDP_SERVE_SPIN before it sleeps again, so that the next request
 * of a stream needs no wake-up. Any thread; cheap. */
void vmmc_udp_link_linger(vmmc_udp_link_t *l);
extern uint64_t vmmc_udp_cfg_serve_spin;

/* The receive callback has room again (it refused data while busy): offer
 * what it refused at once rather than after the busy back-off. Any thread. */
void vmmc_udp_link_retry(vmmc_udp_link_t *l);

/* The polling thread is about to sleep (or will not poll for a while):
 * the progress thread takes the socket back at once instead of after its
 * look-back interval (VMMC_UDP_POLL_QUIET .. VMMC_UDP_POLL_RECHECK). The
 * next vmmc_udp_link_poll() undoes it. */
void vmmc_udp_link_idle(vmmc_udp_link_t *l);

/* Wake the progress thread (it then runs a pass, and the tick). */
void vmmc_udp_link_wake(vmmc_udp_link_t *l);

/* The bound local address (to publish to peers). */
int vmmc_udp_link_local_addr(vmmc_udp_link_t *l, struct sockaddr_storage *ss, socklen_t *len);

/* Register peer @id at @addr with its link secret (@token). Datagrams from
 * other addresses claiming to be @id, and datagrams whose tag is not made
 * with the key of the link from @id to us, are dropped. Its liveness clock
 * starts now. */
int vmmc_udp_link_add_peer(vmmc_udp_link_t *l, uint32_t id, const struct sockaddr *addr,
                           socklen_t alen, const uint8_t token[VMMC_UDP_TOKEN_SIZE]);
/* The same for a peer whose wire id @rid differs from its index @id (the
 * keys are derived from the wire ids). VMMC_ERR_EXISTS if @id or @rid is
 * taken by another peer; VMMC_OK if this very peer is registered already. */
int vmmc_udp_link_add_peer_id(vmmc_udp_link_t *l, uint32_t id, uint32_t rid,
                              const struct sockaddr *addr, socklen_t alen,
                              const uint8_t token[VMMC_UDP_TOKEN_SIZE]);
/* Refuse the handshake @h (authenticated with vmmc_udp_link_auth_from, as
 * sent by wire id h->src with link secret @token, from @from): send it a
 * REFUSE under the key of the link from us to it, so that it fails its
 * operations to us at once instead of after its peer timeout. Receive owner
 * (the unknown callback). */
void vmmc_udp_link_refuse(vmmc_udp_link_t *l, const vmmc_udp_hdr_t *h,
                          const struct sockaddr *from, socklen_t fromlen,
                          const uint8_t token[VMMC_UDP_TOKEN_SIZE]);
/* Check @dgram's tag (decoded into @h) as sent by the endpoint of wire id
 * h->src with link secret @token: VMMC_OK or VMMC_ERR_PERMISSION. */
int vmmc_udp_link_auth_from(const vmmc_udp_link_t *l, const uint8_t *dgram,
                            const vmmc_udp_hdr_t *h, const uint8_t token[VMMC_UDP_TOKEN_SIZE]);

/* Send a message of @len bytes (0 allowed) to @peer. Returns when every
 * fragment is handed to the socket (src reusable), ordered after earlier
 * sends to @peer from any thread. Blocks while the window is full, at most
 * until the peer is declared dead. VMMC_ERR_PEER_DEAD, VMMC_ERR_NOT_FOUND
 * (no such peer), VMMC_ERR_ENDPOINT (link closing), VMMC_ERR_SYSTEM. */
int vmmc_udp_link_send(vmmc_udp_link_t *l, uint32_t peer, const vmmc_udp_rec_t *rec,
                       const void *data, size_t len);
/* As vmmc_udp_link_send(), but with @nonblock set it returns VMMC_ERR_AGAIN
 * (sending nothing) when the window has no room for the whole message or
 * the peer reports its receiver busy. */
int vmmc_udp_link_send_ex(vmmc_udp_link_t *l, uint32_t peer, const vmmc_udp_rec_t *rec,
                          const void *data, size_t len, int nonblock);
/* As vmmc_udp_link_send_ex(), for a small whole message (e.g. a short
 * write) that need not leave at once: it may wait in @peer's open batch, to
 * leave with the messages queued after it as one datagram of several
 * records (F_MULTI), when the batch is full, when anything else is sent to
 * @peer (a read, an atomic, a large write, ...), at a flush or sync, when
 * the application polls or goes to sleep (vmmc_udp_link_poll/idle,
 * vmmc_udp_link_push), or VMMC_UDP_COALESCE after it was opened. Order with
 * everything else sent to @peer is kept; @data is reusable on return.
 * rec->flags may hold NOTIFY only. Messages too large for a record, or
 * with coalescing off, are sent as vmmc_udp_link_send_ex() does. */
int vmmc_udp_link_post(vmmc_udp_link_t *l, uint32_t peer, const vmmc_udp_rec_t *rec,
                       const void *data, size_t len, int nonblock);
/* Send @peer's open batch now (e.g. before a signal that rides on it). */
void vmmc_udp_link_push(vmmc_udp_link_t *l, uint32_t peer);
struct iovec;
/* As vmmc_udp_link_send_ex(), the message being the @iovcnt pieces one
 * after another (gathered into the datagrams, no staging copy). */
int vmmc_udp_link_sendv(vmmc_udp_link_t *l, uint32_t peer, const vmmc_udp_rec_t *rec,
                        const struct iovec *iov, int iovcnt, int nonblock);

/* Wait until everything sent to @peer is acknowledged (timeout_ms -1:
 * until acknowledged or dead). VMMC_OK, VMMC_ERR_TIMEOUT, VMMC_ERR_PEER_DEAD. */
int vmmc_udp_link_flush(vmmc_udp_link_t *l, uint32_t peer, int timeout_ms);

/* As flush, but wait until the peer's receive callback has taken
 * everything sent so far (not just received it): after this, a write is in
 * the peer's memory. With @unless_busy, also return (VMMC_OK) once
 * everything is acknowledged and the peer reports its receiver busy (the
 * rest is held there and lands when it takes data again). */
int vmmc_udp_link_sync(vmmc_udp_link_t *l, uint32_t peer, int timeout_ms, int unless_busy);

/* Datagrams queued to @peer so far (its next sequence number): equal
 * readings before and after something mean nothing was sent in between. */
uint32_t vmmc_udp_link_sent(vmmc_udp_link_t *l, uint32_t peer);

/* 1 alive, 0 dead or gone, VMMC_ERR_NOT_FOUND (not registered). */
int vmmc_udp_link_peer_alive(vmmc_udp_link_t *l, uint32_t peer);
/* Declare @peer dead from outside (e.g. the launcher saw it exit). */
void vmmc_udp_link_peer_kill(vmmc_udp_link_t *l, uint32_t peer);

/* Largest payload carried in one datagram. */
size_t vmmc_udp_link_payload_max(const vmmc_udp_link_t *l);

/* Counters. Index-based iteration (name, value) for `vmmc info`, plus a
 * struct for tests. */
typedef struct vmmc_udp_counters {
    uint64_t tx_dgrams, tx_bytes, rx_dgrams, rx_bytes;
    uint64_t tx_data, retransmits, fast_retransmits, rto_expiries;
    uint64_t acks_sent, keepalives_sent, delivered_frags, delivered_bytes;
    uint64_t drop_truncated, drop_magic, drop_version, drop_header, drop_auth;
    uint64_t drop_unknown_peer, drop_bad_token, drop_window, drop_duplicate, drop_bad_ack;
    uint64_t drop_replay, loss_probes;
    uint64_t drop_dead_peer, peers_dead, send_errors, window_waits, deliver_busy;
    /* Handshakes refused (REFUSE sent), and refusals taken from peers. */
    uint64_t refusals_sent, refused_by_peer;
    /* Fragments the progress thread delivered while it lingered after
     * answering a request (vmmc_udp_link_linger): each spared a wake-up. */
    uint64_t linger_delivered;
    /* Coalescing: messages that went in a batch, datagrams that carried
     * such a batch (sender); records delivered from batches, and
     * multi-record datagrams refused for a malformed record (receiver). */
    uint64_t tx_coalesced, tx_batches, rx_records, drop_records;
    /* Times another thread woke the progress thread (its eventfd), and of
     * those, how many to offer data held back for room (a retry). */
    uint64_t thread_wakes, retry_wakes;
} vmmc_udp_counters_t;
void vmmc_udp_link_counters(vmmc_udp_link_t *l, vmmc_udp_counters_t *c);
int vmmc_udp_link_counter_get(vmmc_udp_link_t *l, int i, const char **name, uint64_t *value);

/* The socket bindings in use (tests read the fault injector's stats). */
const vmmc_udp_bindings_t *vmmc_udp_link_bindings(const vmmc_udp_link_t *l);

/* Effective settings (VMMC_UDP_*), loaded on first use. */
typedef struct vmmc_udp_settings {
    uint64_t dgram_size, window, sockbuf, busy_retry_ns;
    uint64_t rto_min_ns, rto_max_ns, rto_init_ns, keepalive_ns, peer_timeout_ns;
    const char *fault;
} vmmc_udp_settings_t;
const vmmc_udp_settings_t *vmmc_udp_settings(void);

#endif
