/* The service thread must not steal the application's wake-ups. Every rank
 * (run it with more ranks than cores) times a barrier loop and a loop of
 * asynchronous sends large enough for the copy engine, each finished with
 * vmmc_request_wait, first without the service thread (spin, then block),
 * then with it. A wake-up lost to the service thread costs a whole sleep
 * (hundreds of ms); a working hand-off costs a thread switch. The bounds
 * are loose on purpose (the machine is shared): the median with the service
 * thread must stay under 50 ms and within 10x the median without it (plus
 * 2 ms). The barrier loop has 40 rounds, the request loop stops after 100
 * rounds or 8 s, so a broken hand-off fails instead of timing out.
 *
 * With the argument "handlers", a third loop checks the handlers' side: rank
 * r sends a notified update to rank r+1 and waits in vmmc_wait(-1) for the
 * one from rank r-1; the service thread runs the handler and vmmc_wait must
 * return for it; then the same with the application in its own epoll on
 * vmmc_event_fd(), with the service thread and after it stopped. */
#include <math.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "vtest.h"

#define ROUNDS 100
#define BARRIERS 40
#define BUDGET_S 8.0
#define ASYNC_LEN (2u << 20)

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n ? v[n / 2] : INFINITY;
}

static double barrier_loop(vmmc_ep_t *ep)
{
    double t[BARRIERS];
    for (int i = 0; i < BARRIERS; i++) {
        double t0 = vt_now();
        VT_OK(vmmc_barrier(ep));
        t[i] = vt_now() - t0;
    }
    return median(t, BARRIERS);
}

static double request_loop(vmmc_proxy_t *px, const char *src)
{
    double t[ROUNDS], start = vt_now();
    int n = 0;
    while (n < ROUNDS && vt_now() - start < BUDGET_S) {
        vmmc_request_t rq;
        double t0 = vt_now();
        int rc = vmmc_send_async(px, 0, src, ASYNC_LEN, 0, &rq);
        if (rc == VMMC_INPROGRESS)
            rc = vmmc_request_wait(&rq, 30000);
        VT_OK(rc);
        t[n++] = vt_now() - t0;
    }
    return median(t, n);
}

static atomic_int got;
static int rounds; /* ring rounds so far: each brings one notification */

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    atomic_fetch_add(&got, 1);
}

/* Pass a notified token around the ring; vmmc_wait must see each arrival. */
static double handler_loop(vmmc_ep_t *ep, vmmc_proxy_t *next)
{
    int me = vmmc_rank(ep), size = vmmc_size(ep);
    double t[ROUNDS];
    int n = 0;
    for (int i = 0; i < 30; i++) {
        double t0 = vt_now();
        int want = ++rounds; /* rank r-1 may already have sent the next round */
        if (me == 0)
            VT_OK(vmmc_send(next, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
        while (atomic_load(&got) < want) {
            int rc = vmmc_wait(ep, 10000);
            VT_CHECK(rc >= 0);
            if (rc == 0 && atomic_load(&got) < want)
                VT_FAIL("rank %d: vmmc_wait returned nothing for 10 s, handler ran %d of %d", me,
                        atomic_load(&got), want);
        }
        if (me != 0)
            VT_OK(vmmc_send(next, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
        t[n++] = vt_now() - t0;
    }
    (void)size;
    return median(t, n);
}

/* The same ring, but the application sleeps in its own epoll on
 * vmmc_event_fd() while the service thread runs the handlers: the set must
 * become readable for each arrival. */
static double epoll_loop(vmmc_ep_t *ep, vmmc_proxy_t *next, int epfd)
{
    int me = vmmc_rank(ep);
    double t[ROUNDS];
    int n = 0;
    for (int i = 0; i < 30; i++) {
        double t0 = vt_now();
        int want = ++rounds;
        if (me == 0)
            VT_OK(vmmc_send(next, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
        while (atomic_load(&got) < want) {
            VT_CHECK(vmmc_progress(ep) >= 0);
            if (atomic_load(&got) >= want)
                break;
            struct epoll_event ev;
            int k = epoll_wait(epfd, &ev, 1, 10000);
            VT_CHECK(k >= 0);
            if (k == 0 && atomic_load(&got) < want)
                VT_FAIL("rank %d: the event fd stayed quiet for 10 s, handler ran %d of %d", me,
                        atomic_load(&got), want);
        }
        if (me != 0)
            VT_OK(vmmc_send(next, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
        t[n++] = vt_now() - t0;
    }
    return median(t, n);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep), size = vmmc_size(ep);
    VT_CHECK(size >= 2);
    char *dst, *src;
    VT_OK(vmmc_mem_alloc(ep, ASYNC_LEN, (void **)&dst));
    VT_OK(vmmc_mem_alloc(ep, ASYNC_LEN, (void **)&src));
    memset(src, me, ASYNC_LEN);
    static int box[16];
    vmmc_export_params_t p = {.name = "dst", .addr = dst, .length = ASYNC_LEN};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    p = (vmmc_export_params_t){.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "box",
                               .addr = box, .length = sizeof box, .handler = on_note};
    VT_OK(vmmc_export(ep, &p, &ex));
    vmmc_proxy_t *px, *pbox;
    VT_OK(vmmc_import(ep, (me + 1) % size, "dst", 10000, &px));
    VT_OK(vmmc_import(ep, (me + 1) % size, "box", 10000, &pbox));
    VT_OK(vmmc_barrier(ep));

    double b_off = barrier_loop(ep);
    double r_off = request_loop(px, src);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_service_start(ep));
    VT_OK(vmmc_barrier(ep));
    double b_on = barrier_loop(ep);
    double r_on = request_loop(px, src);
    VT_OK(vmmc_barrier(ep));
    printf("rank %d: barrier median %.3f ms polling, %.3f ms service thread (%.1fx); "
           "request wait %.3f / %.3f ms (%.1fx)\n",
           me, b_off * 1e3, b_on * 1e3, b_on / b_off, r_off * 1e3, r_on * 1e3, r_on / r_off);
    if (argc > 1 && !strcmp(argv[1], "handlers")) {
        double h_on = handler_loop(ep, pbox);
        printf("rank %d: handler ring median %.3f ms with the service thread\n", me, h_on * 1e3);
        VT_CHECK(h_on < 0.050);
        VT_OK(vmmc_barrier(ep));
        int fd = vmmc_event_fd(ep);
        VT_CHECK(fd >= 0);
        int epfd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN};
        VT_CHECK(epfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
        VT_OK(vmmc_barrier(ep));
        double e_on = epoll_loop(ep, pbox, epfd);
        printf("rank %d: epoll ring median %.3f ms with the service thread\n", me, e_on * 1e3);
        VT_CHECK(e_on < 0.050);
        VT_OK(vmmc_barrier(ep));
        /* Without the service thread the set holds the endpoint's eventfd again. */
        VT_OK(vmmc_service_stop(ep));
        VT_OK(vmmc_barrier(ep));
        double e_off = epoll_loop(ep, pbox, epfd);
        printf("rank %d: epoll ring median %.3f ms without it\n", me, e_off * 1e3);
        VT_CHECK(e_off < 0.050);
        close(epfd);
        VT_OK(vmmc_barrier(ep));
    }
    VT_CHECK(b_on < 0.050 && b_on < 10 * b_off + 0.002);
    VT_CHECK(r_on < 0.050 && r_on < 10 * r_off + 0.002);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
