/* Stream sockets over vmmc: the layer's internal contract.
 *
 * A vmmc socket (sock_t) is a kernel TCP socket that vmmc may upgrade. The
 * layer is a client of the public vmmc API (vmmc.h: open-world endpoint,
 * export/import, deliberate update, vmmc_signal, event fd) and of the
 * kernel, which it calls through sock_sys.h (raw system calls: when
 * libvmmc-preload.so interposes the libc socket calls, the layer's own calls
 * must not come back to it). Files, one object each:
 *
 *   sock_sys.h     raw system calls (socket, connect, recvmsg, poll, ...)
 *   sock_cfg.c     VMMC_SOCK_* settings (sock_cfg)
 *   sock_fd.c      the descriptor table: fd -> sock_t, references, dups, modes
 *   sock_api.c     the public calls of vmmc/sock.h that dispatch on the mode
 *   sock_io.c      send/recv family, sendfile (dispatch, timeouts, SIGPIPE)
 *   sock_poll.c    vmmc_sock_poll, vmmc_sock_ready, vmmc_sock_event_fd
 *   sock_wait.c    sock_wait: spin, arm, sleep; the EINTR rule
 *   sock_ctx.c     the process context: endpoint, the sock thread, fork/exec
 *   sock_probe.c   UDP probes: the listener's responder, the client's probe,
 *                  the listener's shared probe table
 *   sock_hello.c   the hello/ack exchange on the TCP stream (sock_up_*)
 *   sock_rec.c     reading and writing the TCP stream's records
 *   sock_ring.c    one direction's byte ring in exported memory
 *   sock_conn.c    an upgraded connection: send/recv/ready/shutdown/close
 *                  (the byte path in sock_conn_io.c, receive, and
 *                  sock_conn_tx.c, send; posted receives in sock_zcopy.c)
 *   sock_revert.c  the way back to TCP (fork, exec), both sides
 *
 * How a connection upgrades (sock_probe.c, sock_hello.c):
 *   1. listen(): the listener binds a UDP socket to the same address and
 *      port (if it can; else it never upgrades) and answers probes from the
 *      sock thread. Its probe table is MAP_SHARED anonymous memory made at
 *      listen(), so processes that inherit the listener through fork() (a
 *      pre-forked server whose workers accept) share it.
 *   2. connect() established (blocking: inside connect; non-blocking: at the
 *      first call that sees it established): the client sends a PROBE
 *      datagram {its TCP address, the server's, a nonce} to the server's
 *      address and port over UDP; retried until VMMC_SOCK_PROBE_TIMEOUT. The
 *      responder records {client address, token} in the table (state PROBED)
 *      unless the acceptor already decided that connection is plain
 *      (PLAIN: answer NO) and answers YES{token}. No answer, an ICMP error or
 *      NO: the socket stays on the kernel for good.
 *   3. YES: the client opens its endpoint (sock_ctx_get), makes its conn
 *      (sock_conn_open: exports its receive ring) and sends HELLO{token, its
 *      vmmc address, its ring} on the TCP stream. From then on the client
 *      never writes to the TCP stream (until a revert); what the application
 *      writes waits in the conn's local buffer until the ACK.
 *   4. The acceptor, at the first call on the accepted socket (read, write,
 *      poll that sees it readable): looks the peer up in the shared table.
 *      PROBED: the next bytes on TCP are a HELLO (wait for it, bounded by
 *      VMMC_SOCK_HELLO_TIMEOUT); it connects to the client's endpoint, opens
 *      its conn (its ring), attaches the client's ring, sends ACK{0, its
 *      address, its ring}: upgraded. Not in the table: a read waits for the
 *      first bytes as the kernel would (a HELLO with the right token still
 *      upgrades it: the probe raced the read), a write decides PLAIN (CAS in
 *      the table, so a late probe is answered NO). A HELLO that does not
 *      check out gets ACK{error} and both ends stay on the kernel (the client
 *      then flushes its local buffer to the TCP stream).
 *   5. The client reads the ACK (sock_conn_on_tcp, from whichever thread
 *      calls first, or the sock thread), attaches the server's ring and
 *      flushes its local buffer into it.
 *
 * While upgraded, the TCP stream carries only records (struct sock_rec):
 * ACK, REVERT, REVERT_ACK; the kernel's EOF or reset on it is the liveness
 * signal (a peer that dies closes it). A record that does not parse is a
 * protocol error: the connection is reset (ECONNRESET), never a crash.
 *
 * Locks: sock_t.lock guards mode changes (short); rx_lock and tx_lock
 * serialise each direction (held while a call blocks). Order: tx_lock, then
 * rx_lock, then lock. Never call the mode hook or block in the sock thread
 * with sock_t.lock held.
 */
#ifndef VMMC_SOCK_SOCK_H
#define VMMC_SOCK_SOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>

#include "vmmc/sock.h"
#include "vmmc/vmmc.h"

typedef struct sock sock_t;
typedef struct sock_conn sock_conn_t;
typedef struct sock_ctx sock_ctx_t;
typedef struct sock_listener sock_listener_t;

/* ------------------------------------------------------------------------ */
/* settings (sock_cfg.c) */

typedef struct sock_cfg {
    int upgrade;                /* VMMC_SOCK_UPGRADE: 0 leaves every socket on the kernel */
    uint64_t ring;              /* VMMC_SOCK_RING: bytes of each direction's ring */
    uint64_t probe_timeout_ns;  /* VMMC_SOCK_PROBE_TIMEOUT */
    uint64_t hello_timeout_ns;  /* VMMC_SOCK_HELLO_TIMEOUT */
    uint64_t revert_timeout_ns; /* VMMC_SOCK_REVERT_TIMEOUT */
    uint64_t spin_ns;           /* VMMC_SOCK_SPIN: spin before a blocking call sleeps */
    uint64_t zcopy;             /* VMMC_SOCK_ZCOPY: reads this large may be placed directly */
    int64_t probe_slots;        /* VMMC_SOCK_PROBE_SLOTS: shared probe table entries */
    int debug;                  /* VMMC_SOCK_DEBUG: one line per upgrade/revert on stderr */
} sock_cfg_t;

/* Loaded once (thread-safe); values checked (vmmc_config_check()). */
const sock_cfg_t *sock_cfg(void);

/* ------------------------------------------------------------------------ */
/* the socket and the descriptor table (sock_fd.c) */

struct sock {
    pthread_mutex_t lock;      /* mode, conn/pend/lst pointers, flags below */
    pthread_mutex_t rx_lock;   /* one reader at a time (held while blocked) */
    pthread_mutex_t tx_lock;   /* one writer at a time */
    _Atomic int refs;          /* object references: descriptors + holders */
    int nfds;                  /* descriptors that name it (dups), under lock */
    int fd;                    /* one of them, live: what the layer's kernel
                                  calls use (updated when it is closed) */
    int domain;                /* AF_INET or AF_INET6 */
    _Atomic int mode;          /* vmmc_sock_mode_t */
    _Atomic int nonblock;      /* O_NONBLOCK of the open file (shared by dups) */
    int connecting;            /* non-blocking connect() in flight */
    int accepted;              /* server side of a connection (from accept) */
    int rcvtimeo_ms, sndtimeo_ms; /* SO_RCVTIMEO/SO_SNDTIMEO, -1: none */
    int shut_rd, shut_wr;      /* shutdown() done here */
    struct sockaddr_storage peer, local; /* once connected */
    socklen_t peer_len, local_len;
    sock_conn_t *conn;         /* mode VMMC (and a client between HELLO and ACK) */
    sock_listener_t *lst;      /* mode LISTENING */
    void *pend;                /* sock_hello.c's state while PENDING */
};

/* The socket of @p fd with a reference taken (sock_put() it), or NULL. */
sock_t *sock_get(int fd);
void sock_hold(sock_t *s);
void sock_put(sock_t *s);       /* the last reference frees it */
/* Register @p fd (a kernel TCP socket) as a new socket in mode KERNEL, or as
 * another descriptor of @p s (dup). Returns the socket with a reference. */
sock_t *sock_fd_new(int fd, int domain);
int sock_fd_add(sock_t *s, int fd);
/* Forget @p fd (it is being closed); returns 1 if it was the socket's last
 * descriptor (the caller then closes the connection). */
int sock_fd_drop(int fd, sock_t *s);
/* Change the mode and call the mode hook (never with s->lock held). */
void sock_set_mode(sock_t *s, vmmc_sock_mode_t mode);
/* Every socket in mode VMMC (for revert_all / before_exec), with a
 * reference each; returns the count, fills at most @p max. */
int sock_fd_upgraded(sock_t **out, int max);
/* Is some descriptor of @p s without FD_CLOEXEC (survives exec)? */
int sock_fd_survives_exec(sock_t *s);

/* ------------------------------------------------------------------------ */
/* the process context (sock_ctx.c) */

/* The context, made on first use: an open-world vmmc endpoint
 * (vmmc_ep_open, listening for connects) and the sock thread. NULL and errno
 * on failure (the caller then stays on the kernel). */
sock_ctx_t *sock_ctx_get(void);
sock_ctx_t *sock_ctx_peek(void);          /* NULL if not made (never makes it) */
vmmc_ep_t *sock_ctx_ep(sock_ctx_t *ctx);
int sock_ctx_event_fd(sock_ctx_t *ctx);   /* vmmc_event_fd() of the endpoint */
/* Run the endpoint's progress until it has nothing more (resets the event
 * fd after it fired). Cheap when nothing is pending. */
void sock_ctx_drain(sock_ctx_t *ctx);
/* A vmmc peer handle for @p addr (vmmc_connect; cached by the core). */
int sock_ctx_connect(sock_ctx_t *ctx, const void *addr, size_t len, int *peer);

/* The sock thread polls descriptors for the layer: the listeners' probe
 * sockets, the TCP side of upgraded connections (records, EOF). @p fn runs
 * in the sock thread when @p fd has @p events; it must not block. After
 * sock_ctx_unwatch() returns, @p fn is not running and will not run (unless
 * called from @p fn itself). A context need not exist yet for the probe
 * sockets: sock_ctx_watch makes it if needed (then it may fail: -1/errno). */
typedef void (*sock_watch_fn)(int fd, short revents, void *arg);
int sock_ctx_watch(int fd, short events, sock_watch_fn fn, void *arg);
void sock_ctx_unwatch(int fd, void *arg);
/* The watch of @p arg polls @p fd from now on (the descriptor it polled is
 * being closed while a dup of the same socket lives on). Nothing if @p arg
 * is not watched. */
void sock_ctx_move(void *arg, int fd);

/* ------------------------------------------------------------------------ */
/* wire formats (on the TCP stream and in probe datagrams) */

#define SOCK_WIRE_VERSION 1
#define SOCK_RING_NAME_MAX 64

/* One side's receive ring, as the other side needs it to write there. */
typedef struct sock_ring_ref {
    uint16_t addr_len;                 /* bytes of addr used */
    uint8_t addr[VMMC_ADDR_MAX];       /* the side's vmmc endpoint address */
    char name[SOCK_RING_NAME_MAX];     /* export name, NUL-terminated */
    uint64_t size;                     /* bytes of ring data */
} sock_ring_ref_t;

enum {
    SOCK_REC_HELLO = 1,      /* client -> server: token, client's ring */
    SOCK_REC_ACK = 2,        /* server -> client: status, server's ring */
    SOCK_REC_REVERT = 3,     /* either way: back to TCP (sock_revert.c) */
    SOCK_REC_REVERT_ACK = 4  /* either way: the answer, resent bytes follow */
};

/* A record on the TCP stream: fixed size, little-endian host order (both
 * ends are this library; a peer on another host of other endianness is not
 * supported and fails the magic). */
#define SOCK_REC_MAGIC 0x4b434f53434d4d56ull /* "VMMCSOCK" */
typedef struct sock_rec {
    uint64_t magic;
    uint16_t version;
    uint16_t type;           /* SOCK_REC_* */
    int32_t status;          /* ACK: 0 or a negative vmmc status */
    uint64_t token;          /* HELLO: the probe's token */
    uint64_t a, b;           /* REVERT: a = bytes this side sent through vmmc,
                                b = bytes of the peer's it consumed */
    sock_ring_ref_t ring;    /* HELLO, ACK */
} sock_rec_t;

/* Read exactly one record from @p fd (waiting at most @p timeout_ms; -1
 * forever) / write one. 0, or -1 with errno (EPROTO: not a record). */
int sock_rec_read(int fd, sock_rec_t *r, int timeout_ms);
int sock_rec_write(int fd, const sock_rec_t *r);

/* ------------------------------------------------------------------------ */
/* probes and the upgrade (sock_probe.c, sock_hello.c) */

/* listen() done on s->fd: start answering probes (s->lst). Failure to bind
 * the UDP port only means this listener never upgrades (returns 0). */
int sock_probe_listen(sock_t *s);
void sock_probe_unlisten(sock_t *s);  /* last descriptor of the listener closed */

/* Client: the connection is established; probe the listener and, on YES,
 * open the conn and send HELLO (mode VMMC, conn awaiting ACK), else mode
 * KERNEL. Bounded by VMMC_SOCK_PROBE_TIMEOUT. Returns 0 (the mode says
 * which), or -1/errno for a failure the caller reports (none so far: every
 * failure of the upgrade leaves the socket on the kernel). */
int sock_up_client(sock_t *s);
/* Server: decide a PENDING accepted socket. @p why: SOCK_UP_READ (a read or
 * a readable poll: may consume a HELLO), SOCK_UP_WRITE (a write is waiting:
 * decide now), SOCK_UP_POLL (non-blocking look only). @p timeout_ms bounds
 * the wait for a HELLO that the table says is coming. Returns 0 when decided
 * (mode VMMC or KERNEL), -1/EAGAIN when not decided yet (no byte has come and
 * nothing forces the decision), other -1/errno on failure. */
enum { SOCK_UP_READ = 1, SOCK_UP_WRITE = 2, SOCK_UP_POLL = 3 };
int sock_up_server(sock_t *s, int why, int timeout_ms);

/* ------------------------------------------------------------------------ */
/* an upgraded connection (sock_conn.c, sock_ring.c, sock_revert.c) */

/* Open the conn of @p s: allocate and export its receive ring (VMMC_SOCK_RING
 * bytes, under a random unguessable name; importable only by @p peer when
 * @p peer >= 0) and describe it in @p mine. The conn starts detached: sends
 * wait in a local buffer (up to the ring size) until sock_conn_attach(). */
int sock_conn_open(sock_ctx_t *ctx, sock_t *s, int peer, sock_conn_t **c,
                   sock_ring_ref_t *mine);
/* Import the peer's ring (connecting to its endpoint as needed), flush the
 * local buffer into it. Called by the server with the HELLO's ring, and by
 * sock_conn_on_tcp() with the ACK's. 0, or -1/errno. */
int sock_conn_attach(sock_conn_t *c, const sock_ring_ref_t *theirs, int timeout_ms);
/* The client's conn after ACK{error}: give back what the local buffer holds
 * to the TCP stream and free the conn; the socket goes to mode KERNEL. */
int sock_conn_abandon(sock_conn_t *c);

/* Send/receive through vmmc. @p timeout_ms: -1 block (spin, then sleep on
 * the event fd and the TCP fd), 0 non-blocking (EAGAIN), > 0 bounded
 * (EAGAIN when it passes, as SO_RCVTIMEO). flags: MSG_PEEK, MSG_WAITALL,
 * MSG_DONTWAIT (the caller folded it into timeout_ms), MSG_NOSIGNAL,
 * MSG_TRUNC (discard). Returns bytes, 0 at EOF (recv), or -1/errno: EPIPE
 * (send after the peer closed or shutdown here; the caller raises SIGPIPE
 * unless MSG_NOSIGNAL), ECONNRESET (peer reset or protocol error), EINTR (a
 * signal interrupted the wait and nothing was moved; see sock_poll.c's rule
 * on SA_RESTART), EAGAIN. */
ssize_t sock_conn_send(sock_conn_t *c, const struct iovec *iov, int iovcnt, int flags,
                       int timeout_ms);
ssize_t sock_conn_recv(sock_conn_t *c, const struct iovec *iov, int iovcnt, int flags,
                       int timeout_ms);
/* sendfile(): read the file straight into the peer's ring. */
ssize_t sock_conn_sendfile(sock_conn_t *c, int in_fd, off_t *offset, size_t count,
                           int timeout_ms);
/* What poll() would report now for @p events (POLLIN: bytes, EOF, reset or a
 * record to handle; POLLOUT: room; POLLRDHUP, POLLHUP, POLLERR). Never
 * blocks; handles a TCP record or EOF that is there. */
short sock_conn_ready(sock_conn_t *c, short events);
size_t sock_conn_unread(sock_conn_t *c);      /* FIONREAD */
int sock_conn_shutdown(sock_conn_t *c, int how);
/* The last descriptor closed: FIN (or RST if bytes were left unread) to the
 * peer, wait (bounded) until it has them, withdraw the ring, free. */
int sock_conn_close(sock_conn_t *c);
/* The TCP side is readable: handle the records that are there (ACK,
 * REVERT, REVERT_ACK) and EOF/reset. Non-blocking. Called by the sock thread
 * (it watches every conn's TCP side) and by any waiter that saw it. */
void sock_conn_on_tcp(sock_conn_t *c);
/* Go back to TCP (sock_revert.c): the initiator's side of the protocol;
 * returns when both directions are on TCP (mode KERNEL) or the connection
 * was reset. Bounded by VMMC_SOCK_REVERT_TIMEOUT. */
int sock_conn_revert(sock_conn_t *c);
/* Transport name of the conn ("shm", "udp") and byte counts. */
void sock_conn_info(sock_conn_t *c, vmmc_sock_info_t *info);

/* ------------------------------------------------------------------------ */
/* waiting (sock_wait.c) */

/* Block until @p fd (the TCP side) has POLLIN-class events or the context's
 * event fd fires, at most @p timeout_ms (-1 forever). The waiter arms first,
 * then looks at @p recheck(arg), then sleeps: returns 1 when woken or when
 * recheck says ready, 0 on timeout, -1/EINTR on a signal that must
 * interrupt (a handler without SA_RESTART: a blocking call then fails with
 * EINTR as the kernel's would; with SA_RESTART it goes on waiting), -1/errno
 * else. Used by sock_conn.c, sock_hello.c and sock_poll.c alike. */
int sock_wait(sock_ctx_t *ctx, int fd, int timeout_ms, int (*recheck)(void *), void *arg);
/* Drain the context's event fd (sock_ctx_drain) if it fired, and wake every
 * thread sleeping in sock_wait() meanwhile: a wake-up this drain consumed
 * may have been meant for one of them. Code that drains the context outside
 * sock_wait() (a poll over many sockets) drains through this. */
void sock_wait_drain(sock_ctx_t *ctx);

#endif /* VMMC_SOCK_SOCK_H */
