/* libvmmc-dsm internals: the state of one rank, the message format and the
 * functions the objects of src/dsm/ call in each other.
 *
 * One lock (dsm.lock) guards every table; the application threads (faults,
 * API calls) and the service thread (notification handlers) take it, change
 * state, *post* messages into the rank's outbox, and send them as they drop
 * it (dsm_unlock_flush): one thread at a time sends the outbox in posting
 * order, never under the lock, messages to this rank itself are handled by
 * the flushing thread, and the threads a change woke run once all is sent.
 * docs/dsm.md tells the protocol. */
#ifndef VMMC_DSM_INT_H
#define VMMC_DSM_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "vmmc/dsm.h"
#include "vmmc/vmmc.h"

#define DSM_PAGE 4096u
#define DSM_ALIGN 16u
#define DSM_MAX_RANKS 64   /* copysets are 64-bit masks */
#define DSM_MAX_VIEWS 64
#define DSM_MAX_CHUNK 65534

/* ---- messages: a notification's 64-bit immediate value --------------------
 * Every message is a vmmc_send_imm(VMMC_SEND_NOTIFY) to the destination's
 * export of its privileged view: length 0 for control messages, the
 * minipage's bytes at their own offset for DATA. Layout of the immediate:
 *   bits 0-5 type, 6-15 rank, 16-41 minipage id, 42-63 aux (22 bits)
 * except MALLOC, MALLOC_REP and BCAST, which pack their own fields. */
enum {
    M_REQ_R = 1, M_REQ_W, /* faulter -> manager: rank, raw id */
    M_FWD_R, M_FWD_W,     /* manager -> owner: rank = requester, id */
    M_FWD_PUSH,           /* manager -> owner: send a read copy to rank */
    M_DATA_R, M_DATA_W,   /* owner -> requester: id, aux bit 0 = pushed */
    M_GRANT_R, M_GRANT_W, /* manager -> requester: access without data */
    M_NACK,               /* manager -> faulter: raw id is no minipage */
    M_INV, M_ACK,         /* manager -> holder, holder -> manager */
    M_DONE,               /* requester -> manager: the minipage is open */
    M_MALLOC, M_MALLOC_REP, M_FREE, M_FREE_REP, M_PUSH, M_PUSH_REP,
    M_LOCK, M_LOCK_GRANT, M_UNLOCK, M_BAR, M_BAR_GO, M_BCAST,
    M_REQ_D,              /* faulter -> the owner it knows: a read, one hop */
    M_NOTOWN,             /* that rank -> faulter: not (now) the owner */
    M_DINV, M_DACK,       /* owner -> its direct readers, and back */
    M_CREATE,             /* allocator -> home: a new minipage (see alloc.c) */
    M_RELEASE,            /* home -> allocator: a freed minipage's space */
    M_WHERE,              /* home -> allocator: a request for an id it does not
                             hold (a large allocation's later page?); rank =
                             requester, aux = type << 16 | the request's aux */
    M_NTYPES
};

static inline uint64_t dsm_imm(unsigned type, unsigned rank, uint32_t id, uint32_t aux)
{
    return (uint64_t)(type & 63) | (uint64_t)(rank & 1023) << 6 |
           (uint64_t)(id & 0x3ffffff) << 16 | (uint64_t)(aux & 0x3fffff) << 42;
}
#define IMM_TYPE(x) ((unsigned)((x) & 63))
#define IMM_RANK(x) ((int)(((x) >> 6) & 1023))
#define IMM_ID(x) ((uint32_t)(((x) >> 16) & 0x3ffffff))
#define IMM_AUX(x) ((uint32_t)((x) >> 42))
#define DSM_MAX_IDS (1u << 26)

/* MALLOC: type | chunk+1 (16 bits, 0 = none) << 6 | size (42 bits) << 22.
 * MALLOC_REP: type | status (4 bits) << 6 | extends (1) << 10 |
 *             view (7) << 11 | area offset (40) << 18. */
enum { MREP_OK = 0, MREP_NOSPACE = 1, MREP_TOOBIG = 2, MREP_BADCHUNK = 3 };

/* ---- local access to a (page, view) pair: acc[page * views + view] ---- */
enum {
    ACC_NONE = 0, ACC_R = 1, ACC_W = 2, ACC_MASK = 3,
    ACC_INFLIGHT = 4, /* a thread of this rank asked the manager */
    ACC_NACK = 8,     /* the manager said: no minipage there */
    ACC_OWNER = 16    /* head entries: this rank owns the minipage */
};

/* Extent of a minipage whose head is (page, view), as this rank knows it. */
typedef struct dsm_ext {
    uint32_t len;     /* bytes */
    uint16_t off;     /* offset in its first page */
    uint16_t pad;
} dsm_ext_t;

typedef struct dsm_out {
    int dest;
    uint64_t imm;
    size_t off, len; /* DATA: bytes of the privileged view */
} dsm_out_t;

typedef struct dsm_mgr dsm_mgr_t; /* manager.c (rank 0) */

typedef struct dsm_state {
    pthread_mutex_t lock;
    pthread_cond_t cond;  /* any change an application thread may wait for */
    int wake_pending;     /* dsm_wake() since the lock was taken: broadcast at dsm_unlock() */
    int active;
    int me, n;
    int page_mode;
    unsigned views;       /* application views */
    size_t size;          /* bytes of the area (whole pages) */
    size_t npages;
    char *base;           /* view v at base + v * size; privileged at views */
    char *priv;
    int memfd;
    vmmc_ep_t *ep;
    vmmc_export_t *ex;    /* the privileged view, notifications to dsm_notify */
    vmmc_export_t *boot_ex;
    vmmc_export_t *cpus_ex; /* this rank's processors, until init ends */
    vmmc_proxy_t **px;    /* px[r]: rank r's privileged view */
    uint8_t *acc;         /* npages * views */
    dsm_ext_t *ext;       /* npages * views, heads only */
    int8_t *hint;         /* heads: rank + 1 of the owner last heard of, or 0 */
    uint64_t *dset;       /* heads owned here: ranks given a copy directly */
    dsm_mgr_t *mgr;       /* the minipages this rank is home of (+ placement on rank 0) */
    int spread;           /* VMMC_DSM_MANAGERS=all: homes spread over the ranks */
    int funneled;         /* VMMC_DSM_THREADS=funneled */
    pthread_t init_thread; /* the thread that called vmmc_dsm_init() */
    /* The faulting page opened before the answer (funneled; fault.c):
     * early_want until the waiting thread opens it, early_open until a
     * dsm_protect() covers it (lock held). */
    int early_want, early_open, early_acc;
    uint32_t early_id;
    struct sigaction old_segv;
    int broken;           /* a rank died or a send failed */
    char broken_why[256];
    /* replies an application thread waits for */
    int malloc_done;
    uint64_t malloc_rep;
    int free_done, free_status;
    int push_done, push_status;
    uint8_t lock_held[VMMC_DSM_LOCKS];
    uint8_t lock_granted[VMMC_DSM_LOCKS];
    uint64_t bar_epoch;
    int bcast_have;
    uint64_t bcast_val;
    atomic_int sending;   /* posted messages not yet sent */
    int waiters;          /* application threads in dsm_wait_locked */
    int spin_gated;       /* VMMC_DSM_SERVICE_SPIN=waiting */
    int wait_poll;        /* waiters poll (VMMC_DSM_WAIT_POLL, every rank local) */
    int woken;            /* waiters were woken and none has run yet (atomic) */
    uint64_t wake_gen;    /* broadcasts of dsm.cond so far (lock held) */
    uint64_t wait_since;  /* when waiters last rose from 0 */
    pthread_mutex_t api;  /* one API call at a time */
    /* counters */
    _Atomic uint64_t st_read_faults, st_write_faults, st_served, st_inval, st_forwards,
        st_bytes_in, st_delay_sum, st_delay_max, st_delay_count, st_hist[16], st_bad_msgs,
        st_serve_sum, st_serve_max, st_serve_count, st_serve_wait_sum, st_serve_wait_max,
        st_serve_hist[16], st_spin_yields, st_wait_timeouts, st_msgs_sent,
        st_polled_waits, st_polled_faults, st_opened_early;
    uint8_t *same_clock;  /* same_clock[r]: rank r stamps with this host's clock */
} dsm_state_t;

extern dsm_state_t dsm;

/* config.c */
typedef struct dsm_cfg {
    uint64_t size;
    int64_t views;
    int page, debug, onehop, yield, fault_poll;
    const char *managers;   /* all or 1 */
    const char *spin_yield; /* auto, y or n */
    const char *service_spin; /* waiting or always */
    const char *threads;    /* multiple or funneled */
    uint64_t yield_window;  /* ns into a wait the spin yields */
    uint64_t wait_poll;     /* ns a waiter drives progress itself (vmmc_service_borrow) */
    int64_t service_nice;   /* 0: as the process */
    uint64_t service_slice; /* ns; 0: the kernel's default */
} dsm_cfg_t;
extern dsm_cfg_t dsm_cfg;
const char *dsm_cfg_error(void);

/* view.c: the memfd and its views */
int dsm_view_reserve(size_t size, unsigned views, void **base);
int dsm_view_map(void *base, size_t size, unsigned views, int page_mode, int me);
void dsm_view_unmap(void);
void dsm_protect(unsigned view, size_t page, size_t npg, int acc);
void dsm_open_early(void); /* lock held: open dsm.early_id now if still wanted */
static inline char *dsm_app_addr(unsigned view, size_t off)
{
    return dsm.base + (size_t)view * dsm.size + off;
}

/* msg.c: outbox, flush, the notification handler, waiting */
void dsm_post(int dest, uint64_t imm);
void dsm_post_data(int dest, uint64_t imm, size_t off, size_t len);
void dsm_unlock_flush(void); /* lock held: send the outbox, drop the lock, then wake */
void dsm_outbox_free(void); /* at finalize */
void dsm_notify(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg);
/* wait.c: an application thread's wait for the protocol (lock held; a
 * cond wait with death checks): 0 after a change (callers look again) or
 * an error (a dead rank). @poll: first handle the rank's messages in this
 * thread for up to VMMC_DSM_WAIT_POLL; DSM_WAIT_ACCESS for a wait for a
 * minipage (a fault or a prefetch, counted apart), else 1. */
enum { DSM_WAIT_ACCESS = 2 };
int dsm_wait_locked(int poll);
void dsm_wake(void); /* lock held: something a waiter may wait for changed */
void dsm_unlock(void); /* drop dsm.lock, then wake the waiters if dsm_wake() was called */
int dsm_spin_gate(void *arg); /* the service thread's spin gate (VMMC_DSM_SERVICE_SPIN) */
int dsm_wait_hook(int add); /* the yielding progress hook (VMMC_DSM_SPIN_YIELD) */
int dsm_spin_yield_mode(void); /* 0 n, 1 y, 2 auto; -1 a bad value */
/* cpus.c: publish this rank's affinity; do ranks share its processors? */
int dsm_cpus_publish(void);
int dsm_cpus_shared(int *shared);
void dsm_break(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void dsm_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dsm_bad_msg(int src, uint64_t imm, const char *why);
/* err.c: this thread's message for vmmc_dsm_last_error(); returns status */
int dsm_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int dsm_error_vmmc(int status, const char *what); /* status + vmmc_last_error() */

/* proto.c: the holder's side (lock held) */
void dsm_on_forward(int src, uint64_t imm);
void dsm_on_data(int src, uint64_t imm, size_t off, size_t len);
void dsm_on_grant(int src, uint64_t imm);
void dsm_on_inval(int src, uint64_t imm);
void dsm_on_nack(int src, uint64_t imm);
void dsm_set_acc(uint32_t head, int acc);
void dsm_on_req_d(int src, uint64_t imm);
void dsm_on_notown(int src, uint64_t imm);
void dsm_on_dinv(int src, uint64_t imm);
/* direct.c: the owner's direct readers. Before the owner gives a minipage
 * up, lets it be invalidated or opens it for writing, its direct readers
 * (all but @keep) lose their copies; dsm_direct_hold() returns 1 when it
 * sent invalidations and the step must wait (dsm_proto_resume() runs it
 * once every reader answered), 0 when the step can go on at once. */
enum { CONT_GIVE = 1, CONT_ACK, CONT_OPEN_W, CONT_EXTEND };
int dsm_direct_hold(uint32_t head, int cont, int target, uint64_t a, uint64_t b, uint64_t keep);
int dsm_direct_busy(uint32_t head);
void dsm_on_dack(int src, uint64_t imm);
void dsm_direct_free_all(void);
void dsm_proto_resume(int cont, uint32_t head, int target, uint64_t a, uint64_t b);
void dsm_extend_apply(uint32_t head, size_t off, size_t n16); /* api.c */
int dsm_ext_pages(uint32_t head, size_t *page, size_t *npg, unsigned *view);

/* fault.c */
int dsm_fault_install(void);
void dsm_fault_remove(void);
int dsm_acquire(void *addr, int write, int from_fault);
/* api.c: answers to malloc, free, push */
void dsm_on_reply(int src, uint64_t imm);
int dsm_addr_id(const void *p, uint32_t *id, size_t *off_in_page);

/* manager.c (the homes; lock held) */
int dsm_mgr_create(void);
void dsm_mgr_create_msg(int src, uint64_t imm);  /* CREATE, at the home */
void dsm_mgr_release_msg(int src, uint64_t imm); /* RELEASE, at the allocator */
void dsm_mgr_where(int src, uint64_t imm);       /* WHERE, at the allocator */
void dsm_mgr_destroy(void);
void dsm_mgr_request(int src, uint64_t imm);   /* REQ_R, REQ_W, PUSH, FREE */
void dsm_mgr_ack(int src, uint64_t imm);
void dsm_mgr_done(int src, uint64_t imm);
void dsm_mgr_malloc(int src, uint64_t imm);
/* alloc.c (the allocator's side, rank 0, lock held); *remote: the entry is
 * at another home, which was sent a CREATE and answers the allocator */
int dsm_alloc_place(int rank, size_t n, int chunk, uint64_t *rep, int *remote);
void dsm_alloc_release(uint32_t head);
int dsm_alloc_release_remote(uint32_t head); /* 0, or -1: no such remote minipage */
int dsm_alloc_locate(uint32_t raw, uint32_t *head); /* a large allocation's head */
uint64_t dsm_rep_imm(unsigned status, int extends, unsigned view, size_t off);
/* Where this rank sends a request about @id: its home; on rank 0, which
 * knows the large allocations, the home of the one @id lies in. A home
 * takes a request from rank 0 it cannot resolve for no minipage. */
int dsm_route(uint32_t id);

/* sync.c: locks, barrier, bcast (both sides) */
void dsm_sync_on_msg(int src, uint64_t imm);
int dsm_barrier_internal(void);
void dsm_sync_reset(void);

/* sched.c: the service thread's scheduling (applied once per thread by
 * the handler); skip(1) marks an application thread that waits in vmmc */
void dsm_sched_service_thread(void);
void dsm_sched_skip_thread(int skip);
int dsm_sched_hook(int add); /* the service thread's scheduling, applied in its first pass */

/* stats.c */
void dsm_stats_delay(uint64_t ns);
/* Requests stamped with the sender's clock at the send (aux bits of the
 * immediate, units of 2^DSM_STAMP_SHIFT ns, wrapping at 2^22 units, about
 * 4.3 s): what the serving side measures its request delay from. */
#define DSM_STAMP_SHIFT 10
#define DSM_STAMP_MASK 0x3fffffu
static inline int dsm_stamped(unsigned type)
{
    return type == M_REQ_R || type == M_REQ_W || type == M_REQ_D || type == M_FWD_R ||
           type == M_FWD_W || type == M_FWD_PUSH || type == M_INV || type == M_DINV;
}
uint64_t dsm_stamp(uint64_t imm, uint64_t now_ns);
void dsm_stats_serve(int src, uint64_t imm, uint64_t start_ns, uint64_t end_ns);
int dsm_clock_peers(void); /* fills dsm.same_clock (init) */
uint64_t dsm_now_ns(void);

/* Rank 0 places allocations and keeps the locks and the barrier. */
static inline int dsm_manager(void)
{
    return 0;
}

/* The home of the minipages of page @page: its directory entry (owner,
 * copy set, queue) lives there and every step on it goes through it.
 * VMMC_DSM_MANAGERS=all: page mod ranks; =1: rank 0. A large allocation's
 * home is that of its first page. */
static inline int dsm_home_page(size_t page)
{
    return dsm.spread ? (int)(page % (size_t)dsm.n) : 0;
}
static inline int dsm_home(uint32_t id)
{
    return dsm_home_page(id / dsm.views);
}

#endif
