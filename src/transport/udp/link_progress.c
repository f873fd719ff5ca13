/* UDP link: the progress thread. It receives (link_rx.c) unless the
 * application polls, runs the loss timers (link_ack.c), sends delayed
 * acknowledgements and keep-alives and declares silent peers dead. It sleeps
 * in ppoll() until a datagram arrives or the next timer is due. An
 * application poll receives in its place (vmmc_udp_link_poll). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll */
#endif
#include "transport/udp/link_impl.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "vmmc/vmmc.h"

static __thread const vmmc_udp_link_t *tl_rx_owner;

int vmmc_udp__rx_owner(const vmmc_udp_link_t *l)
{
    return tl_rx_owner == l;
}

/* ---- timers ------------------------------------------------------------- */

/* Retransmit, keep alive, check liveness, send delayed ACKs. Returns the
 * next deadline. */
static uint64_t timers(vmmc_udp_link_t *l, uint64_t now)
{
    const vmmc_udp_settings_t *s = vmmc_udp_settings();
    uint64_t next = now + 1000000000ull;
    uint64_t ack_due = vmmc_udp__owed_acks(l, now);
    if (ack_due < next)
        next = ack_due;
    FOR_PEERS(l, i, p) {
        if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_ALIVE)
            continue;
        uint64_t last_rx = atomic_load_explicit(&p->last_rx_ns, memory_order_relaxed);
        pthread_mutex_lock(&p->lock);
        int dead = 0;
        if (since(now, last_rx) > s->peer_timeout_ns ||
            (p->snd_una != p->snd_nxt && since(now, p->unacked_since) > s->peer_timeout_ns)) {
            dead = 1;
        } else {
            next = vmmc_udp__loss_timers(l, p, now, next);
            next = vmmc_udp__batch_timer(l, p, now, next);
            if (since(now, p->last_tx_ns) >= s->keepalive_ns)
                vmmc_udp__send_ctl(l, i, p, VMMC_UDP_T_KEEPALIVE);
            uint64_t ka = p->last_tx_ns + s->keepalive_ns;
            if (ka < next)
                next = ka;
            uint64_t lv = last_rx + s->peer_timeout_ns + 1;
            if (lv < next)
                next = lv;
            if (p->snd_una != p->snd_nxt && p->unacked_since + s->peer_timeout_ns + 1 < next)
                next = p->unacked_since + s->peer_timeout_ns + 1;
            if (p->busy_until && p->busy_until < next)
                next = p->busy_until;
        }
        pthread_mutex_unlock(&p->lock);
        if (dead)
            vmmc_udp__peer_down(l, i, PEER_DEAD, DOWN_TIMEOUT);
    }
    /* The bindings belong to the receive owner. */
    uint64_t due = UINT64_MAX;
    if (tl_rx_owner == l) {
        due = l->b.next_due(l->b.ctx);
    } else if (pthread_mutex_trylock(&l->rx_lock) == 0) {
        due = l->b.next_due(l->b.ctx);
        pthread_mutex_unlock(&l->rx_lock);
    } else {
        due = now + 1000000; /* someone is receiving: look again soon */
    }
    if (due < next)
        next = due;
    return next;
}

/* ---- thread ------------------------------------------------------------- */

/* Has the application polled since the progress thread last looked (and
 * not announced that it is going to sleep)? Progress thread only. */
static int app_polling(vmmc_udp_link_t *l)
{
    if (!vmmc_udp_cfg_poll_quiet)
        return 0;
    uint64_t polls = atomic_load_explicit(&l->app_polls, memory_order_relaxed);
    int polled = polls != l->seen_polls;
    l->seen_polls = polls;
    return polled && !atomic_load_explicit(&l->app_idle, memory_order_relaxed);
}

/* Sleep until @deadline, an event-fd wake-up, or (unless @app) a datagram.
 * @app: the application polls, so the socket is left to it (progress thread
 * only). The caller bounds @deadline by the look-back interval; the
 * application's announcement that it goes to sleep (vmmc_udp_link_idle) and
 * this decision are ordered Dekker-style (each side stores its flag, then
 * reads the other's), so one of them sees the other: the application never
 * sleeps while this thread ignores the socket for a whole interval. */
static void wait_events(vmmc_udp_link_t *l, uint64_t deadline, uint64_t now, int app)
{
    if (app) {
        atomic_store(&l->skipping, 1);
        if (atomic_load(&l->app_idle)) {
            app = 0;
            atomic_store_explicit(&l->skipping, 0, memory_order_relaxed);
        }
    }
    uint64_t ns = deadline > now ? deadline - now : 0;
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    struct pollfd pf[2] = {{.fd = app ? -1 : l->fd, .events = POLLIN},
                           {.fd = l->evfd, .events = POLLIN}};
    atomic_store(&l->sleep_until, deadline > now ? deadline : now);
    /* A delayed ACK owed since (by an application poll) is due before this
     * sleep would end: Dekker pairing with the check in
     * vmmc_udp_link_poll(), so one of the two sees the other. */
    if (atomic_load(&l->acks_owed) && !app && deadline > now + vmmc_udp_cfg_ack_delay)
        ts.tv_sec = 0, ts.tv_nsec = (long)vmmc_udp_cfg_ack_delay;
    /* A batch opened since is due to leave before then (Dekker pairing with
     * vmmc_udp_link_post, which wakes a sleep it sees lasting too long). */
    if (atomic_load(&l->batches_open) && deadline > now + l->coalesce_ns &&
        (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec > l->coalesce_ns)
        ts.tv_sec = 0, ts.tv_nsec = (long)l->coalesce_ns;
    int r = ppoll(pf, 2, &ts, NULL);
    atomic_store_explicit(&l->sleep_until, 0, memory_order_relaxed);
    if (app)
        atomic_store_explicit(&l->skipping, 0, memory_order_relaxed);
    if (r > 0 && (pf[1].revents & POLLIN)) {
        uint64_t v;
        ssize_t rd = read(l->evfd, &v, sizeof v);
        (void)rd;
    }
}

void vmmc_udp_link_linger(vmmc_udp_link_t *l)
{
    if (vmmc_udp_cfg_serve_spin)
        atomic_store_explicit(&l->linger_until, vmmc_udp_now() + vmmc_udp_cfg_serve_spin,
                              memory_order_relaxed);
}

/* After answering a request (vmmc_udp_link_linger): keep receiving without
 * sleeping until the linger ends, the application polls again (the socket
 * is then its own), or the link stops. A stream of reads or atomics from a
 * peer whose application computes or sleeps is then answered without a
 * wake-up per request (~15-60 us each on a loaded 2-core machine, against
 * a round trip of ~5 us). Bounded, and without sched_yield: on a loaded
 * machine a yielding thread waits behind every other runnable task, where
 * a woken one (the application thread of this endpoint, on the same CPU)
 * preempts the spinner anyway. */
static void linger(vmmc_udp_link_t *l)
{
    uint64_t polls = atomic_load_explicit(&l->app_polls, memory_order_relaxed);
    /* The timers (retransmissions, keep-alives, liveness) and the tick
     * still run at least every look-back interval. */
    uint64_t last = vmmc_udp_now();
    for (;;) {
        uint64_t until = atomic_load_explicit(&l->linger_until, memory_order_relaxed);
        uint64_t now = vmmc_udp_now();
        if (!until || now >= until || atomic_load(&l->stop) ||
            atomic_load_explicit(&l->app_polls, memory_order_relaxed) != polls)
            break;
        if (now - last >= vmmc_udp_cfg_poll_recheck) {
            if (l->p.tick)
                l->p.tick(l->p.arg);
            (void)timers(l, now);
            last = now;
        }
        if (pthread_mutex_trylock(&l->rx_lock) != 0)
            break; /* the application receives */
        tl_rx_owner = l;
        uint64_t before = __atomic_load_n(&l->c.delivered_frags, __ATOMIC_RELAXED);
        vmmc_udp__rx_pass(l, 0, 0);
        uint64_t got = __atomic_load_n(&l->c.delivered_frags, __ATOMIC_RELAXED) - before;
        if (atomic_load_explicit(&l->acks_owed, memory_order_relaxed))
            vmmc_udp__owed_acks(l, vmmc_udp_now()); /* their delay runs out while we spin */
        tl_rx_owner = NULL;
        pthread_mutex_unlock(&l->rx_lock);
        if (got)
            __atomic_fetch_add(&l->c.linger_delivered, got, __ATOMIC_RELAXED);
    }
    atomic_store_explicit(&l->linger_until, 0, memory_order_relaxed);
}

void *vmmc_udp__progress_main(void *arg)
{
    vmmc_udp_link_t *l = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    uint64_t next;
    while (!atomic_load(&l->stop)) {
        /* While the application polls, receiving is its business: this
         * thread only runs the timers (and the tick), without taking the
         * receive lock from under it, and waking it for each datagram would
         * only preempt it. It looks again after a quiet period, then after
         * twice as long each time, up to POLL_RECHECK, while the
         * application keeps polling; at once when it announces a sleep. */
        int app = app_polling(l);
        if (!app) {
            pthread_mutex_lock(&l->rx_lock);
            tl_rx_owner = l;
            vmmc_udp__rx_pass(l, 0, 0);
            tl_rx_owner = NULL;
            pthread_mutex_unlock(&l->rx_lock);
            if (atomic_load_explicit(&l->linger_until, memory_order_relaxed))
                linger(l);
        }
        if (l->p.tick)
            l->p.tick(l->p.arg);
        uint64_t now = vmmc_udp_now();
        next = timers(l, now);
        if (atomic_load(&l->stop))
            break;
        if (app) {
            /* Not earlier either: a ping-pong always has a datagram in
             * flight, acknowledged microseconds later by the answer the
             * application receives itself, so its retransmission and probe
             * deadlines (a few hundred microseconds) would wake this thread
             * over and over for nothing, each time taking the CPU from the
             * poller (~0.45 us more per 64-byte hop). Loss while the
             * application polls is repaired at the next look, at most
             * POLL_RECHECK later; a sender blocked on its window or a
             * flush, and an application asleep, hand the socket back and
             * get the loss timers at full speed. */
            next = now + l->recheck_ns;
            uint64_t r = l->recheck_ns * 2;
            l->recheck_ns = r > vmmc_udp_cfg_poll_recheck ? vmmc_udp_cfg_poll_recheck : r;
        } else {
            l->recheck_ns = vmmc_udp_cfg_poll_quiet;
        }
        wait_events(l, next, now, app);
    }
    pthread_mutex_lock(&l->rx_lock);
    FOR_PEERS(l, i, p) {
        if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != PEER_ALIVE)
            continue;
        uint64_t sack = vmmc_udp__sack_bits(l, p);
        pthread_mutex_lock(&p->lock);
        p->ack_pub = p->rcv_nxt - 1;
        p->dlv_pub = p->dlv_nxt - 1;
        p->sack_pub = sack;
        vmmc_udp__send_ctl(l, i, p, VMMC_UDP_T_BYE);
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&l->rx_lock);
    return NULL;
}

void vmmc_udp__progress_nested(vmmc_udp_link_t *l, uint64_t max_wait_ns)
{
    uint64_t now = vmmc_udp_now();
    vmmc_udp__send_acks(l, 1, now); /* what the callback's own message needs acknowledged */
    if (vmmc_udp__rx_pass(l, 1, 0) == 0) {
        uint64_t next = timers(l, now);
        if (next > now + max_wait_ns)
            next = now + max_wait_ns;
        wait_events(l, next, now, 0);
        vmmc_udp__rx_pass(l, 1, 0);
    }
    timers(l, vmmc_udp_now());
}

int vmmc_udp_link_poll(vmmc_udp_link_t *l)
{
    /* The application waits for something (maybe an answer to what it
     * posted): what waits in batches leaves now. */
    vmmc_udp__batch_push_all(l);
    /* A plain increment: the progress thread only looks for a change. */
    atomic_store_explicit(&l->app_polls,
                          atomic_load_explicit(&l->app_polls, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (atomic_load_explicit(&l->app_idle, memory_order_relaxed))
        atomic_store_explicit(&l->app_idle, 0, memory_order_relaxed);
    if (tl_rx_owner == l || atomic_load_explicit(&l->stop, memory_order_relaxed) ||
        pthread_mutex_trylock(&l->rx_lock) != 0)
        return 0; /* someone else is receiving (or we already are) */
    tl_rx_owner = l;
    uint64_t before = __atomic_load_n(&l->c.delivered_frags, __ATOMIC_RELAXED);
    int got = vmmc_udp__rx_pass(l, 0, !l->rx_streak);
    l->rx_streak = got > 0;
    if (atomic_load_explicit(&l->acks_owed, memory_order_relaxed)) {
        uint64_t now = vmmc_udp_now();
        vmmc_udp__owed_acks(l, now);
        /* An ACK (or delivery report) is still owed, and this thread may
         * stop polling now (compute, or wait for the sender in a barrier):
         * the progress thread must send it in time. While it looks back
         * every POLL_RECHECK it does; if it sleeps on the socket until a
         * keep-alive (the ACK became owed after it computed its deadline),
         * wake it, once. */
        atomic_thread_fence(memory_order_seq_cst);
        uint64_t su = atomic_load(&l->sleep_until);
        if (atomic_load(&l->acks_owed) &&
            su > now + vmmc_udp_cfg_ack_delay + vmmc_udp_cfg_poll_recheck)
            vmmc_udp__wake_sleep(l, su);
    }
    tl_rx_owner = NULL;
    pthread_mutex_unlock(&l->rx_lock);
    return (int)(__atomic_load_n(&l->c.delivered_frags, __ATOMIC_RELAXED) - before);
}

void vmmc_udp_link_idle(vmmc_udp_link_t *l)
{
    vmmc_udp__batch_push_all(l); /* nobody may poll for a while */
    if (!atomic_load_explicit(&l->app_idle, memory_order_relaxed))
        atomic_store(&l->app_idle, 1);
    if (atomic_load(&l->skipping))
        vmmc_udp_link_wake(l);
}
