/* The event fd with the service thread: the application sleeps in its own
 * epoll on vmmc_event_fd(), the service thread runs the handlers and tells
 * it so (the application's signal), and the application's vmmc_progress()
 * resets that signal. A stream of notifications from a second endpoint keeps
 * the service thread signalling while the application resets, many times
 * over; the sender stays at most WINDOW notifications ahead of what the
 * application has seen, so once a signal is lost the application sleeps
 * while a notification it has not seen waits: each sleep is bounded (10 s,
 * far beyond any scheduling delay), and one that ends empty-handed with
 * notifications unseen fails the test.
 * usage: t_evfd_race [NOTIFICATIONS] (default 200000). */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "vtest.h"

static uint64_t WINDOW = 8;

static _Atomic uint64_t handled, seen;
static uint64_t total;
static vmmc_proxy_t *px;
static _Atomic int stop;

static void on_note(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    (void)ep;
    (void)n;
    (void)arg;
    atomic_fetch_add(&handled, 1);
}

static void *sender(void *arg)
{
    vmmc_ep_t *s = arg;
    uint64_t v = 0;
    for (uint64_t i = 1; i <= total && !atomic_load(&stop); i++) {
        while (i > atomic_load(&seen) + WINDOW && !atomic_load(&stop))
            usleep(10);
        v = i;
        int rc;
        while ((rc = vmmc_send(px, 0, &v, sizeof v, VMMC_SEND_NOTIFY)) == VMMC_ERR_AGAIN)
            (void)vmmc_progress(s);
        if (rc != VMMC_OK)
            VT_FAIL("send %llu: %s", (unsigned long long)i, vmmc_strerror(rc));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *vars[] = {"VMMC_LAUNCHER", "VMMC_BOOTSTRAP", "VMMC_RANK", "VMMC_SIZE",
                                 "PMIX_RANK", "PMIX_NAMESPACE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    total = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    VT_CHECK(total > 0);
    if (argc > 2)
        WINDOW = strtoull(argv[2], NULL, 10);
    vmmc_ep_t *e, *s;
    VT_OK(vmmc_ep_open(NULL, &e));
    VT_OK(vmmc_ep_open(NULL, &s));
    void *mem;
    VT_OK(vmmc_mem_alloc(e, 4096, &mem));
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "x", .addr = mem,
                              .length = 4096, .handler = on_note};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(e, &p, &ex));
    char a[VMMC_ADDR_MAX];
    size_t al = sizeof a;
    VT_OK(vmmc_ep_addr(e, a, &al));
    int h;
    VT_OK(vmmc_connect(s, a, al, &h));
    VT_OK(vmmc_listen(e, NULL, NULL));
    VT_OK(vmmc_import(s, h, "x", 20000, &px));

    int efd = vmmc_event_fd(e);
    VT_CHECK(efd >= 0);
    VT_OK(vmmc_service_start(e));
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    VT_CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0);

    pthread_t t;
    VT_CHECK(pthread_create(&t, NULL, sender, s) == 0);
    double t0 = vt_now();
    uint64_t wakes = 0;
    while (atomic_load(&seen) < total) {
        int r = epoll_wait(ep, &ev, 1, 10000);
        if (r < 0)
            continue;
        (void)vmmc_progress(e); /* the application's loop: resets its signal */
        uint64_t hnd = atomic_load(&handled);
        if (r == 0 && hnd > atomic_load(&seen)) {
            atomic_store(&stop, 1);
            VT_FAIL("slept 10 s while %llu notifications the service thread handled were "
                    "unseen (%llu seen, after %llu wake-ups): the event fd lost a wake-up",
                    (unsigned long long)(hnd - atomic_load(&seen)),
                    (unsigned long long)atomic_load(&seen), (unsigned long long)wakes);
        }
        wakes += r;
        atomic_store(&seen, hnd);
    }
    pthread_join(t, NULL);
    printf("t_evfd_race: %llu notifications seen through %llu wake-ups in %.1f s: ok\n",
           (unsigned long long)total, (unsigned long long)wakes, vt_now() - t0);
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_service_stop(e));
    close(ep);
    VT_OK(vmmc_ep_close(s));
    VT_OK(vmmc_ep_close(e));
    return 0;
}
