/* The upgrade end to end, at the layer's internal calls (sock_up_client,
 * sock_up_server, sock_conn_send/recv): a client process and a server
 * process exchange 1 MiB each way and check every byte, in every pairing:
 *   vmmc client + vmmc listener (client writes first): upgraded both sides;
 *   the server writes first: both sides agree (upgraded or both plain);
 *   a plain TCP client to a vmmc listener, the server reading or writing
 *   first: plain, intact;
 *   a vmmc client to a plain listener: plain at once (ECONNREFUSED), intact;
 *   a pre-forked listener (fork after listen, the child accepts): upgraded;
 *   a HELLO without a probe (forged token): ACK{error}, plain, intact;
 *   a vmmc client whose HELLO is refused (its probe's entry gone): the
 *   client says "stays on tcp (ack: ...)", never "upgraded"; plain, intact;
 *   a forged probe followed by plain bytes: plain, intact;
 *   IPv6, and an IPv4 client of a dual-stack listener.
 * With VMMC_SOCK_DEBUG=y, stderr carries one line per decision in the
 * documented format: counted at the end.
 * usage: t_sock_hello [shm|udp] (the transport upgraded connections use)
 *        t_sock_hello serve IP PORT | dial IP PORT: one connection between
 *        two hosts (sock_netns.sh): both ends must upgrade over udp. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/sock_probe.h"
#include "sock/sock_up.h"
#include "vtest.h"

#define N (1u << 20)
static const char *want_transport = "shm";
static int expect_up = 1; /* 0: VMMC_SOCK_UPGRADE=n ("off") */
#define UP (expect_up ? VMMC_SOCK_VMMC : VMMC_SOCK_KERNEL)
static unsigned char *out_buf, *in_buf;

static int magic_prefix; /* the client's bytes start like a record's magic */

static void pattern(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 7 + seed + (i >> 12));
    if (magic_prefix && seed == 1)
        memcpy(b, "VMMCS", 5);
}

static sock_t *wrap(int fd, int domain, int mode)
{
    sock_t *s = sock_fd_new(fd, domain);
    VT_CHECK(s != NULL);
    atomic_store(&s->mode, mode);
    return s;
}

static void xsend(sock_t *s, const unsigned char *b, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r;
        if (atomic_load(&s->mode) == VMMC_SOCK_VMMC && s->conn) {
            struct iovec v = {(void *)(b + done), n - done};
            pthread_mutex_lock(&s->tx_lock);
            r = sock_conn_send(s->conn, &v, 1, MSG_NOSIGNAL, 20000);
            pthread_mutex_unlock(&s->tx_lock);
            if (r < 0 && atomic_load(&s->mode) != VMMC_SOCK_VMMC)
                continue; /* back on the kernel: again there */
        } else {
            r = send(s->fd, b + done, n - done, MSG_NOSIGNAL);
        }
        if (r <= 0)
            VT_FAIL("send: %zd (%s) after %zu bytes", r, strerror(errno), done);
        done += (size_t)r;
    }
}

static void xrecv(sock_t *s, unsigned char *b, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r;
        if (atomic_load(&s->mode) == VMMC_SOCK_VMMC && s->conn) {
            struct iovec v = {b + done, n - done};
            pthread_mutex_lock(&s->rx_lock);
            r = sock_conn_recv(s->conn, &v, 1, 0, 20000);
            pthread_mutex_unlock(&s->rx_lock);
            if (r < 0 && atomic_load(&s->mode) != VMMC_SOCK_VMMC)
                continue;
        } else {
            r = recv(s->fd, b + done, n - done, 0);
        }
        if (r <= 0)
            VT_FAIL("recv: %zd (%s) after %zu bytes", r, strerror(errno), done);
        done += (size_t)r;
    }
}

static void finish(sock_t *s)
{
    if (atomic_load(&s->mode) == VMMC_SOCK_VMMC && s->conn)
        sock_conn_close(s->conn);
    int fd = s->fd;
    sock_fd_drop(fd, s);
    sock_put(s);
    close(fd);
}

/* Server side of an accepted socket: decide, the way sock_io would. */
static void server_decide(sock_t *s, int why)
{
    double end = vt_now() + 30;
    for (;;) {
        if (sock_up_server(s, why, -1) == 0)
            break;
        VT_CHECK(errno == EAGAIN);
        VT_CHECK(vt_now() < end);
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        poll(&p, 1, 1000);
    }
    VT_CHECK(atomic_load(&s->mode) != VMMC_SOCK_PENDING);
    VT_CHECK(s->pend == NULL);
}

static void check_transport(sock_t *s)
{
    /* A retirement clears s->conn under s->lock, then flips the mode. */
    pthread_mutex_lock(&s->lock);
    sock_conn_t *c = s->conn;
    pthread_mutex_unlock(&s->lock);
    if (atomic_load(&s->mode) != VMMC_SOCK_VMMC || !c)
        return;
    vmmc_sock_info_t info;
    sock_conn_info(c, &info);
    if (strcmp(info.transport, want_transport) != 0)
        VT_FAIL("upgraded over %s, expected %s", info.transport, want_transport);
}

/* ------------------------------------------------------------------------ */

typedef struct lst {
    sock_t s;
    struct sockaddr_storage a;
    socklen_t alen;
} lst_t;

static void listen_on(lst_t *l, int family, int vmmc)
{
    memset(l, 0, sizeof *l);
    int fd = socket(family, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    if (family == AF_INET) {
        struct sockaddr_in *in = (void *)&l->a;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        l->alen = sizeof *in;
    } else {
        struct sockaddr_in6 *in6 = (void *)&l->a;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_any;
        l->alen = sizeof *in6;
    }
    VT_CHECK(bind(fd, (struct sockaddr *)&l->a, l->alen) == 0);
    VT_CHECK(listen(fd, 16) == 0);
    VT_CHECK(getsockname(fd, (struct sockaddr *)&l->a, &l->alen) == 0);
    l->s.fd = fd;
    l->s.domain = family;
    if (vmmc)
        VT_CHECK(sock_probe_listen(&l->s) == 0 && (l->s.lst != NULL) == expect_up);
}

static int dial(lst_t *l, int family)
{
    int fd = socket(family, SOCK_STREAM, 0);
    VT_CHECK(fd >= 0);
    struct sockaddr_storage to = l->a;
    socklen_t tl = l->alen;
    if (l->a.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (void *)&to;
        if (family == AF_INET) {
            uint16_t port = in6->sin6_port;
            struct sockaddr_in *in = (void *)&to;
            memset(&to, 0, sizeof to);
            in->sin_family = AF_INET;
            in->sin_port = port;
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            tl = sizeof *in;
        } else {
            in6->sin6_addr = in6addr_loopback;
        }
    }
    VT_CHECK(connect(fd, (struct sockaddr *)&to, tl) == 0);
    return fd;
}

enum { C_VMMC, C_PLAIN, C_HELLO_NO_PROBE, C_PROBE_THEN_PLAIN, C_PARTIAL };

/* The client process: connect, decide, then the exchange. Exit status: 10
 * + its final mode. */
static void client(lst_t *l, int family, int kind, int server_first)
{
    alarm(60);
    int fd = dial(l, family);
    sock_t *s = wrap(fd, family, kind == C_VMMC ? VMMC_SOCK_PENDING : VMMC_SOCK_KERNEL);
    if (kind == C_VMMC) {
        VT_CHECK(sock_up_client(s) == 0);
    } else if (kind == C_HELLO_NO_PROBE) {
        sock_rec_t h;
        memset(&h, 0, sizeof h);
        h.type = SOCK_REC_HELLO;
        h.token = 12345;
        h.ring.addr_len = 5;
        memcpy(h.ring.addr, "host=", 5);
        strcpy(h.ring.name, "forged");
        h.ring.size = 4096;
        VT_CHECK(sock_rec_write(fd, &h) == 0);
        VT_CHECK(sock_rec_read(fd, &h, 20000) == 0);
        VT_CHECK(h.type == SOCK_REC_ACK && h.status == VMMC_ERR_PERMISSION);
    } else if (kind == C_PROBE_THEN_PLAIN) {
        uint64_t tok;
        char addr[VMMC_ADDR_MAX];
        size_t alen = sizeof addr;
        const char *why;
        VT_CHECK(sock_probe_client(s, &tok, addr, &alen, &why) == 1);
    }
    int mode = atomic_load(&s->mode);
    VT_CHECK(mode == VMMC_SOCK_VMMC || mode == VMMC_SOCK_KERNEL);
    pattern(out_buf, N, 1);
    if (kind == C_PARTIAL) {
        /* A plain client whose first bytes look like the start of a
         * record, then a pause longer than VMMC_SOCK_HELLO_TIMEOUT. */
        VT_CHECK(send(fd, out_buf, 5, 0) == 5);
        usleep(400000);
        xsend(s, out_buf + 5, N - 5);
        xrecv(s, in_buf, N);
    } else if (server_first) {
        xrecv(s, in_buf, N);
        xsend(s, out_buf, N);
    } else {
        xsend(s, out_buf, N);
        xrecv(s, in_buf, N);
    }
    pattern(out_buf, N, 2);
    VT_CHECK(memcmp(in_buf, out_buf, N) == 0);
    mode = atomic_load(&s->mode);
    check_transport(s);
    finish(s);
    _exit(10 + mode);
}

static int close_early; /* close the listener right after accept() */
static int force_pending; /* decide the accepted socket even with no table */
static int lose_entry; /* the probe's table entry is gone when the HELLO is read */

/* Accept one connection and serve it; returns its final mode. */
static int serve(lst_t *l, int vmmc, int server_first)
{
    int fd = accept(l->s.fd, NULL, NULL);
    VT_CHECK(fd >= 0);
    if (close_early) {
        /* One-shot servers close the listener before the first read: the
         * connection is still decided by its table. */
        struct pollfd pf = {.fd = fd, .events = POLLIN}; /* the HELLO is in */
        VT_CHECK(poll(&pf, 1, 20000) == 1);
        sock_probe_unlisten(&l->s);
        close(l->s.fd);
        l->s.fd = -1;
    }
    if (lose_entry) {
        /* The HELLO is in, its probe's entry vanishes (as if it expired):
         * the acceptor refuses (ACK{error}), and the client, which had
         * sent its HELLO, must say so and give its bytes to TCP. */
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        VT_CHECK(poll(&pf, 1, 20000) == 1);
        struct sockaddr_storage peer;
        socklen_t pl = sizeof peer;
        uint8_t key[SOCK_KEY_LEN];
        uint64_t tok;
        VT_CHECK(getpeername(fd, (struct sockaddr *)&peer, &pl) == 0);
        VT_CHECK(sock_key_of((struct sockaddr *)&peer, pl, key) == 0);
        sock_tab_t *t = ((sock_listener_t *)l->s.lst)->tab;
        VT_CHECK(sock_tab_claim(t, key, &tok) == SOCK_TAB_CLAIMED);
        sock_tab_release(t, key);
        VT_CHECK(!sock_tab_has(t, key));
    }
    vmmc |= force_pending;
    sock_t *s = wrap(fd, l->s.domain, vmmc ? VMMC_SOCK_PENDING : VMMC_SOCK_KERNEL);
    if (vmmc)
        server_decide(s, server_first ? SOCK_UP_WRITE : SOCK_UP_READ);
    pattern(out_buf, N, 2);
    if (server_first) {
        xsend(s, out_buf, N);
        xrecv(s, in_buf, N);
    } else {
        xrecv(s, in_buf, N);
        xsend(s, out_buf, N);
    }
    pattern(out_buf, N, 1);
    VT_CHECK(memcmp(in_buf, out_buf, N) == 0);
    int mode = atomic_load(&s->mode);
    check_transport(s);
    finish(s);
    return mode;
}

static int reap(pid_t pid)
{
    int st;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) < 10)
        VT_FAIL("client process failed (status %#x)", st);
    return WEXITSTATUS(st) - 10;
}

/* A vmmc client to a plain listener whose UDP port we hold: the probe
 * arrives there, unless upgrading is off (then nothing is ever sent). */
static void sniff_probe(void)
{
    lst_t l;
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    for (int tries = 0;; tries++) { /* another process may hold that UDP port */
        listen_on(&l, AF_INET, 0);
        if (bind(u, (struct sockaddr *)&l.a, l.alen) == 0)
            break;
        VT_CHECK(errno == EADDRINUSE && tries < 100);
        close(l.s.fd);
    }
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60);
        int fd = dial(&l, AF_INET);
        sock_t *s = wrap(fd, AF_INET, VMMC_SOCK_PENDING);
        VT_CHECK(sock_up_client(s) == 0);
        _exit(10 + atomic_load(&s->mode));
    }
    int acc = accept(l.s.fd, NULL, NULL);
    VT_CHECK(acc >= 0);
    VT_CHECK(reap(pid) == VMMC_SOCK_KERNEL);
    char b[2048];
    ssize_t n = recv(u, b, sizeof b, MSG_DONTWAIT);
    VT_CHECK((n > 0) == expect_up);
    printf("%-44s %s\n", "probe sent", n > 0 ? "yes" : "no");
    close(acc);
    close(u);
    close(l.s.fd);
}

/* One pairing: returns the (agreed) mode. */
static int pairing(const char *what, int family, int cfamily, int vmmc_listener, int kind,
                   int server_first)
{
    lst_t l;
    double t0 = vt_now();
    listen_on(&l, family, vmmc_listener);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0)
        client(&l, cfamily, kind, server_first);
    int smode = serve(&l, vmmc_listener, server_first);
    int cmode = reap(pid);
    if (smode != cmode)
        VT_FAIL("%s: server mode %d, client mode %d", what, smode, cmode);
    printf("%-44s %s (%.2fs)\n", what, smode == VMMC_SOCK_VMMC ? "upgraded" : "tcp",
           vt_now() - t0);
    fflush(stdout);
    sock_probe_unlisten(&l.s);
    if (l.s.fd >= 0)
        close(l.s.fd);
    return smode;
}

/* fork after listen: a child accepts; the parent's thread answers probes. */
static void preforked(void)
{
    double t0 = vt_now();
    lst_t l;
    listen_on(&l, AF_INET, 1);
    pid_t acc = fork();
    VT_CHECK(acc >= 0);
    if (acc == 0) {
        alarm(60);
        VT_CHECK(sock_ctx_peek() == NULL);
        _exit(10 + serve(&l, 1, 0));
    }
    pid_t cl = fork();
    VT_CHECK(cl >= 0);
    if (cl == 0)
        client(&l, AF_INET, C_VMMC, 0);
    int cmode = reap(cl), smode = reap(acc);
    VT_CHECK(cmode == smode);
    VT_CHECK(smode == UP);
    printf("%-44s %s (%.2fs)\n", "pre-forked listener", smode == VMMC_SOCK_VMMC ? "upgraded" : "tcp",
           vt_now() - t0);
    sock_probe_unlisten(&l.s);
    close(l.s.fd);
}

static int log_fd = -1, err_fd = -1;
static pid_t main_pid;
static char *log_text;

/* Give the log back to stderr (at the end, or when a check failed). */
static void dump_log(void)
{
    if (getpid() != main_pid || log_fd < 0)
        return;
    fflush(stderr);
    dup2(err_fd, 2);
    off_t len = lseek(log_fd, 0, SEEK_END);
    log_text = calloc(1, (size_t)len + 1);
    if (pread(log_fd, log_text, (size_t)len, 0) == len)
        fputs(log_text, stderr);
    close(log_fd);
    log_fd = -1;
}

static int count_lines(const char *log, const char *needle)
{
    int n = 0;
    for (const char *p = log; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* Two hosts: one connection, upgraded over udp, 1 MiB each way. */
static int two_hosts(const char *role, const char *ip, int port)
{
    want_transport = "udp";
    lst_t l;
    memset(&l, 0, sizeof l);
    struct sockaddr_in *in = (void *)&l.a;
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    VT_CHECK(inet_pton(AF_INET, ip, &in->sin_addr) == 1);
    l.alen = sizeof *in;
    int mode;
    if (!strcmp(role, "serve")) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        VT_CHECK(bind(fd, (struct sockaddr *)&l.a, l.alen) == 0);
        VT_CHECK(listen(fd, 4) == 0);
        l.s.fd = fd;
        l.s.domain = AF_INET;
        VT_CHECK(sock_probe_listen(&l.s) == 0 && l.s.lst != NULL);
        printf("listening\n");
        fflush(stdout);
        mode = serve(&l, 1, 0);
    } else {
        pid_t pid = fork();
        VT_CHECK(pid >= 0);
        if (pid == 0)
            client(&l, AF_INET, C_VMMC, 0);
        mode = reap(pid);
    }
    printf("%s: %s\n", role, mode == VMMC_SOCK_VMMC ? "upgraded" : "tcp");
    return mode == VMMC_SOCK_VMMC ? 0 : 1;
}

int main(int argc, char **argv)
{
    alarm(300);
    if (argc == 4) {
        out_buf = malloc(N);
        in_buf = malloc(N);
        return two_hosts(argv[1], argv[2], atoi(argv[3]));
    }
    if (argc > 1)
        want_transport = argv[1];
    expect_up = strcmp(want_transport, "off") != 0;
    out_buf = malloc(N);
    in_buf = malloc(N);
    /* stderr into a file, read back at the end (children write there too). */
    char path[] = "/tmp/t_sock_hello.XXXXXX";
    log_fd = mkstemp(path);
    VT_CHECK(log_fd >= 0);
    unlink(path);
    err_fd = dup(2);
    main_pid = getpid();
    atexit(dump_log);
    dup2(log_fd, 2);

    int up = 0;
    sniff_probe();
    VT_CHECK(pairing("vmmc client, vmmc listener", AF_INET, AF_INET, 1, C_VMMC, 0) == UP);
    up++;
    if (pairing("vmmc client, vmmc listener, server first", AF_INET, AF_INET, 1, C_VMMC, 1) ==
        VMMC_SOCK_VMMC)
        up++;
    VT_CHECK(pairing("plain client, vmmc listener", AF_INET, AF_INET, 1, C_PLAIN, 0) ==
             VMMC_SOCK_KERNEL);
    VT_CHECK(pairing("plain client, vmmc listener, server first", AF_INET, AF_INET, 1, C_PLAIN,
                     1) == VMMC_SOCK_KERNEL);
    VT_CHECK(pairing("vmmc client, plain listener", AF_INET, AF_INET, 0, C_VMMC, 0) ==
             VMMC_SOCK_KERNEL);
    VT_CHECK(pairing("vmmc client, plain listener, server first", AF_INET, AF_INET, 0, C_VMMC,
                     1) == VMMC_SOCK_KERNEL);
    if (expect_up) { /* these talk to the responder */
        VT_CHECK(pairing("hello without a probe", AF_INET, AF_INET, 1, C_HELLO_NO_PROBE, 0) ==
                 VMMC_SOCK_KERNEL);
        force_pending = 1; /* a listener with no table here: the HELLO is answered */
        VT_CHECK(pairing("hello, no probe table", AF_INET, AF_INET, 0, C_HELLO_NO_PROBE, 0) ==
                 VMMC_SOCK_KERNEL);
        force_pending = 0;
        VT_CHECK(pairing("probe, then plain bytes", AF_INET, AF_INET, 1, C_PROBE_THEN_PLAIN,
                         0) == VMMC_SOCK_KERNEL);
        lose_entry = 1;
        VT_CHECK(pairing("hello refused after the client's YES", AF_INET, AF_INET, 1, C_VMMC,
                         0) == VMMC_SOCK_KERNEL);
        lose_entry = 0;
    }
    close_early = 1;
    VT_CHECK(pairing("listener closed before the first read", AF_INET, AF_INET, 1, C_VMMC, 0) ==
             UP);
    up++;
    close_early = 0;
    magic_prefix = 1;
    VT_CHECK(pairing("plain bytes like a record's start, a pause", AF_INET, AF_INET, 1, C_PARTIAL,
                     0) == VMMC_SOCK_KERNEL);
    magic_prefix = 0;
    VT_CHECK(pairing("IPv6", AF_INET6, AF_INET6, 1, C_VMMC, 0) == UP);
    up++;
    VT_CHECK(pairing("IPv4 client, dual-stack listener", AF_INET6, AF_INET, 1, C_VMMC, 0) == UP);
    up++;
    preforked();
    up++;

    /* The debug lines, in their documented format. */
    dump_log();
    const char *log = log_text;
    VT_CHECK(log != NULL);
    if (getenv("VMMC_SOCK_DEBUG") && !expect_up) {
        VT_CHECK(count_lines(log, "upgraded (") == 0);
        VT_CHECK(count_lines(log, "stays on tcp (upgrade disabled, client)\n") == 9);
        VT_CHECK(count_lines(log, "stays on tcp (upgrade disabled, server)\n") >= 1);
        (void)0;
    } else if (getenv("VMMC_SOCK_DEBUG")) {
        char want[160];
        snprintf(want, sizeof want, "upgraded (%s, client)\n", want_transport);
        VT_CHECK(count_lines(log, want) == up);
        snprintf(want, sizeof want, "upgraded (%s, server)\n", want_transport);
        VT_CHECK(count_lines(log, want) == up);
        VT_CHECK(count_lines(log, "stays on tcp (no vmmc listener, client)\n") == 2);
        VT_CHECK(count_lines(log, "stays on tcp (no answer, client)\n") == 1); /* sniffed */
        VT_CHECK(count_lines(log, "stays on tcp (plain client, server)\n") >= 1);
        VT_CHECK(count_lines(log, "stays on tcp (hello without its probe, server)\n") == 3);
        snprintf(want, sizeof want, "stays on tcp (ack: %s, client)\n",
                 vmmc_strerror(VMMC_ERR_PERMISSION));
        VT_CHECK(count_lines(log, want) == 1);
        VT_CHECK(count_lines(log, "stays on tcp (client sent no hello, server)\n") == 1);
        VT_CHECK(count_lines(log, "stays on tcp (no hello in time, server)\n") == 1);
        VT_CHECK(count_lines(log, "]: fd ") == count_lines(log, "vmmc-sock["));
    }
    printf("t_sock_hello: ok (%d upgraded)\n", expect_up ? up : 0);
    return 0;
}
