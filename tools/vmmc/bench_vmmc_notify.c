/* Suite "vmmc": send overheads, overlap of asynchronous sends, and
 * notification latency in each way of waiting (see bench_vmmc.c). */
#include "bench_vmmc.h"

/* Sizes (--quick: the q_ lists) */
static const size_t ovh_sizes[] = {8, 64, 1024, 4096, 65536, 1 << 20};
static const size_t async_sizes[] = {8, 65536, 1 << 20};
static const size_t q_ovh[] = {8}, q_async[] = {1 << 20};

/* ------------------------------------------------------------------------- */
/* Send overhead, asynchronous sends, overlap (rank 0 sends, rank 1 idles)    */

int vb_test_overhead(vb_t *v)
{
    double s[MAX_REPS];
    if (v->me == 0) {
        region_t *rs[2] = {&v->ma, &v->ml};
        const char *names[2] = {"memalloc_send_overhead", "malloc_send_overhead"};
        for (int k = 0; k < 2; k++) {
            EACH(v, ovh_sizes, q_ovh, n)
            {
                long count = vb_iters_for(v, n, v->c->quick ? 20000 : 100000);
                if (vb_stream(v, rs[k], n, count / 10 + 1))
                    return -1;
                for (int rep = 0; rep < v->c->reps; rep++) {
                    double t0 = bench_now_ns();
                    if (vb_stream(v, rs[k], n, count))
                        return -1;
                    s[rep] = (bench_now_ns() - t0) / (double)count;
                }
                const char *ref = k == 0 ? (n <= 4096 ? "limits/syscall" : "limits/memcpy_bw")
                                         : "limits/pvw_call";
                if (k == 0 && n > 4096)
                    ref = NULL;
                bench_report(v->c, names[k], n, "ns", bench_stats(s, v->c->reps), ref);
            }
        }
    }
    int rc = vmmc_barrier(v->ep);
    return rc ? vb_fail(v, "vmmc_barrier", rc) : 0;
}

static int send_async_wait(vb_t *v, region_t *r, size_t n, double *ret_ns)
{
    vmmc_request_t req;
    double t0 = bench_now_ns();
    int rc = vmmc_send_async(r->px, 0, v->src, n, 0, &req);
    if (ret_ns)
        *ret_ns = bench_now_ns() - t0;
    if (rc == VMMC_INPROGRESS)
        rc = vmmc_request_wait(&req, 20000);
    return rc ? vb_fail(v, "vmmc_send_async", rc) : 0;
}

/* Arithmetic that touches no memory, so it does not compete with the copy. */
static uint64_t compute(long iters)
{
    uint64_t x = 88172645463325252ull;
    for (long i = 0; i < iters; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static volatile uint64_t compute_sink;

int vb_test_async(vb_t *v)
{
    double s[MAX_REPS];
    if (v->me == 0) {
        EACH(v, async_sizes, q_async, n)
        {
            int count = v->c->quick ? 20 : 100;
            for (int w = 0; w < 3; w++)
                if (send_async_wait(v, &v->ma, n, NULL))
                    return -1;
            for (int rep = 0; rep < v->c->reps; rep++) {
                double sum = 0, t;
                for (int i = 0; i < count; i++) {
                    if (send_async_wait(v, &v->ma, n, &t))
                        return -1;
                    sum += t;
                }
                s[rep] = sum / count;
            }
            bench_report(v->c, "memalloc_async_return", n, "ns", bench_stats(s, v->c->reps),
                         "vmmc/memalloc_send_overhead");
        }
        size_t n = (size_t)1 << 20;
        if (vb_want(v, n)) {
            /* time of the send alone, and compute calibrated to last as long */
            double ts[MAX_REPS];
            for (int rep = 0; rep < v->c->reps; rep++) {
                double t0 = bench_now_ns();
                if (send_async_wait(v, &v->ma, n, NULL))
                    return -1;
                ts[rep] = bench_now_ns() - t0;
            }
            double t_send = bench_stats(ts, v->c->reps).median;
            long it = 1000;
            for (;;) {
                double t0 = bench_now_ns();
                compute_sink = compute(it);
                double t = bench_now_ns() - t0;
                if (t > t_send / 8 || it > (1l << 40)) {
                    it = (long)((double)it * t_send / (t > 0 ? t : 1));
                    break;
                }
                it *= 2;
            }
            /* per repetition: the send alone, the computation alone, both at once */
            double ta[MAX_REPS], tb[MAX_REPS], tboth[MAX_REPS];
            for (int rep = 0; rep < v->c->reps; rep++) {
                double t0 = bench_now_ns();
                if (send_async_wait(v, &v->ma, n, NULL))
                    return -1;
                ta[rep] = bench_now_ns() - t0;
                t0 = bench_now_ns();
                compute_sink = compute(it);
                tb[rep] = bench_now_ns() - t0;
                vmmc_request_t req;
                t0 = bench_now_ns();
                int rc = vmmc_send_async(v->ma.px, 0, v->src, n, 0, &req);
                compute_sink = compute(it);
                if (rc == VMMC_INPROGRESS)
                    rc = vmmc_request_wait(&req, 20000);
                tboth[rep] = bench_now_ns() - t0;
                if (rc)
                    return vb_fail(v, "vmmc_send_async", rc);
            }
            /* both together / the longer of the two alone (medians) */
            double ma = bench_stats(ta, v->c->reps).median;
            double mb = bench_stats(tb, v->c->reps).median;
            double longer = ma > mb ? ma : mb;
            for (int rep = 0; rep < v->c->reps; rep++)
                s[rep] = tboth[rep] / longer;
            bench_report(v->c, "overlap", n, "x", bench_stats(s, v->c->reps), NULL);
        }
    }
    int rc = vmmc_barrier(v->ep);
    return rc ? vb_fail(v, "vmmc_barrier", rc) : 0;
}

/* ------------------------------------------------------------------------- */
/* Notifications in each wait mode                                            */

static int wait_notified(vb_t *v, int mode, int epfd, uint64_t target)
{
    double t0 = bench_now_ns();
    unsigned long spins = 0;
    while (atomic_load_explicit(&v->notified, memory_order_acquire) < target) {
        int rc = 0;
        if (mode == MODE_POLL) {
            rc = vmmc_progress(v->ep);
            if (rc == 0 && v->drive && (++spins & 63) == 0)
                sched_yield(); /* now and then: see vb_wait_word() */
        } else if (mode == MODE_BLOCK) {
            rc = vmmc_wait(v->ep, 1000);
        } else if (mode == MODE_EPOLL) {
            rc = vmmc_progress(v->ep);
            if (rc == 0 && atomic_load(&v->notified) < target) {
                struct epoll_event ev;
                int k = epoll_wait(epfd, &ev, 1, 1000);
                if (k < 0 && errno != EINTR) {
                    bench_note(v->c, "vmmc suite: epoll_wait: %s", strerror(errno));
                    v->failed = 1;
                    return -1;
                }
                while ((rc = vmmc_progress(v->ep)) > 0)
                    ;
            }
        }
        if (rc < 0)
            return vb_fail(v, mode == MODE_BLOCK ? "vmmc_wait" : "vmmc_progress", rc);
        if (v->failed)
            return vb_fail(v, "vmmc_send (reply from the handler)", VMMC_ERR_SYSTEM);
        if (bench_now_ns() - t0 > WAIT_LIMIT_NS) {
            bench_note(v->c, "vmmc suite: a notification did not arrive within %.0f s",
                       WAIT_LIMIT_NS / 1e9);
            v->failed = 1;
            return -1;
        }
    }
    return 0;
}

static int notify_mode(vb_t *v, int mode, double *out)
{
    long iters = v->c->quick ? 300 : (mode == MODE_POLL ? 10000 : 2000);
    long warm = iters / 10 + 5;
    long total = warm + iters * v->c->reps;
    int epfd = -1;
    if (mode == MODE_EPOLL) {
        int fd = vmmc_event_fd(v->ep);
        if (fd < 0)
            return vb_fail(v, "vmmc_event_fd", fd);
        epfd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev)) {
            bench_note(v->c, "vmmc suite: epoll: %s", strerror(errno));
            if (epfd >= 0)
                close(epfd);
            v->failed = 1;
            return -1;
        }
    }
    atomic_store(&v->notified, 0);
    v->reply_until = (uint64_t)total;
    v->service_mode = mode == MODE_SERVICE;
    int rc = vmmc_barrier(v->ep); /* counters reset on both sides */
    if (rc) {
        if (epfd >= 0)
            close(epfd);
        return vb_fail(v, "vmmc_barrier", rc);
    }
    int ret = 0;
    if (v->me == 1) {
        if (mode == MODE_SERVICE) {
            rc = vmmc_service_start(v->ep);
            if (rc) {
                ret = vb_fail(v, "vmmc_service_start", rc);
            } else {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += (time_t)(WAIT_LIMIT_NS / 1e9) + 10;
                while ((rc = sem_timedwait(&v->done, &ts)) && errno == EINTR)
                    ;
                if (rc) {
                    bench_note(v->c, "vmmc suite: the service thread did not answer");
                    ret = -1;
                }
                vmmc_service_stop(v->ep);
            }
        } else {
            ret = wait_notified(v, mode, epfd, (uint64_t)total);
        }
    } else {
        int wmode = mode == MODE_SERVICE ? MODE_POLL : mode;
        uint64_t k = 0;
        for (long rep = -1; rep < v->c->reps && !ret; rep++) {
            long n = rep < 0 ? warm : iters;
            double t0 = bench_now_ns();
            for (long i = 0; i < n; i++) {
                uint64_t val = ++k;
                rc = vmmc_send(v->nt.px, 0, &val, sizeof val, VMMC_SEND_NOTIFY);
                if (rc) {
                    ret = vb_fail(v, "vmmc_send (notify)", rc);
                    break;
                }
                if (wait_notified(v, wmode, epfd, k)) {
                    ret = -1;
                    break;
                }
            }
            if (rep >= 0 && !ret)
                out[rep] = (bench_now_ns() - t0) / (double)n / 2 / 1e3;
        }
    }
    if (epfd >= 0)
        close(epfd);
    rc = vmmc_barrier(v->ep);
    if (!ret && rc)
        ret = vb_fail(v, "vmmc_barrier", rc);
    return ret;
}

int vb_test_notify(vb_t *v)
{
    static const char *const names[] = {"notify_poll_lat", "notify_block_lat",
                                        "notify_epoll_lat", "notify_service_lat"};
    static const char *const refs[] = {"vmmc/memalloc_lat", "limits/wake_futex_cross",
                                       "limits/wake_eventfd_cross", "limits/wake_futex_cross"};
    double s[MAX_REPS];
    if (!vb_want(v, 8))
        return 0;
    for (int m = MODE_POLL; m <= MODE_SERVICE; m++) {
        if (notify_mode(v, m, s))
            return -1;
        bench_report(v->c, names[m], 8, "us", bench_stats(s, v->c->reps), refs[m]);
    }
    return 0;
}

