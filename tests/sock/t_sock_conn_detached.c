/* The client between HELLO and ACK (src/sock/sock_conn.c): its sends wait
 * in the local buffer (a non-blocking one takes exactly the ring's size,
 * then EAGAIN; poll says POLLOUT until then), and
 *   attach:  the ACK attaches the server's ring and flushes the buffer: the
 *            server reads every byte through vmmc, then the bytes sent after;
 *   abandon: an ACK with an error gives the buffer to the TCP stream: the
 *            server reads every byte from the kernel, in order with what
 *            the client writes after, and the client's socket is KERNEL.
 * Runs on shm and udp. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>

#include "conn_test.h"

enum { ATTACH, ABANDON, NCASE };
static const char *names[] = {"attach", "abandon"};

static void client(int port, int ctl_port, int cs)
{
    int ctl = ct_connect(ctl_port);
    ct_t t;
    ct_up(&t, ct_connect(port), 0);
    size_t ring = (size_t)sock_cfg()->ring;
    uint8_t *b = malloc(ring + 1000);
    for (size_t i = 0; i < ring + 1000; i++)
        b[i] = ct_pat(i, 3);
    /* the server reads no HELLO before it hears from us: nothing is attached */
    VT_CHECK(!(atomic_load(&t.c->st) & C_ATTACHED));
    VT_CHECK(sock_conn_ready(t.c, POLLOUT) & POLLOUT);
    VT_CHECK(ct_send(&t, b, 100, 0, 0) == 100);
    VT_CHECK(ct_send(&t, b + 100, ring, 0, 0) == (ssize_t)(ring - 100));
    VT_CHECK(ct_send(&t, b, 1, 0, 0) == -1 && errno == EAGAIN);
    VT_CHECK(!(sock_conn_ready(t.c, POLLOUT) & POLLOUT));
    VT_CHECK(write(ctl, "g", 1) == 1); /* the server may now read the HELLO */
    /* blocks until the ACK came and the buffer moved */
    if (cs == ATTACH) {
        ct_send_all(&t, b + ring, 1000);
        VT_CHECK(atomic_load(&t.s->mode) == VMMC_SOCK_VMMC);
    } else {
        for (;;) {
            ssize_t n = atomic_load(&t.s->mode) == VMMC_SOCK_VMMC
                            ? ct_send(&t, b + ring, 1000, 0, -1)
                            : send(t.fd, b + ring, 1000, 0);
            if (n == 1000)
                break;
            VT_CHECK(n < 0 && (n == -2 || errno == EAGAIN));
        }
        VT_CHECK(atomic_load(&t.s->mode) == VMMC_SOCK_KERNEL);
    }
    char go;
    VT_CHECK(read(ctl, &go, 1) == 1);
    if (t.s->conn)
        ct_close(&t);
    _exit(0);
}

static void server_case(int l, int lctl, int cs)
{
    int ctl = ct_accept(lctl);
    int fd = ct_accept(l);
    char go;
    VT_CHECK(read(ctl, &go, 1) == 1);
    size_t ring = (size_t)sock_cfg()->ring, total = ring + 1000;
    uint8_t *b = malloc(total);
    if (cs == ATTACH) {
        ct_t t;
        ct_up(&t, fd, 1);
        ct_recv_all(&t, b, total);
        VT_CHECK(write(ctl, "e", 1) == 1);
        ct_close(&t);
    } else {
        sock_rec_t h;
        VT_CHECK(sock_rec_read(fd, &h, 30000) == 0 && h.type == SOCK_REC_HELLO);
        sock_rec_t a = ct_rec(SOCK_REC_ACK);
        a.status = VMMC_ERR_PERMISSION;
        VT_CHECK(sock_rec_write(fd, &a) == 0);
        VT_CHECK(recv(fd, b, total, MSG_WAITALL) == (ssize_t)total);
        VT_CHECK(write(ctl, "e", 1) == 1);
        close(fd);
    }
    for (size_t i = 0; i < total; i++)
        if (b[i] != ct_pat(i, 3))
            VT_FAIL("byte %zu is %u, expected %u", i, b[i], ct_pat(i, 3));
    free(b);
    close(ctl);
}

int main(void)
{
    vt_require_transport();
    signal(SIGPIPE, SIG_IGN);
    int port, cport, l = ct_listen(&port), lc = ct_listen(&cport);
    for (int cs = 0; cs < NCASE; cs++) {
        pid_t pid = fork();
        VT_CHECK(pid >= 0);
        if (pid == 0) {
            alarm(60);
            close(l);
            close(lc);
            client(port, cport, cs);
        }
        alarm(60);
        server_case(l, lc, cs);
        ct_reap(pid, 60);
        printf("%s: ok\n", names[cs]);
        fflush(stdout);
    }
    return 0;
}
