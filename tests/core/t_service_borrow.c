/* vmmc_service_borrow(): an application thread drives progress in place of
 * a sleeping service thread. Rank 0 runs a service thread that sleeps
 * after every event (no spin); rank 1 sends it notifications.
 *
 *  - refused (0, nothing done) without a service thread, with a NULL
 *    endpoint or callback, and from inside a handler;
 *  - while rank 0's main thread borrows, rank 1's notifications are handled
 *    in that thread, and rank 1 writes no wake-up (it sees no sleeper);
 *  - a borrow whose condition never comes returns 0 after its time;
 *  - after a borrow the service thread handles what comes again;
 *  - notifications that arrive as a wait ends, with or without a borrow,
 *    are handled at once: what came while the last pass of another thread
 *    ran, or while nobody was announced as a sleeper, wakes nobody late. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "vtest.h"

#define SERIES 10
#define ROUNDS 600

static atomic_int got, in_main, in_handler_borrow = -1;
static pthread_t main_thread;
static vmmc_ep_t *ep;
static uint64_t box[8];

static int never(void *arg)
{
    (void)arg;
    return 0;
}

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)n;
    (void)arg;
    if (pthread_equal(pthread_self(), main_thread))
        atomic_fetch_add(&in_main, 1);
    if (atomic_load(&in_handler_borrow) == -1)
        atomic_store(&in_handler_borrow, vmmc_service_borrow(ep, never, NULL, 1000000));
    atomic_fetch_add(&got, 1);
}

static int reached(void *arg)
{
    return atomic_load(&got) >= *(int *)arg;
}

static void wait_got(int n, const char *what)
{
    double t0 = vt_now();
    while (atomic_load(&got) < n) {
        if (vt_now() - t0 > 30.0)
            VT_FAIL("%s: %d of %d notifications handled in 30 s", what, atomic_load(&got), n);
        usleep(200);
    }
}

static void send_notes(vmmc_proxy_t *px, int n, int gap_us)
{
    for (int i = 0; i < n; i++) {
        if (gap_us)
            usleep((useconds_t)gap_us);
        VT_OK(vmmc_send(px, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    main_thread = pthread_self();
    VT_CHECK(vmmc_service_borrow(NULL, never, NULL, 1000) == 0);
    vmmc_ep_params_t ep_p = {.field_mask = VMMC_EP_PARAM_SPIN_NS, .spin_ns = 0};
    VT_OK(vmmc_init(&ep_p, &ep));
    int me = vmmc_rank(ep);
    VT_CHECK(vmmc_size(ep) == 2);
    vmmc_proxy_t *px = NULL;
    if (me == 0) {
        VT_CHECK(vmmc_service_borrow(ep, never, NULL, 1000000) == 0); /* no service thread */
        VT_CHECK(vmmc_service_borrow(ep, NULL, NULL, 1000000) == 0);
        VT_CHECK(vt_counter(ep, "service_borrows") == 0);
        vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_HANDLER, .name = "box",
                                  .addr = box, .length = sizeof box, .handler = on_note};
        vmmc_export_t *ex;
        VT_OK(vmmc_export(ep, &p, &ex));
        VT_OK(vmmc_service_start(ep));
    } else {
        VT_OK(vmmc_import(ep, 0, "box", 5000, &px));
    }

    /* 1. The first notification: a handler cannot borrow; the service thread takes it. */
    VT_OK(vmmc_barrier(ep));
    if (px)
        send_notes(px, 1, 50000); /* (rank 0 has left the barrier, whose waits progress) */
    else {
        wait_got(1, "first notification");
        VT_CHECK(atomic_load(&in_handler_borrow) == 0);
    }

    /* 2. A series taken by the borrowing main thread, no wake-up written. */
    VT_OK(vmmc_barrier(ep));
    if (px) {
        usleep(100000); /* rank 0 borrows meanwhile */
        uint64_t w0 = vt_counter(ep, "wakeups_sent");
        send_notes(px, SERIES, 1000);
        uint64_t w = vt_counter(ep, "wakeups_sent") - w0;
        printf("rank 1 wrote %llu wake-ups for %d notifications to a borrowing rank\n",
               (unsigned long long)w, SERIES);
        VT_CHECK(w == 0);
    } else {
        int want = 1 + SERIES, r = 0, m0 = atomic_load(&in_main);
        double t0 = vt_now();
        /* the service thread may still be awake after the barrier: try again */
        while (!r && vt_now() - t0 < 30.0) {
            usleep(1000);
            r = vmmc_service_borrow(ep, reached, &want, 20000000000ull);
        }
        VT_CHECK(r == 1);
        VT_CHECK(atomic_load(&in_main) - m0 == SERIES);
        VT_CHECK(vt_counter(ep, "service_borrows") >= 1);
    }

    /* 3. A condition that never comes: 0 after the time. */
    if (!px) {
        int r = 1;
        double t0 = vt_now();
        for (int i = 0; i < 100 && r; i++) /* (0 also if the service thread was awake) */
            r = vmmc_service_borrow(ep, never, NULL, 20000000);
        VT_CHECK(r == 0);
        VT_CHECK(vt_now() - t0 >= 0.019);
    }

    /* 4. Afterwards the service thread handles what comes. */
    VT_OK(vmmc_barrier(ep));
    if (px) {
        usleep(50000);
        send_notes(px, SERIES, 1000);
    } else {
        int m0 = atomic_load(&in_main);
        wait_got(1 + 2 * SERIES, "after a borrow");
        VT_CHECK(atomic_load(&in_main) == m0);
    }

    /* 5. Notifications racing with the end of a wait, none delayed. In each
     * round rank 1 sends one notification after a random pause, while rank
     * 0 has just left a barrier (whose wait ran progress in the main
     * thread) and then borrows for a random time (second half only); then
     * it waits without progress of its own. A notification published while
     * the main thread's last pass ran, as the service thread went to sleep,
     * must not wait for the service thread's next timed wake-up (1 s). */
    int base = 1 + 2 * SERIES;
    for (int half = 0; half < 2; half++) {
        unsigned seed = 12345u;
        int lost = 0, borrowed = 0;
        double worst = 0;
        for (int i = 0; i < ROUNDS; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned us = (seed >> 8) % 80;
            VT_OK(vmmc_barrier(ep));
            if (px) {
                double t0 = vt_now();
                while (vt_now() - t0 < us * 1e-6)
                    ;
                VT_OK(vmmc_send(px, 0, &i, sizeof i, VMMC_SEND_NOTIFY));
                continue;
            }
            int want = base + half * ROUNDS + i + 1;
            if (half)
                borrowed += vmmc_service_borrow(ep, reached, &want, (uint64_t)us * 1000);
            double t0 = vt_now();
            while (atomic_load(&got) < want && vt_now() - t0 < 0.5)
                usleep(50);
            double dt = vt_now() - t0;
            worst = dt > worst ? dt : worst;
            if (atomic_load(&got) < want)
                lost++;
        }
        if (px)
            continue;
        printf("%d rounds %s: %d answered within a borrow, the slowest after the wait %.1f ms\n",
               ROUNDS, half ? "with borrows" : "without", borrowed, worst * 1e3);
        if (lost || worst > 0.3)
            VT_FAIL("%d notifications waited more than 0.5 s (slowest %.0f ms): a wake-up was "
                    "lost", lost, worst * 1e3);
        wait_got(base + (half + 1) * ROUNDS, "rounds");
    }
    if (!px)
        printf("ok a borrowing thread takes the events, and none is delayed\n");
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
