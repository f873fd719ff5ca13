/* The one internal transport interface.
 *
 * A transport moves bytes from a local buffer into a peer's exported region at
 * an offset. It must deliver writes from one sender to one receiver exactly
 * once and in order ("data, then flag" holds), and report a dead or
 * unreachable peer as an error on every later operation; it never hangs.
 *
 * Transports register themselves: a transport defines its table with
 * VMMC_TRANSPORT(name) = {...} at the start of a line, and the build lists
 * every such table of the library (cmake/tl_list.cmake) in vmmc_tl_all[], in
 * the order of their folders, with each one's slot in vmmc_tl_slot_<name>.
 * The core never names a transport: it opens every registered one on every
 * endpoint (its state lives in the endpoint at its slot, see VMMC_TL_STATE),
 * and picks one per peer when it first learns the peer's address: the one
 * whose reach() gives the highest score (VMMC_TRANSPORT=<name> keeps only
 * that one). The peer keeps the ops; proxies copy the put/get/notify pointers
 * at import time, so the send path makes at most one indirect call after the
 * bounds check and nothing else.
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
struct vmmc_nrec;

/* The interface version a transport was built against; a table of another
 * version, or shorter than the core's, is refused when an endpoint opens. */
#define VMMC_TL_VERSION 1
/* Registered transports at most (slots of the endpoint's state array). */
#define VMMC_TL_MAX 8

/* What a transport can do (vmmc_tl_ops_t.caps). */
enum {
    VMMC_TL_CAP_LOCAL = 1u << 0,  /* reaches processes on this host */
    VMMC_TL_CAP_REMOTE = 1u << 1, /* reaches processes on other hosts */
    VMMC_TL_CAP_MAP = 1u << 2,    /* maps a peer's library memory (stores, no calls) */
    VMMC_TL_CAP_FDS = 1u << 3,    /* passes file descriptors with control messages */
};

typedef struct vmmc_tl_ops {
    size_t size;      /* sizeof(vmmc_tl_ops_t) where it was built */
    unsigned version; /* VMMC_TL_VERSION where it was built */
    const char *name; /* VMMC_TRANSPORT=<name> forces it */
    const char *about;/* one line for `vmmc info` */
    unsigned caps;    /* VMMC_TL_CAP_* */

    /* Does this transport reach the peer whose validated address is @card
     * (a NUL-terminated "key=value;" list) and that lives on this host when
     * @same_host? < 0: no; otherwise a score, the highest wins. Called with
     * the core's peer table locked: no blocking, no locks of the core. */
    int (*reach)(struct vmmc_ep *ep, const char *card, int same_host);
    /* Check one field of a peer's address: 1 this transport's key with a
     * good value, 0 its key with a bad value (*@why says what is wrong), -1
     * not its key. */
    int (*addr_field)(const char *key, size_t klen, const char *val, size_t vlen,
                      const char **why);
    /* After every field passed (@card NUL-terminated): VMMC_OK, or the
     * error (vmmc_error) when the address holds some of this transport's
     * keys but not all it needs. May be NULL. */
    int (*addr_whole)(const char *card, size_t len);

    /* Endpoint set-up before it has peers: open sockets/segments and append
     * "key=value;" pairs to its address (@card, @cap bytes; core/addr.c
     * checks them). */
    int (*ep_open)(struct vmmc_ep *ep, char *card, size_t cap);
    /* After the job's peers are in the table (vmmc_init) or right after
     * ep_open (vmmc_ep_open). May be NULL. */
    int (*ep_start)(struct vmmc_ep *ep);
    /* Finalize, once the control thread stopped and before the core frees
     * the endpoint's imports and exports: stop delivering into them (threads
     * of the transport end here). May be NULL. */
    void (*ep_stop)(struct vmmc_ep *ep);
    /* Finalize, after imports and exports are gone: free the rest. May be
     * NULL. Both run on an endpoint whose ep_open failed part way. */
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

    /* Complete an imported proxy from the exporter's CTL_IMPORT_REP: set
     * px->put/get (and px->base with px->notify when the region can be
     * written by plain stores: the core then stores itself and calls
     * px->notify for a notification). Owns and closes @fds. */
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
    /* Remote atomic (vmmc_atomic_op_t @op on the word at @off; @size is its
     * width, 4 or 8, or'ed with its type, VMMC_ATOMIC_SIGNED/FLOAT < 0x100),
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
    /* Hand every notification record that peers queued for this endpoint
     * to @push, in order per sender; returns how many. Called first in
     * vmmc_progress(). May be NULL (transports that queue notifications
     * through the core themselves). */
    int (*drain)(struct vmmc_ep *ep, void (*push)(struct vmmc_ep *ep, const struct vmmc_nrec *rec));
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

/* What a transport sees of an endpoint: the core's endpoint starts with
 * this view. Each registered transport's state is at its slot (what its
 * ep_open stored there; NULL where it is not open). */
typedef struct vmmc_tl_ep {
    void *state[VMMC_TL_MAX];
} vmmc_tl_ep_t;

/* The core's side of the interface that transports may call (the rest of
 * what shm and udp still use is in core headers). */
/* The value of @key in a NUL-terminated address, copied (NUL-terminated,
 * truncated to @cap) to @out; NULL if the address has no such key. */
const char *vmmc_card_get(const char *card, const char *key, char *out, size_t cap);
/* A peer's validated, NUL-terminated address, and its handle. */
const char *vmmc_tl_peer_addr(const struct vmmc_peer *p);
int vmmc_tl_peer_rank(const struct vmmc_peer *p);

/* Define a transport's table; the build registers it (see above). */
#define VMMC_TRANSPORT(n) \
    extern const int vmmc_tl_slot_##n; \
    const vmmc_tl_ops_t vmmc_tl_##n
/* Its state on endpoint @ep (what its ep_open stored there), or NULL. */
#define VMMC_TL_STATE(ep, n) (((vmmc_tl_ep_t *)(ep))->state[vmmc_tl_slot_##n])

/* Every registered transport, NULL-terminated (generated). */
extern const vmmc_tl_ops_t *const vmmc_tl_all[];

#endif
