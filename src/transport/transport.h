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
 * Control messages (import requests and replies, unexport notices,
 * transport/ctl_msg.h) travel on the transport's control channel (ctl_send).
 *
 * A transport sees this header, transport/ctl_msg.h, util/ and the public
 * headers, nothing of core/ (its build target cannot include it). What it
 * reads of the core's objects is their view below (the core's structs start
 * with it); what it asks of the core goes through the upcall table the
 * endpoint's view holds (vmmc_tl_up_t: deliver incoming data, hand over
 * control messages, report a failed peer, ...), called through the
 * vmmc_tl_* wrappers at the end of this file. The core resolves the region
 * of incoming data, checks bounds and capability, honours redirection and
 * queues notifications. */
#ifndef VMMC_TRANSPORT_TRANSPORT_H
#define VMMC_TRANSPORT_TRANSPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transport/ctl_msg.h"
#include "util/clock.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

struct vmmc_ep;
struct vmmc_peer;
struct vmmc_proxy;
struct vmmc_ctl_msg;
struct iovec;
struct vmmc_redir_ctl;
struct vmmc_nrec;
struct vmmc_tl_proxy;
struct vmmc_tl_peer;

/* The interface version a transport was built against; a table of another
 * version, or shorter than the core's, is refused when an endpoint opens. */
#define VMMC_TL_VERSION 2
/* Registered transports at most (slots of the endpoint's state array). */
#define VMMC_TL_MAX 8
/* Returned by an optional op that leaves this call to the core's own way
 * (ops->atomic): not a vmmc_status_t. */
#define VMMC_TL_DECLINED 0x7fff

/* ---- what a transport sees of the core's objects --------------------- */

/* Peer handles at most on one endpoint. */
#define VMMC_PEER_CHUNK 256
#define VMMC_PEER_CHUNKS 256
#define VMMC_PEERS_MAX (VMMC_PEER_CHUNK * VMMC_PEER_CHUNKS)

/* One notification, as queued for the receiver's progress. */
typedef struct vmmc_nrec {
    uint32_t export_id;
    uint32_t gen;
    int32_t sender;
    uint32_t pad;
    uint64_t offset;
    uint64_t length;
    uint64_t imm;
} vmmc_nrec_t;

/* The endpoint's counters (vmmc_counter_get lists them by these names,
 * counters.c); transports count the ones that happen in them. */
enum {
    CNT_NOTIFY_SENT, CNT_NOTIFY_RUN, CNT_NOTIFY_DROPPED,
    CNT_ASYNC_ENGINE, CNT_WAKEUPS_SENT, CNT_SLEEPS, CNT_IMPORTS, CNT_EXPORTS,
    CNT_REDIRECT_DIRECT, CNT_REDIRECT_COPIED, CNT_CTL_BAD, CNT_NOTIFY_REFUSED,
    CNT_CONNECT_REFUSED, CNT_PEERS_ACCEPTED, CNT_ATOMICS_SERVED, CNT_ATOMICS_REFUSED,
    CNT_NOTIFY_WAITED, CNT_BORROWS, CNT_MAX
};
#define VMMC_COUNT(ep, c, n) \
    atomic_fetch_add_explicit(&((vmmc_tl_ep_t *)(ep))->counters[c], (n), memory_order_relaxed)

/* A peer's states (vmmc_tl_peer_t.state). */
enum { PEER_NEW = 0, PEER_CONNECTING, PEER_UP, PEER_DEAD };

/* Proxy states and kinds (vmmc_tl_proxy_t.state, .kind). */
enum { PX_PENDING = 0, PX_ACTIVE, PX_STALE, PX_FAILED, PX_DEAD,
       PX_FORKED /* inherited through fork(): unusable in the child */ };
enum { PX_KIND_MAPPED = 1, PX_KIND_PVW = 2, PX_KIND_REMOTE = 3 };

typedef int (*vmmc_put_fn)(struct vmmc_tl_proxy *px, size_t off, const void *src, size_t len,
                           int notify, uint64_t imm);

/* The fields of each view, in the order the core's struct starts with
 * them (core.h embeds the same list, so core code names them directly). */
#define VMMC_TL_EP_FIELDS                                                              \
    void *state[VMMC_TL_MAX];    /* each transport's state, at its slot */            \
    const struct vmmc_tl_up *up; /* the core's upcalls */                              \
    int rank, size;              /* in a job (in_job): our rank and its size */        \
    int in_job;                  /* made by vmmc_init() (peers 0..size-1 are ranks) */ \
    pid_t pid;                                                                         \
    char host_id[96];            /* same host id = same kernel and net namespace */    \
    char addr[VMMC_ADDR_MAX];    /* this endpoint's address, NUL-terminated */          \
    size_t addr_len;                                                                   \
    int evfd;                    /* eventfd peers write to wake a sleeping endpoint */ \
    int evfd_mode;               /* vmmc_event_fd() was called: always armed */        \
    /* > 0 while the owner sleeps; a transport may move it into memory that          \
     * peers map (shm's status page), so that they see it */                         \
    _Atomic uint32_t *sleeping;                                                        \
    uint32_t notify_queue;       /* VMMC_NOTIFY_QUEUE: notifications per sender */     \
    _Atomic uint64_t counters[CNT_MAX];

typedef struct vmmc_tl_ep {
    VMMC_TL_EP_FIELDS
} vmmc_tl_ep_t;

#define VMMC_TL_PEER_FIELDS                                                            \
    int rank;                    /* its handle on this endpoint (== rank in a job) */  \
    struct vmmc_ep *ep;                                                                \
    _Atomic int state;           /* PEER_* */                                          \
    const struct vmmc_tl_ops *tl;/* the transport that reaches it */                   \
    pid_t pid;                   /* from its address (confirm it at connect) */        \
    int same_host;                                                                     \
    uint32_t addr_len;                                                                 \
    char *addr;                  /* its address: NUL-terminated, validated */          \
    void *tl_priv;               /* the transport's per-peer state */

typedef struct vmmc_tl_peer {
    VMMC_TL_PEER_FIELDS
} vmmc_tl_peer_t;

/* An imported region. The first line is the send path's (hot); proxy_setup
 * fills put/get/notify, base, and the fields it keeps for itself (raddr,
 * pid, map_base, map_len, rctl). */
#define VMMC_TL_PROXY_FIELDS                                                           \
    /* hot: a send, with its notification, reads only these (64 bytes; the   \
     * core allocates proxies on a cache line of their own) */                 \
    char *base;                  /* mapped region (stores reach it) or NULL */          \
    size_t len;                                                                        \
    _Atomic int state;           /* PX_* */                                            \
    int kind;                    /* PX_KIND_* */                                       \
    struct vmmc_peer *peer;      /* the core peer: VMMC_TL_PEER(px->peer) views it */ \
    vmmc_put_fn put;                                                                   \
    /* with base: queue a notification after the core's stores */                      \
    int (*notify)(struct vmmc_tl_proxy *px, size_t off, size_t len, uint64_t imm, int nonblock); \
    struct vmmc_ep *ep;                                                                \
    uint32_t export_id;                                                                \
    uint32_t gen;                                                                      \
    /* cold */                                                                         \
    int (*get)(struct vmmc_tl_proxy *px, size_t off, void *dst, size_t len);           \
    int rank;                    /* the exporter's handle */                           \
    unsigned flags;              /* its export flags */                                \
    uintptr_t raddr;             /* exporter's address (copy path) */                  \
    pid_t pid;                   /* exporter's process (copy path) */                  \
    void *map_base;              /* mmap result (page aligned) */                      \
    size_t map_len;                                                                    \
    struct vmmc_redir_ctl *rctl; /* redirectable: its control block, mapped */         \
    uint64_t token[2];           /* capability (udp), or the per-rank key secret */    \
    _Atomic int inflight;        /* copy-path operations under way (vmmc_tl_px_enter) */ \
    void *tl_priv;               /* the transport's (proxy_setup; proxy_release frees) */ \
    char name[VMMC_NAME_MAX];

typedef struct vmmc_tl_proxy {
    VMMC_TL_PROXY_FIELDS
} vmmc_tl_proxy_t;
_Static_assert(offsetof(vmmc_tl_proxy_t, gen) + sizeof(uint32_t) <= 64,
               "the fields a send reads fit in one cache line");

#define VMMC_TL_EP(ep) ((vmmc_tl_ep_t *)(ep))
/* How messages name handle @h: "rank" for a rank of the job, else "peer". */
#define VMMC_PEER_WORD(ep, h) \
    (VMMC_TL_EP(ep)->in_job && (h) < VMMC_TL_EP(ep)->size ? "rank" : "peer")
#define VMMC_TL_PEER(p) ((vmmc_tl_peer_t *)(p))
#define VMMC_TL_PX(px) ((vmmc_tl_proxy_t *)(px))

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
    int (*peer_connect)(struct vmmc_ep *ep, struct vmmc_tl_peer *peer, int timeout_ms);
    /* The core declares the peer dead: release what the transport holds. */
    void (*peer_dead)(struct vmmc_ep *ep, struct vmmc_tl_peer *peer);

    /* Send one control message with @nfds (0..2) file descriptors.
     * Transports that cannot pass descriptors are only given nfds == 0
     * (the core sends regions by address/token to such peers). */
    int (*ctl_send)(struct vmmc_ep *ep, struct vmmc_tl_peer *peer,
                    const struct vmmc_ctl_msg *msg, const int *fds, int nfds);

    /* Complete an imported proxy from the exporter's CTL_IMPORT_REP: set
     * px->put/get (and px->base with px->notify when the region can be
     * written by plain stores: the core then stores itself and calls
     * px->notify for a notification). Owns and closes @fds. */
    int (*proxy_setup)(struct vmmc_tl_proxy *px, const struct vmmc_ctl_msg *m, const int *fds,
                       int nfds);
    /* Release what proxy_setup acquired (mappings). May be NULL. */
    void (*proxy_release)(struct vmmc_tl_proxy *px);

    /* Data path. Bounds and permissions are already checked by the core.
     * put: synchronous (src reusable on return), ordered after earlier puts
     * to the same peer. @notify holds the send flags: with VMMC_SEND_NOTIFY
     * the receiver queues a notification (@imm) after the data is in place;
     * with VMMC_SEND_NONBLOCK a full notification queue gives VMMC_ERR_AGAIN. */
    int (*put)(struct vmmc_tl_proxy *px, size_t off, const void *src, size_t len,
               int notify, uint64_t imm);
    int (*get)(struct vmmc_tl_proxy *px, size_t off, void *dst, size_t len);
    /* Gather put: the @iovcnt pieces land one after another from @off, as
     * one put of their total length would (one notification after all of
     * them). NULL: the core stages the pieces into one buffer for put. Not
     * called for redirectable exports (the core stages those too). */
    int (*putv)(struct vmmc_tl_proxy *px, size_t off, const struct iovec *iov, int iovcnt,
                int notify, uint64_t imm);
    /* Remote atomic (vmmc_atomic_op_t @op on the word at @off; @size is its
     * width, 4 or 8, or'ed with its type, VMMC_ATOMIC_SIGNED/FLOAT < 0x100),
     * executed at the target, ordered after earlier puts to the peer;
     * *@old gets the value before (0 unless @fetch). Alignment, bounds and
     * rights are checked by the core here and again by the target. NULL:
     * the core sends the target a control message (CTL_ATOMIC_REQ) that its
     * control thread executes; so does VMMC_TL_DECLINED from it (the
     * transport cannot do this one: no direct access to this import, an
     * operation or type its hardware lacks). Mapped regions never get here:
     * the core applies atomics to the mapping itself. */
    int (*atomic)(struct vmmc_tl_proxy *px, size_t off, int op, int size, uint64_t operand,
                  uint64_t compare, int fetch, uint64_t *old);
    /* Wake the peer if it sleeps (vmmc_signal). */
    int (*signal)(struct vmmc_ep *ep, struct vmmc_tl_peer *peer);
    /* Hand every notification record that peers queued for this endpoint
     * to @push, in order per sender; returns how many. The one way
     * notifications reach the core: called first in vmmc_progress(), and by
     * the upcall drain (a sender waiting for room). @push runs with the
     * core's progress lock held: take no lock of the core in it. May be
     * NULL (a transport that carries no notifications). */
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
    int (*flush_peer)(struct vmmc_ep *ep, struct vmmc_tl_peer *peer);
    /* The transport's counters, index-based like vmmc_counter_get (which
     * lists them after the core's): VMMC_ERR_NOT_FOUND past the end. May be
     * NULL. */
    int (*counter_get)(struct vmmc_ep *ep, int i, const char **name, uint64_t *value);
    /* The endpoint is about to sleep (vmmc_wait, the service thread, an
     * armed event fd): 1 when work is already pending (do not sleep), else
     * 0. A transport that receives in the caller's thread hands receiving
     * back to its own thread here. May be NULL. */
    int (*arm)(struct vmmc_ep *ep);
    /* Exporter side: the core answers @peer's import with @rep (a
     * CTL_IMPORT_REP of PX_KIND_REMOTE with export id, gen, flags, length
     * and addr filled in). The transport may give the peer direct access to
     * the region (register it, once per export) by setting rep->rkey and
     * rep->rkey_ok (and rep->nslot, a word of its own for that importer);
     * it leaves them 0 to keep the peer on the path through the core. Called with the core's endpoint lock held: no lock of the
     * core. May be NULL. */
    void (*export_grant)(struct vmmc_ep *ep, struct vmmc_tl_peer *peer,
                         struct vmmc_ctl_msg *rep);
    /* The export @export_id/@gen ended (unexport, revocation, endpoint
     * close): once this returns, nothing export_grant gave access to
     * reaches its memory. May be NULL. */
    void (*export_end)(struct vmmc_ep *ep, uint32_t export_id, uint32_t gen);
    /* @peer holds no import of export @export_id/@gen any more (its last
     * unimport arrived, or it died): what export_grant gave it may close.
     * Its operations posted before the unimport have been placed (the
     * transport orders the unimport's message after them). Called with
     * the core's endpoint lock held. May be NULL. */
    void (*export_release)(struct vmmc_ep *ep, struct vmmc_tl_peer *peer, uint32_t export_id,
                           uint32_t gen);
} vmmc_tl_ops_t;

/* ---- the core's upcalls ------------------------------------------------ */

/* A control channel's descriptor is ready (the core's control thread). */
typedef void (*vmmc_watch_fn)(struct vmmc_ep *ep, int fd, uint32_t events, void *arg);
/* Redirection's copy callback (@to_user: into the posted buffer at @addr). */
typedef int (*vmmc_redir_copy_fn)(void *ctx, int to_user, uint64_t addr, const void *src,
                                  size_t len);

typedef struct vmmc_tl_up {
    size_t size;      /* sizeof(vmmc_tl_up_t) of the core */
    unsigned version; /* VMMC_TL_VERSION */

    /* Incoming data for export @export_id/@gen, capability @token: the core
     * resolves and checks it (stale, token, bounds, rights), honours
     * redirection and stores (@head_last: VMMC_SEND_HEAD_LAST's order).
     * A vmmc status; nothing is written on error. VMMC_ERR_AGAIN: no room
     * now (a redirectable export's arrival log is full): offer it again. */
    int (*deliver_write)(struct vmmc_ep *ep, uint32_t export_id, uint32_t gen,
                         const uint64_t token[2], uint64_t off, const void *src, size_t len,
                         int head_last);
    /* A remote read (needs VMMC_EXPORT_READ). */
    int (*deliver_read)(struct vmmc_ep *ep, uint32_t export_id, uint32_t gen,
                        const uint64_t token[2], uint64_t off, void *dst, size_t len);
    /* A remote atomic for peer @sender, checked like a write plus the
     * importer list, alignment and, with @fetch, VMMC_EXPORT_READ. */
    int (*deliver_atomic)(struct vmmc_ep *ep, int sender, uint32_t export_id, uint32_t gen,
                          const uint64_t token[2], uint64_t off, int op, int size, int fetch,
                          uint64_t operand, uint64_t compare, uint64_t *old);
    /* Wake the endpoint's sleepers (an event arrived for it). */
    void (*wake)(struct vmmc_ep *ep);
    /* A sender waiting for room in a peer's notification queue: move what
     * peers queued for this endpoint into the core's queue (those peers may
     * wait for room too), without running handlers. */
    void (*drain)(struct vmmc_ep *ep);

    /* An incoming control message from peer @h; @fds belong to the core. */
    void (*ctl_recv)(struct vmmc_ep *ep, int h, const vmmc_ctl_msg_t *msg, size_t len,
                     const int *fds, int nfds);
    /* A message of @type with magic, our handle's rank and pid filled in. */
    void (*ctl_init)(struct vmmc_ep *ep, vmmc_ctl_msg_t *m, uint32_t type);
    /* Have the control thread call @fn when @fd is readable (or closes). */
    int (*ctl_watch)(struct vmmc_ep *ep, int fd, vmmc_watch_fn fn, void *arg);
    void (*ctl_unwatch)(struct vmmc_ep *ep, int fd);

    /* The peer of handle @h (NULL and *@status when there is none). */
    vmmc_tl_peer_t *(*peer_get)(struct vmmc_ep *ep, int h, int *status);
    /* Handles so far (0 .. n-1; never shrinks), and the peer of one of
     * them (no check). */
    int (*peer_count)(const struct vmmc_ep *ep);
    vmmc_tl_peer_t *(*peer_at)(const struct vmmc_ep *ep, int h);
    /* A peer reached us first through transport @via: its handle, known or
     * new (refused, counted, unless the endpoint listens; @addr is checked
     * here). A new one is answered through @via. *@is_new: tell the
     * application with peer_announce once the transport can talk to it. */
    int (*peer_accept)(struct vmmc_ep *ep, const struct vmmc_tl_ops *via, const char *addr,
                       size_t len, pid_t pid, int *is_new);
    void (*peer_announce)(struct vmmc_ep *ep, int h);
    /* The peer failed (@why; @wstatus: its wait status, or -1). */
    void (*peer_failed)(struct vmmc_ep *ep, int h, int wstatus, const char *why);
    /* The error a dead peer's operations get (sets the message). */
    int (*peer_error)(const vmmc_tl_peer_t *peer);
    /* Is @addr a well-formed address? VMMC_OK or VMMC_ERR_INVALID. */
    int (*addr_check)(const void *addr, size_t len);

    /* A proxy's state is not PX_ACTIVE: the precise error. */
    int (*proxy_state_error)(const vmmc_tl_proxy_t *px);
    /* Redirection, for transports that write a redirectable export's bytes
     * themselves: its control block's size, and one write through it. */
    size_t (*redir_ctl_size)(void);
    int (*redir_write)(struct vmmc_redir_ctl *rc, size_t off, const void *src, size_t len,
                       vmmc_redir_copy_fn copy, void *ctx);
} vmmc_tl_up_t;

/* The core's side of the interface that is plain functions (no state). */
/* The value of @key in a NUL-terminated address, copied (NUL-terminated,
 * truncated to @cap) to @out; NULL if the address has no such key. */
const char *vmmc_card_get(const char *card, const char *key, char *out, size_t cap);

/* Define a transport's table; the build registers it (see above). */
#define VMMC_TRANSPORT(n) \
    extern const int vmmc_tl_slot_##n; \
    const vmmc_tl_ops_t vmmc_tl_##n
/* Its state on endpoint @ep (what its ep_open stored there), or NULL. */
#define VMMC_TL_STATE(ep, n) (((vmmc_tl_ep_t *)(ep))->state[vmmc_tl_slot_##n])

/* Every registered transport, NULL-terminated (generated). */
extern const vmmc_tl_ops_t *const vmmc_tl_all[];

/* ---- calling the core ---------------------------------------------------- */
#define VMMC_TL_UP(ep) (VMMC_TL_EP(ep)->up)
static inline int vmmc_tl_deliver_write(struct vmmc_ep *ep, uint32_t id, uint32_t gen,
                                        const uint64_t token[2], uint64_t off, const void *src,
                                        size_t len, int head_last)
{
    return VMMC_TL_UP(ep)->deliver_write(ep, id, gen, token, off, src, len, head_last);
}
static inline int vmmc_tl_deliver_read(struct vmmc_ep *ep, uint32_t id, uint32_t gen,
                                       const uint64_t token[2], uint64_t off, void *dst,
                                       size_t len)
{
    return VMMC_TL_UP(ep)->deliver_read(ep, id, gen, token, off, dst, len);
}
static inline int vmmc_tl_deliver_atomic(struct vmmc_ep *ep, int sender, uint32_t id,
                                         uint32_t gen, const uint64_t token[2], uint64_t off,
                                         int op, int size, int fetch, uint64_t operand,
                                         uint64_t compare, uint64_t *old)
{
    return VMMC_TL_UP(ep)->deliver_atomic(ep, sender, id, gen, token, off, op, size, fetch,
                                          operand, compare, old);
}
static inline void vmmc_tl_wake(struct vmmc_ep *ep)
{
    VMMC_TL_UP(ep)->wake(ep);
}
static inline void vmmc_tl_drain(struct vmmc_ep *ep)
{
    VMMC_TL_UP(ep)->drain(ep);
}
static inline void vmmc_tl_ctl_recv(struct vmmc_ep *ep, int h, const vmmc_ctl_msg_t *m,
                                    size_t len, const int *fds, int nfds)
{
    VMMC_TL_UP(ep)->ctl_recv(ep, h, m, len, fds, nfds);
}
static inline void vmmc_tl_ctl_init(struct vmmc_ep *ep, vmmc_ctl_msg_t *m, uint32_t type)
{
    VMMC_TL_UP(ep)->ctl_init(ep, m, type);
}
static inline int vmmc_tl_ctl_watch(struct vmmc_ep *ep, int fd, vmmc_watch_fn fn, void *arg)
{
    return VMMC_TL_UP(ep)->ctl_watch(ep, fd, fn, arg);
}
static inline void vmmc_tl_ctl_unwatch(struct vmmc_ep *ep, int fd)
{
    VMMC_TL_UP(ep)->ctl_unwatch(ep, fd);
}
static inline vmmc_tl_peer_t *vmmc_tl_peer_get(struct vmmc_ep *ep, int h, int *status)
{
    return VMMC_TL_UP(ep)->peer_get(ep, h, status);
}
static inline int vmmc_tl_peer_count(struct vmmc_ep *ep)
{
    return VMMC_TL_UP(ep)->peer_count(ep);
}
static inline vmmc_tl_peer_t *vmmc_tl_peer_at(struct vmmc_ep *ep, int h)
{
    return VMMC_TL_UP(ep)->peer_at(ep, h);
}
static inline int vmmc_tl_peer_accept(struct vmmc_ep *ep, const struct vmmc_tl_ops *via,
                                      const char *addr, size_t len, pid_t pid, int *is_new)
{
    return VMMC_TL_UP(ep)->peer_accept(ep, via, addr, len, pid, is_new);
}
static inline void vmmc_tl_peer_announce(struct vmmc_ep *ep, int h)
{
    VMMC_TL_UP(ep)->peer_announce(ep, h);
}
static inline void vmmc_tl_peer_failed(struct vmmc_ep *ep, int h, int wstatus, const char *why)
{
    VMMC_TL_UP(ep)->peer_failed(ep, h, wstatus, why);
}
static inline int vmmc_tl_peer_error(const vmmc_tl_peer_t *p)
{
    return VMMC_TL_UP(p->ep)->peer_error(p);
}
static inline int vmmc_tl_addr_check(struct vmmc_ep *ep, const void *addr, size_t len)
{
    return VMMC_TL_UP(ep)->addr_check(addr, len);
}

/* Copy-path operations (process_vm_writev/readv, or a transport's own
 * copy) bracket themselves with these, so that a revocation can wait until
 * none is under way: the importer marks the proxy stale, then waits for
 * inflight to drain (both sequentially consistent, so either the operation
 * sees the stale state or the revocation sees the operation). */
static inline int vmmc_tl_px_enter(vmmc_tl_proxy_t *px)
{
    atomic_fetch_add_explicit(&px->inflight, 1, memory_order_seq_cst);
    if (VMMC_UNLIKELY(atomic_load_explicit(&px->state, memory_order_seq_cst) != PX_ACTIVE)) {
        atomic_fetch_sub_explicit(&px->inflight, 1, memory_order_release);
        return VMMC_TL_UP(px->ep)->proxy_state_error(px);
    }
    return VMMC_OK;
}
static inline void vmmc_tl_px_leave(vmmc_tl_proxy_t *px)
{
    atomic_fetch_sub_explicit(&px->inflight, 1, memory_order_release);
}

#endif
