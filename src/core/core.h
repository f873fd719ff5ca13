/* Core internals: endpoint, peers, exports, proxies, requests.
 *
 * Threads of an endpoint:
 *  - the application's threads (any number) call the API;
 *  - the control thread (ctl.c) blocks in epoll on the bootstrap connection
 *    and the transports' control channels: it serves import requests,
 *    revocations and death notices. Control plane only, never data;
 *  - the copy engine (dma.c), started on the first large asynchronous send:
 *    carries out long transfers while the application computes;
 *  - the optional service thread (wait.c) runs handlers while the
 *    application computes.
 * Lock order: ep->lock before peer->lock; progress_lock is never held while
 * taking ep->lock from the control thread. */
#ifndef VMMC_CORE_CORE_H
#define VMMC_CORE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "core/boot.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/store.h"
#include "vmmc/vmmc.h"

#define VMMC_MKEY_PREFIX "vmmc.mem." /* exports behind memory keys (mkey.c) */
#define VMMC_CACHELINE 64

/* ---- settings (core.c declares the table) ---- */
typedef struct vmmc_core_cfg {
    uint64_t spin_ns;          /* VMMC_SPIN: spin before blocking */
    uint64_t dma_spin_ns;      /* VMMC_DMA_SPIN: copy engine idle spin */
    uint64_t async_inline_max; /* VMMC_ASYNC_INLINE: async sends up to this size complete inline */
    uint64_t pvw_min;          /* unused by sends into mapped memory; documented threshold */
    int64_t notify_queue;      /* VMMC_NOTIFY_QUEUE: records per sender ring */
    int64_t max_exports;       /* VMMC_MAX_EXPORTS */
    const char *transport;     /* VMMC_TRANSPORT: auto | shm | udp */
    int service_thread;        /* VMMC_SERVICE_THREAD */
    uint64_t connect_timeout_ns;
    const char *dma_cpu;       /* VMMC_DMA_CPU: auto | inherit | <cpu> */
    const char *stats;         /* VMMC_STATS: where vmmc_finalize writes the counters */
} vmmc_core_cfg_t;
extern vmmc_core_cfg_t vmmc_core_cfg;

/* ---- peers ---- */

/* A peer handle's state (peer.c). Created by vmmc_init() (one per rank),
 * vmmc_connect() or an accepted connection; never moved or freed before the
 * endpoint closes, so the send path reads it without a lock. What a peer
 * costs while idle is this struct, its address and one slot of the table
 * (docs/core.md, "Endpoints and addresses"). */
typedef struct vmmc_peer {
    union {
        vmmc_tl_peer_t view;      /* what transports see (transport.h): first */
        struct {
            VMMC_TL_PEER_FIELDS
        };
    };
    _Atomic int async_inflight;   /* copy-engine sends not yet complete */
    int dead_status;              /* wait status from the launcher, or -1 */
    uint64_t addr_hash;
    char dead_why[96];
    pthread_mutex_t lock;         /* connect and control sends */
} vmmc_peer_t;

/* The peer table: chunks of pointers, allocated as handles grow; an entry,
 * once published, never moves. */


/* ---- library memory (the translation table of vmmc_mem_alloc regions) ---- */
typedef struct vmmc_mem {
    char *base;
    size_t len;                /* mapped: the requested size rounded up to pages */
    size_t req;                /* requested size: exports must end inside it */
    int fd;                    /* sealed memfd (no shrinking or growing by holders) */
    struct vmmc_export *fdex;  /* the export whose importers hold fd, or NULL */
    struct vmmc_export *kex;   /* export behind vmmc_mem_key(), or NULL */
    int klast;                 /* rank granted last (fast path of vmmc_mem_key) */
    uint64_t ksec[2];          /* klast's grant secret (mkey.c) */
    struct vmmc_mem *next;
} vmmc_mem_t;

/* ---- exports ---- */
struct vmmc_redir_ctl;

struct vmmc_export {
    vmmc_ep_t *ep;
    uint32_t id;
    uint32_t gen;
    char name[VMMC_NAME_MAX];
    char *addr;
    size_t len;
    unsigned flags;
    int *importers;
    int num_importers;
    vmmc_notify_fn_t handler;
    void *handler_arg;
    int memfd;                 /* backing memfd if inside vmmc_mem_alloc memory (or the
                                * library's duplicate of the caller's, own_fd), else -1 */
    size_t memfd_off;          /* offset of addr in that memfd */
    int own_fd;                /* VMMC_EXPORT_PARAM_FD: memfd is ours to close, and the
                                * mappings are the caller's (never re-backed) */
    uint64_t token[2];         /* capability for transports without fd passing */
    struct vmmc_redir_ctl *rctl;/* redirect control block (shared), if REDIRECTABLE */
    int rctl_fd;
    int dead;                  /* unexported: kept as a tombstone until finalize */
    int revoking;              /* unexport waits for importers' acknowledgements */
    int no_reback;             /* memory is being freed: do not re-back it at unexport */
    int mkey;                  /* behind vmmc_mem_key(): importers get per-rank secrets */
    struct vmmc_export *next_dead;
    int *imported_by;          /* ranks that imported it (for revocation); while
                                * revoking, those that have not acknowledged yet */
    int *import_n;             /* beside imported_by: imports a rank holds through a
                                * network transport (unimports and its death release
                                * its grant: export_release) */
    int n_imported_by, cap_imported_by;
    struct vmmc_cq *cq;        /* VMMC_EXPORT_PARAM_CQ: notifications complete here */
    void *cq_context;
};

/* ---- proxies ---- */
struct vmmc_proxy {
    union {
        vmmc_tl_proxy_t view;  /* what transports see (transport.h): first */
        struct {
            VMMC_TL_PROXY_FIELDS
        };
    };
    uint64_t req_id;
    int status;                /* final status if FAILED */
    char errmsg[160];
    uint64_t deadline_ns;      /* import deadline */
    uint32_t map_flags;        /* CTL_MAP_* of the import's reply */
    struct vmmc_proxy *next;   /* ep->proxies list */
};

/* ---- requests (overlay of the public vmmc_request_t) ---- */
/* REQ_FETCH: vmmc_fetch_async (src is the destination); REQ_CQ: an
 * operation posted to a completion queue (cq.c), never a user's request. */
enum { REQ_NONE = 0, REQ_SEND = 0x5e4d, REQ_REDIRECT = 0x7ed1, REQ_FETCH = 0xfe7c, REQ_CQ = 0xc0c0 };
typedef struct vmmc_req_int {
    uint32_t type;
    _Atomic int32_t status;
    struct vmmc_proxy *px;
    size_t off;
    const void *src;
    size_t len;
    uint32_t flags;
    uint32_t slot;             /* redirect slot */
    struct vmmc_req_int *next; /* copy-engine queue */
    uint64_t imm;
} vmmc_req_int_t;
_Static_assert(sizeof(vmmc_req_int_t) <= sizeof(vmmc_request_t), "request overlay too large");

/* ---- progress hooks ---- */
typedef struct vmmc_hook {
    vmmc_progress_fn_t poll, arm;
    void *arg;
} vmmc_hook_t;
#define VMMC_MAX_HOOKS 8

/* ---- the endpoint ---- */
struct vmmc_ep {
    union {
        vmmc_tl_ep_t view;     /* what transports see (transport.h): first */
        struct {
            VMMC_TL_EP_FIELDS
        };
    };
    vmmc_boot_t boot;

    pthread_mutex_t lock;      /* exports, proxies, pending requests */
    pthread_cond_t cond;       /* control replies, barrier, deaths */

    /* Peers (peer.c): handles 0 .. npeers-1, chunks of VMMC_PEER_CHUNK
     * pointers. Writers hold peers_lock; readers load npeers (acquire). */
    vmmc_peer_t **_Atomic peer_chunks[VMMC_PEER_CHUNKS];
    _Atomic int npeers;
    pthread_mutex_t peers_lock;
    _Atomic int listening;     /* vmmc_listen() was called */
    vmmc_accept_fn_t accept_fn;
    void *accept_arg;

    vmmc_export_t **exports;   /* by id; max_exports entries */
    uint32_t max_exports;
    uint32_t export_gen;
    vmmc_proxy_t *proxies;
    uint64_t next_req_id;
    void *pending_imports;     /* imports waiting for a name to be exported */
    void *demand;              /* vmmc_export_on_demand() prefixes (demand.c), under lock */
    vmmc_export_t *dead_exports;/* unexported handles, freed at finalize */
    vmmc_proxy_t *dead_proxies; /* unimported handles, freed at finalize */

    vmmc_mem_t *mem;           /* library memory */
    pthread_mutex_t mem_lock;
    struct vmmc_mkey_cache *_Atomic mkeys; /* translation cache (mkey.c), made on first use */

    /* barrier (under lock): epochs asked for, completed, and completed
     * before the bootstrap reported any death (only those succeed) */
    uint64_t barrier_epoch, barrier_done, barrier_ok;
    int launcher_closed;
    int boot_dead_rank;        /* first rank the bootstrap reported dead, or -1 */

    /* deaths detected by any means (the bootstrap's: boot_dead_rank) */
    _Atomic uint64_t deaths;

    /* control thread */
    void *ctl;                 /* its watches (ctl.c) */
    int epfd;
    int ctl_wake_fd;           /* eventfd to stop the control thread */
    pthread_t ctl_thread;
    int ctl_running;

    /* waiting (wait.c). One eventfd per endpoint, written by peers and local
     * events when *sleeping > 0, read only by its owner; other sleepers
     * wait on the wake_seq futex and are woken by whoever handled events. */
    _Atomic uint32_t sleeping_local;
    _Atomic int evfd_owner;    /* WAIT_OWN_*: who may read evfd now */
    _Atomic int owner_asleep;  /* a waiter that owns evfd is in poll() on it */
    _Atomic uint32_t sleepers; /* application threads asleep or about to sleep */
    _Atomic uint32_t followers;/* of those, on the futex */
    _Atomic uint32_t wake_seq; /* futex word of the followers */
    _Atomic uint64_t work;     /* events handled by progress so far (written under progress_lock) */
    _Atomic int app_signalled; /* app_evfd holds an unread signal */
    int app_fd;                /* vmmc_event_fd(): an epoll set of app_evfd (and evfd) */
    int app_evfd;              /* signalled when the application should call vmmc_progress */

    /* progress */
    pthread_mutex_t progress_lock;
    _Atomic int progress_missed; /* a thread about to sleep found a pass under way (progress.c) */
    _Atomic int notify_blocked;
    vmmc_nrec_t *pending;      /* FIFO of notifications not yet run */
    size_t pend_head, pend_tail, pend_cap;
    vmmc_hook_t hooks[VMMC_MAX_HOOKS];
    _Atomic int nhooks;
    /* The open transports' drain and progress operations in registry
     * order, NULL-terminated: set once every transport is open (tl.c), so
     * progress calls them without walking the registry. */
    int (*tl_drain[VMMC_TL_MAX + 1])(vmmc_ep_t *ep, void (*push)(vmmc_ep_t *ep,
                                                                 const struct vmmc_nrec *rec));
    int (*tl_progress[VMMC_TL_MAX + 1])(vmmc_ep_t *ep);
    pthread_mutex_t hooks_lock; /* arm calls vs. hook add/remove (poll calls hold progress_lock) */
    uint64_t spin_ns;

    /* service thread */
    pthread_t service_thread;
    _Atomic int service_run;
    int service_started;
    int (*spin_gate)(void *arg); /* vmmc_service_spin_gate(): spin only while it says so */
    void *spin_gate_arg;
    _Atomic uint32_t svc_state;  /* SVC_*: running, asleep on evfd, or lent (vmmc_service_lend) */
    _Atomic int svc_parked;      /* the service thread waits on svc_state for the lender */

    /* copy engine */
    pthread_t dma_thread;
    int dma_started;
    pthread_mutex_t dma_lock;
    pthread_cond_t dma_cond;
    vmmc_req_int_t *dma_head, *dma_tail;
    _Atomic int dma_sleeping;
    _Atomic int dma_stop;
    _Atomic int dma_pending;

    int closing;
    _Atomic int forked;        /* this process is a child of fork(): the endpoint is the parent's */
    struct vmmc_counters *published; /* the counters file (counters.c), or NULL */
};


/* ---- internal API between core files ---- */
/* Value of @key in a business card "k1=v1;k2=v2;" (NULL if absent). */
const char *vmmc_card_get(const char *card, const char *key, char *out, size_t cap);

/* addr.c: is @addr (@len bytes, no NUL needed) a well-formed address?
 * VMMC_OK, or VMMC_ERR_INVALID with the reason. Checks every byte. */
int vmmc_addr_check(const void *addr, size_t len);

/* The transport registry (tl.c), and the core's upcalls (tl_up.c). */
extern const vmmc_tl_up_t vmmc_tl_up;
#define VMMC_TL_CAN_MAP(tl) (((tl)->caps & VMMC_TL_CAP_MAP) != 0)
/* Importers through @tl may write an export without us in the path (a
 * mapping, or RMA a transport granted with export_grant): an unexport waits
 * for their revocation acknowledgements before the memory is withdrawn. */
#define VMMC_TL_DIRECT(tl) (VMMC_TL_CAN_MAP(tl) || (tl)->export_grant != NULL)
/* Is VMMC_TRANSPORT "auto" or a registered transport's name? */
int vmmc_tl_check_choice(void);
/* Open every registered transport, appending to the card at @card. */
int vmmc_tl_open_all(vmmc_ep_t *ep, char *card, size_t cap);
int vmmc_tl_start_all(vmmc_ep_t *ep);
void vmmc_tl_stop_all(vmmc_ep_t *ep);
void vmmc_tl_close_all(vmmc_ep_t *ep);
/* An export ended: every open transport withdraws what it granted for it. */
void vmmc_tl_export_end(vmmc_ep_t *ep, uint32_t export_id, uint32_t gen);
int vmmc_tl_listen_all(vmmc_ep_t *ep);
int vmmc_tl_flush_all(vmmc_ep_t *ep);
/* The endpoint is about to sleep: 1 when a transport has work pending. */
int vmmc_tl_arm_all(vmmc_ep_t *ep);
/* The transport that reaches the peer at @card best, or NULL. */
const vmmc_tl_ops_t *vmmc_tl_pick(vmmc_ep_t *ep, const char *card, int same_host);
/* Transport counters after the core's: index @i among all open ones. */
int vmmc_tl_counter_get(vmmc_ep_t *ep, int i, const char **name, uint64_t *value);
/* The @i-th registered transport's "transport.<name>" fact for vmmc_info_get. */
int vmmc_tl_info(int i, const char **key, const char **value);
/* Check a field of an address no core key owns: as addr_field. */
int vmmc_tl_addr_field(const char *k, size_t kl, const char *v, size_t vl, const char **why);
int vmmc_tl_addr_whole(const char *card, size_t len);
uint64_t vmmc_addr_hash(const void *addr, size_t len);

/* peer.c */
/* The peer of handle @h (NULL and *status set when there is none). */
vmmc_peer_t *vmmc_peer_get(vmmc_ep_t *ep, int h, int *status);
static inline int vmmc_peer_count_int(const vmmc_ep_t *ep)
{
    return atomic_load_explicit(&((vmmc_ep_t *)ep)->npeers, memory_order_acquire);
}
/* The peer of handle @h, known to be < vmmc_peer_count_int(). */
static inline vmmc_peer_t *vmmc_peer_at(const vmmc_ep_t *ep, int h)
{
    vmmc_peer_t **c = atomic_load_explicit(&((vmmc_ep_t *)ep)->peer_chunks[h / VMMC_PEER_CHUNK],
                                           memory_order_acquire);
    return __atomic_load_n(&c[h % VMMC_PEER_CHUNK], __ATOMIC_ACQUIRE);
}
/* Add a peer for a checked address (@pid: from the bootstrap or 0 to take
 * the address's); no lookup. Returns the handle or an error. */
int vmmc_peer_insert(vmmc_ep_t *ep, const char *addr, size_t len, pid_t pid);
/* The handle of the peer with this address, or -1. */
int vmmc_peer_find(vmmc_ep_t *ep, const char *addr, size_t len);
/* A peer reached us first (its address @addr is checked; the transport
 * established that process @pid, or the udp link peer, speaks for it):
 * its handle, known or new. New ones are refused (counted) unless the
 * endpoint listens; *is_new says whether to announce it with
 * vmmc_peer_announce() once the transport can talk to it. */
int vmmc_peer_accept(vmmc_ep_t *ep, const vmmc_tl_ops_t *via, const char *addr, size_t len,
                     pid_t pid, int *is_new);
/* Run the accept callback for a new peer (control or progress thread). */
void vmmc_peer_announce(vmmc_ep_t *ep, int h);
void vmmc_peer_table_free(vmmc_ep_t *ep);
int vmmc_peer_connect(vmmc_ep_t *ep, vmmc_peer_t *peer, int timeout_ms);
void vmmc_peer_mark_dead(vmmc_ep_t *ep, int rank, int wstatus, const char *why);
int vmmc_peer_error(const vmmc_peer_t *peer);
/* The allocation that holds @addr; caller holds ep->mem_lock. */
vmmc_mem_t *vmmc_mem_at(vmmc_ep_t *ep, const void *addr);
void vmmc_mem_release(vmmc_mem_t *m);
/* Move @m's pages to a fresh memfd at the same address, so the descriptor
 * importers were given reaches nothing of this process any more. Caller
 * holds ep->mem_lock. */
int vmmc_mem_reback(vmmc_mem_t *m);
void vmmc_mkey_cache_destroy(vmmc_ep_t *ep);

/* Wake this endpoint's sleepers (after queueing an event for it). */
void vmmc_ep_wake(vmmc_ep_t *ep);
/* The same for an event that only waiting application threads look at
 * (barrier or copy-engine completion): progress need not run for it, so a
 * sleeping service thread is left alone. */
void vmmc_ep_wake_waiters(vmmc_ep_t *ep);
/* A sender waiting for room in a peer's notification queue: move the
 * records peers queued for this endpoint into its pending queue (those
 * peers may be waiting for room too), without running handlers or hooks. */
void vmmc_progress_drain(vmmc_ep_t *ep);
int vmmc_progress_before_sleep(vmmc_ep_t *ep); /* progress.c: a pass under way passes again */
void vmmc_wait_fence_all(void); /* wait.c: a full barrier in every thread of the process */

int vmmc_ctl_start(vmmc_ep_t *ep);
void vmmc_ctl_stop(vmmc_ep_t *ep);
int vmmc_ctl_watch(vmmc_ep_t *ep, int fd, vmmc_watch_fn fn, void *arg);
void vmmc_ctl_unwatch(vmmc_ep_t *ep, int fd);
void vmmc_ctl_fork_prepare(vmmc_ep_t *ep);
void vmmc_ctl_fork_parent(vmmc_ep_t *ep);
void vmmc_ctl_fork_child(vmmc_ep_t *ep);

/* wait.c */
enum { WAIT_OWN_NONE = 0, WAIT_OWN_WAITER, WAIT_OWN_SERVICE, WAIT_OWN_PROGRESS };
/* ep->svc_state */
enum { SVC_RUN = 0, SVC_ASLEEP, SVC_LENT };
extern int vmmc_wait_membar; /* sleepers fence every thread (membarrier), so workers need none */
void vmmc_wait_init(vmmc_ep_t *ep);
void vmmc_wait_fini(vmmc_ep_t *ep);
void vmmc_wait_work_slow(vmmc_ep_t *ep) VMMC_COLD;
void vmmc_wait_app_reset(vmmc_ep_t *ep);
int vmmc_hooks_armed(vmmc_ep_t *ep);
int vmmc_in_progress(const vmmc_ep_t *ep);

/* Progress handled @n events (called with progress_lock held): count them,
 * and wake application threads that sleep meanwhile. A sleeper announces
 * itself, then fences every thread of the process (membarrier) before it
 * checks its condition, so here a compiler barrier orders our stores (the
 * handlers' effects, work) before the load of sleepers. */
/* The hot side of a Dekker pair with a sleeper (which fences every thread
 * with membarrier where the kernel has it): a compiler barrier, or a full
 * fence where the sleeper cannot do that. */
static inline void vmmc_wait_hot_fence(void)
{
    if (VMMC_UNLIKELY(!vmmc_wait_membar))
        atomic_thread_fence(memory_order_seq_cst);
    else
        atomic_signal_fence(memory_order_seq_cst);
}

static inline void vmmc_wait_note_work(vmmc_ep_t *ep, int n)
{
    uint64_t w = atomic_load_explicit(&ep->work, memory_order_relaxed);
    atomic_store_explicit(&ep->work, w + (uint64_t)n, memory_order_relaxed);
    vmmc_wait_hot_fence();
    if (VMMC_UNLIKELY(atomic_load_explicit(&ep->sleepers, memory_order_relaxed) != 0))
        vmmc_wait_work_slow(ep);
}

int vmmc_dma_submit(vmmc_ep_t *ep, vmmc_req_int_t *r);
/* Queue @r (its peer's async_inflight already counted) to the copy engine;
 * on failure undo the count. */
int vmmc_dma_post(vmmc_proxy_t *px, vmmc_req_int_t *r);
void vmmc_dma_stop(vmmc_ep_t *ep);
int vmmc_send_wait_async(vmmc_peer_t *peer);
int vmmc_wait_until(vmmc_ep_t *ep, int (*done)(void *), void *arg, int timeout_ms);
void vmmc_service_stop_internal(vmmc_ep_t *ep);
/* fork.c: endpoints inherited through fork() fail every call in the child. */
int vmmc_fork_track(vmmc_ep_t *ep);
void vmmc_fork_untrack(vmmc_ep_t *ep);
int vmmc_fork_error(const vmmc_ep_t *ep, const char *what) VMMC_COLD;
/* Leave [addr, addr+len) out of children (memory peers reach). */
void vmmc_fork_exclude(void *addr, size_t len);
#define VMMC_FORK_CHECK(ep)                                                              \
    do {                                                                                 \
        if (VMMC_UNLIKELY((ep) && atomic_load_explicit(&(ep)->forked, memory_order_relaxed))) \
            return vmmc_fork_error((ep), __func__);                                      \
    } while (0)

/* counters.c: publish the endpoint's counters for `vmmc info --counters`
 * (after the control thread runs; close after it stopped). */
typedef struct vmmc_counters vmmc_counters_t;
int vmmc_counters_open(vmmc_ep_t *ep);
void vmmc_counters_close(vmmc_ep_t *ep);

/* stats.c: write the endpoint's counters where VMMC_STATS says (at finalize). */
void vmmc_stats_dump(vmmc_ep_t *ep);

/* redirect.c */
int vmmc_redir_create(vmmc_export_t *ex);
void vmmc_redir_destroy(vmmc_export_t *ex);
int vmmc_redir_write(struct vmmc_redir_ctl *rc, size_t off, const void *src, size_t len,
                     vmmc_redir_copy_fn copy, void *ctx);
size_t vmmc_redir_ctl_size(void);

/* Proxy state check failed: produce the precise error. */
int vmmc_proxy_state_error(const vmmc_proxy_t *px) VMMC_COLD;

/* Copy-path operations (process_vm_writev/readv) bracket themselves with
 * these, so that a revocation can wait until none is under way: the
 * importer marks the proxy stale, then waits for inflight to drain (both
 * sequentially consistent, so either the operation sees the stale state or
 * the revocation sees the operation). */
static inline int vmmc_proxy_enter(vmmc_proxy_t *px)
{
    atomic_fetch_add_explicit(&px->inflight, 1, memory_order_seq_cst);
    if (VMMC_UNLIKELY(atomic_load_explicit(&px->state, memory_order_seq_cst) != PX_ACTIVE)) {
        atomic_fetch_sub_explicit(&px->inflight, 1, memory_order_release);
        return vmmc_proxy_state_error(px);
    }
    return VMMC_OK;
}
static inline void vmmc_proxy_leave(vmmc_proxy_t *px)
{
    atomic_fetch_sub_explicit(&px->inflight, 1, memory_order_release);
}

/* send.c: the checks of vmmc_fetch (state, bounds, dead peer, rights), and
 * the fetch itself once they passed (waits for earlier async sends). */
int vmmc_send_check(const vmmc_proxy_t *px, size_t off, const void *src, size_t len,
                    unsigned flags);
/* VMMC_SEND_FENCE in *@flags: fence every peer now (vmmc_fence(ep, -1)) and
 * take the flag out of *@flags (the transports never see it). */
int vmmc_send_fence_first(vmmc_proxy_t *px, unsigned *flags);
int vmmc_fetch_check(vmmc_proxy_t *px, size_t off, void *dst, size_t len);
int vmmc_fetch_now(vmmc_proxy_t *px, size_t off, void *dst, size_t len);

/* atomic.c */
/* Check a vmmc_atomic before anything moves (@fetch: the old value is wanted). */
int vmmc_atomic_check(const vmmc_proxy_t *px, size_t off, int op, int size, int fetch);
/* Carry out a checked atomic, without waiting for the peer's asynchronous
 * operations (the copy engine runs them in order) ... */
int vmmc_atomic_exec(vmmc_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                     uint64_t compare, uint64_t *old);
/* ... and after them (the caller's thread). */
int vmmc_atomic_now(vmmc_proxy_t *px, size_t off, int op, int size, uint64_t operand,
                    uint64_t compare, uint64_t *old);
/* The word's arithmetic (validation, vmmc_atomic_apply): atomic_word.h. */
struct vmmc_ctl_msg;
/* Control thread: a peer's atomic request (executed here) and a reply. */
void vmmc_atomic_serve(vmmc_ep_t *ep, int rank, const struct vmmc_ctl_msg *m);
void vmmc_atomic_replied(vmmc_ep_t *ep, int rank, const struct vmmc_ctl_msg *m);

/* cq.c */
/* Copy engine: carry out the queued operation @r and complete it into its
 * queue (after which @r belongs to the queue again). */
void vmmc_cq_run(vmmc_req_int_t *r);
/* Progress: a notification for an export with a queue. When the queue is
 * full it waits in the queue's backlog, in order, until a poll frees a slot;
 * VMMC_ERR_NOMEM only if the backlog cannot grow. */
int vmmc_cq_notify(vmmc_export_t *ex, const vmmc_nrec_t *rec);
void vmmc_cq_ref(struct vmmc_cq *cq, int delta);

/* mkey.c: the secret that rank @rank's keys for @ex are authenticated with. */
void vmmc_mkey_grant_secret(const vmmc_export_t *ex, int rank, uint64_t out[2]);

#endif
