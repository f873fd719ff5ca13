/* An XDR encoding stream that gathers instead of copying (rpc_int.h).
 *
 * Small items (integers, headers, short opaques and strings) are written
 * into the record buffer as xdrmem would. An opaque or string of at least
 * RPC_GATHER_MIN bytes is not copied: the stream closes the buffer's
 * current piece, records an iovec that points at the caller's bytes, and
 * goes on in the buffer after it. The record is then one sendmsg of those
 * pieces, and the sockets layer copies the caller's bytes once, into the
 * peer's ring (or the kernel). The caller's memory must stay as it is until
 * the record is sent: true of a call's arguments during clnt_call and of a
 * reply's results during svc_sendreply. */
#include <string.h>

#include "rpc/rpc_int.h"

#define GX(x) ((rpc_gx_t *)(x)->x_private)

/* Close the buffer's open piece into the iovec list. */
static void close_piece(rpc_gx_t *g)
{
    if (g->used > g->piece)
        g->iov[g->n++] = (struct iovec){g->base + g->piece, g->used - g->piece};
    g->piece = g->used;
}

static bool_t gx_putlong(XDR *x, const long *lp)
{
    rpc_gx_t *g = GX(x);
    if (g->cap - g->used < 4)
        return FALSE;
    uint32_t v = htonl((uint32_t)*lp);
    memcpy(g->base + g->used, &v, 4);
    g->used += 4;
    g->total += 4;
    return TRUE;
}

static bool_t gx_putbytes(XDR *x, const char *p, u_int n)
{
    rpc_gx_t *g = GX(x);
    /* a reference needs two slots: the piece it closes and itself, and one
     * more stays for the last piece */
    if (g->gather && n >= RPC_GATHER_MIN && g->n + 3 <= RPC_GX_IOV) {
        close_piece(g);
        g->iov[g->n++] = (struct iovec){(void *)p, n};
        g->total += n;
        return TRUE;
    }
    if (g->cap - g->used < n)
        return FALSE;
    memcpy(g->base + g->used, p, n);
    g->used += n;
    g->total += n;
    return TRUE;
}

static u_int gx_getpostn(XDR *x)
{
    return (u_int)GX(x)->total;
}

/* Back within the open piece only (what XDR routines that rewrite a
 * length do); a reference already taken cannot be undone. */
static bool_t gx_setpostn(XDR *x, u_int pos)
{
    rpc_gx_t *g = GX(x);
    size_t open = g->used - g->piece;
    if (pos > g->total || g->total - pos > open)
        return FALSE;
    g->used -= g->total - pos;
    g->total = pos;
    return TRUE;
}

static int32_t *gx_inline(XDR *x, u_int len)
{
    rpc_gx_t *g = GX(x);
    if (g->cap - g->used < len || ((uintptr_t)(g->base + g->used) & 3))
        return NULL;
    int32_t *p = (int32_t *)(void *)(g->base + g->used);
    g->used += len;
    g->total += len;
    return p;
}

static bool_t gx_getlong(XDR *x, long *lp)
{
    (void)x, (void)lp;
    return FALSE;
}

static bool_t gx_getbytes(XDR *x, char *p, u_int n)
{
    (void)x, (void)p, (void)n;
    return FALSE;
}

static void gx_destroy(XDR *x)
{
    (void)x;
}

static bool_t gx_control(XDR *x, int req, void *info)
{
    (void)x, (void)req, (void)info;
    return FALSE;
}

static const struct xdr_ops gx_ops = {gx_getlong,  gx_putlong, gx_getbytes, gx_putbytes,
                                      gx_getpostn, gx_setpostn, gx_inline,  gx_destroy,
                                      gx_control};

void rpc_gx_create(rpc_gx_t *g, char *buf, size_t cap, int gather)
{
    g->gather = gather;
    memset(&g->x, 0, sizeof g->x);
    g->x.x_op = XDR_ENCODE;
    g->x.x_ops = (struct xdr_ops *)&gx_ops;
    g->x.x_private = g;
    g->base = buf;
    g->cap = cap;
    g->used = 4; /* the record mark goes there */
    g->piece = 0;
    g->total = 0;
    g->n = 0;
}

int rpc_gx_finish(rpc_gx_t *g)
{
    close_piece(g);
    uint32_t m = htonl(rpc_mark(g->total));
    memcpy(g->base, &m, 4);
    return g->n;
}
