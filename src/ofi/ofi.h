/* The libfabric provider "vmmc" (libvmmc-fi.so): internal objects.
 *
 * One object per file, each filling a libfabric ops table, as libfabric's own
 * providers do:
 *   ofi_init.c     fi_prov_ini, the provider, fi_getinfo (hints, limits)
 *   ofi_fabric.c   fabric object, fi_trywait
 *   ofi_domain.c   domain object, its ops table, query_atomic
 *   ofi_eq.c       event queues (fabtests and others open one; no async events)
 *   ofi_addr.c     the compact address (fi_getname) <-> vmmc address
 *   ofi_av.c       address vectors (map and table)
 *   ofi_cq.c       completion queues (every format, fd wait object)
 *   ofi_cntr.c     counters
 *   ofi_mr.c       memory regions (exports made on demand per endpoint)
 *   ofi_ep.c       endpoint object: bind, enable, getname, progress thread
 *   ofi_progress.c the endpoint's progress (FM extract, rendezvous, RMA)
 *   ofi_match.c    posted and unexpected queues, MPI-FM matching
 *   ofi_proto.c    the wire: eager over FM streams, handlers, sends
 *   ofi_rdv.c      the rendezvous: redirection windows, chunks, CTS
 *   ofi_tagged.c   fi_ops_tagged        ofi_msg.c    fi_ops_msg
 *   ofi_rma.c      fi_ops_rma           ofi_atomic.c fi_ops_atomic
 *
 * Locking: every endpoint has one mutex (ep->lock) that every call on it,
 * and its progress, hold; FM channels and the vmmc endpoint are used only
 * under it. A CQ or counter has its own mutex, taken after an endpoint's
 * (an endpoint writes completions while it holds its own lock); a CQ read
 * first progresses its endpoints (each under its lock, released), then takes
 * the CQ's lock. The AV has a rwlock of its own, taken last.
 *
 * The provider is a client of the public vmmc API only (vmmc/vmmc.h,
 * vmmc/fm.h, vmmc/config.h).
 */
#ifndef VMMC_OFI_H
#define VMMC_OFI_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include "vmmc/fm.h"
#include "vmmc/vmmc.h"

#define VOFI_NAME "vmmc"
#define VOFI_FABRIC_NAME "vmmc"
#define VOFI_DOMAIN_NAME "vmmc"
/* The libfabric API we are built against, and our own version. */
#define VOFI_FI_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define VOFI_PROV_VERSION FI_VERSION(0, 1)

/* Exact limits reported by fi_getinfo() and enforced by the calls. */
#define VOFI_IOV_LIMIT 8          /* iov entries per operation */
#define VOFI_RMA_IOV_LIMIT 1      /* remote iov entries per RMA/atomic */
#define VOFI_MAX_MSG ((size_t)1 << 40)
#define VOFI_TX_SIZE 65536        /* outstanding sends per endpoint */
#define VOFI_RX_SIZE 65536        /* posted receives per endpoint */
#define VOFI_CQ_DATA_SIZE 8       /* bytes of remote CQ data */
#define VOFI_MAX_EP_ADDR 64       /* fi_getname() size, <= FI_NAME_MAX */
#define VOFI_MR_KEY_SIZE 8
#define VOFI_MAX_CNTR_EPS 64
#define VOFI_MAX_ATOMIC_COUNT 4096 /* elements per atomic operation */

/* FM channels of an endpoint: messages in matching order, and the
 * rendezvous answers, which must never wait behind unread messages. */
#define VOFI_CH_DATA 64
#define VOFI_CH_CTRL 65
#define VOFI_H_MSG 0 /* handler id on both channels */

/* Settings (VMMC_OFI_*, `vmmc info -c`), registered at fi_prov_ini(). */
typedef struct vofi_settings {
    uint64_t eager;      /* largest message sent eagerly (VMMC_OFI_EAGER) */
    uint64_t inject;     /* largest fi_inject (VMMC_OFI_INJECT), <= eager */
    uint64_t unexp_max;  /* bytes of unexpected eager data held (VMMC_OFI_UNEXPECTED) */
    uint64_t rdv_chunk;  /* rendezvous chunk (VMMC_OFI_RDV_CHUNK) */
    uint64_t cq_size;    /* default CQ depth (VMMC_OFI_CQ_SIZE) */
    uint64_t import_ms;  /* how long a first RMA to a peer waits for its import */
    int progress_thread; /* auto progress: a thread per endpoint (VMMC_OFI_PROGRESS=auto) */
    int progress_manual; /* VMMC_OFI_PROGRESS=manual: FI_PROGRESS_AUTO is refused */
} vofi_settings_t;
extern vofi_settings_t vofi_set;
int vofi_settings_init(void);

extern struct fi_provider vofi_prov;

/* Logging through libfabric's FI_LOG (FI_LOG_LEVEL=warn|info|debug). */
void vofi_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vofi_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ofi_noop.c: for ops tables, what an object does not offer (-FI_ENOSYS). */
int vofi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                     void *context);
int vofi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);

/* vmmc status -> negative FI_E* (FI_EAGAIN, FI_EINVAL, FI_EIO, ...). */
int vofi_err(int vmmc_status);

/* ------------------------------------------------------------------------ */
/* fabric, domain */

typedef struct vofi_fabric {
    struct fid_fabric fid;
    _Atomic int ref; /* domains, EQs */
} vofi_fabric_t;

typedef struct vofi_mr vofi_mr_t;

typedef struct vofi_domain {
    struct fid_domain fid;
    vofi_fabric_t *fab;
    struct fi_info *info; /* our copy */
    _Atomic int ref;      /* endpoints, AVs, CQs, counters, MRs */
    pthread_mutex_t mr_lock;
    vofi_mr_t **mrs;      /* by key index (see ofi_mr.c) */
    size_t mr_cap;
    uint32_t mr_gen;
    uint64_t mr_mode;     /* FI_MR_* the application agreed to, as bits: FI_MR_BASIC is
                           * PROV_KEY|VIRT_ADDR|ALLOCATED, FI_MR_SCALABLE is 0 */
    int threading;        /* FI_THREAD_* */
    int data_progress;    /* FI_PROGRESS_* */
    struct fid_eq *eq;    /* bound by fi_domain_bind (held: it cannot close first) */
} vofi_domain_t;

int vofi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
int vofi_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
                     void *context);
int vofi_trywait(struct fid_fabric *fabric, struct fid **fids, int count);
int vofi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
                 void *context);
/* An object bound to an EQ holds it (+1) until it closes (-1): fi_close of
 * a held EQ is -FI_EBUSY. */
void vofi_eq_hold(struct fid_eq *eq, int delta);
int vofi_query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
                      struct fi_atomic_attr *attr, uint64_t flags);

/* fi_getinfo pieces used by the domain and endpoint to check an fi_info. */
int vofi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                 const struct fi_info *hints, struct fi_info **info);
int vofi_check_info(const struct fi_info *info); /* 0 or -FI_ENODATA / -FI_EINVAL */

/* ------------------------------------------------------------------------ */
/* addresses (ofi_addr.c) */

/* Pack a vmmc address (vmmc_ep_addr()) into at most VOFI_MAX_EP_ADDR bytes.
 * *outlen: in, the room at @p out; out, the packed size (every name has the
 * same size, and its first byte says it). 0 or -FI_ETOOSMALL (*outlen: the
 * size needed) / -FI_EINVAL (not an address this format can hold). */
int vofi_addr_pack(const void *vaddr, size_t vlen, uint8_t *out, size_t *outlen);
/* Back to a vmmc address, given this host's own vmmc address (to restore
 * the host field when the packed one names this host; NULL: none is).
 * *vlen: in, the room at @p vaddr (VMMC_ADDR_MAX is always enough); out,
 * the address's length. 0, -FI_EINVAL (malformed: every byte is checked)
 * or -FI_ETOOSMALL (*vlen: the size needed). */
int vofi_addr_unpack(const uint8_t *in, size_t inlen, const void *own_vaddr, size_t own_vlen,
                     void *vaddr, size_t *vlen);
/* Printable form for fi_av_straddr(): "vmmc://<hex>". */
void vofi_addr_str(const uint8_t *in, size_t inlen, char *buf, size_t *len);

/* ------------------------------------------------------------------------ */
/* address vectors (ofi_av.c) */

typedef struct vofi_av_entry {
    uint8_t len; /* 0: unused slot */
    uint8_t addr[VOFI_MAX_EP_ADDR];
} vofi_av_entry_t;

typedef struct vofi_av {
    struct fid_av fid;
    vofi_domain_t *dom;
    enum fi_av_type type;
    pthread_rwlock_t lock;
    vofi_av_entry_t *tab;   /* fi_addr_t i is tab[i] (map and table alike) */
    size_t count, cap;
    _Atomic uint64_t gen;   /* bumped by fi_av_remove(): endpoints drop cached handles */
    _Atomic int ref;        /* bound endpoints */
} vofi_av_t;

int vofi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
                 void *context);
/* Copy entry @p a into @p out (VOFI_MAX_EP_ADDR bytes); its length, or
 * -FI_EINVAL when @p a is not a valid entry. */
int vofi_av_get(vofi_av_t *av, fi_addr_t a, uint8_t *out);
/* The fi_addr_t holding packed address @p addr, or FI_ADDR_NOTAVAIL. */
fi_addr_t vofi_av_find(vofi_av_t *av, const uint8_t *addr, size_t len);

/* ------------------------------------------------------------------------ */
/* completion queues and counters (ofi_cq.c, ofi_cntr.c) */

typedef struct vofi_ep vofi_ep_t;

/* One completion as every format needs it. */
typedef struct vofi_cqe {
    void *op_context;
    uint64_t flags;
    size_t len;
    void *buf;
    uint64_t data;
    uint64_t tag;
    fi_addr_t src;
    /* errors only */
    int err;           /* positive FI_E* */
    int prov_errno;    /* the vmmc status */
    size_t olen;       /* bytes that did not fit (FI_ETRUNC) */
} vofi_cqe_t;

typedef struct vofi_cq {
    struct fid_cq fid;
    vofi_domain_t *dom;
    enum fi_cq_format format;
    size_t entry_size;
    pthread_mutex_t lock;
    vofi_cqe_t *ring;        /* successful completions */
    size_t size, head, count;
    struct vofi_cqe_node *err_head, *err_tail; /* error completions, unbounded */
    struct vofi_cqe_node *over_head, *over_tail; /* successes beyond size (FI_RM_ENABLED: never lost) */
    size_t nerr;
    char err_str[160];       /* for fi_cq_strerror / readerr err_data */
    int wait_obj;            /* FI_WAIT_NONE / FI_WAIT_FD / FI_WAIT_UNSPEC */
    int efd;                 /* eventfd written on each completion (wait fd only) */
    int epfd;                /* epoll: efd + each bound endpoint's vmmc event fd */
    _Atomic int signaled;
    /* Under lock: the eventfd is written only when someone may sleep on it
     * (a thread in sread, or the fd was handed out by FI_GETWAIT), and only
     * once until a read empties the queue again. */
    int waiters, fd_given, armed;
    size_t lost;             /* completions that found no memory: one FI_EOVERRUN error */
    vofi_ep_t *eps[VOFI_MAX_CNTR_EPS]; /* endpoints bound: progressed by reads */
    int ep_fd[VOFI_MAX_CNTR_EPS]; /* eps[i]'s wait fd once added to epfd, else -1 */
    int neps;
    _Atomic int ref;
} vofi_cq_t;

int vofi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
                 void *context);
/* Called by an endpoint with its lock held. Never fails (FI_RM_ENABLED):
 * beyond the queue's size entries wait in an overflow list. */
void vofi_cq_write(vofi_cq_t *cq, const vofi_cqe_t *e);
void vofi_cq_write_err(vofi_cq_t *cq, const vofi_cqe_t *e);
int vofi_cq_bind_ep(vofi_cq_t *cq, vofi_ep_t *ep);   /* 0 or -FI_ENOSPC */
void vofi_cq_unbind_ep(vofi_cq_t *cq, vofi_ep_t *ep);
/* 1 if the queue has something to read (fi_trywait). */
int vofi_cq_ready(vofi_cq_t *cq);

typedef struct vofi_cntr {
    struct fid_cntr fid;
    vofi_domain_t *dom;
    _Atomic uint64_t value, err;
    pthread_mutex_t lock;
    int wait_obj;
    int efd, epfd;
    /* The eventfd counts wake-ups: one per waiting thread not woken yet
     * (waiters), and one for the holder of the fd (FI_GETWAIT) until it
     * reads the counter (armed). kicks: wake-ups given, under lock. */
    _Atomic int waiters, fd_given, armed;
    uint64_t kicks;
    vofi_ep_t *eps[VOFI_MAX_CNTR_EPS];
    int ep_fd[VOFI_MAX_CNTR_EPS]; /* as in vofi_cq_t */
    int neps;
    _Atomic int ref;
} vofi_cntr_t;

int vofi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
                   void *context);
void vofi_cntr_inc(vofi_cntr_t *c);
void vofi_cntr_err(vofi_cntr_t *c);
int vofi_cntr_bind_ep(vofi_cntr_t *c, vofi_ep_t *ep);
void vofi_cntr_unbind_ep(vofi_cntr_t *c, vofi_ep_t *ep);
int vofi_cntr_ready(vofi_cntr_t *c);

/* ------------------------------------------------------------------------ */
/* memory regions (ofi_mr.c) */

struct vofi_mr {
    struct fid_mr mr;      /* mr.key: [index 24 bits | generation 24 bits | 16 random bits] */
    vofi_domain_t *dom;
    void *addr;
    size_t len;
    uint64_t access;       /* FI_REMOTE_READ / FI_REMOTE_WRITE / ... */
    uint64_t offset;       /* fi_mr_reg offset (non-VIRT_ADDR addressing) */
    vofi_ep_t *ep;         /* FI_MR_ENDPOINT: bound endpoint */
    vofi_cntr_t *rcntr;    /* FI_REMOTE_WRITE counter bound to the MR (FI_RMA_EVENT) */
    _Atomic int ref;
    uint32_t slot;         /* its place in dom->mrs */
    int closed;            /* fi_close() began: nothing is exported of it again */
    struct vofi_mr_exp *exps; /* its exports, one per endpoint that was asked (ofi_rma.c);
                                 under dom->mr_lock */
};

int vofi_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
                uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context);
int vofi_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
                 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
                 void *context);
int vofi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                    struct fid_mr **mr);
/* The registered region with @p key (a reference is taken), or NULL. */
vofi_mr_t *vofi_mr_get(vofi_domain_t *dom, uint64_t key);
void vofi_mr_put(vofi_mr_t *mr);
/* Same, dom->mr_lock held by the caller; NULL for a closing region too. */
vofi_mr_t *vofi_mr_find_locked(vofi_domain_t *dom, uint64_t key);
/* fi_close() of a region: withdraw its exports (ofi_rma.c; the records are
 * already off the region and the lock is not held). */
void vofi_rma_mr_unexport(struct vofi_mr_exp *list);

/* ------------------------------------------------------------------------ */
/* the wire (FM messages on VOFI_CH_DATA / VOFI_CH_CTRL) */

enum {
    VOFI_OP_EAGER = 1, /* data: header + payload */
    VOFI_OP_RTS = 2,   /* data: header; payload follows by rendezvous */
    VOFI_OP_CTS = 3,   /* ctrl: receiver posted a redirect; send a chunk */
    VOFI_OP_NAK = 4    /* ctrl: receiver refused (no window): sender fails the send */
};
enum {
    VOFI_F_TAGGED = 1u << 0, /* fi_tsend* (else fi_send*) */
    VOFI_F_DATA = 1u << 1,   /* remote CQ data present */
    VOFI_F_LAST = 1u << 2    /* CTS: the receiver wants nothing after this chunk */
};

typedef struct vofi_hdr {
    uint8_t op, flags;
    uint16_t rsv;
    uint32_t rsv2;
    uint64_t tag;
    uint64_t data;
    uint64_t len; /* message length */
    uint64_t id;  /* RTS: sender's send id */
} vofi_hdr_t;

typedef struct vofi_cts {
    uint8_t op, flags;
    uint16_t rsv;
    uint32_t rsv2;
    uint64_t id;      /* the RTS's id */
    uint64_t msg_off; /* where in the message this chunk starts */
    uint64_t len;     /* chunk length (0 with VOFI_F_LAST: nothing wanted) */
    uint64_t win_off; /* where in the window export to write it */
    char window[48];  /* name of the receiver's window export for this sender */
} vofi_cts_t;

/* ------------------------------------------------------------------------ */
/* transfers */

/* A posted receive, or a send waiting in the rendezvous. */
typedef struct vofi_xfer {
    struct vofi_xfer *next, *prev;
    void *context;
    uint64_t flags;           /* FI_TAGGED|FI_MSG|FI_RECV|FI_SEND|FI_COMPLETION|FI_MULTI_RECV ... */
    struct iovec iov[VOFI_IOV_LIMIT];
    size_t iov_count;
    size_t len;               /* total of iov */
    uint64_t tag, ignore;
    int peer;                 /* vmmc peer handle; -1: any source */
    fi_addr_t addr;           /* as the application gave it */
    uint64_t data;
    uint64_t id;              /* rendezvous: send id / receive id */
    size_t done;              /* rendezvous: bytes moved so far */
    size_t want;              /* receive: bytes to move (min(len, message)) */
    size_t msg_len;           /* receive: the message's length */
    uint64_t msg_tag, msg_data;
    int msg_flags;            /* VOFI_F_* of the matched message */
    size_t mr_used;           /* FI_MULTI_RECV: bytes consumed */
    vmmc_request_t req;       /* receive: the redirect of the current chunk */
    int chunk_live;           /* its slot + 1 in window win */
    struct vofi_window *win;
} vofi_xfer_t;

/* A message that arrived before its receive was posted. */
typedef struct vofi_unexp {
    struct vofi_unexp *next, *prev;
    int peer;
    uint8_t op, flags;        /* VOFI_OP_EAGER / VOFI_OP_RTS, VOFI_F_* */
    uint64_t tag, data;
    size_t len;               /* message length */
    uint64_t id;              /* RTS: sender's id */
    void *claim;              /* FI_CLAIM: the context that claimed it */
    size_t have;              /* eager bytes held in payload[] */
    int arriving;             /* its handler is still receiving the payload */
    struct vofi_xfer *waiter; /* matched while arriving: delivered when it has arrived */
    char payload[];
} vofi_unexp_t;

typedef struct vofi_queue {
    void *head, *tail;        /* vofi_xfer_t or vofi_unexp_t */
} vofi_queue_t;

/* ------------------------------------------------------------------------ */
/* endpoint (ofi_ep.c) */

/* The endpoint's counters (ep->counters[]). */
enum {
    VOFI_C_PROTOCOL, /* malformed or stale messages dropped */
    VOFI_C_UNEXP,    /* messages that arrived before their receive */
    VOFI_C_EAGER,    /* eager messages received straight into a posted buffer */
    VOFI_C_RTS,      /* rendezvous messages matched on arrival */
    VOFI_C_OVER,     /* passes that read beyond the unexpected bound for a posted receive */
    VOFI_C_COUNT
};

struct vofi_ep {
    struct fid_ep fid;
    vofi_domain_t *dom;
    struct fi_info *info;
    pthread_mutex_t lock;
    int enabled;
    vmmc_ep_t *vep;
    fm_t *fm, *fmc;             /* VOFI_CH_DATA, VOFI_CH_CTRL */
    uint8_t vaddr[VMMC_ADDR_MAX];
    size_t vaddr_len;
    uint8_t name[VOFI_MAX_EP_ADDR]; /* packed: fi_getname() */
    size_t name_len;
    vofi_av_t *av;
    uint64_t av_gen;
    int *peer_of;               /* fi_addr_t -> vmmc handle (-1: not yet) */
    size_t npeer_of;
    fi_addr_t *addr_of;         /* vmmc handle -> fi_addr_t (FI_ADDR_NOTAVAIL) */
    size_t naddr_of;
    vofi_cq_t *tx_cq, *rx_cq;
    uint64_t tx_cq_flags, rx_cq_flags; /* FI_SELECTIVE_COMPLETION */
    vofi_cntr_t *cntr_send, *cntr_recv, *cntr_read, *cntr_write, *cntr_rread, *cntr_rwrite;
    struct fid *binds[8];       /* CQs and counters, once per fi_ep_bind() call */
    int nbinds;
    uint64_t caps, tx_op_flags, rx_op_flags;
    size_t min_multi_recv;
    /* matching */
    vofi_queue_t posted_tag, posted_msg;   /* vofi_xfer_t */
    vofi_queue_t unexp_tag, unexp_msg;     /* vofi_unexp_t */
    size_t unexp_bytes;
    size_t rx_posted, tx_live;
    /* rendezvous */
    vofi_queue_t tx_wait;       /* sends that found no credit, in order (ofi_proto.c) */
    struct vofi_xfer *xfer_pool; /* freed transfers kept for reuse (ofi_match.c) */
    int xfer_pooled;
    vofi_queue_t rdv_tx;        /* sends waiting for CTS, by id */
    vofi_queue_t rdv_rx;        /* receives moving data (redirects live) */
    vofi_queue_t work;          /* CTS/NAK to act on outside handlers (ofi_proto.c) */
    uint64_t next_id;
    struct vofi_window *windows; /* per sending peer: our redirectable export (ofi_proto.c) */
    struct vofi_wproxy *wproxies; /* per receiving peer: its window, imported (ofi_proto.c) */
    struct vofi_rproxy *rproxies; /* imports of peers' MRs (ofi_rma.c) */
    void *rma;                    /* the rest of the RMA state (ofi_rma.c) */
    /* RMA */
    vmmc_cq_t *vcq;             /* vmmc completions of RMA and atomics */
    size_t rma_live;
    /* auto progress */
    pthread_t thread;
    int thread_on;
    _Atomic int stop;
    uint64_t live_check_ns;     /* last peer liveness check of the rendezvous */
    unsigned live_passes;
    unsigned passes;            /* progress passes (see vofi_ep_progress_locked) */
    uint64_t counters[VOFI_C_COUNT];
};

/* Progress once (takes the lock): returns events handled (>= 0). */
int vofi_ep_progress(vofi_ep_t *ep);
/* Same, lock held by the caller. */
int vofi_ep_progress_locked(vofi_ep_t *ep);
/* Progress once before sleeping on the endpoint's wait fd (takes the
 * lock): the core's progress runs too, which leaves that fd quiet. */
int vofi_ep_progress_wait(vofi_ep_t *ep);
/* The fd that becomes readable when the endpoint has work (vmmc event fd). */
int vofi_ep_wait_fd(vofi_ep_t *ep);
/* The vmmc peer handle for @p a (connecting on first use), or a negative
 * FI_E*: -FI_EINVAL for an address not in the AV. Lock held. */
int vofi_ep_peer(vofi_ep_t *ep, fi_addr_t a);
/* The fi_addr_t of vmmc peer @p peer (FI_ADDR_NOTAVAIL if not in the AV). */
fi_addr_t vofi_ep_addr_of(vofi_ep_t *ep, int peer);
int vofi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
                  void *context);

/* Completions of an endpoint's operations (lock held): a CQ entry when
 * the flags hold FI_COMPLETION (set at posting time when the operation must
 * be reported: no selective completion, or FI_COMPLETION asked; never for
 * FI_INJECT), written without that bit; and the counter, if any. Errors
 * are always written to the CQ (and counted as counter errors). */
void vofi_complete_tx(vofi_ep_t *ep, uint64_t flags, void *context, vofi_cntr_t *cntr);
void vofi_complete_rx(vofi_ep_t *ep, const vofi_cqe_t *e, vofi_cntr_t *cntr);
void vofi_fail_tx(vofi_ep_t *ep, uint64_t flags, void *context, int err, int vst,
                  vofi_cntr_t *cntr);
void vofi_fail_rx(vofi_ep_t *ep, const vofi_cqe_t *e, vofi_cntr_t *cntr);

extern struct fi_ops_tagged vofi_tagged_ops;
extern struct fi_ops_msg vofi_msg_ops;
extern struct fi_ops_rma vofi_rma_ops;
extern struct fi_ops_atomic vofi_atomic_ops;

/* ofi_rma.c / ofi_atomic.c: the endpoint's RMA state */
int vofi_rma_open(vofi_ep_t *ep);   /* at fi_enable: on-demand MR exports, vmmc CQ */
void vofi_rma_close(vofi_ep_t *ep);
int vofi_rma_progress(vofi_ep_t *ep); /* poll ep->vcq; lock held */
int vofi_rma_busy(vofi_ep_t *ep);     /* 1 while RMA may wait for the core's progress */

/* ofi_proto.c: the matching protocol */
int vofi_proto_open(vofi_ep_t *ep);  /* at fi_enable: FM channels, handlers */
void vofi_proto_close(vofi_ep_t *ep);
int vofi_proto_progress(vofi_ep_t *ep); /* lock held */
/* Start a send (tagged or not): eager or RTS. Lock held. 0 or -FI_E*. */
ssize_t vofi_proto_send(vofi_ep_t *ep, const struct iovec *iov, size_t count, int peer,
                        uint64_t tag, uint64_t data, uint64_t flags, void *context);
/* A receive was posted (or claimed) and matched @p u, which the caller took
 * off its queue: deliver it into @p x (now, or when it has arrived). x is
 * owned by the protocol from then on. Returns 1 when x was a multi-receive
 * buffer that this message released (x is gone), else 0. */
int vofi_proto_take(vofi_ep_t *ep, vofi_xfer_t *x, vofi_unexp_t *u);

/* ofi_rdv.c: large messages. The receiver, once the message is matched,
 * posts a redirect of a window of its export for that sender into the
 * user's buffer and sends a CTS; the sender writes the chunk there by
 * deliberate update (process_vm_writev on one host, the udp link across). */
void vofi_rdv_start(vofi_ep_t *ep, vofi_xfer_t *x); /* x matched an RTS (x->peer, x->id set) */
void vofi_rdv_cts(vofi_ep_t *ep, int peer, const vofi_cts_t *cts); /* from the ctrl handler */
int vofi_rdv_progress(vofi_ep_t *ep);
void vofi_rdv_close(vofi_ep_t *ep);
/* Send a CTS on the control channel: 0, or -FI_EAGAIN. */
int vofi_proto_send_cts(vofi_ep_t *ep, int peer, const vofi_cts_t *cts);

/* ofi_tagged.c: the checked entry of every send and receive call. */
ssize_t vofi_send_common(struct fid_ep *fep, const struct iovec *iov, size_t count,
                         fi_addr_t dest, uint64_t tag, uint64_t data, void *context,
                         uint64_t flags);
ssize_t vofi_recv_common(struct fid_ep *fep, const struct iovec *iov, size_t count,
                         fi_addr_t src, uint64_t tag, uint64_t ignore, void *context,
                         uint64_t flags);

/* ofi_match.c */
/* A zeroed transfer, from the endpoint's pool when it has one (no malloc on
 * the short-message path), and back. Lock held. */
vofi_xfer_t *vofi_xfer_get(vofi_ep_t *ep);
void vofi_xfer_put(vofi_ep_t *ep, vofi_xfer_t *x);
void vofi_xfer_pool_free(vofi_ep_t *ep);
ssize_t vofi_post_recv(vofi_ep_t *ep, const struct iovec *iov, size_t count, fi_addr_t src,
                       uint64_t tag, uint64_t ignore, void *context, uint64_t flags);
ssize_t vofi_cancel(fid_t fid, void *context);
/* Find the posted receive that matches an arriving message (removed from
 * its queue), or NULL. */
vofi_xfer_t *vofi_match_posted(vofi_ep_t *ep, int tagged, int peer, uint64_t tag);
void vofi_queue_push(vofi_queue_t *q, void *e);
void vofi_queue_remove(vofi_queue_t *q, void *e);
/* Copy @p n bytes from @p src into the iov at offset @p off. */
void vofi_iov_copy_in(const struct iovec *iov, size_t count, size_t off, const void *src, size_t n);
size_t vofi_iov_len(const struct iovec *iov, size_t count);

#endif /* VMMC_OFI_H */
