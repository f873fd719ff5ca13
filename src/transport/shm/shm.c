/* shm transport: peers on the same host.
 *
 * Control channel: each endpoint listens on an abstract SOCK_SEQPACKET Unix
 * socket "\0vmmc.<pid>.<random>" (its address's shm=; nothing in the
 * filesystem, gone when the process is). A peer connects and says HELLO with
 * its own address; the listener checks with SO_PEERCRED that the caller is
 * the process that address names, finds the peer by address (or, if it
 * listens, accepts a new one; else refuses), and answers with its
 * notification ring, status page and event fd. Who the peer is comes from
 * the socket it talks on from then on, never from a field of a message.
 * Requests travel on the importer's connection; replies and revocations come
 * back on it too (the exporter replies on the socket it accepted).
 *
 * Data (shm_data.c): regions in library memory are memfd-backed and mapped
 * by importers, so a put is a memcpy. Other regions are written with
 * process_vm_writev.
 *
 * Notifications: each sender has its own ring segment at the receiver
 * (shm_inbox.c). */
#include "transport/shm/shm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>


/* Abstract socket address for @name (no leading '@'). */
static socklen_t sock_addr(const char *name, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "%s", name);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* ---------------------------------------------------------------- messages */

static int send_buf(int fd, const void *m, size_t len, const int *fds, int nfds)
{
    struct iovec iov = {(void *)m, len};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SHM_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t r;
    do
        r = sendmsg(fd, &mh, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "control connection to peer closed: %s",
                              strerror(errno));
        return vmmc_error_sys("sendmsg on control socket");
    }
    return VMMC_OK;
}

static int send_msg(int fd, const vmmc_ctl_msg_t *m, const int *fds, int nfds)
{
    return send_buf(fd, m, sizeof *m, fds, nfds);
}

/* Receive one message of at most @cap bytes; returns bytes (>0), 0 on EOF,
 * or -1 (errno). */
static ssize_t recv_buf(int fd, void *m, size_t cap, int *fds, int *nfds)
{
    struct iovec iov = {m, cap};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf};
    ssize_t r;
    do
        r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    *nfds = 0;
    if (r <= 0)
        return r;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int tmp[8];
            if (n > 8)
                n = 8;
            memcpy(tmp, CMSG_DATA(c), sizeof(int) * (size_t)n);
            for (int i = 0; i < n; i++) {
                if (*nfds < SHM_MAX_FDS)
                    fds[(*nfds)++] = tmp[i];
                else
                    close(tmp[i]);
            }
        }
    }
    if (mh.msg_flags & MSG_TRUNC) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
        errno = EMSGSIZE;
        return -1;
    }
    return r;
}

static ssize_t recv_msg(int fd, vmmc_ctl_msg_t *m, int *fds, int *nfds)
{
    return recv_buf(fd, m, sizeof *m, fds, nfds);
}

/* HELLO: a control message followed by the sender's address. */
typedef struct shm_hello {
    vmmc_ctl_msg_t m;
    char addr[VMMC_ADDR_MAX];
} shm_hello_t;

/* ----------------------------------------------------------- control thread */

static void peer_fd_ready(vmmc_ep_t *ep, int fd, uint32_t events, void *arg);

static shm_peer_t *shm_peer(vmmc_tl_peer_t *p)
{
    return p->tl_priv;
}

/* Called by the application thread (connecting) and the control thread
 * (accepting) alike: publish with a compare-and-swap so that both end up
 * with the same state. */
static shm_peer_t *shm_peer_alloc(vmmc_tl_peer_t *p)
{
    shm_peer_t *cur = __atomic_load_n((shm_peer_t **)&p->tl_priv, __ATOMIC_ACQUIRE);
    if (cur)
        return cur;
    shm_peer_t *sp = calloc(1, sizeof *sp);
    if (!sp)
        return NULL;
    sp->out_fd = sp->in_fd = sp->pend_fd = sp->evfd = -1;
    atomic_flag_clear(&sp->prod_lock);
    if (__atomic_compare_exchange_n((shm_peer_t **)&p->tl_priv, &cur, sp, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return sp;
    free(sp);
    return cur;
}

static void refuse(vmmc_ep_t *ep, int fd, int count)
{
    if (count)
        VMMC_COUNT(ep, CNT_CONNECT_REFUSED, 1);
    vmmc_tl_ctl_unwatch(ep, fd);
    close(fd);
}

/* Accepted connection: the first message must be HELLO with the address of
 * the very process on the other end of the socket. */
static void accepted_ready(vmmc_ep_t *ep, int fd, uint32_t events, void *arg)
{
    shm_ep_t *s = VMMC_TL_STATE(ep, shm);
    shm_hello_t hm;
    int fds[SHM_MAX_FDS], nfds;
    ssize_t r = recv_buf(fd, &hm, sizeof hm, fds, &nfds);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    size_t alen = r > (ssize_t)sizeof hm.m ? (size_t)r - sizeof hm.m : 0;
    if (r <= (ssize_t)sizeof hm.m || hm.m.magic != VMMC_CTL_MAGIC || hm.m.type != CTL_HELLO ||
        vmmc_tl_addr_check(ep, hm.addr, alen) != VMMC_OK) {
        if (r != 0) {
            VMMC_COUNT(ep, CNT_CTL_BAD, 1);
            vmmc_debug("refused a malformed HELLO (%zd bytes): %s", r, vmmc_last_error());
        }
        refuse(ep, fd, r != 0);
        return;
    }
    hm.addr[alen] = 0; /* alen < VMMC_ADDR_MAX: checked */
    struct ucred cr;
    socklen_t cl = sizeof cr;
    char v[96];
    long claimed = vmmc_card_get(hm.addr, "pid", v, sizeof v) ? strtol(v, NULL, 10) : -1;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.pid != claimed ||
        !vmmc_card_get(hm.addr, "host", v, sizeof v) || strcmp(v, VMMC_TL_EP(ep)->host_id)) {
        vmmc_warn("refused a control connection from pid %d claiming an address of pid %ld "
                  "(or of another host)", (int)cr.pid, claimed);
        refuse(ep, fd, 1);
        return;
    }
    int is_new;
    int h = vmmc_tl_peer_accept(ep, &vmmc_tl_shm, hm.addr, alen, cr.pid, &is_new);
    if (h < 0) {
        vmmc_debug("shm: %s", vmmc_last_error());
        refuse(ep, fd, 0); /* counted by vmmc_peer_accept */
        return;
    }
    int st;
    vmmc_tl_peer_t *p = vmmc_tl_peer_get(ep, h, &st);
    shm_peer_t *sp = p ? shm_peer_alloc(p) : NULL;
    if (!sp) {
        refuse(ep, fd, 0);
        return;
    }
    vmmc_tl_ctl_unwatch(ep, fd);
    /* Not p->lock: our application thread may hold it while it connects to
     * this same peer, whose control thread waits for us in turn. */
    pthread_mutex_lock(&s->lock);
    if (sp->in_fd >= 0 && sp->in_fd != fd) {
        /* A second HELLO from the same peer replaces the first connection. */
        vmmc_tl_ctl_unwatch(ep, sp->in_fd);
        close(sp->in_fd);
    }
    sp->in_fd = fd;
    pthread_mutex_unlock(&s->lock);

    /* This sender's own notification ring, polled from now on. */
    int ring_fd;
    if (shm_inbox_ring_for(ep, s, sp, h, &ring_fd) != VMMC_OK) {
        vmmc_warn("no notification ring for peer %d: %s", h, vmmc_last_error());
        vmmc_tl_ctl_unwatch(ep, fd);
        close(fd);
        return;
    }
    vmmc_ctl_msg_t ack;
    vmmc_tl_ctl_init(ep, &ack, CTL_HELLO_ACK);
    ack.id = hm.m.id;
    int out[3] = {s->status_fd, ring_fd, VMMC_TL_EP(ep)->evfd};
    ack.nfds = 3;
    if (send_msg(fd, &ack, out, 3) == VMMC_OK) {
        vmmc_tl_ctl_watch(ep, fd, peer_fd_ready, (void *)(intptr_t)h);
        if (is_new)
            vmmc_tl_peer_announce(ep, h);
    }
}

static void listen_ready(vmmc_ep_t *ep, int fd, uint32_t events, void *arg)
{
    for (;;) {
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0)
            return;
        if (vmmc_tl_ctl_watch(ep, c, accepted_ready, NULL) != VMMC_OK)
            close(c);
    }
}

/* Messages from a connected peer (either direction). */
static void peer_fd_ready(vmmc_ep_t *ep, int fd, uint32_t events, void *arg)
{
    int rank = (int)(intptr_t)arg;
    for (;;) {
        vmmc_ctl_msg_t m;
        int fds[SHM_MAX_FDS], nfds;
        ssize_t r = recv_msg(fd, &m, fds, &nfds);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            vmmc_tl_ctl_unwatch(ep, fd);
            vmmc_tl_peer_failed(ep, rank, -1, r == 0 ? "its control connection closed"
                                                     : "its control connection failed");
            return;
        }
        vmmc_tl_ctl_recv(ep, rank, &m, (size_t)r, fds, nfds);
    }
}

/* ------------------------------------------------------------ transport ops */

static int shm_ep_open(vmmc_ep_t *ep, char *card, size_t cap)
{
    shm_ep_t *s = calloc(1, sizeof *s);
    if (!s)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for shm transport state");
    s->listen_fd = s->status_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    VMMC_TL_STATE(ep, shm) = s;
    s->nrec = (uint32_t)VMMC_TL_EP(ep)->notify_queue;
    /* Listen before the bootstrap completes, so that no peer that learns our
     * card can find us missing. The name is unique on this host. */
    s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0)
        return vmmc_error_sys("socket(AF_UNIX)");
    uint64_t rnd = vmmc_now_ns() ^ ((uint64_t)(uintptr_t)s << 16);
    char name[64];
    snprintf(name, sizeof name, "vmmc.%d.%llx", (int)VMMC_TL_EP(ep)->pid, (unsigned long long)rnd);
    struct sockaddr_un sa;
    socklen_t sl = sock_addr(name, &sa);
    if (bind(s->listen_fd, (struct sockaddr *)&sa, sl) != 0)
        return vmmc_error_sys("bind control socket @%s", name);
    if (listen(s->listen_fd, 128) != 0)
        return vmmc_error_sys("listen on control socket");
    int n = snprintf(card, cap, "shm=%s;", name);
    if (n < 0 || (size_t)n >= cap)
        return vmmc_error(VMMC_ERR_INVALID, "business card too small");
    return vmmc_tl_ctl_watch(ep, s->listen_fd, listen_ready, NULL);
}

static int shm_ep_start(vmmc_ep_t *ep)
{
    shm_ep_t *s = VMMC_TL_STATE(ep, shm);
    return shm_inbox_open(ep, s);
}

static void shm_ep_close(vmmc_ep_t *ep)
{
    shm_ep_t *s = VMMC_TL_STATE(ep, shm);
    if (!s)
        return;
    int np = vmmc_tl_peer_count(ep);
    for (int r = 0; r < np; r++) {
        vmmc_tl_peer_t *p = vmmc_tl_peer_at(ep, r);
        shm_peer_t *sp = p->tl_priv;
        if (!sp || p->tl != &vmmc_tl_shm)
            continue;
        if (sp->out_fd >= 0)
            close(sp->out_fd);
        if (sp->in_fd >= 0)
            close(sp->in_fd);
        if (sp->pend_fd >= 0)
            close(sp->pend_fd);
        if (sp->evfd >= 0)
            close(sp->evfd);
        shm_inbox_detach(sp);
        free(sp);
        p->tl_priv = NULL;
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    shm_inbox_close(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
    VMMC_TL_STATE(ep, shm) = NULL;
}

/* Wait (bounded) for one message on a blocking handshake. */
static int wait_msg(int fd, vmmc_ctl_msg_t *m, int *fds, int *nfds, int timeout_ms)
{
    uint64_t deadline = vmmc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        ssize_t r = recv_msg(fd, m, fds, nfds);
        if (r == (ssize_t)sizeof *m)
            return VMMC_OK;
        if (r == 0)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "peer closed its control connection");
        if (r > 0)
            return vmmc_error(VMMC_ERR_PROTOCOL, "short control message (%zd bytes)", r);
        if (errno == ECONNRESET || errno == ENOTCONN)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "peer closed its control connection: %s",
                              strerror(errno));
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return vmmc_error_sys("recvmsg on control socket");
        uint64_t now = vmmc_now_ns();
        if (now >= deadline)
            return vmmc_error(VMMC_ERR_TIMEOUT, "peer did not answer the handshake in %d ms",
                              timeout_ms);
        struct pollfd pf = {fd, POLLIN, 0};
        poll(&pf, 1, (int)((deadline - now) / 1000000 + 1));
    }
}

/* Connect to the peer's control socket and say HELLO: the connection, or
 * an error. */
static int hello_open(vmmc_ep_t *ep, vmmc_tl_peer_t *p, int timeout_ms, int *out)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return vmmc_error_sys("socket(AF_UNIX)");
    char name[96];
    if (!vmmc_card_get(p->addr, "shm", name, sizeof name)) {
        close(fd);
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "peer %d's address has no shm socket", p->rank);
    }
    struct sockaddr_un sa;
    socklen_t sl = sock_addr(name, &sa);
    int rc;
    uint64_t deadline = vmmc_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while ((rc = connect(fd, (struct sockaddr *)&sa, sl)) != 0) {
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN && vmmc_now_ns() < deadline) {
            usleep(200);
            continue;
        }
        int e = errno;
        close(fd);
        errno = e;
        if (e == ECONNREFUSED || e == ENOENT)
            return vmmc_error(VMMC_ERR_PEER_DEAD, "%s %d is not listening (@%s): it has exited",
                              VMMC_PEER_WORD(ep, p->rank), p->rank, sa.sun_path + 1);
        return vmmc_error_sys("connect to rank %d", p->rank);
    }
    shm_hello_t hm;
    vmmc_tl_ctl_init(ep, &hm.m, CTL_HELLO);
    memcpy(hm.addr, VMMC_TL_EP(ep)->addr, VMMC_TL_EP(ep)->addr_len);
    if ((rc = send_buf(fd, &hm, sizeof hm.m + VMMC_TL_EP(ep)->addr_len, NULL, 0)) != VMMC_OK) {
        close(fd);
        return rc;
    }
    *out = fd;
    return VMMC_OK;
}

/* Called with the core peer's lock held, so one connect per peer at a time.
 * A connection whose HELLO went out is never closed for lack of patience:
 * the peer may have taken it already (its HELLO_ACK on the way), and a
 * closed control connection is how an endpoint learns that its peer died.
 * It is kept (pend_fd) and the next connect waits on it, so a peer sees one
 * HELLO per connection of ours, and an impatient caller costs nothing. */
static int shm_peer_connect(vmmc_ep_t *ep, vmmc_tl_peer_t *p, int timeout_ms)
{
    shm_peer_t *sp = shm_peer_alloc(p);
    if (!sp)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for peer state");
    int fd = sp->pend_fd, rc;
    sp->pend_fd = -1;
    if (fd < 0 && (rc = hello_open(ep, p, timeout_ms, &fd)) != VMMC_OK)
        return rc;
    vmmc_ctl_msg_t m;
    int fds[SHM_MAX_FDS], nfds = 0;
    rc = wait_msg(fd, &m, fds, &nfds, timeout_ms);
    if (rc == VMMC_ERR_TIMEOUT) {
        sp->pend_fd = fd; /* answered later, maybe: the next connect looks */
        return rc;
    }
    if (rc == VMMC_OK && (m.magic != VMMC_CTL_MAGIC || m.type != CTL_HELLO_ACK || nfds != 3))
        rc = vmmc_error(VMMC_ERR_PROTOCOL, "bad handshake reply from peer %d", p->rank);
    if (rc == VMMC_ERR_PEER_DEAD) /* it closed on us: it does not know us and does not listen */
        rc = vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "peer %d refused the connection (it does not "
                        "know this endpoint and does not listen, or it is closing)", p->rank);
    /* The kernel, not the message, says which process listens there: the
     * copy path writes into that pid, so it must be the one the address
     * (or the bootstrap) names. */
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (rc == VMMC_OK &&
        (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || !p->pid || cr.pid != p->pid))
        rc = vmmc_error(VMMC_ERR_PROTOCOL,
                        "peer %d's control socket is held by pid %d, not by pid %d of its address",
                        p->rank, (int)cr.pid, (int)p->pid);
    if (rc == VMMC_OK && !sp->ring)
        rc = shm_inbox_attach(sp, p->rank, fds[0], fds[1]);
    for (int i = 0; i < nfds && i < 2; i++)
        close(fds[i]);
    if (rc != VMMC_OK) {
        if (nfds == 3)
            close(fds[2]);
        close(fd);
        return rc;
    }
    sp->evfd = fds[2];
    sp->out_fd = fd;
    return vmmc_tl_ctl_watch(ep, fd, peer_fd_ready, (void *)(intptr_t)p->rank);
}

static void shm_peer_dead(vmmc_ep_t *ep, vmmc_tl_peer_t *p)
{
    (void)ep;
    (void)p; /* descriptors are closed at endpoint close: other threads may use them */
}

static int shm_ctl_send(vmmc_ep_t *ep, vmmc_tl_peer_t *p, const vmmc_ctl_msg_t *m, const int *fds,
                        int nfds)
{
    shm_peer_t *sp = shm_peer(p);
    if (!sp)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "no control connection to rank %d", p->rank);
    /* Requests go on our connection, replies on the peer's. */
    int fd = (m->type == CTL_IMPORT_REP || m->type == CTL_REVOKE || m->type == CTL_ATOMIC_REP)
                 ? sp->in_fd
                 : sp->out_fd;
    if (fd < 0)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "no control connection to rank %d", p->rank);
    return send_msg(fd, m, fds, nfds);
}

int shm_signal(vmmc_ep_t *ep, vmmc_tl_peer_t *p)
{
    shm_peer_t *sp = p->tl_priv;
    if (!sp || !sp->status)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "rank %d is not connected", p->rank);
    return shm_wake_peer(ep, sp);
}

VMMC_TRANSPORT(shm) = {
    .size = sizeof(vmmc_tl_ops_t),
    .version = VMMC_TL_VERSION,
    .name = "shm",
    .about = "yes (memfd mappings, process_vm_writev)",
    .caps = VMMC_TL_CAP_LOCAL | VMMC_TL_CAP_MAP | VMMC_TL_CAP_FDS,
    .reach = vmmc_shm_reach,
    .addr_field = vmmc_shm_addr_field,
    .drain = vmmc_shm_drain,
    .ep_open = shm_ep_open,
    .ep_start = shm_ep_start,
    .ep_close = shm_ep_close,
    .peer_connect = shm_peer_connect,
    .peer_dead = shm_peer_dead,
    .ctl_send = shm_ctl_send,
    .proxy_setup = vmmc_shm_proxy_setup,
    .proxy_release = NULL,
    .put = vmmc_shm_put_pvw,
    .get = vmmc_shm_get,
    .putv = vmmc_shm_putv,
    .signal = shm_signal,
    .progress = NULL,
};
