/* Records on the TCP stream (struct sock_rec): HELLO, ACK, REVERT,
 * REVERT_ACK.
 *
 * A record is read whole or not at all as far as the caller is concerned:
 * sock_rec_read() takes exactly sizeof(sock_rec_t) bytes, waiting for them in
 * poll() (bounded by its timeout) and reading without blocking, so a peer
 * that sends half a record cannot hold the caller past the timeout. Every
 * field another process wrote is checked before anything believes it; a
 * record that does not parse is EPROTO, and the caller resets the
 * connection. Writes go out with MSG_NOSIGNAL (a dead peer is EPIPE, never a
 * SIGPIPE the application did not ask for). */
#include <string.h>

#include "sock/sock.h"
#include "sock/sock_sys.h"
#include "sock/sock_up.h"
#include "util/clock.h"
#include "util/log.h"

/* Largest ring a peer may describe (VMMC_SOCK_RING's own bound). */
#define REC_RING_MAX (1ull << 30)

/* A refused record: the reason for vmmc_last_error(), EPROTO. */
#define proto(...) (vmmc_error(VMMC_ERR_PROTOCOL, __VA_ARGS__), errno = EPROTO, -1)

static int check_ring(const sock_ring_ref_t *g)
{
    if (g->addr_len == 0 || g->addr_len > VMMC_ADDR_MAX)
        return proto("sock: record names an address of %u bytes", g->addr_len);
    if (!memchr(g->name, 0, sizeof g->name))
        return proto("sock: record's ring name is not terminated (%u bytes)",
                     (unsigned)sizeof g->name);
    if (g->name[0] == 0)
        return proto("sock: record's ring name is empty");
    if (g->size == 0 || g->size > REC_RING_MAX)
        return proto("sock: record describes a ring of %llu bytes",
                     (unsigned long long)g->size);
    return 0;
}

int sock_rec_check(const sock_rec_t *r)
{
    if (r->magic != SOCK_REC_MAGIC)
        return proto("sock: not a record (magic %#llx)", (unsigned long long)r->magic);
    if (r->version != SOCK_WIRE_VERSION)
        return proto("sock: record of wire version %u", r->version);
    switch (r->type) {
    case SOCK_REC_HELLO:
        if (r->status != 0)
            return proto("sock: HELLO with status %d", (int)r->status);
        return check_ring(&r->ring);
    case SOCK_REC_ACK:
        if (r->status > 0)
            return proto("sock: ACK with status %d", (int)r->status);
        return r->status == 0 ? check_ring(&r->ring) : 0;
    case SOCK_REC_REVERT:
    case SOCK_REC_REVERT_ACK:
        if (r->status != 0)
            return proto("sock: REVERT with status %d", (int)r->status);
        return 0;
    default:
        return proto("sock: record of unknown type %u", r->type);
    }
}

/* Wait for @p ev on @p fd until @p deadline (0: forever). 1 ready, 0 timed
 * out, -1/errno. EINTR is retried. */
static int wait_fd(int fd, short ev, uint64_t deadline)
{
    for (;;) {
        int ms = -1;
        if (deadline) {
            uint64_t now = vmmc_now_ns();
            if (now >= deadline)
                return 0;
            ms = (int)((deadline - now + 999999) / 1000000);
        }
        struct pollfd p = {.fd = fd, .events = ev};
        int r = sys_poll(&p, 1, ms);
        if (r > 0)
            return 1; /* the call that follows tells errors and EOF */
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

int sock_rec_read(int fd, sock_rec_t *r, int timeout_ms)
{
    uint64_t deadline = timeout_ms >= 0 ? vmmc_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
    char *p = (char *)r;
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t n = sys_recvfrom(fd, p + got, sizeof *r - got, MSG_DONTWAIT, NULL, NULL);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0) {
            vmmc_error(VMMC_ERR_PEER_DEAD, "sock: connection closed %s a record (%zu of %zu bytes)",
                       got ? "inside" : "before", got, sizeof *r);
            errno = ECONNRESET;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            vmmc_error_sys("sock: reading a record from fd %d", fd);
            return -1;
        }
        int w = wait_fd(fd, POLLIN, deadline);
        if (w < 0) {
            vmmc_error_sys("sock: waiting for a record on fd %d", fd);
            return -1;
        }
        if (w == 0) {
            vmmc_error(VMMC_ERR_TIMEOUT, "sock: no record on fd %d within %d ms (%zu of %zu bytes)",
                       fd, timeout_ms, got, sizeof *r);
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return sock_rec_check(r);
}

int sock_rec_write(int fd, const sock_rec_t *rec)
{
    sock_rec_t r = *rec;
    r.magic = SOCK_REC_MAGIC;
    r.version = SOCK_WIRE_VERSION;
    /* A record goes on a stream that carries nothing else but records: the
     * peer reads them promptly, unless it is stuck or hostile. */
    const sock_cfg_t *cfg = sock_cfg();
    uint64_t bound = cfg->hello_timeout_ns > cfg->revert_timeout_ns ? cfg->hello_timeout_ns
                                                                    : cfg->revert_timeout_ns;
    uint64_t deadline = vmmc_now_ns() + bound;
    const char *p = (const char *)&r;
    size_t put = 0;
    while (put < sizeof r) {
        ssize_t n = sys_sendto(fd, p + put, sizeof r - put, MSG_NOSIGNAL | MSG_DONTWAIT, NULL, 0);
        if (n > 0) {
            put += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            vmmc_error_sys("sock: writing a record on fd %d", fd);
            return -1;
        }
        int w = wait_fd(fd, POLLOUT, deadline);
        if (w < 0) {
            vmmc_error_sys("sock: waiting to write a record on fd %d", fd);
            return -1;
        }
        if (w == 0) {
            vmmc_error(VMMC_ERR_TIMEOUT, "sock: the peer took no record on fd %d (%zu of %zu bytes)",
                       fd, put, sizeof r);
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return 0;
}

ssize_t sock_rec_peek(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = sys_recvfrom(fd, buf, len, MSG_PEEK | MSG_DONTWAIT, NULL, NULL);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}
