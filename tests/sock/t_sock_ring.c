/* The byte ring alone (src/sock/sock_ring.c): two processes, each with an
 * open-world endpoint, export their receive rings and import each other's.
 * The writer streams bytes (random chunk sizes, 1-3 iovec pieces each, some
 * from a file) into a small ring so that it wraps many times, publishing the
 * tail after the data; the reader checks every byte against the stream
 * position and publishes its consumption in the writer's ring (the credit).
 * At the end the writer reads back its last bytes from the peer's ring (the
 * revert's read-back). Runs mapped (shm) and sent (VMMC_TRANSPORT=udp). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sock/sock_conn_priv.h"
#include "vtest.h"

#define RING 4096u
#define TOTAL (3u << 20)

static uint8_t pat(uint64_t pos)
{
    uint64_t x = pos * 0x9E3779B97F4A7C15ull;
    return (uint8_t)(x >> 56) ^ (uint8_t)pos;
}

static pid_t child; /* the writer's reader */

static void nap(void)
{
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
    int st;
    if (child > 0 && waitpid(child, &st, WNOHANG) == child)
        VT_FAIL("the reader ended early (status %d)", st);
}

static void xfer(int fd, void *b, size_t n, int out)
{
    while (n) {
        ssize_t k = out ? write(fd, b, n) : read(fd, b, n);
        VT_CHECK(k > 0);
        b = (uint8_t *)b + k;
        n -= (size_t)k;
    }
}

/* Open an endpoint, trade addresses over @p sp, connect to the other one. */
static vmmc_ep_t *setup(int sp, int *peer)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_ep_open(NULL, &ep));
    VT_OK(vmmc_listen(ep, NULL, NULL));
    uint8_t a[VMMC_ADDR_MAX], b[VMMC_ADDR_MAX];
    size_t la = sizeof a, lb;
    VT_OK(vmmc_ep_addr(ep, a, &la));
    xfer(sp, &la, sizeof la, 1);
    xfer(sp, a, la, 1);
    xfer(sp, &lb, sizeof lb, 0);
    VT_CHECK(lb <= sizeof b);
    xfer(sp, b, lb, 0);
    VT_OK(vmmc_connect(ep, b, lb, peer));
    return ep;
}

/* Both sides: my ring exported to @p peer, the other's imported. */
static void rings(vmmc_ep_t *ep, int peer, int sp, sock_rx_ring_t *rx, sock_tx_ring_t *tx)
{
    VT_OK(sock_rx_open(rx, ep, RING, peer));
    xfer(sp, rx->name, sizeof rx->name, 1);
    char other[SOCK_RING_NAME_MAX];
    xfer(sp, other, sizeof other, 0);
    VT_OK(sock_tx_open(tx, ep, peer, other, RING, 20000));
    VT_CHECK((tx->map != NULL) == !vt_remote());
}

static void reader(int sp)
{
    int peer;
    vmmc_ep_t *ep = setup(sp, &peer);
    sock_rx_ring_t rx;
    sock_tx_ring_t tx;
    rings(ep, peer, sp, &rx, &tx);
    unsigned long long seed = 77;
    uint64_t head = 0;
    uint8_t buf[3][3000];
    double deadline = vt_now() + 120;
    while (head < TOTAL) {
        uint64_t tail = sock_rx_word(&rx, SOCK_HDR_TAIL);
        VT_CHECK(tail >= head && tail - head <= RING);
        if (tail == head) {
            VT_CHECK(vt_now() < deadline);
            nap();
            continue;
        }
        struct iovec iov[3];
        int n = 1 + (int)(vt_rand(&seed) % 3);
        for (int i = 0; i < n; i++) {
            iov[i].iov_base = buf[i];
            iov[i].iov_len = 1 + vt_rand(&seed) % sizeof buf[i];
        }
        size_t skip = vt_rand(&seed) % 2 ? 0 : iov[0].iov_len / 2;
        size_t cap = 0;
        for (int i = 0; i < n; i++)
            cap += iov[i].iov_len;
        cap -= skip;
        size_t len = tail - head < cap ? (size_t)(tail - head) : cap;
        sock_rx_copy(&rx, head, len, iov, n, skip);
        size_t k = 0, s = skip;
        for (int i = 0; i < n && k < len; i++) {
            for (size_t j = s; j < iov[i].iov_len && k < len; j++, k++)
                if (buf[i][j] != pat(head + k))
                    VT_FAIL("byte %llu: %u, expected %u", (unsigned long long)(head + k),
                            buf[i][j], pat(head + k));
            s = 0;
        }
        head += len;
        VT_OK(sock_tx_word(&tx, SOCK_HDR_CREDIT, head));
    }
    char done;
    xfer(sp, &done, 1, 0); /* the writer's read-back is over */
    sock_tx_close(&tx);
    sock_rx_close(&rx);
    VT_OK(vmmc_ep_close(ep));
    exit(0);
}

static void writer(int sp)
{
    int peer;
    vmmc_ep_t *ep = setup(sp, &peer);
    sock_rx_ring_t rx;
    sock_tx_ring_t tx;
    rings(ep, peer, sp, &rx, &tx);

    /* a file whose bytes are the stream's from FILE_AT on */
    enum { FILE_AT = 1u << 20, FILE_LEN = 300000 };
    char path[] = "/tmp/t_sock_ring.XXXXXX";
    int ffd = mkstemp(path);
    VT_CHECK(ffd >= 0);
    unlink(path);
    static uint8_t fb[FILE_LEN];
    for (size_t i = 0; i < FILE_LEN; i++)
        fb[i] = pat(FILE_AT + i);
    VT_CHECK(write(ffd, fb, FILE_LEN) == FILE_LEN);

    unsigned long long seed = 5;
    uint64_t sent = 0;
    uint8_t src[3][5000];
    double deadline = vt_now() + 120;
    while (sent < TOTAL) {
        uint64_t credit = sock_rx_word(&rx, SOCK_HDR_CREDIT);
        VT_CHECK(credit <= sent);
        uint64_t room = RING - (sent - credit);
        if (!room) {
            VT_CHECK(vt_now() < deadline);
            nap();
            continue;
        }
        if (sent >= FILE_AT && sent < FILE_AT + FILE_LEN) {
            size_t k = FILE_AT + FILE_LEN - sent < room ? (size_t)(FILE_AT + FILE_LEN - sent)
                                                        : (size_t)room;
            ssize_t got = sock_tx_put_file(&tx, sent, ffd, (off_t)(sent - FILE_AT), k);
            VT_CHECK(got == (ssize_t)k);
            sent += k;
            VT_OK(sock_tx_word(&tx, SOCK_HDR_TAIL, sent));
            continue;
        }
        struct iovec iov[3];
        int n = 1 + (int)(vt_rand(&seed) % 3);
        size_t skip = vt_rand(&seed) % 3 ? 0 : 7, len = 0;
        uint64_t p = sent;
        for (int i = 0; i < n; i++) {
            size_t l = 1 + vt_rand(&seed) % (vt_rand(&seed) % 4 ? 64 : sizeof src[i] - 8);
            if (i == 0)
                l += skip;
            size_t from = i == 0 ? skip : 0;
            for (size_t j = from; j < l; j++)
                src[i][j] = pat(p++);
            iov[i].iov_base = src[i];
            iov[i].iov_len = l;
            len += l - from;
        }
        if (len > room)
            len = (size_t)room;
        if (sent < FILE_AT && sent + len > FILE_AT)
            len = FILE_AT - sent;
        if (len > TOTAL - sent)
            len = TOTAL - sent;
        VT_OK(sock_tx_put(&tx, sent, iov, n, skip, len));
        sent += len;
        VT_OK(sock_tx_word(&tx, SOCK_HDR_TAIL, sent));
    }
    /* wait for the reader to consume all, then read the ring back */
    while (sock_rx_word(&rx, SOCK_HDR_CREDIT) != TOTAL) {
        VT_CHECK(vt_now() < deadline);
        nap();
    }
    uint8_t back[RING];
    VT_OK(sock_tx_fetch(&tx, TOTAL - RING + 100, back, RING - 100));
    for (size_t i = 0; i < RING - 100; i++)
        if (back[i] != pat(TOTAL - RING + 100 + i))
            VT_FAIL("read-back byte %zu wrong", i);
    VT_OK(sock_tx_fence(&tx));
    char done = 1;
    xfer(sp, &done, 1, 1);
    int st;
    pid_t c = child;
    child = 0;
    VT_CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    sock_tx_close(&tx);
    sock_rx_close(&rx);
    VT_OK(vmmc_ep_close(ep));
}

int main(void)
{
    vt_require_transport();
    int sp[2];
    VT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    child = pid;
    if (pid == 0) {
        close(sp[0]);
        alarm(150);
        reader(sp[1]);
    }
    close(sp[1]);
    alarm(150);
    writer(sp[0]);
    printf("ok: %u bytes through a %u-byte ring (%s)\n", TOTAL, RING,
           vt_remote() ? "sent" : "mapped");
    return 0;
}
