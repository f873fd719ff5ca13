/* libFuzzer target: the bootstrap wire format (src/core/boot_wire.h), read
 * by both of its sides.
 *
 * Byte 0 picks the reader (low 2 bits) and options; the rest is what the
 * other side wrote:
 *   0  the rendezvous server (boot_server.c): up to 3 clients connect to a
 *      job of 1..4 ranks and send the bytes (split at 0xfe 0xfe markers, one
 *      piece per client, round robin); bit 2: the launcher reports rank
 *      exits in between; bit 3: TCP mode (a disconnect is a death).
 *   1  the client's event reader (vmmc_boot_dispatch) on a stream socket;
 *      bit 2: the stream ends after the bytes.
 *   2  the client's rank-table parser (vmmc_boot_parse_table), job size
 *      1..8 from byte 1.
 *   3  the message framing and field readers alone (vmmc_bw_rx_next and
 *      vmmc_bw_get_*).
 * Anything is fine except a crash, a sanitizer report, a hang, or an event
 * that names a rank outside the job. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/boot_priv.h"
#include "core/boot_server.h"
#include "core/boot_wire.h"
#include "fuzz_target.h"

static void drain(int fd)
{
    char buf[4096];
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        ;
}

static void serve_round(vmmc_boot_server_t *s, int rounds)
{
    struct pollfd fds[64];
    for (int i = 0; i < rounds; i++) {
        int n = vmmc_boot_server_pollfds(s, fds);
        int r = poll(fds, (nfds_t)n, 0);
        vmmc_boot_server_handle(s, fds, r > 0 ? n : 0);
        if (r <= 0)
            break;
    }
}

static void fuzz_server(const uint8_t *d, size_t n, unsigned mode)
{
    static int seq;
    char name[64];
    snprintf(name, sizeof name, "vmmc-fuzz-boot-%d-%d", (int)getpid(), seq++);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t nl = strlen(name);
    memcpy(sa.sun_path + 1, name, nl);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, len) || listen(lfd, 16)) {
        if (lfd >= 0)
            close(lfd);
        return;
    }
    int size = 1 + (n ? d[0] % 4 : 0);
    vmmc_boot_server_t *s;
    unsigned flags = (mode & 8) ? VMMC_BSRV_DEAD_ON_DISCONNECT : 0;
    if (vmmc_boot_server_create(&s, lfd, size, "fuzzjob", flags)) {
        close(lfd);
        return;
    }
    int cl[3];
    int ncl = 1 + (n ? (d[0] >> 2) % 3 : 0);
    for (int i = 0; i < ncl; i++) {
        cl[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (cl[i] >= 0 && connect(cl[i], (struct sockaddr *)&sa, len) != 0) {
            close(cl[i]);
            cl[i] = -1;
        }
    }
    serve_round(s, 2);
    if (n)
        d++, n--;
    int who = 0;
    while (n) {
        const uint8_t *m = memmem(d, n, "\xfe\xfe", 2);
        size_t piece = m ? (size_t)(m - d) : n;
        if (cl[who] >= 0 && piece)
            (void)!send(cl[who], d, piece, MSG_NOSIGNAL | MSG_DONTWAIT);
        serve_round(s, 4);
        if ((mode & 4) && piece)
            vmmc_boot_server_rank_exited(s, d[0] % (size + 1), d[piece - 1], d[0] & 1);
        for (int i = 0; i < ncl; i++)
            if (cl[i] >= 0)
                drain(cl[i]);
        d += piece;
        n -= piece;
        if (m) {
            d += 2;
            n -= 2;
            who = (who + 1) % ncl;
        }
    }
    /* Clients leave (close) in turn: the server must settle every state. */
    for (int i = 0; i < ncl; i++) {
        if (cl[i] >= 0)
            close(cl[i]);
        serve_round(s, 2);
    }
    if (vmmc_boot_server_live(s) < 0 || vmmc_boot_server_live(s) > size)
        abort();
    vmmc_boot_server_destroy(s);
}

typedef struct {
    int size;
} evctx_t;

static void on_event(void *arg, vmmc_boot_event_t ev, int64_t a, int64_t b)
{
    evctx_t *c = arg;
    if (ev == VMMC_BOOT_EV_DEAD && (a < 0 || a >= c->size))
        abort(); /* a death notice for a rank outside the job */
    (void)b;
}

static void fuzz_dispatch(const uint8_t *d, size_t n, unsigned mode)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
        return;
    vmmc_boot_t b;
    memset(&b, 0, sizeof b);
    boot_priv_t *p = calloc(1, sizeof *p);
    if (!p) {
        close(sv[0]);
        close(sv[1]);
        return;
    }
    p->mode = BOOT_LAUNCHER;
    p->ev_wr = -1;
    b.priv = p;
    b.size = 1 + (n ? d[0] % 8 : 0);
    b.fd = sv[0];
    pthread_mutex_init(&b.wlock, NULL);
    evctx_t c = {b.size};
    /* Feed in slices so that messages straddle reads. */
    size_t off = 0;
    while (off < n && b.fd >= 0) {
        size_t slice = 1 + (d[off] % 64) * 8;
        if (slice > n - off)
            slice = n - off;
        (void)!send(sv[1], d + off, slice, MSG_NOSIGNAL | MSG_DONTWAIT);
        off += slice;
        vmmc_boot_dispatch(&b, on_event, &c);
    }
    if ((mode & 4) && b.fd >= 0) {
        shutdown(sv[1], SHUT_WR);
        vmmc_boot_dispatch(&b, on_event, &c);
    }
    if (b.fd >= 0)
        close(b.fd);
    close(sv[1]);
    vmmc_bw_rx_free(&p->rx);
    free(p);
    pthread_mutex_destroy(&b.wlock);
}

static void fuzz_table(const uint8_t *d, size_t n)
{
    if (n < 1)
        return;
    vmmc_boot_t b;
    memset(&b, 0, sizeof b);
    b.size = 1 + d[0] % 8;
    if (vmmc_boot_parse_table(&b, d + 1, (uint32_t)(n - 1)) == 0) {
        if (!b.peers || strlen(b.job) > VMMC_BW_MAX_JOB)
            abort();
        for (int r = 0; r < b.size; r++) {
            if (!b.peers[r].card)
                abort();
            free(b.peers[r].card);
        }
        free(b.peers);
    } else if (b.peers) {
        abort(); /* a refused table leaves nothing behind */
    }
}

static void fuzz_framing(const uint8_t *d, size_t n)
{
    vmmc_bw_rx_t rx = {0};
    rx.buf = malloc(n ? n : 1);
    if (!rx.buf)
        return;
    memcpy(rx.buf, d, n);
    rx.len = rx.cap = n;
    for (;;) {
        uint16_t type;
        const uint8_t *body;
        uint32_t len;
        if (vmmc_bw_rx_next(&rx, &type, &body, &len) != 1)
            break;
        if (body + len > rx.buf + rx.len)
            abort();
        vmmc_bw_in_t in = {.p = body, .len = len};
        while (!in.err) {
            const char *s;
            uint32_t sl = vmmc_bw_get_str(&in, &s, VMMC_BW_MAX_CARD);
            if (!in.err && (const uint8_t *)s + sl > body + len)
                abort();
            vmmc_bw_get_u64(&in);
            vmmc_bw_get_u32(&in);
        }
        if (in.off > in.len)
            abort();
        vmmc_bw_rx_consume(&rx);
    }
    vmmc_bw_rx_free(&rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    data++;
    size--;
    switch (mode & 3) {
    case 0:
        fuzz_server(data, size, mode);
        break;
    case 1:
        fuzz_dispatch(data, size, mode);
        break;
    case 2:
        fuzz_table(data, size);
        break;
    case 3:
        fuzz_framing(data, size);
        break;
    }
    return 0;
}
