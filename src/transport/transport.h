/* The one internal transport interface.
 *
 * A transport moves bytes from a local buffer into a peer's exported region at
 * an offset. It must deliver writes from one sender to one receiver exactly
 * once and in order ("data, then flag" holds), and report a dead or
 * unreachable peer as an error on every later operation; it never hangs.
 *
 * The core picks a transport per peer when it first contacts the peer (same
 * host: shm, otherwise udp; VMMC_TRANSPORT=udp forces udp) and stores the ops
 * in the peer; proxies copy the put/get pointers at import time, so the send
 * path makes one indirect call after the bounds check and nothing else.
 *
 * Control messages (import requests and replies, unexport notices) travel on
 * the transport's control channel (ctl_send). Incoming control messages are
 * handed to vmmc_ctl_recv() (core/ctl.h). Incoming data for a region is
 * applied with the core helpers in core/deliver.h, which resolve the region,
 * check bounds and capability, honour redirection and queue notifications. */
#ifndef VMMC_TRANSPORT_TRANSPORT_H
#define VMMC_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

struct vmmc_ep;
struct vmmc_peer;
struct vmmc_proxy;
struct vmmc_ctl_msg;
struct iovec;

typedef struct vmmc_tl_ops {
    const char *name;

    /* Endpoint set-up before it has peers: open sockets/segments and append
     * "key=value;" pairs to its address (@card, @cap bytes; core/addr.c
     * checks them). */
    int (*ep_open)(struct vmmc_ep *ep, char *card, size_t cap);
    /* After the job's peers are in the table (vmmc_init) or right after
     * ep_open (vmmc_ep_open). May be NULL. */
    int (*ep_start)(struct vmmc_ep *ep);
    void (*ep_close)(struct vmmc_ep *ep);

    /* vmmc_listen() was called: be ready for peers that reach this
     * endpoint first (they come in through vmmc_peer_accept()). May be NULL. */
    int (*listen)(struct vmmc_ep *ep);
    /* Establish the peer (lazily, on first use). Must be idempotent. */
    int (*peer_connect)(struct vmmc_ep *ep, struct vmmc_peer *peer, int timeout_ms);
    /* The core declares the peer dead: release what the transport holds. */
    void (*peer_dead)(struct vmmc_ep *ep, struct vmmc_peer *peer);

    /* Send one control message with @nfds (0..2) file descriptors.
     * Transports that cannot pass descriptors are only given nfds == 0
     * (the core sends regions by address/token to such peers). */
    int (*ctl_send)(struct vmmc_ep *ep, struct vmmc_peer *peer,
                    const struct vmmc_ctl_msg *msg, const int *fds, int nfds);
    /* Can this transport map a peer's memory (automatic update, zero-copy
     * into library memory)? shm: yes; udp: no. */
    int can_map;

    /* Complete an imported proxy from the exporter's CTL_IMPORT_REP: set
     * px->put/get (and px->base when the region can be written by plain
     * stores). Owns and closes @fds. */
    int (*proxy_setup)(struct vmmc_proxy *px, const struct vmmc_ctl_msg *m, const int *fds,
                       int nfds);
    /* Release what proxy_setup acquired (mappings). May be NULL. */
    void (*proxy_release)(struct vmmc_proxy *px);

    /* Data path. Bounds and permissions are already checked by the core.
     * put: synchronous (src reusable on return), ordered after earlier puts
     * to the same peer. @notify holds the send flags: with VMMC_SEND_NOTIFY
     * the receiver queues a notification (@imm) after the data is in place;
     * with VMMC_SEND_NONBLOCK a full notification queue gives VMMC_ERR_AGAIN. */
    int (*put)(struct vmmc_proxy *px, size_t off, const void *src, size_t len,
               int notify, uint64_t imm);
    int (*get)(struct vmmc_proxy *px, size_t off, void *dst, size_t len);
    /* Gather put: the @iovcnt pieces land one after another from @off, as
     * one put of their total length would (one notification after all of
     * them). NULL: the core stages the pieces into one buffer for put. Not
     * called for redirectable exports (the core stages those too). */
    int (*putv)(struct vmmc_proxy *px, size_t off, const struct iovec *iov, int iovcnt,
                int notify, uint64_t imm);
    /* Remote atomic (vmmc_atomic_op_t @op on the @size-byte word at @off),
     * executed at the target, ordered after earlier puts to the peer;
     * *@old gets the value before (0 unless @fetch). Alignment, bounds and
     * rights are checked by the core here and again by the target. NULL:
     * the core sends the target a control message (CTL_ATOMIC_REQ) that its
     * control thread executes. Mapped regions never get here: the core
     * applies atomics to the mapping itself. */
    int (*atomic)(struct vmmc_proxy *px, size_t off, int op, int size, uint64_t operand,
                  uint64_t compare, int fetch, uint64_t *old);
    /* Wake the peer if it sleeps (vmmc_signal). */
    int (*signal)(struct vmmc_ep *ep, struct vmmc_peer *peer);
    /* Drive the transport from the caller's thread; returns events handled.
     * May be NULL (transports with their own progress thread). */
    int (*progress)(struct vmmc_ep *ep);
    /* Wait until every put issued so far has been applied by its receiver
     * (called before a barrier). NULL when puts land before they return. */
    int (*flush)(struct vmmc_ep *ep);
    /* The same for one peer (vmmc_fence): VMMC_OK once every put issued to
     * it so far was applied, or the peer's error. NULL when puts land before
     * they return. */
    int (*flush_peer)(struct vmmc_ep *ep, struct vmmc_peer *peer);
    /* The transport's counters, index-based like vmmc_counter_get (which
     * lists them after the core's): VMMC_ERR_NOT_FOUND past the end. May be
     * NULL. */
    int (*counter_get)(struct vmmc_ep *ep, int i, const char **name, uint64_t *value);
} vmmc_tl_ops_t;

extern const vmmc_tl_ops_t vmmc_tl_shm;
extern const vmmc_tl_ops_t vmmc_tl_udp;

#endif
