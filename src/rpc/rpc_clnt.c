/* The vRPC CLIENT: struct clnt_ops over a vmmc socket (libtirpc's clnt_vc.c
 * is the model; its xdrrec layer is gone).
 *
 * A call: the 20-byte call header made at creation is copied in front,
 * then the procedure, the credentials and the arguments are XDR-encoded
 * straight into one buffer behind a 4-byte record mark, large opaques
 * referred to where they are (rpc_xdr.c); the whole record goes out with
 * one socket call. The reply is read whole (rpc_rec.c) into
 * the reply buffer and decoded there with an xdrmem stream. A reply whose
 * xid is not the call's (the late answer of a call that timed out) is read
 * and dropped. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/rpc_int.h"
#include "vmmc/sock.h"

#define CALLHDR_LEN 20 /* xid, CALL, RPC version, program, version */

typedef struct vclnt {
    pthread_mutex_t lock;
    int fd;
    int closeit;               /* close fd at destroy */
    struct timeval wait;       /* CLSET_TIMEOUT */
    int waitset;
    uint32_t xid;
    unsigned char hdr[CALLHDR_LEN]; /* XDR of the call header */
    rpc_buf_t sbuf, rbuf;
    struct rpc_err err;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    rpc_rd_t rd;
    rpc_gx_t gx;               /* the call being encoded */
} vclnt_t;

static const struct clnt_ops vclnt_ops;

static uint64_t tv_ns(struct timeval tv)
{
    if (tv.tv_sec < 0 || tv.tv_usec < 0)
        return 0;
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static void put32(unsigned char *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return ntohl(v);
}

static enum clnt_stat fail_call(vclnt_t *ct, enum clnt_stat st, int err)
{
    ct->err.re_status = st;
    ct->err.re_errno = err;
    return st;
}

/* Encode the call record (mark in front) into ct->gx: large opaques are
 * referred to where they are (rpc_xdr.c). Its number of pieces, or 0. */
static int encode_call(CLIENT *cl, vclnt_t *ct, rpcproc_t proc, xdrproc_t xargs, void *args)
{
    size_t maxrec = rpc_cfg()->maxrec;
    int gather = cl->cl_auth->ah_cred.oa_flavor != RPCSEC_GSS;
    for (int attempt = 0; attempt < 2; attempt++) {
        rpc_gx_t *g = &ct->gx;
        rpc_gx_create(g, ct->sbuf.p, ct->sbuf.cap, gather);
        int32_t p32 = (int32_t)proc;
        int ok = XDR_PUTBYTES(&g->x, (char *)ct->hdr, CALLHDR_LEN) &&
                 XDR_PUTINT32(&g->x, &p32) && AUTH_MARSHALL(cl->cl_auth, &g->x) &&
                 AUTH_WRAP(cl->cl_auth, &g->x, xargs, args);
        if (ok) {
            if (g->total > maxrec) {
                errno = EMSGSIZE;
                rpc_fail("a call of %zu bytes exceeds VMMC_RPC_MAXREC (%zu)", g->total, maxrec);
                return 0;
            }
            return rpc_gx_finish(g);
        }
        if (attempt)
            break;
        /* too small, or the arguments do not encode: size them and retry once */
        u_long need = xargs ? xdr_sizeof(xargs, args) : 0;
        size_t total = (size_t)need + CALLHDR_LEN + 4 + 2 * (8 + MAX_AUTH_BYTES) + 4;
        if (!need || total <= ct->sbuf.cap - 4)
            break;
        if (total > maxrec + 4) {
            errno = EMSGSIZE;
            rpc_fail("a call of about %zu bytes exceeds VMMC_RPC_MAXREC (%zu)", total, maxrec);
            return 0;
        }
        if (rpc_buf_reserve(&ct->sbuf, total + 4, 0))
            return 0;
    }
    errno = EINVAL;
    rpc_fail("the arguments of procedure %u do not encode", (unsigned)proc);
    return 0;
}

/* Read records until the one answering @p xid is in rbuf; 0, or a status. */
static enum clnt_stat read_reply(vclnt_t *ct, uint32_t xid, uint64_t dl, size_t *len)
{
    size_t maxrec = rpc_cfg()->maxrec;
    for (;;) {
        int eof = 0;
        int r = rpc_rd_pump(ct->fd, &ct->rd, &ct->rbuf, maxrec, &eof);
        if (r < 0) {
            int e = errno;
            rpc_rd_next(&ct->rd); /* the stream is lost: no later call may use it */
            return fail_call(ct, RPC_CANTRECV, e);
        }
        if (r == 0) {
            int w = rpc_wait_fd(ct->fd, POLLIN, dl);
            if (w < 0)
                return fail_call(ct, RPC_CANTRECV, errno);
            if (w == 0) {
                rpc_fail("no reply within the call's timeout");
                return fail_call(ct, RPC_TIMEDOUT, 0);
            }
            continue;
        }
        size_t n = ct->rd.len;
        rpc_rd_next(&ct->rd);
        if (n >= 4 && get32((unsigned char *)ct->rbuf.p) == xid) {
            *len = n;
            return RPC_SUCCESS;
        }
        /* a reply to an earlier call that timed out, or garbage: drop it */
    }
}

static enum clnt_stat vclnt_call(CLIENT *cl, rpcproc_t proc, xdrproc_t xargs, void *args,
                                 xdrproc_t xres, void *res, struct timeval timeout)
{
    vclnt_t *ct = cl->cl_private;
    pthread_mutex_lock(&ct->lock);
    enum clnt_stat st;
    if (ct->waitset)
        timeout = ct->wait;
    if (!xargs)
        xargs = rpc_xdr_void;
    int refreshes = 2;
    int shipnow = !(xres == NULL && timeout.tv_sec == 0 && timeout.tv_usec == 0);
    uint64_t dl = rpc_deadline(tv_ns(timeout));
again:
    memset(&ct->err, 0, sizeof ct->err);
    uint32_t xid = ++ct->xid;
    put32(ct->hdr, xid);
    int pieces = encode_call(cl, ct, proc, xargs, args);
    if (!pieces) {
        st = fail_call(ct, RPC_CANTENCODEARGS, errno);
        goto out;
    }
    if (rpc_send_all(ct->fd, ct->gx.iov, pieces, dl)) {
        st = fail_call(ct, errno == ETIMEDOUT ? RPC_TIMEDOUT : RPC_CANTSEND, errno);
        goto out;
    }
    if (!shipnow) {
        st = RPC_SUCCESS; /* batched: no reply is coming */
        goto out;
    }
    if (timeout.tv_sec == 0 && timeout.tv_usec == 0) {
        st = fail_call(ct, RPC_TIMEDOUT, 0); /* message passing: do not wait */
        goto out;
    }
    size_t rlen;
    st = read_reply(ct, xid, dl, &rlen);
    if (st != RPC_SUCCESS)
        goto out;

    struct rpc_msg reply;
    memset(&reply, 0, sizeof reply);
    reply.acpted_rply.ar_verf = _null_auth;
    reply.acpted_rply.ar_results.where = NULL;
    reply.acpted_rply.ar_results.proc = rpc_xdr_void;
    XDR x;
    xdrmem_create(&x, ct->rbuf.p, (u_int)rlen, XDR_DECODE);
    if (!xdr_replymsg(&x, &reply)) {
        XDR_DESTROY(&x);
        rpc_fail("a reply of %zu bytes that does not decode", rlen);
        st = fail_call(ct, RPC_CANTDECODERES, EPROTO);
        goto out;
    }
    _seterr_reply(&reply, &ct->err);
    if (ct->err.re_status == RPC_SUCCESS) {
        if (!AUTH_VALIDATE(cl->cl_auth, &reply.acpted_rply.ar_verf)) {
            ct->err.re_status = RPC_AUTHERROR;
            ct->err.re_why = AUTH_INVALIDRESP;
        } else if (!AUTH_UNWRAP(cl->cl_auth, &x, xres ? xres : rpc_xdr_void, res)) {
            if (ct->err.re_status == RPC_SUCCESS)
                ct->err.re_status = RPC_CANTDECODERES;
            rpc_fail("the results of procedure %u do not decode", (unsigned)proc);
        }
        if (reply.acpted_rply.ar_verf.oa_base != NULL) {
            x.x_op = XDR_FREE;
            (void)xdr_opaque_auth(&x, &reply.acpted_rply.ar_verf);
        }
    } else if (refreshes-- > 0 && AUTH_REFRESH(cl->cl_auth, &reply)) {
        XDR_DESTROY(&x);
        goto again;
    }
    XDR_DESTROY(&x);
    st = ct->err.re_status;
out:
    pthread_mutex_unlock(&ct->lock);
    return st;
}

static void vclnt_geterr(CLIENT *cl, struct rpc_err *e)
{
    vclnt_t *ct = cl->cl_private;
    *e = ct->err;
}

static bool_t vclnt_freeres(CLIENT *cl, xdrproc_t xres, void *res)
{
    (void)cl;
    XDR x;
    x.x_op = XDR_FREE;
    return xres(&x, res);
}

static void vclnt_abort(CLIENT *cl)
{
    (void)cl;
}

static bool_t vclnt_control(CLIENT *cl, u_int req, void *info)
{
    vclnt_t *ct = cl->cl_private;
    bool_t ok = TRUE;
    pthread_mutex_lock(&ct->lock);
    switch (req) {
    case CLSET_FD_CLOSE:
        ct->closeit = 1;
        break;
    case CLSET_FD_NCLOSE:
        ct->closeit = 0;
        break;
    case CLSET_TIMEOUT: {
        struct timeval *tv = info;
        if (!tv || tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000) {
            ok = FALSE;
            break;
        }
        ct->wait = *tv;
        ct->waitset = 1;
        break;
    }
    case CLGET_TIMEOUT:
        if (info)
            *(struct timeval *)info = ct->wait;
        else
            ok = FALSE;
        break;
    case CLGET_SERVER_ADDR:
        if (info)
            memcpy(info, &ct->addr, ct->addrlen);
        else
            ok = FALSE;
        break;
    case CLGET_FD:
        if (info)
            *(int *)info = ct->fd;
        else
            ok = FALSE;
        break;
    case CLGET_SVC_ADDR:
        if (info) {
            struct netbuf *nb = info;
            nb->buf = &ct->addr;
            nb->len = nb->maxlen = ct->addrlen;
        } else {
            ok = FALSE;
        }
        break;
    case CLGET_XID:
        if (info)
            *(uint32_t *)info = ct->xid;
        else
            ok = FALSE;
        break;
    case CLSET_XID:
        /* the next call uses this xid (as clnt_vc: it is incremented first) */
        if (info)
            ct->xid = *(uint32_t *)info - 1;
        else
            ok = FALSE;
        break;
    case CLGET_VERS:
        if (info)
            *(uint32_t *)info = get32(ct->hdr + 16);
        else
            ok = FALSE;
        break;
    case CLSET_VERS:
        if (info)
            put32(ct->hdr + 16, *(uint32_t *)info);
        else
            ok = FALSE;
        break;
    case CLGET_PROG:
        if (info)
            *(uint32_t *)info = get32(ct->hdr + 12);
        else
            ok = FALSE;
        break;
    case CLSET_PROG:
        if (info)
            put32(ct->hdr + 12, *(uint32_t *)info);
        else
            ok = FALSE;
        break;
    default:
        ok = FALSE;
    }
    pthread_mutex_unlock(&ct->lock);
    return ok;
}

static void vclnt_destroy(CLIENT *cl)
{
    vclnt_t *ct = cl->cl_private;
    if (ct->closeit)
        vmmc_sock_close(ct->fd);
    rpc_buf_free(&ct->sbuf);
    rpc_buf_free(&ct->rbuf);
    pthread_mutex_destroy(&ct->lock);
    if (cl->cl_auth)
        AUTH_DESTROY(cl->cl_auth);
    free(cl->cl_netid);
    free(cl->cl_tp);
    free(ct);
    free(cl);
}

static const struct clnt_ops vclnt_ops = {
    .cl_call = vclnt_call,
    .cl_abort = vclnt_abort,
    .cl_geterr = vclnt_geterr,
    .cl_freeres = vclnt_freeres,
    .cl_destroy = vclnt_destroy,
    .cl_control = vclnt_control,
};

static CLIENT *create_fail(enum clnt_stat st, int err)
{
    rpc_createerr.cf_stat = st;
    rpc_createerr.cf_error.re_status = st;
    rpc_createerr.cf_error.re_errno = err;
    return NULL;
}

VMMC_API CLIENT *clnt_vmmc_fd_create(int fd, rpcprog_t prog, rpcvers_t vers, u_int sendsz,
                                     u_int recvsz)
{
    rpc_fail_clear();
    if (fd < 0) {
        rpc_fail("clnt_vmmc_fd_create: fd %d is not a descriptor", fd);
        return create_fail(RPC_SYSTEMERROR, EBADF);
    }
    if (!vmmc_sock_is(fd) && vmmc_sock_adopt(fd) < 0) {
        int e = errno;
        rpc_fail("clnt_vmmc_fd_create: fd %d is not a TCP socket vmmc can take: %s", fd,
                 strerror(e));
        return create_fail(RPC_SYSTEMERROR, e);
    }
    CLIENT *cl = calloc(1, sizeof *cl);
    vclnt_t *ct = calloc(1, sizeof *ct);
    if (!cl || !ct)
        goto nomem;
    size_t first = rpc_cfg()->buf;
    if (rpc_buf_reserve(&ct->sbuf, sendsz > first ? sendsz : first, 0) ||
        rpc_buf_reserve(&ct->rbuf, recvsz > first ? recvsz : first, 0))
        goto nomem;
    pthread_mutex_init(&ct->lock, NULL);
    ct->fd = fd;
    ct->wait.tv_sec = 25; /* what CLGET_TIMEOUT says before CLSET_TIMEOUT, as clnt_vc */
    ct->addrlen = sizeof ct->addr;
    if (getpeername(fd, (struct sockaddr *)&ct->addr, &ct->addrlen)) {
        int e = errno;
        rpc_fail("clnt_vmmc_fd_create: fd %d is not connected: %s", fd, strerror(e));
        pthread_mutex_destroy(&ct->lock);
        rpc_buf_free(&ct->sbuf);
        rpc_buf_free(&ct->rbuf);
        free(ct);
        free(cl);
        return create_fail(RPC_SYSTEMERROR, e);
    }
    int one = 1;
    (void)vmmc_sock_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* a start the server cannot predict, as clnt_vc's */
    ct->xid = (uint32_t)(rpc_now_ns() ^ ((uint64_t)getpid() << 16) ^ (uintptr_t)ct);
    struct rpc_msg call;
    memset(&call, 0, sizeof call);
    call.rm_xid = 0;
    call.rm_direction = CALL;
    call.rm_call.cb_rpcvers = RPC_MSG_VERSION;
    call.rm_call.cb_prog = (uint32_t)prog;
    call.rm_call.cb_vers = (uint32_t)vers;
    XDR x;
    xdrmem_create(&x, (char *)ct->hdr, CALLHDR_LEN, XDR_ENCODE);
    if (!xdr_callhdr(&x, &call) || XDR_GETPOS(&x) != CALLHDR_LEN) {
        XDR_DESTROY(&x);
        rpc_fail("clnt_vmmc_fd_create: the call header does not encode");
        vclnt_destroy((cl->cl_private = ct, cl));
        return create_fail(RPC_CANTENCODEARGS, 0);
    }
    XDR_DESTROY(&x);
    cl->cl_ops = (struct clnt_ops *)&vclnt_ops;
    cl->cl_private = ct;
    cl->cl_auth = authnone_create();
    cl->cl_netid = strdup(ct->addr.ss_family == AF_INET6 ? "tcp6" : "tcp");
    cl->cl_tp = NULL;
    if (!cl->cl_auth || !cl->cl_netid) {
        vclnt_destroy(cl);
        rpc_fail("clnt_vmmc_fd_create: out of memory");
        return create_fail(RPC_SYSTEMERROR, ENOMEM);
    }
    return cl;
nomem:
    if (ct) {
        rpc_buf_free(&ct->sbuf);
        rpc_buf_free(&ct->rbuf);
    }
    free(ct);
    free(cl);
    rpc_fail("clnt_vmmc_fd_create: out of memory");
    return create_fail(RPC_SYSTEMERROR, ENOMEM);
}

VMMC_API CLIENT *clnt_vmmc_addr_create(const struct sockaddr *addr, socklen_t len,
                                       rpcprog_t prog, rpcvers_t vers, u_int sendsz,
                                       u_int recvsz)
{
    rpc_fail_clear();
    if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
        len < (addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                          : sizeof(struct sockaddr_in6))) {
        rpc_fail("clnt_vmmc_addr_create: not an IPv4 or IPv6 socket address");
        return create_fail(RPC_UNKNOWNADDR, EINVAL);
    }
    int fd = vmmc_sock_socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        rpc_fail("clnt_vmmc_addr_create: socket: %s", strerror(e));
        return create_fail(RPC_SYSTEMERROR, e);
    }
    int rc;
    do
        rc = vmmc_sock_connect(fd, addr, len);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        int e = errno;
        char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
        getnameinfo(addr, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV);
        vmmc_sock_close(fd);
        rpc_fail("clnt_vmmc_addr_create: connect to %s port %s: %s", host, serv, strerror(e));
        return create_fail(RPC_SYSTEMERROR, e);
    }
    CLIENT *cl = clnt_vmmc_fd_create(fd, prog, vers, sendsz, recvsz);
    if (!cl) {
        vmmc_sock_close(fd);
        return NULL;
    }
    ((vclnt_t *)cl->cl_private)->closeit = 1;
    return cl;
}

/* rpcbind's address of prog/vers for @p netid on @p host: 0 and @p out, or -1. */
static int lookup(const char *host, rpcprog_t prog, rpcvers_t vers, const char *netid,
                  struct sockaddr_storage *out, socklen_t *outlen)
{
    struct netconfig *nc = getnetconfigent(netid);
    if (!nc) {
        rpc_fail("clnt_vmmc_create: netid %s is not in /etc/netconfig", netid);
        create_fail(RPC_UNKNOWNPROTO, 0);
        return -1;
    }
    struct netbuf nb = {.maxlen = sizeof *out, .len = 0, .buf = out};
    bool_t ok = rpcb_getaddr(prog, vers, nc, &nb, host);
    freenetconfigent(nc);
    if (!ok) {
        rpc_fail("clnt_vmmc_create: rpcbind on %s does not know program %lu version %lu "
                 "over %s: %s", host, (unsigned long)prog, (unsigned long)vers, netid,
                 clnt_sperrno(rpc_createerr.cf_stat));
        return -1;
    }
    *outlen = nb.len;
    return 0;
}

VMMC_API CLIENT *clnt_vmmc_create(const char *host, rpcprog_t prog, rpcvers_t vers,
                                  const char *nettype)
{
    rpc_fail_clear();
    if (!host || !*host) {
        rpc_fail("clnt_vmmc_create: no host");
        return create_fail(RPC_UNKNOWNHOST, 0);
    }
    const char *netids[2] = {"tcp", "tcp6"};
    int n = 2;
    if (nettype && *nettype) {
        if (strcmp(nettype, "tcp") && strcmp(nettype, "tcp6")) {
            rpc_fail("clnt_vmmc_create: nettype \"%s\": vRPC speaks \"tcp\" and \"tcp6\"",
                     nettype);
            return create_fail(RPC_UNKNOWNPROTO, 0);
        }
        netids[0] = nettype;
        n = 1;
    }
    char why[256] = "";
    for (int i = 0; i < n; i++) {
        struct sockaddr_storage ss;
        socklen_t len;
        if (lookup(host, prog, vers, netids[i], &ss, &len)) {
            snprintf(why, sizeof why, "%s", vmmc_rpc_last_error());
            continue;
        }
        return clnt_vmmc_addr_create((struct sockaddr *)&ss, len, prog, vers, 0, 0);
    }
    rpc_fail("%s", why);
    return NULL;
}
