/* The vRPC server transports: a listener SVCXPRT that accepts, and one
 * SVCXPRT per connection (struct xp_ops/xp_ops2; libtirpc's svc_vc.c is the
 * model, without its xdrrec layer).
 *
 * A connection reads a request without blocking (rpc_rec.c keeps a
 * partial record between calls, so a slow or hostile client never stalls
 * the loop), decodes it where it lies with an xdrmem stream, and encodes the
 * reply behind its record mark into one buffer sent with one socket call
 * (bounded by VMMC_RPC_SVC_WAIT). Anything malformed closes that
 * connection: svc_getreq_common() sees XPRT_DIED and destroys it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/rpc_int.h"

#include <rpc/rpc_com.h>
#include <rpc/svc_auth.h>
#include <rpc/svc_mt.h>
#include "vmmc/sock.h"

typedef struct vsvc {
    SVCXPRT x;
    SVCXPRT_EXT ext;           /* xp_p3: libtirpc keeps the request's auth here */
    int listener;
    u_int sendsz, recvsz;
    struct sockaddr_storage laddr, raddr;
    /* a connection */
    rpc_rd_t rd;
    rpc_buf_t rbuf, sbuf;
    XDR xdrs;                  /* decoding the current request */
    int have_req;
    uint32_t xid;
    int dead;
    rpc_gx_t gx;               /* the reply being encoded */
} vsvc_t;

static const struct xp_ops conn_ops, lst_ops;
static const struct xp_ops2 vsvc_ops2;

/* The auth "none" wrap/unwrap, for a handle libtirpc has not authenticated yet. */
static int none_wrap(SVCAUTH *a, XDR *x, xdrproc_t f, caddr_t p)
{
    (void)a;
    return f(x, p);
}
static int none_destroy(SVCAUTH *a)
{
    (void)a;
    return TRUE;
}
static struct svc_auth_ops none_ops = {none_wrap, none_wrap, none_destroy};

static vsvc_t *vsvc_new(int fd, int listener, u_int sendsz, u_int recvsz)
{
    vsvc_t *v = calloc(1, sizeof *v);
    if (!v) {
        errno = ENOMEM;
        rpc_fail("out of memory");
        return NULL;
    }
    v->listener = listener;
    v->sendsz = sendsz;
    v->recvsz = recvsz;
    v->ext.xp_auth.svc_ah_ops = &none_ops;
    SVCXPRT *x = &v->x;
    x->xp_fd = fd;
    x->xp_ops = listener ? &lst_ops : &conn_ops;
    x->xp_ops2 = &vsvc_ops2;
    x->xp_p1 = v;
    x->xp_p3 = &v->ext;
    x->xp_verf.oa_base = NULL;
    socklen_t ll = sizeof v->laddr;
    if (getsockname(fd, (struct sockaddr *)&v->laddr, &ll) == 0) {
        x->xp_ltaddr.buf = &v->laddr;
        x->xp_ltaddr.len = x->xp_ltaddr.maxlen = ll;
        if (v->laddr.ss_family == AF_INET)
            x->xp_port = ntohs(((struct sockaddr_in *)&v->laddr)->sin_port);
        else if (v->laddr.ss_family == AF_INET6)
            x->xp_port = ntohs(((struct sockaddr_in6 *)&v->laddr)->sin6_port);
    }
    x->xp_netid = strdup(v->laddr.ss_family == AF_INET6 ? "tcp6" : "tcp");
    if (!x->xp_netid) {
        free(v);
        errno = ENOMEM;
        rpc_fail("out of memory");
        return NULL;
    }
    return v;
}

static void vsvc_free(vsvc_t *v)
{
    if (v->have_req)
        XDR_DESTROY(&v->xdrs);
    rpc_buf_free(&v->rbuf);
    rpc_buf_free(&v->sbuf);
    free(v->x.xp_netid);
    free(v->x.xp_tp);
    free(v);
}

/* ---- a connection ---- */

static bool_t conn_recv(SVCXPRT *xprt, struct rpc_msg *msg)
{
    vsvc_t *v = xprt->xp_p1;
    if (v->dead)
        return FALSE;
    if (v->have_req) {
        XDR_DESTROY(&v->xdrs);
        v->have_req = 0;
    }
    int eof;
    int r = rpc_rd_pump(xprt->xp_fd, &v->rd, &v->rbuf, rpc_cfg()->maxrec, &eof);
    if (r < 0) {
        v->dead = 1;
        return FALSE;
    }
    if (r == 0)
        return FALSE;
    size_t len = v->rd.len;
    rpc_rd_next(&v->rd);
    xdrmem_create(&v->xdrs, v->rbuf.p, (u_int)len, XDR_DECODE);
    v->have_req = 1;
    if (!xdr_callmsg(&v->xdrs, msg)) {
        rpc_fail("fd %d: a request of %zu bytes that is not an RPC call", xprt->xp_fd, len);
        v->dead = 1; /* the stream cannot be trusted any more */
        return FALSE;
    }
    v->xid = msg->rm_xid;
    return TRUE;
}

static enum xprt_stat conn_stat(SVCXPRT *xprt)
{
    vsvc_t *v = xprt->xp_p1;
    return v->dead ? XPRT_DIED : XPRT_IDLE;
}

static bool_t conn_getargs(SVCXPRT *xprt, xdrproc_t xargs, void *args)
{
    vsvc_t *v = xprt->xp_p1;
    if (!v->have_req)
        return FALSE;
    return SVCAUTH_UNWRAP(&SVC_XP_AUTH(xprt), &v->xdrs, xargs, args);
}

static bool_t conn_freeargs(SVCXPRT *xprt, xdrproc_t xargs, void *args)
{
    (void)xprt;
    XDR x;
    x.x_op = XDR_FREE;
    return xargs(&x, args);
}

/* Encode the reply (mark in front) into v->gx, large opaques referred to
 * where they are: its number of pieces, or 0. */
static int encode_reply(SVCXPRT *xprt, vsvc_t *v, struct rpc_msg *msg, xdrproc_t xres,
                        caddr_t where)
{
    size_t maxrec = rpc_cfg()->maxrec;
    size_t first = v->sendsz > rpc_cfg()->buf ? v->sendsz : rpc_cfg()->buf;
    if (rpc_buf_reserve(&v->sbuf, first, 0))
        return 0;
    int gather = msg->rm_reply.rp_stat != MSG_ACCEPTED ||
                 msg->acpted_rply.ar_verf.oa_flavor != RPCSEC_GSS;
    for (int attempt = 0; attempt < 2; attempt++) {
        rpc_gx_t *g = &v->gx;
        rpc_gx_create(g, v->sbuf.p, v->sbuf.cap, gather);
        int ok = xdr_replymsg(&g->x, msg) &&
                 (!xres || SVCAUTH_WRAP(&SVC_XP_AUTH(xprt), &g->x, xres, where));
        if (ok) {
            if (g->total > maxrec) {
                errno = EMSGSIZE;
                rpc_fail("fd %d: a reply of %zu bytes exceeds VMMC_RPC_MAXREC (%zu)",
                         xprt->xp_fd, g->total, maxrec);
                return 0;
            }
            return rpc_gx_finish(g);
        }
        if (attempt || !xres)
            break;
        u_long need = xdr_sizeof(xres, where);
        size_t total = (size_t)need + 64 + 2 * (8 + MAX_AUTH_BYTES);
        if (!need || total <= v->sbuf.cap - 4)
            break;
        if (total > maxrec + 4) {
            errno = EMSGSIZE;
            rpc_fail("fd %d: a reply of about %zu bytes exceeds VMMC_RPC_MAXREC (%zu)",
                     xprt->xp_fd, total, maxrec);
            return 0;
        }
        if (rpc_buf_reserve(&v->sbuf, total + 4, 0))
            return 0;
    }
    errno = EINVAL;
    rpc_fail("fd %d: the reply does not encode", xprt->xp_fd);
    return 0;
}

static bool_t conn_reply(SVCXPRT *xprt, struct rpc_msg *msg)
{
    vsvc_t *v = xprt->xp_p1;
    if (v->dead)
        return FALSE;
    xdrproc_t xres = NULL;
    caddr_t where = NULL;
    if (msg->rm_reply.rp_stat == MSG_ACCEPTED && msg->rm_reply.rp_acpt.ar_stat == SUCCESS) {
        xres = msg->acpted_rply.ar_results.proc;
        where = msg->acpted_rply.ar_results.where;
        msg->acpted_rply.ar_results.proc = rpc_xdr_void;
        msg->acpted_rply.ar_results.where = NULL;
    }
    msg->rm_xid = v->xid;
    int n = encode_reply(xprt, v, msg, xres, where);
    if (xres) {
        msg->acpted_rply.ar_results.proc = xres;
        msg->acpted_rply.ar_results.where = where;
    }
    if (!n)
        return FALSE;
    if (rpc_send_all(xprt->xp_fd, v->gx.iov, n, rpc_deadline(rpc_cfg()->svc_wait_ns))) {
        v->dead = 1; /* a reply cut in the middle: the stream is lost */
        return FALSE;
    }
    return TRUE;
}

static void conn_destroy(SVCXPRT *xprt)
{
    vsvc_t *v = xprt->xp_p1;
    xprt_unregister(xprt);
    vmmc_sock_close(xprt->xp_fd);
    vsvc_free(v);
}

static bool_t vsvc_control(SVCXPRT *xprt, const u_int rq, void *in)
{
    (void)xprt;
    switch (rq) {
    case SVCGET_CONNMAXREC:
        if (!in)
            return FALSE;
        *(int *)in = (int)rpc_cfg()->maxrec;
        return TRUE;
    default:
        break;
    }
    return FALSE;
}

/* ---- the listener ---- */

static bool_t lst_recv(SVCXPRT *xprt, struct rpc_msg *msg)
{
    (void)msg;
    vsvc_t *l = xprt->xp_p1;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd;
    do
        fd = vmmc_sock_accept(xprt->xp_fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            rpc_fail("accept on fd %d: %s", xprt->xp_fd, strerror(errno));
        return FALSE;
    }
    if (fd >= _rpc_dtablesize()) {
        rpc_fail("accept: fd %d is beyond libtirpc's table (%d)", fd, _rpc_dtablesize());
        vmmc_sock_close(fd);
        return FALSE;
    }
    int one = 1;
    (void)vmmc_sock_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    vsvc_t *c = vsvc_new(fd, 0, l->sendsz, l->recvsz);
    if (!c) {
        vmmc_sock_close(fd);
        return FALSE;
    }
    memcpy(&c->raddr, &ss, len);
    c->x.xp_rtaddr.buf = &c->raddr;
    c->x.xp_rtaddr.len = c->x.xp_rtaddr.maxlen = len;
    c->x.xp_addrlen = (int)(len < sizeof c->x.xp_raddr ? len : sizeof c->x.xp_raddr);
    memcpy(&c->x.xp_raddr, &ss, (size_t)c->x.xp_addrlen);
    size_t first = l->recvsz > rpc_cfg()->buf ? l->recvsz : rpc_cfg()->buf;
    if (rpc_buf_reserve(&c->rbuf, first, 0)) {
        vsvc_free(c);
        vmmc_sock_close(fd);
        return FALSE;
    }
    xprt_register(&c->x);
    return FALSE; /* no request on the listener itself */
}

static enum xprt_stat lst_stat(SVCXPRT *xprt)
{
    (void)xprt;
    return XPRT_IDLE;
}

static bool_t lst_never(SVCXPRT *xprt, xdrproc_t f, void *p)
{
    (void)xprt, (void)f, (void)p;
    return FALSE;
}

static bool_t lst_reply(SVCXPRT *xprt, struct rpc_msg *msg)
{
    (void)xprt, (void)msg;
    return FALSE;
}

static void lst_destroy(SVCXPRT *xprt)
{
    xprt_unregister(xprt);
    vmmc_sock_close(xprt->xp_fd);
    vsvc_free(xprt->xp_p1);
}

static const struct xp_ops conn_ops = {conn_recv,     conn_stat,    conn_getargs,
                                       conn_reply,    conn_freeargs, conn_destroy};
static const struct xp_ops lst_ops = {lst_recv, lst_stat, lst_never, lst_reply, lst_never,
                                      lst_destroy};
static const struct xp_ops2 vsvc_ops2 = {vsvc_control};

VMMC_API SVCXPRT *svc_vmmc_create(int fd, u_int sendsz, u_int recvsz)
{
    rpc_fail_clear();
    int made = 0;
    if (fd == RPC_ANYSOCK) {
        fd = vmmc_sock_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rpc_fail("svc_vmmc_create: socket: %s", strerror(errno));
            return NULL;
        }
        made = 1;
    } else if (fd < 0) {
        rpc_fail("svc_vmmc_create: fd %d is not a descriptor", fd);
        return NULL;
    } else if (!vmmc_sock_is(fd) && vmmc_sock_adopt(fd) < 0) {
        rpc_fail("svc_vmmc_create: fd %d is not a TCP socket vmmc can take: %s", fd,
                 strerror(errno));
        return NULL;
    }
    if (fd >= _rpc_dtablesize()) {
        rpc_fail("svc_vmmc_create: fd %d is beyond libtirpc's table (%d)", fd,
                 _rpc_dtablesize());
        goto fail;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len)) {
        rpc_fail("svc_vmmc_create: getsockname: %s", strerror(errno));
        goto fail;
    }
    int port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                        : ((struct sockaddr_in *)&ss)->sin_port;
    if (port == 0) { /* not bound: any address, a port the kernel picks */
        sa_family_t fam = ss.ss_family == AF_INET6 ? AF_INET6 : AF_INET;
        memset(&ss, 0, sizeof ss);
        ss.ss_family = fam;
        socklen_t bl = fam == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        if (vmmc_sock_bind(fd, (struct sockaddr *)&ss, bl)) {
            rpc_fail("svc_vmmc_create: bind: %s", strerror(errno));
            goto fail;
        }
    }
    int acc = 0;
    socklen_t al = sizeof acc;
    if (vmmc_sock_getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) || !acc) {
        if (vmmc_sock_listen(fd, SOMAXCONN)) {
            rpc_fail("svc_vmmc_create: listen: %s", strerror(errno));
            goto fail;
        }
    }
    int fl = vmmc_sock_fcntl(fd, F_GETFL, 0);
    if (fl < 0 || vmmc_sock_fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        rpc_fail("svc_vmmc_create: fcntl O_NONBLOCK: %s", strerror(errno));
        goto fail;
    }
    vsvc_t *l = vsvc_new(fd, 1, sendsz, recvsz);
    if (!l)
        goto fail;
    xprt_register(&l->x);
    return &l->x;
fail:
    if (made)
        vmmc_sock_close(fd);
    return NULL;
}

VMMC_API SVCXPRT *svc_vmmc_tp_create(void (*dispatch)(struct svc_req *, SVCXPRT *),
                                     rpcprog_t prog, rpcvers_t vers,
                                     const struct netconfig *nconf)
{
    rpc_fail_clear();
    if (!nconf || !dispatch) {
        rpc_fail("svc_vmmc_tp_create: no netconfig or no dispatch routine");
        return NULL;
    }
    int af;
    if (!strcmp(nconf->nc_netid, "tcp"))
        af = AF_INET;
    else if (!strcmp(nconf->nc_netid, "tcp6"))
        af = AF_INET6;
    else {
        rpc_fail("svc_vmmc_tp_create: netid %s: vRPC serves \"tcp\" and \"tcp6\"",
                 nconf->nc_netid);
        return NULL;
    }
    int fd = vmmc_sock_socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rpc_fail("svc_vmmc_tp_create: socket: %s", strerror(errno));
        return NULL;
    }
    if (af == AF_INET6) {
        int one = 1;
        (void)vmmc_sock_setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    SVCXPRT *x = svc_vmmc_create(fd, 0, 0);
    if (!x) {
        vmmc_sock_close(fd);
        return NULL;
    }
    (void)rpcb_unset(prog, vers, (struct netconfig *)nconf);
    if (!svc_reg(x, prog, vers, dispatch, nconf)) {
        rpc_fail("svc_vmmc_tp_create: svc_reg of program %lu version %lu over %s failed "
                 "(is rpcbind running?)", (unsigned long)prog, (unsigned long)vers,
                 nconf->nc_netid);
        SVC_DESTROY(x);
        return NULL;
    }
    return x;
}

VMMC_API int svc_vmmc_poll(int timeout_ms)
{
    int n = svc_max_pollfd;
    if (n == 0 && svc_pollfd == NULL) {
        errno = ENOENT;
        return rpc_fail("svc_vmmc_poll: no transport is registered (svc_exit?)");
    }
    /* svc_getreq_poll() walks svc_max_pollfd entries, which a dispatch that
     * accepts may grow: room for that, marked unused */
    size_t cap = (size_t)n + 64;
    struct pollfd *p = malloc(cap * sizeof *p);
    if (!p) {
        errno = ENOMEM;
        return rpc_fail("svc_vmmc_poll: out of memory");
    }
    memcpy(p, svc_pollfd, (size_t)n * sizeof *p);
    for (size_t i = (size_t)n; i < cap; i++)
        p[i] = (struct pollfd){.fd = -1};
    int r = vmmc_sock_poll(p, (nfds_t)n, timeout_ms);
    if (r > 0)
        svc_getreq_poll(p, r);
    else if (r < 0 && errno != EINTR)
        rpc_fail("svc_vmmc_poll: poll: %s", strerror(errno));
    int e = errno;
    free(p);
    errno = e;
    return r;
}

VMMC_API void svc_vmmc_run(void)
{
    for (;;) {
        if (svc_max_pollfd == 0 && svc_pollfd == NULL)
            return;
        if (svc_vmmc_poll(-1) < 0 && errno != EINTR)
            return;
    }
}
