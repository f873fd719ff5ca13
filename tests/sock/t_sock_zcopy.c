/* Posted receives (sock_zcopy.c): a large blocking read has the writer place
 * its bytes straight into the reader's buffer. One fresh connection per
 * case; the writer is a child process, the reader this one; every byte is
 * checked against the stream's pattern:
 *   exact:    recv(1M) posted, then a 1M send: all of it placed directly
 *             (the direct counters say so: the test fails if the bytes went
 *             through the ring);
 *   small_first: a 100-byte send, then 1M: the small one comes through the
 *             ring first (the posting is withdrawn), then the rest, in order;
 *   smaller:  recv(256K) posted while 1M is sent: 256K placed, the rest
 *             through the ring;
 *   larger:   recv(4M) posted, a 300K send: a short read of 300K, placed;
 *   iov:      readv of {1M, 64K} posted: placed into the first piece;
 *   eintr:    a posted recv interrupted by a signal (no SA_RESTART) before
 *             anything came: EINTR, no byte lost; then a stream read while a
 *             timer interrupts the reads constantly, so withdrawals race the
 *             writer's placements: the stream is exact;
 *   timeout:  timed reads (as SO_RCVTIMEO) that expire while posted, racing
 *             the writer: the stream is exact;
 *   mixed:    random send and read sizes, small and large, MSG_WAITALL and
 *             readv, 24M: exact, and some bytes went directly;
 *   fork:     the reader forks in the middle of a stream of large reads
 *             (the connection goes back to TCP while reads are posted and
 *             placements are under way): the stream is exact across it;
 *   dead:     the writer is killed in the middle of its stream: the reader
 *             gets a prefix of the stream, then 0 or ECONNRESET, no hang;
 *   claim:    a hostile writer claims placed bytes it never wrote: reset;
 *   bad_seq:  a record for a posting never made: reset;
 *   big_post: a hostile reader posts more than a posting may hold: the
 *             writer resets instead of writing.
 * Runs on shm and udp. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <time.h>

#include "conn_test.h"

enum { EXACT, SMALL_FIRST, SMALLER, LARGER, IOV, EINTR_, TIMEOUT, MIXED, FORK, DEAD, H_CLAIM,
       H_SEQ, H_BIGPOST, NCASE };
static const char *names[] = {"exact", "small_first", "smaller", "larger", "iov", "eintr",
                              "timeout", "mixed", "fork", "dead", "claim", "bad_seq",
                              "big_post"};

#define MB ((size_t)1 << 20)
enum { SEED = 7 };

static uint64_t wpos; /* writer's stream position */

static void wait_attached(ct_t *t)
{
    double end = vt_now() + 30;
    while (!(atomic_load(&t->c->st) & C_ATTACHED)) {
        VT_CHECK(vt_now() < end);
        usleep(1000);
    }
}

/* Send @p len bytes of the pattern (all of it). */
static void wsend(ct_t *t, size_t len)
{
    uint8_t *b = malloc(len);
    VT_CHECK(b != NULL);
    for (size_t i = 0; i < len; i++)
        b[i] = ct_pat(wpos + i, SEED);
    ct_send_all(t, b, len);
    wpos += len;
    free(b);
}

/* The same, through the kernel once the connection went back to TCP. */
static void wsend_any(ct_t *t, size_t len)
{
    uint8_t *b = malloc(len);
    VT_CHECK(b != NULL);
    for (size_t i = 0; i < len; i++)
        b[i] = ct_pat(wpos + i, SEED);
    for (size_t off = 0; off < len;) {
        ssize_t n = ct_send(t, b + off, len - off, 0, -1);
        if (n == -2 || (n < 0 && errno == EAGAIN)) /* on the kernel now */
            n = send(t->fd, b + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            VT_FAIL("send: %zd (%s)", n, strerror(errno));
        off += (size_t)n;
    }
    wpos += len;
    free(b);
}

/* The writer has seen a posting in its header (the reader blocks). */
static void wait_posted(ct_t *t)
{
    double end = vt_now() + 30;
    while (!sock_zc_posted(t->c)) {
        VT_CHECK(vt_now() < end);
        usleep(1000);
    }
}

static void ctl_wait(int ctl)
{
    char go;
    VT_CHECK(read(ctl, &go, 1) == 1);
}

static void client(int port, int ctl_port, int cs)
{
    int ctl = ct_connect(ctl_port);
    ct_t t;
    ct_up(&t, ct_connect(port), 0);
    wait_attached(&t);
    unsigned long long rs = 99;
    switch (cs) {
    case EXACT:
    case SMALLER:
    case LARGER:
    case IOV:
        wait_posted(&t);
        wsend(&t, cs == LARGER ? 300 * 1024 : MB);
        break;
    case SMALL_FIRST:
        wait_posted(&t);
        wsend(&t, 100);
        ctl_wait(ctl); /* the reader has its 100 */
        wsend(&t, MB);
        break;
    case EINTR_:
        ctl_wait(ctl); /* the first read was interrupted */
        /* fall through */
    case TIMEOUT:
        for (int i = 0; i < 40; i++)
            wsend(&t, MB / 2 + (size_t)(vt_rand(&rs) % MB));
        break;
    case MIXED:
        while (wpos < 24 * MB) {
            unsigned long long r = vt_rand(&rs);
            size_t n = r % 4 == 0 ? 1 + r % 200 : r % 4 == 1 ? 1 + r % 70000 : 1 + r % (3 * MB);
            if (n > 24 * MB - wpos)
                n = (size_t)(24 * MB - wpos);
            wsend(&t, n);
            if (r % 8 == 0)
                usleep(2000); /* let the reader post */
        }
        break;
    case FORK:
        for (int i = 0; i < 40; i++)
            wsend_any(&t, MB / 2 + (size_t)(vt_rand(&rs) % MB));
        break;
    case DEAD:
        for (;;)
            wsend(&t, MB);
    case H_CLAIM:
    case H_SEQ: {
        wait_posted(&t);
        uint64_t pw = sock_rx_word(&t.c->rx, SOCK_HDR_POST);
        uint32_t seq = cs == H_CLAIM ? (uint32_t)(pw >> 32) : (uint32_t)(pw >> 32) + 5;
        VT_OK(sock_tx_word(&t.c->tx, SOCK_HDR_DIR_AT, 0));
        VT_OK(sock_tx_word(&t.c->tx, SOCK_HDR_DIR_LEN, (uint32_t)pw));
        VT_OK(sock_tx_word(&t.c->tx, SOCK_HDR_DIR_SEQ, seq));
        (void)sock_tx_fence(&t.c->tx);
        (void)vmmc_signal(t.c->ep, t.c->peer);
        break;
    }
    case H_BIGPOST:
        VT_OK(sock_tx_word(&t.c->tx, SOCK_HDR_POST, (uint64_t)1 << 32 | 0xffffffffu));
        (void)sock_tx_fence(&t.c->tx);
        break;
    }
    VT_CHECK(write(ctl, "d", 1) == 1);
    ctl_wait(ctl); /* the reader is done */
    _exit(0);
}

static uint64_t rpos; /* reader's stream position */

static void check(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != ct_pat(rpos + i, SEED))
            VT_FAIL("byte %llu of the stream is 0x%02x, not 0x%02x",
                    (unsigned long long)(rpos + i), b[i], ct_pat(rpos + i, SEED));
    rpos += n;
}

static ssize_t rread(ct_t *t, uint8_t *b, size_t len, int flags, int tmo)
{
    ssize_t n = ct_recv(t, b, len, flags, tmo);
    if (n > 0)
        check(b, (size_t)n);
    return n;
}

static uint64_t direct_in(ct_t *t)
{
    return atomic_load(&t->c->zrecv);
}

static volatile sig_atomic_t nsig;
static void on_sig(int sig)
{
    (void)sig;
    nsig++;
}

/* SIGUSR1 every @p us (0: once after @p once_us; both 0: stop). */
static timer_t tm;
static void timer(long us, long once_us)
{
    static int made;
    if (!made) {
        struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
        VT_CHECK(timer_create(CLOCK_MONOTONIC, &ev, &tm) == 0);
        made = 1;
    }
    long first = us ? us : once_us;
    struct itimerspec it = {{0, us * 1000}, {first / 1000000, (first % 1000000) * 1000}};
    VT_CHECK(timer_settime(tm, 0, &it, NULL) == 0);
}

/* Read @p total bytes of the stream in reads of up to @p max, whatever
 * fails with EINTR/EAGAIN (tmo > 0) being tried again. */
static void read_stream(ct_t *t, uint8_t *b, uint64_t total, size_t max, int tmo, int *fails)
{
    unsigned long long rs = 5;
    while (rpos < total) {
        size_t len = 64 * 1024 + (size_t)(vt_rand(&rs) % max);
        if (len > total - rpos)
            len = (size_t)(total - rpos);
        ssize_t n = rread(t, b, len, 0, tmo);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            (*fails)++;
            continue;
        }
        if (n <= 0)
            VT_FAIL("read: %zd (%s)", n, strerror(errno));
    }
}

static void *kill_child(void *arg)
{
    usleep(1000 + (useconds_t)(vt_now() * 1e6) % 30000);
    kill((pid_t)(intptr_t)arg, SIGKILL);
    return NULL;
}

static void server_case(int l, int lctl, int cs, pid_t child, pthread_t *killer)
{
    int ctl = ct_accept(lctl);
    ct_t t;
    ct_up(&t, ct_accept(l), 1);
    rpos = 0;
    size_t cap = 4 * MB + 65536;
    uint8_t *b = malloc(cap);
    VT_CHECK(b != NULL);
    ssize_t n;
    int fails = 0;
    switch (cs) {
    case EXACT:
        n = rread(&t, b, MB, 0, -1);
        VT_CHECK(n == (ssize_t)MB);
        VT_CHECK(direct_in(&t) == MB);
        VT_CHECK(atomic_load(&t.c->zposts) >= 1);
        break;
    case SMALL_FIRST:
        VT_CHECK(rread(&t, b, MB, 0, -1) == 100);
        VT_CHECK(direct_in(&t) == 0);
        VT_CHECK(write(ctl, "g", 1) == 1);
        n = rread(&t, b, MB, MSG_WAITALL, -1);
        VT_CHECK(n == (ssize_t)MB);
        break;
    case SMALLER:
        while (rpos < MB) {
            n = rread(&t, b, 256 * 1024, 0, -1);
            VT_CHECK(n > 0);
        }
        VT_CHECK(direct_in(&t) >= 256 * 1024); /* the first read; later ones may post too */
        break;
    case LARGER:
        VT_CHECK(rread(&t, b, 4 * MB, 0, -1) == 300 * 1024);
        VT_CHECK(direct_in(&t) == 300 * 1024);
        break;
    case IOV: {
        struct iovec v[2] = {{b, MB}, {b + MB, 65536}};
        n = ct_recvv(&t, v, 2, 0, -1);
        VT_CHECK(n == (ssize_t)MB);
        check(b, MB);
        VT_CHECK(direct_in(&t) == MB);
        break;
    }
    case EINTR_: {
        struct sigaction sa = {.sa_handler = on_sig};
        sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART */
        timer(0, 100000);
        VT_CHECK(rread(&t, b, MB, 0, -1) == -1 && errno == EINTR);
        VT_CHECK(atomic_load(&t.c->zposts) >= 1);
        VT_CHECK(write(ctl, "g", 1) == 1);
        timer(700, 0);
        unsigned long long rs = 99;
        uint64_t total = 0;
        for (int i = 0; i < 40; i++)
            total += MB / 2 + (size_t)(vt_rand(&rs) % MB);
        read_stream(&t, b, total, 2 * MB, -1, &fails);
        timer(0, 0);
        sa.sa_handler = SIG_IGN;
        sigaction(SIGUSR1, &sa, NULL);
        printf("  %d reads interrupted, %d signals, %llu bytes placed directly, %llu late, "
               "%llu waited\n", fails, (int)nsig, (unsigned long long)direct_in(&t),
               (unsigned long long)t.c->zlate, (unsigned long long)t.c->zwaited);
        break;
    }
    case TIMEOUT: {
        unsigned long long rs = 99;
        uint64_t total = 0;
        for (int i = 0; i < 40; i++)
            total += MB / 2 + (size_t)(vt_rand(&rs) % MB);
        read_stream(&t, b, total, 2 * MB, 1, &fails);
        printf("  %d reads timed out, %llu bytes placed directly, %llu late, %llu waited\n",
               fails, (unsigned long long)direct_in(&t), (unsigned long long)t.c->zlate,
               (unsigned long long)t.c->zwaited);
        break;
    }
    case MIXED: {
        unsigned long long rs = 3;
        while (rpos < 24 * MB) {
            unsigned long long r = vt_rand(&rs);
            size_t len = r % 3 == 0 ? 1 + r % 5000 : 1 + r % (4 * MB);
            if (len > 24 * MB - rpos)
                len = (size_t)(24 * MB - rpos);
            if (r % 5 == 0) {
                size_t a = len / 3;
                struct iovec v[2] = {{b, a}, {b + a, len - a}};
                n = ct_recvv(&t, v, 2, r % 2 ? MSG_WAITALL : 0, -1);
                if (n > 0)
                    check(b, (size_t)n);
            } else {
                n = rread(&t, b, len, r % 7 == 0 ? MSG_WAITALL : 0, -1);
            }
            VT_CHECK(n > 0);
        }
        VT_CHECK(direct_in(&t) > 0);
        printf("  %llu of %llu bytes placed directly\n", (unsigned long long)direct_in(&t),
               (unsigned long long)rpos);
        break;
    }
    case FORK: {
        unsigned long long rs = 99, rl = 5;
        uint64_t total = 0;
        for (int i = 0; i < 40; i++)
            total += MB / 2 + (size_t)(vt_rand(&rs) % MB);
        int forked = 0;
        while (rpos < total) {
            if (!forked && rpos >= total / 3) {
                uint64_t before = direct_in(&t);
                VT_CHECK(before > 0);
                pid_t k = fork(); /* takes the connection back to TCP */
                VT_CHECK(k >= 0);
                if (k == 0)
                    _exit(0);
                VT_CHECK(waitpid(k, NULL, 0) == k);
                forked = 1;
            }
            size_t len = 256 * 1024 + (size_t)(vt_rand(&rl) % (2 * MB));
            if (len > total - rpos)
                len = (size_t)(total - rpos);
            n = rread(&t, b, len, 0, -1);
            if (n == -2 || (n < 0 && errno == EAGAIN)) { /* on the kernel now */
                n = recv(t.fd, b, len, 0);
                if (n > 0)
                    check(b, (size_t)n);
            }
            if (n <= 0)
                VT_FAIL("read: %zd (%s)", n, strerror(errno));
        }
        printf("  %llu bytes, %s after the fork\n", (unsigned long long)rpos,
               t.s->conn ? "still upgraded" : "on TCP");
        break;
    }
    case DEAD:
        VT_CHECK(rread(&t, b, 2 * MB, 0, -1) > 0);
        /* a thread (a fork would take the connection back to TCP) kills
         * the writer in the middle of its stream */
        VT_CHECK(pthread_create(killer, NULL, kill_child, (void *)(intptr_t)child) == 0);
        for (;;) {
            n = rread(&t, b, 2 * MB, 0, -1);
            if (n == 0 || (n < 0 && errno == ECONNRESET))
                break;
            VT_CHECK(n > 0);
        }
        printf("  %llu bytes, then the end\n", (unsigned long long)rpos);
        break;
    case H_CLAIM:
    case H_SEQ:
        VT_CHECK(ct_recv(&t, b, MB, 0, -1) == -1 && errno == ECONNRESET);
        VT_CHECK(strstr(vmmc_last_error(), "direct") != NULL);
        break;
    case H_BIGPOST:
        ctl_wait(ctl);
        memset(b, 1, 100);
        VT_CHECK(ct_send(&t, b, 100, MSG_NOSIGNAL, -1) == -1 && errno == ECONNRESET);
        VT_CHECK(strstr(vmmc_last_error(), "posted") != NULL);
        break;
    }
    if (cs != DEAD && cs != H_BIGPOST)
        ctl_wait(ctl);
    free(b);
    ct_close(&t); /* while the writer lives: the close fences its last words */
    if (cs != DEAD)
        VT_CHECK(write(ctl, "e", 1) == 1);
    close(ctl);
}

int main(void)
{
    vt_require_transport();
    signal(SIGPIPE, SIG_IGN);
    if (!sock_cfg()->zcopy)
        VT_SKIP("VMMC_SOCK_ZCOPY=0: posted receives are off");
    int port, cport, l = ct_listen(&port), lc = ct_listen(&cport);
    for (int cs = 0; cs < NCASE; cs++) {
        pid_t pid = fork();
        VT_CHECK(pid >= 0);
        if (pid == 0) {
            alarm(120);
            close(l);
            close(lc);
            wpos = 0;
            client(port, cport, cs);
        }
        pthread_t killer = 0;
        alarm(120);
        server_case(l, lc, cs, pid, &killer);
        alarm(0);
        int st;
        VT_CHECK(waitpid(pid, &st, 0) == pid);
        VT_CHECK(cs == DEAD ? WIFSIGNALED(st) : (WIFEXITED(st) && !WEXITSTATUS(st)));
        if (killer)
            VT_CHECK(pthread_join(killer, NULL) == 0);
        printf("%s: ok\n", names[cs]);
        fflush(stdout);
    }
    return 0;
}
