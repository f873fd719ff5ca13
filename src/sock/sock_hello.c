/* The upgrade's decision on each side (steps 3 to 5 of sock.h).
 *
 * Client (sock_up_client, once its connection is established): probe; on
 * YES, unless the server already wrote (bytes waiting on the stream: it
 * went plain), open the conn and send HELLO. The ACK is handled by
 * sock_conn_on_tcp(), which attaches or abandons, and says which
 * (sock_up_acked): the client's "upgraded" line means the ACK said yes.
 *
 * Server (sock_up_server, at each call on a PENDING accepted socket until it
 * decides): its state is s->pend, freed when it decides. The table entry of
 * the connection (sock_probe_tab.c) and the first bytes on the stream decide:
 *   - PROBED: the client got YES; the HELLO is coming (or it gave up and
 *     sends plain bytes, or it was a forged probe: then the first bytes are
 *     not a record and the socket stays on the kernel);
 *   - nothing in the table, and the first bytes look like a HELLO: the probe
 *     raced this call (or its entry expired): claim it again and check the
 *     token; a HELLO that does not check out gets ACK{error} (the client
 *     then gives its bytes to the TCP stream), the socket stays on the kernel;
 *   - nothing in the table and other bytes, or EOF: plain;
 *   - nothing at all yet: a read or a poll waits (EAGAIN: the caller waits
 *     for the stream to become readable, as the kernel would); a write
 *     decides plain in the table, so that a late probe is answered NO.
 * A HELLO starts with the record's magic: a stream whose first bytes are a
 * prefix of it is waited for (bounded by @p timeout_ms) until it is whole.
 *
 * VMMC_SOCK_DEBUG=y: one line on stderr per decision, which tests grep:
 *   vmmc-sock[<pid>]: fd <n> upgraded (<transport>, client|server)
 *   vmmc-sock[<pid>]: fd <n> stays on tcp (<reason>, client|server) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/sock_probe.h"
#include "sock/sock_sys.h"
#include "sock/sock_up.h"
#include "util/clock.h"
#include "util/log.h"

typedef struct up_pend {
    sock_listener_t *lst;     /* the listener that decides (a reference), or NULL */
    sock_tab_t *tab;          /* its table */
    uint8_t key[SOCK_KEY_LEN];
    int claimed;              /* the table's entry is ours */
    uint64_t token;
} up_pend_t;

void sock_up_say(sock_t *s, const char *what, const char *detail, const char *side)
{
    if (sock_cfg()->debug)
        fprintf(stderr, "vmmc-sock[%d]: fd %d %s (%s, %s)\n", (int)getpid(), s->fd, what, detail,
                side);
}

static void decide_kernel(sock_t *s, const char *why, const char *side)
{
    sock_set_mode(s, VMMC_SOCK_KERNEL);
    sock_up_say(s, "stays on tcp", why, side);
}

/* ------------------------------------------------------------------------ */
/* client */

int sock_up_client(sock_t *s)
{
    const sock_cfg_t *cfg = sock_cfg();
    if (!cfg->upgrade) {
        decide_kernel(s, "upgrade disabled", "client");
        return 0;
    }
    uint64_t token;
    char addr[VMMC_ADDR_MAX];
    size_t alen = sizeof addr;
    const char *why;
    if (!sock_probe_client(s, &token, addr, &alen, &why)) {
        decide_kernel(s, why, "client");
        return 0;
    }
    sock_ctx_t *ctx = sock_ctx_get();
    if (!ctx) {
        decide_kernel(s, "no endpoint", "client");
        return 0;
    }
    char b;
    ssize_t n = sock_rec_peek(s->fd, &b, 1);
    if (n != -1 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        /* The server wrote (it went plain), or the stream ended. */
        decide_kernel(s, n > 0 ? "server wrote first" : "connection ended", "client");
        return 0;
    }
    /* The ring is for whoever accepts: the process that answered the probe
     * may not be the one that accepts (a pre-forked server), so the ring is
     * not restricted to the YES's endpoint; its name, random and sent only
     * on this TCP stream, is what lets the acceptor in. */
    sock_conn_t *c;
    sock_rec_t h;
    memset(&h, 0, sizeof h);
    if (sock_conn_open(ctx, s, -1, &c, &h.ring) != 0) {
        decide_kernel(s, "no ring", "client");
        return 0;
    }
    h.type = SOCK_REC_HELLO;
    h.token = token;
    pthread_mutex_lock(&s->lock);
    s->conn = c;
    pthread_mutex_unlock(&s->lock);
    /* Upgraded in name before the HELLO leaves: once it is out, the ACK
     * may come and be handled by another thread (the sock thread), and a
     * refusal retires the conn and sets the mode back to KERNEL; setting
     * VMMC after the write could undo that. The ACK's verdict is said by
     * sock_conn_on_tcp() (sock_up_acked). */
    sock_set_mode(s, VMMC_SOCK_VMMC);
    if (sock_rec_write(s->fd, &h) != 0) {
        (void)sock_conn_abandon(c); /* nothing buffered yet: only frees it */
        decide_kernel(s, "hello not sent", "client");
        return 0;
    }
    return 0;
}

void sock_up_acked(sock_t *s, int status, const char *transport)
{
    if (!status) {
        sock_up_say(s, "upgraded", transport, "client");
        return;
    }
    char why[96];
    snprintf(why, sizeof why, "ack: %s", vmmc_strerror(status));
    sock_up_say(s, "stays on tcp", why, "client");
}

/* ------------------------------------------------------------------------ */
/* server */

static void pend_free(sock_t *s)
{
    up_pend_t *p = s->pend;
    if (!p)
        return;
    if (p->claimed)
        sock_tab_release(p->tab, p->key);
    if (p->lst)
        sock_probe_put(p->lst);
    pthread_mutex_lock(&s->lock);
    s->pend = NULL;
    pthread_mutex_unlock(&s->lock);
    free(p);
}

static int server_kernel(sock_t *s, const char *why)
{
    pend_free(s);
    decide_kernel(s, why, "server");
    return 0;
}

static void send_ack_error(sock_t *s, int status)
{
    sock_rec_t a;
    memset(&a, 0, sizeof a);
    a.type = SOCK_REC_ACK;
    a.status = status;
    (void)sock_rec_write(s->fd, &a);
}

/* A checked HELLO with the right token: make the conn, answer ACK. */
static int server_upgrade(sock_t *s, const sock_rec_t *h, int timeout_ms)
{
    sock_ctx_t *ctx = sock_ctx_get();
    int peer;
    sock_conn_t *c;
    sock_rec_t a;
    memset(&a, 0, sizeof a);
    a.type = SOCK_REC_ACK;
    if (!ctx) {
        send_ack_error(s, VMMC_ERR_ENDPOINT);
        return server_kernel(s, "no endpoint");
    }
    if (sock_ctx_connect(ctx, h->ring.addr, h->ring.addr_len, &peer) != 0) {
        send_ack_error(s, VMMC_ERR_INVALID);
        return server_kernel(s, "bad client address");
    }
    if (sock_conn_open(ctx, s, peer, &c, &a.ring) != 0) {
        send_ack_error(s, VMMC_ERR_NOMEM);
        return server_kernel(s, "no ring");
    }
    if (sock_conn_attach(c, &h->ring, timeout_ms < 0 ? -1 : timeout_ms) != 0) {
        vmmc_warn("sock: fd %d: the client's ring cannot be imported: %s", s->fd,
                  vmmc_last_error());
        (void)sock_conn_abandon(c);
        send_ack_error(s, VMMC_ERR_PEER_UNREACHABLE);
        return server_kernel(s, "client ring unreachable");
    }
    pthread_mutex_lock(&s->lock);
    s->conn = c;
    pthread_mutex_unlock(&s->lock);
    /* Upgraded before the ACK leaves: the client may answer at once (a
     * REVERT, its end), which another thread may handle and retire the
     * conn for; setting VMMC after the write could undo that. */
    pend_free(s);
    sock_set_mode(s, VMMC_SOCK_VMMC);
    if (sock_rec_write(s->fd, &a) != 0) {
        (void)sock_conn_abandon(c);
        return server_kernel(s, "ack not sent");
    }
    vmmc_sock_info_t info;
    sock_conn_info(c, &info);
    sock_up_say(s, "upgraded", info.transport, "server");
    return 0;
}

/* Does what the stream holds start like a record? */
static int looks_like_record(const void *buf, size_t n)
{
    static const uint64_t magic = SOCK_REC_MAGIC;
    return memcmp(buf, &magic, n < sizeof magic ? n : sizeof magic) == 0;
}

/* Wait until @p fd is readable, at most @p timeout_ms (-1 forever): 1, 0
 * on timeout, -1/errno. */
static int wait_readable(int fd, int timeout_ms)
{
    uint64_t end = timeout_ms >= 0 ? vmmc_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
    for (;;) {
        int ms = -1;
        if (timeout_ms >= 0) {
            uint64_t now = vmmc_now_ns();
            ms = now >= end ? 0 : (int)((end - now + 999999) / 1000000);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
        int r = sys_poll(&p, 1, ms);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            return -1;
    }
}

int sock_up_server(sock_t *s, int why, int timeout_ms)
{
    if (atomic_load(&s->mode) != VMMC_SOCK_PENDING)
        return 0;
    up_pend_t *p = s->pend;
    if (!p) {
        if (!sock_cfg()->upgrade) {
            decide_kernel(s, "upgrade disabled", "server");
            return 0;
        }
        p = calloc(1, sizeof *p);
        if (!p)
            return server_kernel(s, "no memory");
        struct sockaddr_storage loc, peer;
        socklen_t ll = sizeof loc, pl = sizeof peer;
        if (sys_getsockname(s->fd, (struct sockaddr *)&loc, &ll) == 0 &&
            sys_getpeername(s->fd, (struct sockaddr *)&peer, &pl) == 0 &&
            sock_key_of((struct sockaddr *)&peer, pl, p->key) == 0)
            p->lst = sock_probe_find((struct sockaddr *)&loc, ll, p->key);
        if (p->lst)
            p->tab = p->lst->tab;
        pthread_mutex_lock(&s->lock);
        s->pend = p;
        pthread_mutex_unlock(&s->lock);
        /* No table (its listener closed long ago, or it is another
         * process's): no probe can be ours, but a HELLO may still come and
         * must be answered, not read as data. */
    }
    if (!p->claimed && p->tab) {
        int r = sock_tab_claim(p->tab, p->key, &p->token);
        if (r == SOCK_TAB_CLAIMED)
            p->claimed = 1;
        else if (r == SOCK_TAB_PLAIN)
            return server_kernel(s, "decided plain");
    }

    /* Waits here are for a HELLO in flight: never longer than its bound. */
    int hello_ms = (int)(sock_cfg()->hello_timeout_ns / 1000000u);
    if (timeout_ms < 0 || timeout_ms > hello_ms)
        timeout_ms = hello_ms;
    uint64_t end = vmmc_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        sock_rec_t h;
        ssize_t n = sock_rec_peek(s->fd, &h, sizeof h);
        if (n == 0)
            return server_kernel(s, "connection ended");
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return server_kernel(s, "connection failed");
        if (n > 0 && !looks_like_record(&h, (size_t)n))
            return server_kernel(s, p->claimed ? "client sent no hello" : "plain client");
        if (n == (ssize_t)sizeof h) {
            /* A whole record: take it, whatever it holds. */
            if (sock_rec_read(s->fd, &h, 0) != 0 || h.type != SOCK_REC_HELLO) {
                send_ack_error(s, VMMC_ERR_PROTOCOL);
                return server_kernel(s, "malformed hello");
            }
            if (!p->claimed && p->tab &&
                sock_tab_claim(p->tab, p->key, &p->token) == SOCK_TAB_CLAIMED)
                p->claimed = 1; /* the probe raced this call */
            if (!p->claimed || h.token != p->token) {
                send_ack_error(s, VMMC_ERR_PERMISSION);
                return server_kernel(s, "hello without its probe");
            }
            /* Reaching the client's ring may take a first handshake with a
             * fresh endpoint: bounded by the larger of the two timeouts. */
            const sock_cfg_t *cfg = sock_cfg();
            uint64_t reach = cfg->revert_timeout_ns > cfg->hello_timeout_ns
                                 ? cfg->revert_timeout_ns
                                 : cfg->hello_timeout_ns;
            return server_upgrade(s, &h, (int)(reach / 1000000u));
        }
        /* Nothing yet, or the start of a record. */
        if (n < 0 && !p->claimed) {
            if (why != SOCK_UP_WRITE) {
                errno = EAGAIN; /* a read waits for the first bytes */
                return -1;
            }
            int r = p->tab ? sock_tab_plain(p->tab, p->key, &p->token) : SOCK_TAB_PLAIN;
            if (r == SOCK_TAB_PLAIN)
                return server_kernel(s, "server writes first");
            p->claimed = 1; /* a probe came first: its HELLO is due */
            continue;
        }
        if (why == SOCK_UP_POLL || (n < 0 && why == SOCK_UP_READ)) {
            errno = EAGAIN;
            return -1;
        }
        uint64_t now = vmmc_now_ns();
        if (now >= end)
            return server_kernel(s, "no hello in time");
        if (n > 0) {
            /* Part of a record: the stream is readable already, so poll()
             * would not wait; look again in a millisecond. */
            struct timespec ms1 = {0, 1000000};
            nanosleep(&ms1, NULL);
        } else if (wait_readable(s->fd, (int)((end - now + 999999) / 1000000)) < 0) {
            return server_kernel(s, "connection failed");
        }
    }
}
