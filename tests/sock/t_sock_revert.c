/* Back to TCP (src/sock/sock_revert.c) with bytes in flight both ways: each
 * side has written part of its stream into the other's ring and read only
 * part of what it was sent; then
 *   one:  the client reverts alone (the server's sock thread answers);
 *   one_server: the server reverts alone;
 *   both: both revert at the same moment;
 * and the streams go on over the kernel's TCP. Each side checks that it
 * reads the other's whole stream exactly once and in order, across the
 * switch, and that both sockets end in mode KERNEL. Runs on shm and udp. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "conn_test.h"

enum { ONE_CLIENT, ONE_SERVER, BOTH, NCASE };
static const char *names[] = {"one", "one_server", "both"};

static int ctl;

static void step(void)
{
    char b = 's';
    VT_CHECK(write(ctl, &b, 1) == 1);
    VT_CHECK(read(ctl, &b, 1) == 1);
}

/* Read through the conn while the socket is upgraded, else the kernel. */
static ssize_t any_recv(ct_t *t, void *b, size_t len)
{
    for (;;) {
        if (atomic_load(&t->s->mode) == VMMC_SOCK_VMMC) {
            ssize_t n = ct_recv(t, b, len, 0, -1);
            if (n >= 0)
                return n;
            if (n == -1 && !(errno == EAGAIN && atomic_load(&t->s->mode) != VMMC_SOCK_VMMC))
                return n;
            continue;
        }
        return recv(t->fd, b, len, 0);
    }
}

static void any_send_all(ct_t *t, const uint8_t *b, size_t len)
{
    while (len) {
        ssize_t n;
        if (atomic_load(&t->s->mode) == VMMC_SOCK_VMMC) {
            n = ct_send(t, b, len, MSG_NOSIGNAL, -1);
            if (n < 0 && (n == -2 || (errno == EAGAIN &&
                                      atomic_load(&t->s->mode) != VMMC_SOCK_VMMC)))
                continue;
        } else {
            n = send(t->fd, b, len, MSG_NOSIGNAL);
        }
        if (n <= 0)
            VT_FAIL("send: %zd (%s)", n, strerror(errno));
        b += n;
        len -= (size_t)n;
    }
}

static void out(ct_t *t, uint64_t *pos, size_t len, unsigned seed)
{
    uint8_t *b = malloc(len);
    for (size_t i = 0; i < len; i++)
        b[i] = ct_pat(*pos + i, seed);
    any_send_all(t, b, len);
    *pos += len;
    free(b);
}

static void in(ct_t *t, uint64_t *pos, size_t len, unsigned seed)
{
    uint8_t b[5000];
    while (len) {
        ssize_t n = any_recv(t, b, len < sizeof b ? len : sizeof b);
        if (n <= 0)
            VT_FAIL("recv: %zd (%s) at %llu", n, strerror(errno), (unsigned long long)*pos);
        for (ssize_t i = 0; i < n; i++)
            if (b[i] != ct_pat(*pos + (uint64_t)i, seed))
                VT_FAIL("byte %llu is %u, expected %u", (unsigned long long)(*pos + (uint64_t)i),
                        b[i], ct_pat(*pos + (uint64_t)i, seed));
        *pos += (uint64_t)n;
        len -= (size_t)n;
    }
}

static void run(ct_t *t, int server, int cs)
{
    unsigned mine = server ? 11 : 22, theirs = server ? 22 : 11;
    uint64_t opos = 0, ipos = 0;
    size_t ring = (size_t)sock_cfg()->ring;
    size_t first = ring * 3 / 4;
    /* bytes in flight both ways: written, a third read */
    out(t, &opos, first, mine);
    step();
    in(t, &ipos, first / 3, theirs);
    step();
    int me = (cs == BOTH) || (cs == ONE_CLIENT && !server) || (cs == ONE_SERVER && server);
    if (me) {
        VT_CHECK(sock_conn_revert(t->c) == 0);
        VT_CHECK(atomic_load(&t->s->mode) == VMMC_SOCK_KERNEL);
    }
    /* go on: the rest of the first part, then more both ways */
    out(t, &opos, 100000, mine);
    in(t, &ipos, first - first / 3 + 100000, theirs);
    step();
    out(t, &opos, 300000, mine);
    in(t, &ipos, 300000, theirs);
    step();
    VT_CHECK(atomic_load(&t->s->mode) == VMMC_SOCK_KERNEL);
    VT_CHECK(t->s->conn == NULL);
}

int main(void)
{
    vt_require_transport();
    signal(SIGPIPE, SIG_IGN);
    int port, cport, l = ct_listen(&port), lc = ct_listen(&cport);
    const char *only = getenv("T_CASE");
    for (int cs = 0; cs < NCASE; cs++) {
        if (only && atoi(only) != cs)
            continue;
        pid_t pid = fork();
        VT_CHECK(pid >= 0);
        if (pid == 0) {
            alarm(100);
            close(l);
            close(lc);
            ctl = ct_connect(cport);
            ct_t t;
            ct_up(&t, ct_connect(port), 0);
            run(&t, 0, cs);
            ct_close(&t);
            _exit(0);
        }
        alarm(100);
        ctl = ct_accept(lc);
        ct_t t;
        ct_up(&t, ct_accept(l), 1);
        run(&t, 1, cs);
        ct_close(&t);
        close(ctl);
        ct_reap(pid, 60);
        printf("%s: ok\n", names[cs]);
        fflush(stdout);
    }
    return 0;
}
