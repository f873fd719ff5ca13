/* Suite "vmmc": the core library through its public API (vmmc/vmmc.h), two
 * ranks on distinct cores. Rank 0 measures and reports; rank 1 answers.
 *
 * Each rank exports three regions: "ma" from vmmc_mem_alloc() (a send into it
 * is a copy into a shared mapping), "ml" from malloc() (a send into it goes
 * through process_vm_writev on shm), and "nt", a small vmmc_mem_alloc()
 * region with a notification handler. The last page of "ma" holds control
 * words (flags and acks), one cache line each.
 *
 * Metrics (size in bytes):
 *   memalloc_lat, malloc_lat        us   one-way latency = ping-pong / 2; the
 *                                        receiver polls the last 8-byte word,
 *                                        which holds the sequence number
 *   memalloc_bw, malloc_bw          GB/s sender streams N sends, then a flag;
 *                                        the receiver acks the flag
 *   malloc_bw_vs_pvw                GB/s the malloc_bw figure, compared with
 *                                        process_vm_writev alone (full runs)
 *   memalloc_bidir_bw, malloc_bidir_bw  GB/s both ranks stream at once (total)
 *   memalloc_alt_lat                us   both ranks send to each other at once,
 *                                        time per exchange (alternating traffic)
 *   memalloc_n_half, malloc_n_half  B    N1/2: size at which size / one-way
 *                                        latency reaches half its peak (full runs)
 *   memalloc_send_overhead, malloc_send_overhead  ns  time per vmmc_send()
 *   memalloc_async_return           ns   time for vmmc_send_async() to return
 *   overlap                         x    1 MiB async send while computing for
 *                                        about as long: time of both together /
 *                                        the longer of the two alone (1 = full
 *                                        overlap, 2 = none)
 *   line_lat                        us   the floor of memalloc_lat: the same
 *                                        ping-pong (same ranks, pinning, loop,
 *                                        wait, clock and iteration counts) with
 *                                        each vmmc_send() replaced by a plain
 *                                        memcpy into a mapping of the peer's
 *                                        region (vmmc_proxy_map): one cache
 *                                        line each way at 8 B. Repetitions of
 *                                        the two alternate, so both see the
 *                                        same machine. memalloc_lat is
 *                                        reported against it as its floor
 *   copy_bw                         GB/s the ceiling of memalloc_bw, made the
 *                                        same way: the same stream, flag and
 *                                        ack, with memcpy into the mapping
 *   copy2_bw                        GB/s the ceiling of a copy that both
 *                                        cores share (FM's split copy): per
 *                                        message, rank 0 says go, rank 1
 *                                        copies the front half from rank 0's
 *                                        memory while rank 0 copies the back
 *                                        half into rank 1's, and rank 0 waits
 *                                        for rank 1's done before the next
 *                                        (the sender may reuse its buffer when
 *                                        the send returns); source and
 *                                        destination are "ma" memory
 *   notify_poll_lat, notify_block_lat, notify_epoll_lat, notify_service_lat
 *                                   us   8-byte send with VMMC_SEND_NOTIFY,
 *                                        the handler replies; ping-pong / 2 with
 *                                        both sides waiting in that mode (service:
 *                                        rank 1's service thread replies while
 *                                        rank 1's main thread sleeps)
 *   memalloc_fetch_lat              us   vmmc_fetch of 8 bytes from rank 1's "ma"
 *   memalloc_atomic_lat             us   vmmc_atomic fetch-add of 8 bytes on "ma":
 *                                        one instruction on the mapping on shm,
 *                                        a request the target executes over udp
 *   malloc_atomic_lat               us   vmmc_atomic add (no fetch: "ml" is not
 *                                        readable) on "ml", which is not mapped:
 *                                        executed by the target's control thread
 *                                        (shm) or link thread (udp) */
#include "bench_vmmc.h"

/* ------------------------------------------------------------------------- */

int vb_fail(vb_t *v, const char *what, int rc)
{
    if (!v->failed)
        bench_note(v->c, "vmmc suite: %s failed: %s (%s)", what, vmmc_strerror(rc),
                   vmmc_last_error());
    v->failed = 1;
    return -1;
}

volatile uint64_t *vb_slot(vb_t *v, int k)
{
    return (volatile uint64_t *)(v->ma.mem + v->data + 64 * (size_t)k);
}

size_t vb_slot_off(vb_t *v, int k)
{
    return v->data + 64 * (size_t)k;
}

/* Spin until *p >= val (every word only grows: sequence numbers); -1 if the
 * peer stays silent too long. */
int vb_wait_word(vb_t *v, volatile uint64_t *p, uint64_t val)
{
    double t0 = 0;
    for (unsigned long spins = 0;; spins++) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) >= val)
            return 0;
        if (v->drive) {
            int rc = vmmc_progress(v->ep);
            if (rc < 0)
                return vb_fail(v, "vmmc_progress", rc);
            /* Now and then, let the progress thread on this cpu run (timers,
             * queued control messages). Not on every empty pass: while
             * the rank polls, the udp progress thread leaves the socket to
             * it, and a system call per pass would only lengthen the time
             * before a datagram is seen. */
            if (rc == 0 && (spins & 63) == 63)
                sched_yield();
        } else {
            bench_cpu_relax();
        }
        if ((spins & 0xffff) == 0xffff) {
            double now = bench_now_ns();
            if (t0 == 0)
                t0 = now;
            else if (now - t0 > WAIT_LIMIT_NS) {
                bench_note(v->c, "vmmc suite: the peer did not answer within %.0f s",
                           WAIT_LIMIT_NS / 1e9);
                v->failed = 1;
                return -1;
            }
        }
    }
}

int vb_put_word(vb_t *v, int k, uint64_t val)
{
    int rc = vmmc_send(v->ma.px, vb_slot_off(v, k), &val, sizeof val, 0);
    return rc ? vb_fail(v, "vmmc_send (control word)", rc) : 0;
}

static void on_notify(vmmc_ep_t *ep, const vmmc_notification_t *n, void *arg)
{
    vb_t *v = arg;
    uint64_t k = atomic_fetch_add(&v->notified, 1) + 1;
    if (v->me == 1 && k <= v->reply_until) {
        uint64_t val = k;
        int rc = vmmc_send(v->nt.px, 0, &val, sizeof val, VMMC_SEND_NOTIFY);
        if (rc)
            v->failed = 1;
        if (k == v->reply_until && v->service_mode)
            sem_post(&v->done);
    }
    (void)ep;
    (void)n;
}

static int setup_region(vb_t *v, region_t *r, const char *name, size_t len, int from_alloc,
                        int handler)
{
    r->len = len;
    r->from_alloc = from_alloc;
    int rc;
    if (from_alloc) {
        void *p = NULL;
        rc = vmmc_mem_alloc(v->ep, len, &p);
        if (rc)
            return vb_fail(v, "vmmc_mem_alloc", rc);
        r->mem = p;
    } else {
        void *p = NULL;
        if (posix_memalign(&p, 4096, len)) {
            bench_note(v->c, "vmmc suite: out of memory");
            v->failed = 1;
            return -1;
        }
        memset(p, 0, len);
        r->mem = p;
    }
    int importers[1] = {v->peer};
    vmmc_export_params_t ep = {0};
    ep.field_mask = VMMC_EXPORT_PARAM_IMPORTERS | (handler ? VMMC_EXPORT_PARAM_HANDLER : 0) |
                    VMMC_EXPORT_PARAM_FLAGS;
    /* A whole allocation that grants reads is mapped by the peer (the
     * deliberate-update path, and copy2_bw reads through the mapping). */
    ep.flags = from_alloc ? VMMC_EXPORT_READ : 0;
    ep.name = name;
    ep.addr = r->mem;
    ep.length = len;
    ep.importers = importers;
    ep.num_importers = 1;
    if (handler) {
        ep.handler = on_notify;
        ep.handler_arg = v;
    }
    rc = vmmc_export(v->ep, &ep, &r->ex);
    if (rc)
        return vb_fail(v, "vmmc_export", rc);
    rc = vmmc_import(v->ep, v->peer, name, 20000, &r->px);
    if (rc)
        return vb_fail(v, "vmmc_import", rc);
    return 0;
}

static void teardown_region(vb_t *v, region_t *r)
{
    if (r->px)
        vmmc_unimport(r->px);
    if (r->ex)
        vmmc_unexport(r->ex);
    if (r->mem) {
        if (r->from_alloc)
            vmmc_mem_free(v->ep, r->mem);
        else
            free(r->mem);
    }
    memset(r, 0, sizeof *r);
}

/* --quick measures latency at 8 B, and over udp at 64 B too: the size of
 * its reference (peers/sockperf_udp_lat) and of the transport's figure. */
int vb_quick_skip(vb_t *v, size_t n)
{
    return v->c->quick && n == 64 && !v->drive;
}

int vb_want(vb_t *v, size_t n)
{
    return n >= v->c->min_size && n <= v->c->max_size && n <= v->data;
}

long vb_iters_for(vb_t *v, size_t n, long base)
{
    double budget = v->c->quick ? 64e6 : 256e6; /* bytes per repetition */
    long it = (long)(budget / (double)n);
    if (it > base)
        it = base;
    return it < 8 ? 8 : it;
}

/* ------------------------------------------------------------------------- */

static int vmmc_suite_run(bench_ctx_t *c)
{
    if (!c->ep || c->size < 2) {
        bench_note(c, "the vmmc suite needs a job of 2 ranks (vmmc run -n 2)");
        return -1;
    }
    if (c->reps > MAX_REPS)
        c->reps = MAX_REPS;
    vb_t *v = calloc(1, sizeof *v);
    if (!v)
        return -1;
    v->c = c;
    v->ep = c->ep;
    v->me = c->rank;
    v->peer = c->rank == 0 ? 1 : 0;
    /* On shm a send lands with no help from the receiver, so waits are pure
     * spins. Over udp each rank's progress thread shares its one cpu with the
     * spinning thread: waits drive progress themselves instead. */
    v->drive = c->transport && strcmp(c->transport, "shm") != 0;
    if (c->rank > 1) { /* extra ranks only take part in barriers */
        free(v);
        return 0;
    }
    sem_init(&v->done, 0, 0);
    size_t want_max = c->max_size < MAX_SIZE ? c->max_size : MAX_SIZE;
    if (c->quick && want_max > ((size_t)4 << 20))
        want_max = (size_t)4 << 20;
    v->data = (want_max + 4095) & ~(size_t)4095;
    if (v->data < 4096)
        v->data = 4096;
    int ret = -1;
    v->src = aligned_alloc(4096, v->data);
    if (!v->src)
        goto out;
    memset(v->src, 0x5a, v->data);
    if (setup_region(v, &v->ma, "bench.ma", v->data + 64 * NSLOTS, 1, 0) ||
        setup_region(v, &v->ml, "bench.ml", v->data, 0, 0) ||
        setup_region(v, &v->nt, "bench.nt", 4096, 1, 1))
        goto out;
    /* The floors' path: the peer's "ma" mapped here, stores straight into
     * it. Where the library cannot map it (udp, a policy), no floor. */
    void *map = NULL;
    int mrc = v->drive ? VMMC_ERR_UNSUPPORTED : vmmc_proxy_map(v->ma.px, &map);
    if (mrc == VMMC_OK)
        v->ma.map = map;
    else if (!v->drive && v->me == 0)
        bench_note(c, "vmmc suite: no same-method floor for latency and bandwidth "
                      "(vmmc_proxy_map: %s); memalloc_lat and memalloc_bw are compared with the "
                      "limits suite instead", vmmc_last_error());
    /* Floors need both mappings: each rank says whether it has one. */
    int rc = vb_put_word(v, SLOT_MAP, v->ma.map ? 2 : 1);
    if (rc || vb_wait_word(v, vb_slot(v, SLOT_MAP), 1))
        goto out;
    if (*vb_slot(v, SLOT_MAP) != 2)
        v->ma.map = NULL;
    rc = vmmc_barrier(v->ep);
    if (rc) {
        vb_fail(v, "vmmc_barrier", rc);
        goto out;
    }
    if (vb_test_latency(v) || vb_test_bandwidth(v) || vb_test_overhead(v) || vb_test_async(v) ||
        vb_test_notify(v) || vb_test_atomic(v))
        goto out;
    ret = 0;
    /* Finish on the data path: rank 1 says it is done and rank 0 waits for
     * that, so neither rank leaves while the other is still inside a call
     * that involves it (a barrier that sees its peer exit fails). */
    if (v->me == 1)
        ret = vb_put_word(v, SLOT_DONE, 1);
    else
        ret = vb_wait_word(v, vb_slot(v, SLOT_DONE), 1);
out:
    teardown_region(v, &v->nt);
    teardown_region(v, &v->ml);
    teardown_region(v, &v->ma);
    free(v->src);
    sem_destroy(&v->done);
    free(v);
    return ret;
}

BENCH_SUITE(vmmc_suite, .name = "vmmc",
            .help = "the core: latency, bandwidth, send overheads, overlap, notifications",
            .nranks = 2, .run = vmmc_suite_run);
