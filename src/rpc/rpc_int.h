/* vRPC internals: SunRPC's CLIENT and SVCXPRT over vmmc sockets.
 *
 * Files, one object each:
 *   rpc_cfg.c   VMMC_RPC_* settings; the thread's last error text
 *   rpc_rec.c   record marking on a socket: send a whole record with one
 *               call, read one record (marks, then exactly their lengths)
 *               into one buffer without blocking, waits with deadlines
 *   rpc_clnt.c  the CLIENT (struct clnt_ops) and its constructors
 *   rpc_svc.c   the SVCXPRTs (listener and connection; struct xp_ops,
 *               xp_ops2), svc_vmmc_run
 *
 * Every socket call goes through vmmc/sock.h, so a connection whose other end
 * runs vmmc moves off the kernel and every other one stays on TCP; bytes on
 * the wire are standard ONC RPC record marking either way. */
#ifndef VMMC_RPC_INT_H
#define VMMC_RPC_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vmmc/rpc.h"

/* xdr_void as an xdrproc_t (libtirpc declares it without parameters). */
bool_t rpc_xdr_void(XDR *x, ...);

/* settings (rpc_cfg.c) */
typedef struct rpc_cfg {
    uint64_t maxrec;      /* VMMC_RPC_MAXREC: largest record sent or accepted */
    uint64_t buf;         /* VMMC_RPC_BUF: first size of a handle's buffers */
    uint64_t svc_wait_ns; /* VMMC_RPC_SVC_WAIT: a server's wait for a client to take a reply */
} rpc_cfg_t;
const rpc_cfg_t *rpc_cfg(void);

/* The calling thread's last error text (vmmc_rpc_last_error()). Returns
 * -1 so that callers can `return rpc_fail(...)`; errno is kept. */
int rpc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rpc_fail_clear(void);

/* A growable buffer. */
typedef struct rpc_buf {
    char *p;
    size_t cap;
} rpc_buf_t;
/* Make room for @p need bytes (keeps the first @p keep); 0 or -1/ENOMEM. */
int rpc_buf_reserve(rpc_buf_t *b, size_t need, size_t keep);
void rpc_buf_free(rpc_buf_t *b);

/* Deadlines: CLOCK_MONOTONIC ns; RPC_NEVER: no deadline. */
#define RPC_NEVER UINT64_MAX
uint64_t rpc_now_ns(void);
uint64_t rpc_deadline(uint64_t ns_from_now);

/* Wait until @p fd has @p events (vmmc_sock_poll), at most until @p dl.
 * 1 ready, 0 deadline passed, -1/errno (EINTR is retried). */
int rpc_wait_fd(int fd, short events, uint64_t dl);

/* Send all of @p iov (non-blocking socket calls, waiting for room until
 * @p dl). 0, or -1 with errno (ETIMEDOUT, EPIPE, ECONNRESET, ...) and the
 * reason in rpc_fail. */
int rpc_send_all(int fd, struct iovec *iov, int iovcnt, uint64_t dl);

/* Reading one record without blocking: the state survives calls, so a
 * server reads what has come and goes back to its loop. */
typedef struct rpc_rd {
    unsigned char mark[4];
    unsigned got;     /* bytes of the current mark read */
    uint32_t frag;    /* bytes of the current fragment still to read */
    int in_frag;      /* reading a fragment's bytes (else a mark) */
    int last;         /* the current fragment is the record's last */
    size_t len;       /* bytes of the record so far */
    size_t frags;     /* fragments of the record so far */
} rpc_rd_t;
/* Read what is there: 1 when a whole record is in b->p[0..rd->len) (the
 * state is then reset for the next one by rpc_rd_next), 0 when the socket
 * has no more bytes now (EAGAIN), -1 with errno: ECONNRESET (EOF or reset:
 * @p eof tells which), EPROTO (malformed mark), EMSGSIZE (larger than
 * @p maxrec), ENOMEM; the reason in rpc_fail. */
int rpc_rd_pump(int fd, rpc_rd_t *rd, rpc_buf_t *b, size_t maxrec, int *eof);
void rpc_rd_next(rpc_rd_t *rd);
/* Has the record started (bytes of it read)? */
static inline int rpc_rd_started(const rpc_rd_t *rd) { return rd->got || rd->in_frag || rd->len; }

/* An XDR encoding stream into @p buf that refers to large opaques and
 * strings (RPC_GATHER_MIN bytes and more) where they are instead of copying
 * them (rpc_xdr.c). The first 4 bytes of @p buf are left for the record
 * mark. After the encoding, rpc_gx_finish() writes the mark and returns the
 * number of pieces in iov[] (the record, mark included). With @p gather 0
 * everything is copied into one piece. */
#define RPC_GATHER_MIN 2048
#define RPC_GX_IOV 16
typedef struct rpc_gx {
    XDR x;
    char *base;
    size_t cap, used; /* bytes of base in use (mark included) */
    size_t piece;     /* where the buffer's open piece starts */
    size_t total;     /* bytes of the record (mark excluded): the XDR position */
    int n;
    int gather;       /* 0: copy everything (RPCSEC_GSS wraps need one piece) */
    struct iovec iov[RPC_GX_IOV];
} rpc_gx_t;
void rpc_gx_create(rpc_gx_t *g, char *buf, size_t cap, int gather);
int rpc_gx_finish(rpc_gx_t *g);

/* The record mark of a whole record of @p len bytes in one fragment. */
static inline uint32_t rpc_mark(size_t len) { return 0x80000000u | (uint32_t)len; }

#endif
