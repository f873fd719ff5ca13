/* Blocking calls from several threads (src/sock/sock_conn_io.c, sock_wait.c):
 *   duplex: on each side a writer thread streams 8 MB while the main thread
 *     reads the other side's 8 MB, every byte checked; with a small ring
 *     (VMMC_SOCK_RING=4K in one run) both directions block for room and for
 *     bytes over and over, so a lost wake-up would hang it (each blocking
 *     call is bounded by the test's alarm);
 *   eintr: a recv blocked on an empty ring fails with EINTR when a handler
 *     without SA_RESTART runs, and goes on waiting (then returns the bytes)
 *     when the handler has SA_RESTART, as the kernel's recv does.
 * Runs on shm and udp. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdlib.h>

#include "conn_test.h"

#define DUPLEX (8u << 20)

static int ctl;
static ct_t t;
static unsigned out_seed;

static void *writer(void *arg)
{
    (void)arg;
    static uint8_t b[50000];
    uint64_t pos = 0;
    unsigned long long r = out_seed;
    while (pos < DUPLEX) {
        size_t l = 1 + vt_rand(&r) % (vt_rand(&r) % 4 ? 200 : sizeof b);
        if (l > DUPLEX - pos)
            l = (size_t)(DUPLEX - pos);
        for (size_t i = 0; i < l; i++)
            b[i] = ct_pat(pos + i, out_seed);
        ct_send_all(&t, b, l);
        pos += l;
    }
    return NULL;
}

static void duplex(int server)
{
    out_seed = server ? 31 : 32;
    unsigned in_seed = server ? 32 : 31;
    pthread_t w;
    VT_CHECK(pthread_create(&w, NULL, writer, NULL) == 0);
    static uint8_t b[70000];
    uint64_t pos = 0;
    unsigned long long r = in_seed + 100;
    while (pos < DUPLEX) {
        size_t want = 1 + vt_rand(&r) % (vt_rand(&r) % 3 ? 300 : sizeof b);
        ssize_t n = ct_recv(&t, b, want, 0, -1);
        if (n <= 0)
            VT_FAIL("recv: %zd (%s)", n, strerror(errno));
        for (ssize_t i = 0; i < n; i++)
            if (b[i] != ct_pat(pos + (uint64_t)i, in_seed))
                VT_FAIL("byte %llu wrong", (unsigned long long)(pos + (uint64_t)i));
        pos += (uint64_t)n;
    }
    VT_CHECK(pthread_join(w, NULL) == 0);
}

static volatile sig_atomic_t hits;
static void on_usr1(int sig)
{
    (void)sig;
    hits++;
}

static pthread_t main_thr;

static void *poker(void *arg)
{
    int restart = (int)(intptr_t)arg;
    usleep(100000);
    pthread_kill(main_thr, SIGUSR1);
    if (restart) {
        usleep(100000);
        VT_CHECK(write(ctl, "s", 1) == 1); /* now the client sends */
    }
    return NULL;
}

static void eintr_server(void)
{
    main_thr = pthread_self();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    VT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    pthread_t p;
    uint8_t b[16];
    VT_CHECK(pthread_create(&p, NULL, poker, (void *)0) == 0);
    VT_CHECK(ct_recv(&t, b, sizeof b, 0, -1) == -1 && errno == EINTR);
    VT_CHECK(hits == 1);
    pthread_join(p, NULL);
    sa.sa_flags = SA_RESTART;
    VT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    VT_CHECK(pthread_create(&p, NULL, poker, (void *)1) == 0);
    VT_CHECK(ct_recv(&t, b, sizeof b, MSG_WAITALL, -1) == (ssize_t)sizeof b);
    VT_CHECK(hits == 2);
    for (size_t i = 0; i < sizeof b; i++)
        VT_CHECK(b[i] == (uint8_t)i);
    pthread_join(p, NULL);
    signal(SIGUSR1, SIG_DFL);
}

static void eintr_client(void)
{
    char go;
    VT_CHECK(read(ctl, &go, 1) == 1);
    uint8_t b[16];
    for (size_t i = 0; i < sizeof b; i++)
        b[i] = (uint8_t)i;
    ct_send_all(&t, b, sizeof b);
}

static void step(void)
{
    char b = 's';
    VT_CHECK(write(ctl, &b, 1) == 1);
    VT_CHECK(read(ctl, &b, 1) == 1);
}

int main(void)
{
    vt_require_transport();
    signal(SIGPIPE, SIG_IGN);
    int port, l = ct_listen(&port);
    pid_t pid = fork();
    VT_CHECK(pid >= 0);
    if (pid == 0) {
        alarm(200);
        ctl = ct_connect(port);
        ct_up(&t, ct_connect(port), 0);
        duplex(0);
        step();
        eintr_client();
        step();
        ct_close(&t);
        _exit(0);
    }
    alarm(200);
    ctl = ct_accept(l);
    ct_up(&t, ct_accept(l), 1);
    duplex(1);
    printf("duplex: ok\n");
    step();
    eintr_server();
    printf("eintr: ok\n");
    step();
    ct_close(&t);
    ct_reap(pid, 60);
    return 0;
}
