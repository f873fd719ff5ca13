/* Job bootstrap client (see boot.h): the `vmmc run` launcher over an abstract
 * Unix socket, the TCP rendezvous (rank 0 serves it from a thread), PMIx
 * (boot_pmix.c), or a singleton job. Wire format: boot_wire.h; reaching
 * the launcher or the rendezvous: boot_conn.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/boot_priv.h"
#include "util/config.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

static uint64_t boot_timeout_ns;
static uint64_t run_grace_ns;
static const vmmc_cfg_entry_t boot_entries[] = {
    {"BOOT_TIMEOUT", "30s",
     "how long a rank waits to join its job (TCP connect retries, rendezvous, rank 0 at exit)",
     VMMC_CFG_TIME, &boot_timeout_ns, 1000000ull, 1000000000000000ull},
    {"RUN_GRACE", "500ms",
     "vmmc run: after a rank fails, time the others get before SIGTERM (SIGKILL follows)",
     VMMC_CFG_TIME, &run_grace_ns, 0, 3600000000000ull},
};
VMMC_CONFIG_TABLE(boot_cfg, "boot", boot_entries);

int vmmc_boot_parse_int_env(const char *name, int lo, int hi, int *out)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return vmmc_error(VMMC_ERR_INVALID, "%s is not set", name);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < lo || v > hi)
        return vmmc_error(VMMC_ERR_INVALID, "%s=%s is not an integer in [%d, %d]", name, s, lo, hi);
    *out = (int)v;
    return VMMC_OK;
}

void vmmc_boot_random_job(char *job, size_t n)
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        uint64_t x = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
        memcpy(r, &x, sizeof r);
    }
    snprintf(job, n, "%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5], r[6],
             r[7]);
}

/* ---- TCP rendezvous server thread (rank 0) ------------------------------ */

static void *server_thread(void *arg)
{
    boot_priv_t *p = arg;
    int max = vmmc_boot_server_maxfds(p->srv) + 1;
    struct pollfd *fds = calloc((size_t)max, sizeof *fds);
    if (!fds) {
        vmmc_log(VMMC_LOG_ERROR, "bootstrap server: out of memory");
        return NULL;
    }
    int64_t deadline = -1; /* set once the local rank has left */
    for (;;) {
        fds[0] = (struct pollfd){.fd = p->srv_ctl[0], .events = POLLIN};
        int n = 1 + vmmc_boot_server_pollfds(p->srv, fds + 1);
        int wait = deadline < 0 ? -1 : vmmc_bw_left_ms(deadline);
        int rc = poll(fds, (nfds_t)n, wait);
        if (rc < 0 && errno != EINTR) {
            vmmc_log(VMMC_LOG_ERROR, "bootstrap server: poll: %s", strerror(errno));
            break;
        }
        if (rc > 0 && (fds[0].revents & POLLIN)) {
            char c = 0;
            if (read(p->srv_ctl[0], &c, 1) == 1 && c == 'q')
                break;
            if (c == 'f' && deadline < 0)
                deadline = vmmc_bw_now_ms() + p->timeout_ms;
        }
        vmmc_boot_server_handle(p->srv, fds + 1, rc > 0 ? n - 1 : 0);
        if (deadline >= 0 && (vmmc_boot_server_live(p->srv) == 0 || vmmc_bw_left_ms(deadline) == 0))
            break;
    }
    free(fds);
    return NULL;
}

static void server_stop(boot_priv_t *p, char how)
{
    if (!p->srv_running)
        return;
    ssize_t w;
    do
        w = write(p->srv_ctl[1], &how, 1);
    while (w < 0 && errno == EINTR);
    pthread_join(p->srv_thread, NULL);
    p->srv_running = 0;
    vmmc_boot_server_destroy(p->srv);
    p->srv = NULL;
    close(p->srv_ctl[0]);
    close(p->srv_ctl[1]);
}

static int server_start(vmmc_boot_t *b, boot_priv_t *p, const char *port)
{
    /* Every address, IPv6 and IPv4 (dual stack), else IPv4 only. */
    int one = 1, zero = 0, rc;
    uint16_t portn = htons((uint16_t)atoi(port));
    int lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd >= 0) {
        struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = portn,
                                   .sin6_addr = IN6ADDR_ANY_INIT};
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        rc = bind(lfd, (struct sockaddr *)&sa6, sizeof sa6);
        if (rc < 0 && errno == EADDRINUSE) {
            rc = vmmc_error_sys("bootstrap server: cannot listen on port %s", port);
            close(lfd);
            return rc;
        }
        if (rc < 0) {
            close(lfd);
            lfd = -1;
        }
    }
    if (lfd < 0) {
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0)
            return vmmc_error_sys("bootstrap server: socket");
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = portn,
                                 .sin_addr.s_addr = htonl(INADDR_ANY)};
        if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            rc = vmmc_error_sys("bootstrap server: cannot listen on port %s", port);
            close(lfd);
            return rc;
        }
    }
    if (listen(lfd, 1024) < 0) {
        rc = vmmc_error_sys("bootstrap server: cannot listen on port %s", port);
        close(lfd);
        return rc;
    }
    rc = vmmc_boot_server_create(&p->srv, lfd, b->size, b->job, VMMC_BSRV_DEAD_ON_DISCONNECT);
    if (rc < 0) {
        close(lfd);
        errno = -rc;
        return vmmc_error_sys("bootstrap server: create");
    }
    if (pipe2(p->srv_ctl, O_CLOEXEC) < 0) {
        rc = vmmc_error_sys("bootstrap server: pipe");
        vmmc_boot_server_destroy(p->srv);
        p->srv = NULL;
        return rc;
    }
    /* The thread must not take the application's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&p->srv_thread, NULL, server_thread, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        errno = rc;
        rc = vmmc_error_sys("bootstrap server: pthread_create");
        vmmc_boot_server_destroy(p->srv);
        p->srv = NULL;
        close(p->srv_ctl[0]);
        close(p->srv_ctl[1]);
        return rc;
    }
    p->srv_running = 1;
    return VMMC_OK;
}

/* ---- rendezvous -------------------------------------------------------- */

/* Read exactly n bytes (blocking up to the deadline). */
static int recv_exact(int fd, uint8_t *buf, size_t n, int64_t deadline)
{
    while (n) {
        ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);
        if (r > 0) {
            buf += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return -EPIPE;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int left = vmmc_bw_left_ms(deadline);
        if (left == 0)
            return -ETIMEDOUT;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, left) < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

/* Read exactly one message into rx (so nothing after it is buffered: later
 * events make b->fd readable). */
static int recv_one(int fd, vmmc_bw_rx_t *rx, int64_t deadline, uint16_t *type,
                    const uint8_t **body, uint32_t *len)
{
    if (rx->cap < VMMC_BW_HDR) {
        uint8_t *nb = realloc(rx->buf, 4096);
        if (!nb)
            return -ENOMEM;
        rx->buf = nb;
        rx->cap = 4096;
    }
    rx->len = 0;
    int rc = recv_exact(fd, rx->buf, VMMC_BW_HDR, deadline);
    if (rc < 0)
        return rc;
    uint32_t n = (uint32_t)rx->buf[0] | (uint32_t)rx->buf[1] << 8 | (uint32_t)rx->buf[2] << 16 |
                 (uint32_t)rx->buf[3] << 24;
    if (n > VMMC_BW_MAX_BODY)
        return -EPROTO;
    if (rx->cap < VMMC_BW_HDR + n) {
        uint8_t *nb = realloc(rx->buf, VMMC_BW_HDR + n);
        if (!nb)
            return -ENOMEM;
        rx->buf = nb;
        rx->cap = VMMC_BW_HDR + n;
    }
    rc = recv_exact(fd, rx->buf + VMMC_BW_HDR, n, deadline);
    if (rc < 0)
        return rc;
    rx->len = VMMC_BW_HDR + n;
    rc = vmmc_bw_rx_next(rx, type, body, len);
    if (rc != 1)
        return -EPROTO;
    vmmc_bw_rx_consume(rx);
    /* body stays valid: consume only moved zero bytes to the front */
    *body = rx->buf + VMMC_BW_HDR;
    return 0;
}

int vmmc_boot_parse_table(vmmc_boot_t *b, const uint8_t *body, uint32_t len)
{
    vmmc_bw_in_t in = {.p = body, .len = len};
    const char *job;
    uint32_t joblen = vmmc_bw_get_str(&in, &job, VMMC_BW_MAX_JOB);
    uint32_t size = vmmc_bw_get_u32(&in);
    if (in.err || (int)size != b->size)
        return vmmc_error(VMMC_ERR_PROTOCOL, "bootstrap: malformed rank table (size %u, ours %d)",
                          size, b->size);
    vmmc_boot_peer_t *peers = calloc(size, sizeof *peers);
    if (!peers)
        return vmmc_error(VMMC_ERR_NOMEM, "bootstrap: no memory for %u peers", size);
    for (uint32_t r = 0; r < size; r++) {
        peers[r].pid = (pid_t)vmmc_bw_get_u32(&in);
        const char *card;
        uint32_t cl = vmmc_bw_get_str(&in, &card, VMMC_BW_MAX_CARD);
        if (in.err)
            break;
        peers[r].card = malloc(cl + 1);
        if (!peers[r].card) {
            in.err = 2;
            break;
        }
        memcpy(peers[r].card, card, cl);
        peers[r].card[cl] = 0;
    }
    if (in.err || in.off != in.len) {
        for (uint32_t r = 0; r < size; r++)
            free(peers[r].card);
        free(peers);
        return in.err == 2 ? vmmc_error(VMMC_ERR_NOMEM, "bootstrap: no memory for cards")
                           : vmmc_error(VMMC_ERR_PROTOCOL, "bootstrap: malformed rank table");
    }
    memcpy(b->job, job, joblen);
    b->job[joblen] = 0;
    b->peers = peers;
    return VMMC_OK;
}

static int rendezvous(vmmc_boot_t *b, boot_priv_t *p, const char *card, int64_t deadline)
{
    size_t cl = strlen(card);
    if (cl > VMMC_BW_MAX_CARD)
        return vmmc_error(VMMC_ERR_INVALID, "bootstrap: card of %zu bytes exceeds %u", cl,
                          VMMC_BW_MAX_CARD);
    vmmc_bw_out_t o;
    vmmc_bw_out_init(&o, VMMC_BW_HELLO);
    vmmc_bw_put_u32(&o, (uint32_t)b->rank);
    vmmc_bw_put_u32(&o, (uint32_t)b->size);
    vmmc_bw_put_u32(&o, (uint32_t)getpid());
    vmmc_bw_put_str(&o, b->job, strlen(b->job));
    vmmc_bw_put_str(&o, card, cl);
    int rc = vmmc_bw_out_finish(&o);
    if (rc == 0)
        rc = vmmc_bw_write_all(b->fd, o.p, o.len, vmmc_bw_left_ms(deadline));
    vmmc_bw_out_free(&o);
    if (rc < 0)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "bootstrap: cannot send HELLO: %s",
                          strerror(-rc));
    for (;;) {
        uint16_t type;
        const uint8_t *body;
        uint32_t len;
        rc = recv_one(b->fd, &p->rx, deadline, &type, &body, &len);
        if (rc == -ETIMEDOUT)
            return vmmc_error(VMMC_ERR_TIMEOUT,
                              "bootstrap: the job did not start within %d ms (rank %d of %d "
                              "waiting for the others)",
                              p->timeout_ms, b->rank, b->size);
        if (rc == -EPROTO)
            return vmmc_error(VMMC_ERR_PROTOCOL, "bootstrap: malformed message from the server");
        if (rc < 0)
            return vmmc_error(VMMC_ERR_PEER_UNREACHABLE,
                              "bootstrap: connection to the server lost while joining: %s",
                              strerror(-rc));
        vmmc_bw_in_t in = {.p = body, .len = len};
        switch (type) {
        case VMMC_BW_TABLE:
            return vmmc_boot_parse_table(b, body, len);
        case VMMC_BW_DEAD: {
            uint32_t r = vmmc_bw_get_u32(&in);
            int64_t st = (int64_t)vmmc_bw_get_u64(&in);
            return vmmc_error(VMMC_ERR_PEER_DEAD,
                              "bootstrap: rank %u left or died (status %lld) before the job started",
                              r, (long long)st);
        }
        case VMMC_BW_ERROR: {
            const char *why;
            uint32_t wl = vmmc_bw_get_str(&in, &why, VMMC_BW_MAX_BODY);
            return vmmc_error(VMMC_ERR_PROTOCOL, "bootstrap: the server refused rank %d: %.*s",
                              b->rank, (int)wl, why);
        }
        default:
            return vmmc_error(VMMC_ERR_PROTOCOL, "bootstrap: unexpected message %u while joining",
                              type);
        }
    }
}

/* ---- public entry points ------------------------------------------------ */

static int init_singleton(vmmc_boot_t *b, const char *card)
{
    b->rank = 0;
    b->size = 1;
    b->fd = -1;
    vmmc_boot_random_job(b->job, sizeof b->job);
    b->peers = calloc(1, sizeof *b->peers);
    if (!b->peers || !(b->peers[0].card = strdup(card))) {
        free(b->peers);
        b->peers = NULL;
        return vmmc_error(VMMC_ERR_NOMEM, "bootstrap: no memory");
    }
    b->peers[0].pid = getpid();
    return VMMC_OK;
}

static int init_connected(vmmc_boot_t *b, boot_priv_t *p, const char *card, int64_t deadline)
{
    const char *bootstrap = getenv("VMMC_BOOTSTRAP");
    int rc = vmmc_boot_parse_int_env("VMMC_SIZE", 1, VMMC_BW_MAX_SIZE, &b->size);
    if (rc == VMMC_OK)
        rc = vmmc_boot_parse_int_env("VMMC_RANK", 0, b->size - 1, &b->rank);
    if (rc != VMMC_OK)
        return rc;
    if (bootstrap && *bootstrap) {
        char host[256], port[16];
        p->mode = BOOT_TCP;
        if ((rc = vmmc_boot_split_hostport(bootstrap, host, sizeof host, port, sizeof port)) != VMMC_OK)
            return rc;
        if (b->rank == 0) {
            vmmc_boot_random_job(b->job, sizeof b->job);
            if ((rc = server_start(b, p, port)) != VMMC_OK)
                return rc;
            snprintf(host, sizeof host, "127.0.0.1");
        }
        rc = vmmc_boot_connect_tcp(host, port, deadline, &b->fd);
    } else {
        const char *job = getenv("VMMC_JOB");
        p->mode = BOOT_LAUNCHER;
        if (job && strlen(job) < sizeof b->job)
            snprintf(b->job, sizeof b->job, "%s", job);
        rc = vmmc_boot_connect_launcher(getenv("VMMC_LAUNCHER"), deadline, &b->fd);
    }
    if (rc == VMMC_OK)
        rc = rendezvous(b, p, card, deadline);
    return rc;
}

int vmmc_boot_init(vmmc_boot_t *b, const char *card, int timeout_ms)
{
    if (!b || !card)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_boot_init: NULL argument");
    vmmc_config_load();
    memset(b, 0, sizeof *b);
    b->fd = -1;
    boot_priv_t *p = calloc(1, sizeof *p);
    if (!p)
        return vmmc_error(VMMC_ERR_NOMEM, "bootstrap: no memory");
    p->ev_wr = -1;
    /* VMMC_BOOT_TIMEOUT, when the user set it, overrides the caller's. */
    uint64_t cfg_ms = boot_timeout_ns / 1000000u;
    p->timeout_ms = cfg_ms > 1000000000u ? 1000000000 : (int)cfg_ms;
    if (timeout_ms >= 0 && !getenv("VMMC_BOOT_TIMEOUT"))
        p->timeout_ms = timeout_ms;
    int64_t deadline = vmmc_bw_now_ms() + p->timeout_ms;

    const char *bootstrap = getenv("VMMC_BOOTSTRAP");
    const char *launcher = getenv("VMMC_LAUNCHER");
    int rc;
    if ((bootstrap && *bootstrap) || (launcher && *launcher))
        rc = init_connected(b, p, card, deadline);
    else if (vmmc_boot_pmix_available()) {
        p->mode = BOOT_PMIX;
        rc = vmmc_boot_pmix_init(b, p, card, p->timeout_ms);
    } else
        rc = init_singleton(b, card);

    if (rc != VMMC_OK) {
        if (p->mode == BOOT_PMIX)
            vmmc_boot_pmix_fini(b, p);
        if (b->fd >= 0)
            close(b->fd);
        server_stop(p, 'q');
        vmmc_bw_rx_free(&p->rx);
        free(p);
        if (b->peers)
            for (int r = 0; r < b->size; r++)
                free(b->peers[r].card);
        free(b->peers);
        memset(b, 0, sizeof *b);
        b->fd = -1;
        return rc;
    }
    pthread_mutex_init(&b->wlock, NULL);
    b->priv = p;
    vmmc_debug("bootstrap: rank %d of %d, job %s, fd %d", b->rank, b->size, b->job, b->fd);
    return VMMC_OK;
}

int vmmc_boot_barrier_send(vmmc_boot_t *b, uint64_t epoch)
{
    if (!b || !b->priv)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_boot_barrier_send: not initialised");
    boot_priv_t *p = b->priv;
    if (p->mode == BOOT_PMIX)
        return vmmc_boot_pmix_barrier(b, p, epoch);
    pthread_mutex_lock(&b->wlock);
    int fd = b->fd;
    int rc = VMMC_OK;
    if (fd < 0) {
        if (b->size > 1)
            rc = vmmc_error(VMMC_ERR_PEER_DEAD, "barrier: the connection to the launcher is closed");
    } else {
        vmmc_bw_out_t o;
        vmmc_bw_out_init(&o, VMMC_BW_BARRIER);
        vmmc_bw_put_u64(&o, epoch);
        int w = vmmc_bw_out_finish(&o);
        if (w == 0)
            w = vmmc_bw_write_all(fd, o.p, o.len, p->timeout_ms);
        vmmc_bw_out_free(&o);
        if (w < 0)
            rc = vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "barrier: cannot reach the launcher: %s",
                            strerror(-w));
    }
    pthread_mutex_unlock(&b->wlock);
    return rc;
}

/* The connection is gone: close it (b->fd becomes -1, so pollers drop it)
 * and report VMMC_BOOT_EV_CLOSED once. */
static void conn_lost(vmmc_boot_t *b, vmmc_boot_event_fn fn, void *arg)
{
    pthread_mutex_lock(&b->wlock);
    int fd = b->fd;
    b->fd = -1;
    pthread_mutex_unlock(&b->wlock);
    if (fd >= 0)
        close(fd);
    if (fn)
        fn(arg, VMMC_BOOT_EV_CLOSED, 0, 0);
}

int vmmc_boot_dispatch(vmmc_boot_t *b, vmmc_boot_event_fn fn, void *arg)
{
    if (!b || !b->priv)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_boot_dispatch: not initialised");
    boot_priv_t *p = b->priv;
    if (b->fd < 0)
        return VMMC_OK;
    for (;;) {
        long n = vmmc_bw_rx_fill(&p->rx, b->fd);
        int eof = n == 0 || (n < 0 && n != -EAGAIN);
        for (;;) {
            uint16_t type;
            const uint8_t *body;
            uint32_t len;
            int rc = vmmc_bw_rx_next(&p->rx, &type, &body, &len);
            if (rc == 0)
                break;
            vmmc_bw_in_t in = {.p = body, .len = len};
            int bad = rc < 0;
            if (!bad && type == VMMC_BW_BARRIER) {
                uint64_t e = vmmc_bw_get_u64(&in);
                bad = in.err || in.off != len;
                if (!bad && fn)
                    fn(arg, VMMC_BOOT_EV_BARRIER, (int64_t)e, 0);
            } else if (!bad && type == VMMC_BW_DEAD) {
                uint32_t r = vmmc_bw_get_u32(&in);
                int64_t st = (int64_t)vmmc_bw_get_u64(&in);
                bad = in.err || in.off != len || r >= (uint32_t)b->size;
                if (!bad && fn)
                    fn(arg, VMMC_BOOT_EV_DEAD, (int64_t)r, st);
            } else if (!bad && type == VMMC_BW_ERROR) {
                const char *why;
                uint32_t wl = vmmc_bw_get_str(&in, &why, VMMC_BW_MAX_BODY);
                vmmc_log(VMMC_LOG_ERROR, "bootstrap server: %.*s", (int)wl, why);
                bad = 1;
            } else {
                bad = 1;
            }
            if (bad) {
                vmmc_bw_rx_free(&p->rx);
                conn_lost(b, fn, arg);
                return vmmc_error(VMMC_ERR_PROTOCOL,
                                  "bootstrap: malformed or unexpected message from the server");
            }
            vmmc_bw_rx_consume(&p->rx);
        }
        if (eof) {
            vmmc_bw_rx_free(&p->rx);
            conn_lost(b, fn, arg);
            if (n == -EPROTO)
                return vmmc_error(VMMC_ERR_PROTOCOL, "bootstrap: oversized message from the server");
            return VMMC_OK;
        }
        if (n == -EAGAIN)
            return VMMC_OK;
    }
}

int vmmc_boot_host_rank(const vmmc_boot_t *b)
{
    const boot_priv_t *p = b ? b->priv : NULL;
    return p && p->mode == BOOT_TCP ? 0 : -1;
}

void vmmc_boot_fini(vmmc_boot_t *b)
{
    if (!b || !b->priv)
        return;
    boot_priv_t *p = b->priv;
    pthread_mutex_lock(&b->wlock);
    int fd = b->fd;
    b->fd = -1;
    pthread_mutex_unlock(&b->wlock);
    if (fd >= 0) {
        if (p->mode != BOOT_PMIX) {
            vmmc_bw_out_t o;
            vmmc_bw_out_init(&o, VMMC_BW_FINI);
            if (vmmc_bw_out_finish(&o) == 0)
                vmmc_bw_write_all(fd, o.p, o.len, 1000);
            vmmc_bw_out_free(&o);
        }
        close(fd);
    }
    server_stop(p, 'f');
    if (p->mode == BOOT_PMIX)
        vmmc_boot_pmix_fini(b, p);
    vmmc_bw_rx_free(&p->rx);
    free(p);
    b->priv = NULL;
    if (b->peers)
        for (int r = 0; r < b->size; r++)
            free(b->peers[r].card);
    free(b->peers);
    b->peers = NULL;
    pthread_mutex_destroy(&b->wlock);
}
