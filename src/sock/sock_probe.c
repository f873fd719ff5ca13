/* UDP probes (steps 1 and 2 of the upgrade, sock.h).
 *
 * The listener binds a UDP socket to its own address and port and answers
 * from the sock thread. Every datagram is hostile input: a PROBE is taken
 * only if it has exactly the size of a probe (padded to the size of the
 * largest answer, so answering amplifies nothing), the magic, the version
 * and the type, names this listener's port (and address, for a listener
 * bound to one), and comes from the very address and port it says the
 * connection's client side has; anything else is counted and dropped. The
 * answer is YES {token, the server's endpoint address} when the table took
 * the connection (sock_probe_tab.c), NO when it was decided plain or has no
 * room for it.
 *
 * The client binds its UDP socket to its TCP connection's own address and
 * port (TCP and UDP ports are separate spaces), connects it to the server's,
 * and sends the PROBE every few milliseconds until an answer, an ICMP error
 * (ECONNREFUSED: no vmmc there, known at once) or VMMC_SOCK_PROBE_TIMEOUT. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sock/sock_probe.h"
#include "sock/sock_sys.h"
#include "sock/sock_up.h"
#include "util/clock.h"
#include "util/log.h"

#define PROBE_RESEND_MS 5
#define PROBE_BATCH 64

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static sock_listener_t *listeners;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void reap_closed(uint64_t now);

static void reg_child(void)
{
    /* The list is the parent's copy, and ours now: the tables are shared. */
    pthread_mutex_init(&reg_lock, NULL);
}

static void reg_init(void)
{
    pthread_atfork(NULL, NULL, reg_child);
}

int sock_key_of(const struct sockaddr *sa, socklen_t len, uint8_t key[SOCK_KEY_LEN])
{
    memset(key, 0, SOCK_KEY_LEN);
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const void *)sa;
        memcpy(key, &in->sin_port, 2);
        key[2 + 10] = 0xff;
        key[2 + 11] = 0xff;
        memcpy(key + 2 + 12, &in->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const void *)sa;
        memcpy(key, &in6->sin6_port, 2);
        memcpy(key + 2, &in6->sin6_addr, 16);
        return 0;
    }
    errno = EAFNOSUPPORT;
    return -1;
}

static int key_is_any(const uint8_t *key)
{
    static const uint8_t any4[16] = {[10] = 0xff, [11] = 0xff};
    static const uint8_t any6[16];
    return !memcmp(key + 2, any4, 16) || !memcmp(key + 2, any6, 16);
}

/* ------------------------------------------------------------------------ */
/* the responder */

static void answer(int fd, const struct sockaddr *to, socklen_t tolen, const sock_probe_msg_t *q,
                   int yes, uint64_t token)
{
    sock_probe_msg_t a;
    memset(&a, 0, SOCK_PROBE_HDR);
    a.magic = SOCK_PROBE_MAGIC;
    a.version = SOCK_WIRE_VERSION;
    a.type = yes ? SOCK_PROBE_YES : SOCK_PROBE_NO;
    a.nonce = q->nonce;
    memcpy(a.client, q->client, SOCK_KEY_LEN);
    memcpy(a.server, q->server, SOCK_KEY_LEN);
    size_t len = SOCK_PROBE_HDR;
    if (yes) {
        sock_ctx_t *ctx = sock_ctx_peek();
        size_t alen = sizeof a.addr;
        if (!ctx || vmmc_ep_addr(sock_ctx_ep(ctx), a.addr, &alen) != VMMC_OK) {
            a.type = SOCK_PROBE_NO;
        } else {
            a.token = token;
            a.addr_len = (uint16_t)alen;
            len += alen;
        }
    }
    (void)sys_sendto(fd, &a, len, MSG_DONTWAIT | MSG_NOSIGNAL, to, tolen);
}

static void on_probe(int fd, short revents, void *arg)
{
    sock_listener_t *l = arg;
    sock_tab_stats_t *st = sock_tab_stats(l->tab);
    (void)revents;
    for (int i = 0; i < PROBE_BATCH; i++) {
        sock_probe_msg_t q;
        struct sockaddr_storage src;
        socklen_t slen = sizeof src;
        ssize_t n = sys_recvfrom(fd, &q, sizeof q, MSG_DONTWAIT | MSG_TRUNC,
                                 (struct sockaddr *)&src, &slen);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* EAGAIN, or an ICMP error of an earlier answer */
        }
        uint8_t from[SOCK_KEY_LEN];
        if ((size_t)n != sizeof q || q.magic != SOCK_PROBE_MAGIC ||
            q.version != SOCK_WIRE_VERSION || q.type != SOCK_PROBE ||
            sock_key_of((struct sockaddr *)&src, slen, from) != 0 ||
            memcmp(from, q.client, SOCK_KEY_LEN) != 0 || memcmp(q.server, l->bound, 2) != 0 ||
            (!l->any && memcmp(q.server, l->bound, SOCK_KEY_LEN) != 0)) {
            atomic_fetch_add(&st->refused, 1);
            continue;
        }
        atomic_fetch_add(&st->probes, 1);
        uint64_t token = 0;
        int yes = sock_tab_probe(l->tab, q.client, &token) == SOCK_TAB_YES;
        atomic_fetch_add(yes ? &st->yes : &st->no, 1);
        answer(fd, (struct sockaddr *)&src, slen, &q, yes, token);
    }
}

int sock_probe_listen(sock_t *s)
{
    const sock_cfg_t *cfg = sock_cfg();
    if (!cfg->upgrade || s->lst)
        return 0;
    struct sockaddr_storage a;
    socklen_t alen = sizeof a;
    if (sys_getsockname(s->fd, (struct sockaddr *)&a, &alen) != 0)
        return 0;
    sock_listener_t *l = calloc(1, sizeof *l);
    if (!l)
        return 0;
    l->udp = -1;
    l->family = a.ss_family;
    if (sock_key_of((struct sockaddr *)&a, alen, l->bound) != 0)
        goto never;
    l->any = key_is_any(l->bound);
    l->port = ntohs(*(uint16_t *)l->bound);
    l->udp = sys_socket(a.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l->udp < 0)
        goto never;
    if (a.ss_family == AF_INET6) {
        int v6only = 0;
        socklen_t ol = sizeof v6only;
        if (sys_getsockopt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol) == 0)
            (void)sys_setsockopt(l->udp, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    }
    if (sys_bind(l->udp, (struct sockaddr *)&a, alen) != 0) {
        vmmc_debug("sock: listener on port %d does not upgrade: its UDP port is taken (%s)",
                   l->port, strerror(errno));
        goto never;
    }
    /* A probed connection waits in the listen queue and then for its
     * acceptor's first call; a plain one must be remembered while its
     * client may still be probing. */
    uint64_t ttl = (2 * cfg->hello_timeout_ns + cfg->probe_timeout_ns) / 1000000u;
    l->tab = sock_tab_new((uint64_t)cfg->probe_slots, ttl);
    l->ttl_ns = ttl * 1000000u;
    l->refs = 1; /* the registry's */
    if (!l->tab)
        goto never;
    if (sock_ctx_watch(l->udp, POLLIN, on_probe, l) != 0)
        goto never;
    pthread_once(&reg_once, reg_init);
    pthread_mutex_lock(&reg_lock);
    reap_closed(vmmc_now_ns());
    l->next = listeners;
    listeners = l;
    pthread_mutex_unlock(&reg_lock);
    s->lst = l;
    return 0;

never:
    /* This listener's connections stay on the kernel. */
    if (l->udp >= 0)
        sys_close(l->udp);
    sock_tab_free(l->tab);
    free(l);
    return 0;
}

/* Free the listeners closed longer ago than their table's entries live
 * and held by no acceptor (registry lock held). */
static void reap_closed(uint64_t now)
{
    for (sock_listener_t **p = &listeners; *p;) {
        sock_listener_t *l = *p;
        if (l->closed_ns && l->refs == 1 && now - l->closed_ns > l->ttl_ns) {
            *p = l->next;
            sock_tab_free(l->tab); /* this process's mapping only: children keep theirs */
            free(l);
        } else {
            p = &l->next;
        }
    }
}

void sock_probe_unlisten(sock_t *s)
{
    sock_listener_t *l = s->lst;
    if (!l)
        return;
    s->lst = NULL;
    sock_ctx_unwatch(l->udp, l);
    sys_close(l->udp);
    pthread_mutex_lock(&reg_lock);
    l->udp = -1;
    l->closed_ns = vmmc_now_ns();
    reap_closed(l->closed_ns);
    pthread_mutex_unlock(&reg_lock);
}

sock_listener_t *sock_probe_find(const struct sockaddr *local, socklen_t len,
                                 const uint8_t key[SOCK_KEY_LEN])
{
    uint8_t me[SOCK_KEY_LEN];
    if (sock_key_of(local, len, me) != 0)
        return NULL;
    sock_listener_t *open = NULL, *holder = NULL;
    pthread_mutex_lock(&reg_lock);
    reap_closed(vmmc_now_ns());
    for (sock_listener_t *l = listeners; l; l = l->next) {
        if (memcmp(l->bound, me, 2) != 0 ||
            (!l->any && memcmp(l->bound, me, SOCK_KEY_LEN) != 0))
            continue;
        if (!l->closed_ns && (!open || (open->any && !l->any)))
            open = l; /* a listener bound to the address beats one on any */
        if (!holder && sock_tab_has(l->tab, key))
            holder = l;
    }
    sock_listener_t *l = holder ? holder : open;
    if (l)
        l->refs++;
    pthread_mutex_unlock(&reg_lock);
    return l;
}

void sock_probe_put(sock_listener_t *l)
{
    pthread_mutex_lock(&reg_lock);
    l->refs--;
    reap_closed(vmmc_now_ns());
    pthread_mutex_unlock(&reg_lock);
}

/* ------------------------------------------------------------------------ */
/* the client */

int sock_probe_client(sock_t *s, uint64_t *token, void *addr, size_t *alen, const char **why)
{
    struct sockaddr_storage me, srv;
    socklen_t mlen = sizeof me, slen = sizeof srv;
    sock_probe_msg_t q, a;
    *why = "not connected";
    if (sys_getsockname(s->fd, (struct sockaddr *)&me, &mlen) != 0 ||
        sys_getpeername(s->fd, (struct sockaddr *)&srv, &slen) != 0)
        return 0;
    memset(&q, 0, sizeof q);
    if (sock_key_of((struct sockaddr *)&me, mlen, q.client) != 0 ||
        sock_key_of((struct sockaddr *)&srv, slen, q.server) != 0)
        return 0;
    *why = "probe port busy";
    int u = sys_socket(me.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (u < 0)
        return 0;
    if (sys_bind(u, (struct sockaddr *)&me, mlen) != 0 ||
        sys_connect(u, (struct sockaddr *)&srv, slen) != 0) {
        sys_close(u);
        return 0;
    }
    q.magic = SOCK_PROBE_MAGIC;
    q.version = SOCK_WIRE_VERSION;
    q.type = SOCK_PROBE;
    if (getrandom(&q.nonce, sizeof q.nonce, GRND_NONBLOCK) != sizeof q.nonce) {
        *why = "no random nonce";
        sys_close(u);
        return 0;
    }
    uint64_t end = vmmc_now_ns() + sock_cfg()->probe_timeout_ns, next = 0;
    int rc = 0;
    *why = "no answer";
    for (;;) {
        uint64_t now = vmmc_now_ns();
        if (now >= end)
            break;
        if (now >= next) {
            if (sys_sendto(u, &q, sizeof q, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0) < 0 &&
                errno == ECONNREFUSED) {
                *why = "no vmmc listener";
                break;
            }
            next = now + PROBE_RESEND_MS * 1000000ull;
        }
        uint64_t until = next < end ? next : end;
        struct pollfd p = {.fd = u, .events = POLLIN};
        int ms = (int)((until - now + 999999) / 1000000);
        if (sys_poll(&p, 1, ms) <= 0)
            continue; /* EINTR or time to send again */
        ssize_t n = sys_recvfrom(u, &a, sizeof a, MSG_DONTWAIT, NULL, NULL);
        if (n < 0) {
            if (errno == ECONNREFUSED) {
                *why = "no vmmc listener";
                break;
            }
            continue;
        }
        if ((size_t)n < SOCK_PROBE_HDR || a.magic != SOCK_PROBE_MAGIC ||
            a.version != SOCK_WIRE_VERSION || a.nonce != q.nonce)
            continue; /* not the answer to this probe */
        if (a.type == SOCK_PROBE_NO && (size_t)n == SOCK_PROBE_HDR) {
            *why = "listener said no";
            break;
        }
        if (a.type == SOCK_PROBE_YES && a.token != 0 && a.addr_len > 0 &&
            a.addr_len <= VMMC_ADDR_MAX && (size_t)n == SOCK_PROBE_HDR + a.addr_len &&
            *alen >= a.addr_len) {
            *token = a.token;
            memcpy(addr, a.addr, a.addr_len);
            *alen = a.addr_len;
            rc = 1;
            *why = NULL;
            break;
        }
    }
    sys_close(u);
    return rc;
}
