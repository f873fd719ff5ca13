/* fork(): a child must not disturb its parent's endpoint. Two ranks stream
 * notified writes to each other; half-way, rank 0 forks. The child finds
 * every call on the inherited endpoint refused with VMMC_ERR_ENDPOINT, the
 * memory peers reach absent from its address space, and vmmc_finalize()
 * dropping only its copy; then it opens an endpoint of its own and uses it.
 * Meanwhile rank 1 keeps sending and the parent keeps receiving: both see
 * every write exactly once and in order, no death, and a working barrier. */
#include <dirent.h>
#include <sys/socket.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vtest.h"

#define N 3000
#define SLOT 8

static uint64_t *inbox;
static int expect, bad_order;

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep, (void)arg;
    uint64_t v;
    memcpy(&v, (char *)inbox + n->offset, sizeof v);
    if (n->length != SLOT || v != (uint64_t)expect || n->offset != (size_t)expect * SLOT)
        bad_order++;
    expect++;
}

static int self_got;
static void on_self(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    if (n->length == 6 && !memcmp((char *)arg + n->offset, "child", 6))
        self_got++;
}

static int absent(const void *p)
{
    unsigned char v;
    long pg = sysconf(_SC_PAGESIZE);
    void *a = (void *)((uintptr_t)p & ~(uintptr_t)(pg - 1));
    return mincore(a, (size_t)pg, &v) != 0 && errno == ENOMEM;
}

/* Descriptors of this process that are sockets. */
/* Connection sockets (stream or seqpacket) this process holds: the control
 * connections; a datagram socket holds no connection open. */
static int sockets(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    struct dirent *de;
    char path[300], link[64];
    while (d && (de = readdir(d))) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
        ssize_t l = readlink(path, link, sizeof link - 1);
        if (l <= 7 || strncmp(link, "socket:", 7))
            continue;
        int type = 0;
        socklen_t tl = sizeof type;
        if (getsockopt(atoi(de->d_name), SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
            type != SOCK_DGRAM)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

#define REFUSED(expr)                                                                  \
    do {                                                                               \
        int r_ = (expr);                                                               \
        if (r_ != VMMC_ERR_ENDPOINT || !strstr(vmmc_last_error(), "fork()"))           \
            VT_FAIL("in the child, %s returned %d (%s), expected VMMC_ERR_ENDPOINT",   \
                    #expr, r_, vmmc_strerror(r_));                                     \
    } while (0)

static void child(vmmc_ep_t *ep, vmmc_export_t *ex, vmmc_proxy_t *px, void *mapped)
{
    uint64_t v = 42;
    vmmc_request_t req;
    char tmp[64];
    REFUSED(vmmc_send(px, 0, &v, sizeof v, VMMC_SEND_NOTIFY));
    REFUSED(vmmc_send(px, 0, &v, sizeof v, 0));
    REFUSED(vmmc_send_async(px, 0, &v, sizeof v, 0, &req));
    REFUSED(vmmc_fetch(px, 0, &v, sizeof v));
    REFUSED(vmmc_progress(ep));
    REFUSED(vmmc_wait(ep, 0));
    REFUSED(vmmc_barrier(ep));
    REFUSED(vmmc_event_fd(ep));
    REFUSED(vmmc_signal(ep, 1));
    REFUSED(vmmc_unexport(ex));
    REFUSED(vmmc_unimport(px));
    REFUSED(vmmc_peer_alive(ep, 1));
    void *p;
    REFUSED(vmmc_mem_alloc(ep, 4096, &p));
    vmmc_export_params_t ep2 = {.name = "other", .addr = tmp, .length = sizeof tmp};
    vmmc_export_t *ex2;
    REFUSED(vmmc_export(ep, &ep2, &ex2));
    vmmc_proxy_t *px2;
    REFUSED(vmmc_import(ep, 1, "inbox", 100, &px2));
    /* What peers reach is not even mapped here. */
    VT_CHECK(absent(inbox));
    if (mapped)
        VT_CHECK(absent(mapped));
    VT_OK(vmmc_finalize(ep)); /* drops this process's copy, tells nobody */
    /* The child holds none of the parent's control sockets (which would keep
     * the parent's connections open after it dies); the udp datagram socket
     * stays until exit or exec (it holds no connection). */
    int socks = sockets();
    printf("child: %d connection socket(s) inherited\n", socks);
    VT_CHECK(socks == 0);

    /* An endpoint of its own: the child is a job of size 1. */
    unsetenv("VMMC_LAUNCHER");
    unsetenv("VMMC_RANK");
    unsetenv("VMMC_SIZE");
    unsetenv("VMMC_LOCAL_RANK");
    unsetenv("VMMC_JOB");
    unsetenv("VMMC_BOOTSTRAP");
    vmmc_ep_t *own;
    VT_OK(vmmc_init(NULL, &own));
    VT_CHECK(vmmc_size(own) == 1);
    char *mem;
    VT_OK(vmmc_mem_alloc(own, 4096, (void **)&mem));
    vmmc_export_params_t sp = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "self", .addr = mem,
                               .length = 4096, .handler = on_self, .handler_arg = mem};
    vmmc_export_t *sex;
    VT_OK(vmmc_export(own, &sp, &sex));
    vmmc_proxy_t *spx;
    VT_OK(vmmc_import(own, 0, "self", 5000, &spx));
    VT_OK(vmmc_send(spx, 100, "child", 6, VMMC_SEND_NOTIFY));
    double t0 = vt_now();
    while (!self_got && vt_now() - t0 < 30)
        VT_CHECK(vmmc_wait(own, 100) >= 0);
    VT_CHECK(self_got == 1);
    VT_OK(vmmc_unimport(spx));
    VT_OK(vmmc_unexport(sex));
    VT_OK(vmmc_finalize(own));
    exit(0);
}

int main(void)
{
    vt_require_transport();
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    VT_CHECK(vmmc_size(ep) == 2);
    int me = vmmc_rank(ep), peer = 1 - me;
    VT_OK(vmmc_mem_alloc(ep, N * SLOT, (void **)&inbox));
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER | VMMC_EXPORT_PARAM_FLAGS,
                              .name = "inbox", .addr = inbox, .length = N * SLOT,
                              .handler = on_note, .flags = VMMC_EXPORT_READ};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_proxy_t *px;
    VT_OK(vmmc_import(ep, peer, "inbox", 10000, &px));
    void *mapped = NULL;
    if (vmmc_proxy_map(px, &mapped) != VMMC_OK)
        mapped = NULL; /* over udp nothing is mapped */
    VT_OK(vmmc_barrier(ep));

    pid_t kid = -1;
    for (int i = 0; i < N; i++) {
        uint64_t v = (uint64_t)i;
        VT_OK(vmmc_send(px, (size_t)i * SLOT, &v, sizeof v, VMMC_SEND_NOTIFY));
        VT_CHECK(vmmc_progress(ep) >= 0);
        if (me == 0 && i == N / 2) {
            fflush(stdout);
            fflush(stderr);
            kid = fork();
            VT_CHECK(kid >= 0);
            if (kid == 0)
                child(ep, ex, px, mapped);
            /* The peer keeps sending while the child runs: serve it. */
            int st;
            double t0 = vt_now();
            pid_t w;
            while ((w = waitpid(kid, &st, WNOHANG)) == 0 && vt_now() - t0 < 60)
                VT_CHECK(vmmc_wait(ep, 1) >= 0);
            if (w == 0)
                kill(kid, SIGKILL);
            VT_CHECK(w == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
    }
    double t0 = vt_now();
    while (expect < N && vt_now() - t0 < 60)
        VT_CHECK(vmmc_wait(ep, 100) >= 0);
    printf("rank %d: %d of %d writes received in order (%d out of order)\n", me, expect, N,
           bad_order);
    VT_CHECK(expect == N && bad_order == 0);
    VT_CHECK(vmmc_peer_alive(ep, peer) == 1);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
