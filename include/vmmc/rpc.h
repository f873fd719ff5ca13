/**
 * @file rpc.h
 * @brief vRPC: SunRPC (ONC RPC) clients and servers over vmmc sockets.
 *
 * A native transport for programs linked with libtirpc: a CLIENT and a
 * SVCXPRT that fill libtirpc's public operation tables (struct clnt_ops,
 * struct xp_ops/xp_ops2) on vmmc sockets (vmmc/sock.h). On the wire they
 * speak standard ONC RPC over TCP with record marking (RFC 5531 §11), so a
 * vRPC client calls any TCP RPC server (rpcgen's, the kernel's NFS helpers)
 * and a plain libtirpc TCP client calls a vRPC server; the connection moves
 * onto vmmc when the other end runs vmmc too (its own vRPC, or a plain
 * program under `vmmc preload`), and stays on the kernel otherwise.
 *
 * What it saves over libtirpc's clnt_vc/svc_vc: a call is XDR-encoded
 * straight into one buffer with its record mark in front and sent with one
 * socket call; a reply (or a request, on the server) is read whole (the
 * mark, then exactly its length) into one buffer and decoded where it lies;
 * there is no xdrrec layer between the stream and XDR. docs/rpc.md lists
 * the copies that remain.
 *
 * rpcgen's stubs (clnt_call through CLIENT, svc_sendreply/svc_getargs
 * through SVCXPRT) run unchanged over these handles: only the creation
 * differs, e.g. clnt_vmmc_create() where the program had clnt_create().
 *
 * @code
 *   CLIENT *cl = clnt_vmmc_create("server", PROG, VERS, "tcp");   // rpcbind finds the port
 *   if (!cl) { clnt_pcreateerror("server"); exit(1); }
 *   int *r = add_1(&args, cl);                                     // rpcgen stub
 *
 *   SVCXPRT *x = svc_vmmc_create(RPC_ANYSOCK, 0, 0);              // a listener
 *   svc_reg(x, PROG, VERS, prog_1, getnetconfigent("tcp"));       // and rpcbind
 *   svc_vmmc_run();
 * @endcode
 *
 * Errors are libtirpc's: creation failures in rpc_createerr
 * (clnt_pcreateerror() prints them), call failures as the clnt_stat the
 * call returns and clnt_geterr()/clnt_sperror() (RPC_CANTSEND,
 * RPC_CANTRECV with re_errno ECONNRESET when the server died, RPC_TIMEDOUT
 * after the call's timeout or CLSET_TIMEOUT, RPC_CANTDECODERES, and so on).
 * vmmc_rpc_last_error() adds the precise reason of the calling thread's
 * last failure (a malformed or oversized record, which call failed).
 *
 * Threads: a CLIENT serialises its calls (one in flight at a time); a
 * server's handles are used by the thread that runs its loop, as libtirpc's.
 * fork(): as with any vmmc socket (vmmc/sock.h), both processes may go on
 * using the connection.
 */
#ifndef VMMC_RPC_H
#define VMMC_RPC_H

#include <rpc/rpc.h>
#include <sys/socket.h>

#include "vmmc/vmmc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @name Clients @{ */

/**
 * @brief A client of program @p prog, version @p vers on @p host: rpcbind
 * (or the portmapper) on @p host gives the port for @p nettype, then a vmmc
 * socket connects to it.
 *
 * @param host    a host name or a numeric IPv4/IPv6 address.
 * @param nettype "tcp" or "tcp6" (the netid looked up), or NULL: "tcp",
 *                then "tcp6".
 * @return the CLIENT (auth none, as clnt_create's; replace cl_auth as
 *         usual), or NULL with rpc_createerr set (RPC_UNKNOWNHOST,
 *         RPC_PROGNOTREGISTERED, RPC_UNKNOWNPROTO, RPC_SYSTEMERROR with
 *         the errno) and vmmc_rpc_last_error() saying why.
 */
VMMC_API CLIENT *clnt_vmmc_create(const char *host, rpcprog_t prog, rpcvers_t vers,
                                  const char *nettype);

/**
 * @brief A client of @p prog/@p vers at the socket address @p addr (IPv4 or
 * IPv6, with its port): no rpcbind. @p sendsz/@p recvsz: first sizes of the
 * call and reply buffers (0: defaults); they grow as calls need, up to
 * VMMC_RPC_MAXREC.
 */
VMMC_API CLIENT *clnt_vmmc_addr_create(const struct sockaddr *addr, socklen_t len,
                                       rpcprog_t prog, rpcvers_t vers, u_int sendsz,
                                       u_int recvsz);

/**
 * @brief A client on a connected TCP socket @p fd (a vmmc socket, or a
 * kernel TCP socket not used yet, which is adopted with vmmc_sock_adopt()).
 * clnt_destroy() leaves @p fd open unless CLSET_FD_CLOSE is set.
 */
VMMC_API CLIENT *clnt_vmmc_fd_create(int fd, rpcprog_t prog, rpcvers_t vers, u_int sendsz,
                                     u_int recvsz);
/** @} */

/** @name Servers @{ */

/**
 * @brief A server transport that listens on @p fd and serves every
 * connection accepted on it (as svc_vc_create()).
 *
 * @param fd a TCP socket (vmmc socket or kernel socket, bound or not,
 *           listening or not), or RPC_ANYSOCK: a new IPv4 vmmc socket on
 *           any address and a port the kernel picks (xprt->xp_port).
 * @param sendsz, recvsz first sizes of each connection's buffers (0:
 *           defaults); they grow as requests need, up to VMMC_RPC_MAXREC.
 * @return the listening SVCXPRT, registered with xprt_register() (netid
 *         "tcp" or "tcp6" after its address family, so svc_reg() with
 *         getnetconfigent() of that netid registers it with rpcbind), or
 *         NULL (the reason in vmmc_rpc_last_error()).
 *
 * A connection whose client sends a malformed record mark or a record
 * larger than VMMC_RPC_MAXREC, or does not take its reply within
 * VMMC_RPC_SVC_WAIT, is closed; the others are not disturbed.
 */
VMMC_API SVCXPRT *svc_vmmc_create(int fd, u_int sendsz, u_int recvsz);

/**
 * @brief As svc_tp_create(): a listener for the netconfig @p nconf ("tcp":
 * IPv4, "tcp6": IPv6) on a port the kernel picks, with @p dispatch
 * registered for @p prog/@p vers, with rpcbind too (svc_reg). NULL on
 * failure (the reason in vmmc_rpc_last_error()).
 */
VMMC_API SVCXPRT *svc_vmmc_tp_create(void (*dispatch)(struct svc_req *, SVCXPRT *),
                                     rpcprog_t prog, rpcvers_t vers,
                                     const struct netconfig *nconf);

/**
 * @brief svc_run() that sees vmmc readiness: waits with vmmc_sock_poll() on
 * every descriptor in svc_pollfd (vmmc sockets and any other transport's)
 * and dispatches with svc_getreq_poll(). Returns after svc_exit(), or on a
 * poll failure other than EINTR (the reason in vmmc_rpc_last_error()).
 * Under `vmmc preload`, libtirpc's own svc_run() does the same.
 */
VMMC_API void svc_vmmc_run(void);

/**
 * @brief One pass of svc_vmmc_run(): wait at most @p timeout_ms (-1:
 * forever) and serve what is ready. Returns the number of descriptors
 * served, 0 on timeout, -1 with errno on failure (EINTR included).
 */
VMMC_API int svc_vmmc_poll(int timeout_ms);
/** @} */

/** @brief The precise reason of the calling thread's last vRPC failure
 *  ("" if none). */
VMMC_API const char *vmmc_rpc_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* VMMC_RPC_H */
