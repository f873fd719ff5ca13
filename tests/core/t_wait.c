/* The four ways to wait for notifications, each used for a ping-pong:
 * polling (vmmc_progress), blocking (vmmc_wait, spin then sleep), an event
 * fd in the application's own epoll loop, and the service thread running
 * handlers while the main thread computes. Rank 0 pings, rank 1 answers
 * using each mode in turn. Some pings come after a pause, so the blocking
 * modes really sleep (checked with the "sleeps" counter). */
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "vtest.h"

#define PINGS 200

static vmmc_ep_t *ep;
static vmmc_proxy_t *peer;
static volatile uint64_t seen;
static uint64_t box[8];

static void on_ping(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    seen = n->imm;
}

static uint64_t counter(const char *name)
{
    const char *nm;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &nm, &v) == VMMC_OK; i++)
        if (!strcmp(nm, name))
            return v;
    VT_FAIL("no counter %s", name);
}

static void send_ping(uint64_t v)
{
    VT_OK(vmmc_send_imm(peer, 0, &v, 8, VMMC_SEND_NOTIFY, v));
}

int main(void)
{
    vt_require_transport();
    VT_OK(vmmc_init(NULL, &ep));
    int me = vmmc_rank(ep);
    vmmc_export_params_t p = {0};
    p.field_mask = VMMC_EXPORT_PARAM_HANDLER;
    p.name = "box";
    p.addr = box;
    p.length = sizeof box;
    p.handler = on_ping;
    vmmc_export_t *ex;
    VT_OK(vmmc_export(ep, &p, &ex));
    VT_OK(vmmc_import(ep, 1 - me, "box", 5000, &peer));
    VT_OK(vmmc_barrier(ep));

    const char *modes[] = {"polling", "blocking", "epoll", "service"};
    uint64_t v = 0;
    for (int mode = 0; mode < 4; mode++) {
        uint64_t sleeps0 = counter("sleeps");
        if (me == 0) {
            for (int i = 0; i < PINGS; i++) {
                if (i % 50 == 49)
                    usleep(20000); /* let the other side fall asleep */
                send_ping(++v);
                while (seen != v)
                    VT_CHECK(vmmc_wait(ep, 5000) >= 0);
            }
        } else {
            int efd = -1, epfd = -1;
            if (mode == 2) {
                efd = vmmc_event_fd(ep);
                VT_CHECK(efd >= 0 && vmmc_event_fd(ep) == efd);
                epfd = epoll_create1(0);
                struct epoll_event e = {.events = EPOLLIN};
                VT_CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &e) == 0);
            }
            if (mode == 3)
                VT_OK(vmmc_service_start(ep));
            for (int i = 0; i < PINGS; i++) {
                ++v;
                switch (mode) {
                case 0:
                    while (seen != v)
                        VT_CHECK(vmmc_progress(ep) >= 0);
                    break;
                case 1:
                    while (seen != v)
                        VT_CHECK(vmmc_wait(ep, 5000) >= 0);
                    break;
                case 2:
                    while (seen != v) {
                        struct epoll_event e;
                        int n = epoll_wait(epfd, &e, 1, 5000);
                        VT_CHECK(n >= 0);
                        while (vmmc_progress(ep) > 0)
                            ;
                    }
                    break;
                case 3: {
                    /* The main thread computes; the service thread runs the
                     * handler. */
                    volatile double x = 1;
                    double t0 = vt_now();
                    while (seen != v) {
                        for (int k = 0; k < 1000; k++)
                            x = x * 1.0000001 + 1e-9;
                        VT_CHECK(vt_now() - t0 < 10);
                    }
                    break;
                }
                }
                send_ping(v);
            }
            if (mode == 3)
                VT_OK(vmmc_service_stop(ep));
            if (mode == 2)
                close(epfd);
            uint64_t sleeps = counter("sleeps") - sleeps0;
            printf("mode %-8s: %d ping-pongs, %llu sleeps\n", modes[mode], PINGS,
                   (unsigned long long)sleeps);
            if (mode == 1 || mode == 3)
                VT_CHECK(sleeps > 0);
            if (mode == 0)
                VT_CHECK(sleeps == 0);
        }
        VT_OK(vmmc_barrier(ep));
    }
    VT_OK(vmmc_unimport(peer));
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    printf("t_wait rank %d: ok\n", me);
    return 0;
}
