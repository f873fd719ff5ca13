/* Concurrency: 4 threads per rank send at once, through shared proxies, into
 * disjoint slices of every other rank's two exports (heap memory: copy path;
 * a whole allocation: mapped on shm), in chunks of 1 byte to 8 KiB, several
 * passes, synchronous and asynchronous, some notified. Then every byte of
 * every slice must hold the last pass's pattern, the guards must be intact,
 * and each thread's notifications must have arrived once each, in the order
 * that thread sent them.
 *
 * usage: conf_threads [passes]   (default 4) */
#include <pthread.h>

#include "conf.h"

#define NT 4
#define MAXR 4
#define SLICE ((size_t)192 << 10)
#define CHUNK 8192

static vmmc_ep_t *ep;
static int me, np, passes = 4;
static vmmc_proxy_t *px[MAXR][2];
static conf_region_t reg[2];
static uint64_t note_seq[MAXR][NT]; /* receiver: next notification per sender thread */
static uint64_t notes;              /* receiver: notifications so far */
static int threads_done;

static uint64_t seed_of(int rank, int t, int pass) { return (uint64_t)(rank * NT + t) * 100 + pass + 1; }
static size_t slice_off(int sender, int t) { return ((size_t)sender * NT + t) * SLICE; }

/* Chunks of a slice in pass @p pass: lengths vary with the pass, so passes
 * cut the slice differently. */
static size_t chunk_len(size_t pos, int pass)
{
    size_t n = 1 + conf_hash(pos * 7 + (size_t)pass) % CHUNK;
    return pos + n > SLICE ? SLICE - pos : n;
}

/* Where a chunk of some pass starts in a slice: its length in each pass
 * (0: no chunk of that pass starts there). A notification must name exactly
 * one chunk its sender sent (or, after an asynchronous send, a chunk's start
 * with length 0), even when threads' multi-datagram messages travel at the
 * same time. */
static uint16_t (*chunk_at)[SLICE];

static int is_chunk(size_t pos, size_t len)
{
    for (int p = 0; p < passes; p++)
        if (chunk_at[p][pos] && (chunk_at[p][pos] == len || len == 0))
            return 1;
    return 0;
}

static void on_note(vmmc_ep_t *e, const vmmc_notification_t *n, void *arg)
{
    (void)e;
    (void)arg;
    int s = n->sender, t = (int)(n->imm >> 32);
    uint64_t seq = n->imm & 0xffffffffu;
    if (s < 0 || s >= np || t < 0 || t >= NT)
        VT_FAIL("[%s] notification from rank %d thread %d", conf_transport(), s, t);
    size_t base = slice_off(s, t);
    if (n->offset < base || n->offset - base >= SLICE || !is_chunk(n->offset - base, n->length))
        VT_FAIL("[%s] rank %d thread %d: notification %llu for %zu bytes at %zu: no such chunk",
                conf_transport(), s, t, (unsigned long long)seq, n->length, n->offset);
    if (seq != note_seq[s][t] + 1)
        VT_FAIL("[%s] rank %d thread %d: notification %llu after %llu", conf_transport(), s, t,
                (unsigned long long)seq, (unsigned long long)note_seq[s][t]);
    note_seq[s][t] = seq;
    notes++;
}

static void chunks_init(void)
{
    chunk_at = calloc((size_t)passes, sizeof *chunk_at);
    VT_CHECK(chunk_at != NULL);
    for (int p = 0; p < passes; p++)
        for (size_t pos = 0; pos < SLICE; pos += chunk_len(pos, p))
            chunk_at[p][pos] = (uint16_t)chunk_len(pos, p);
}

static uint64_t notes_per_thread(void)
{
    uint64_t k = 0;
    for (int pass = 0; pass < passes; pass++)
        for (size_t pos = 0, i = 0; pos < SLICE; pos += chunk_len(pos, pass), i++)
            k += i % 16 == 0;
    return k * (np - 1) * 2; /* to every other rank, into both exports */
}

static void *sender(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned char *src = malloc(SLICE);
    VT_CHECK(src != NULL);
    uint32_t seqs[MAXR] = {0}; /* per receiver */
    for (int pass = 0; pass < passes; pass++) {
        conf_fill(src, SLICE, seed_of(me, t, pass), slice_off(me, t));
        for (int k = 1; k < np; k++) {
            int p = (me + k) % np;
            uint32_t *sq = &seqs[p];
            for (int x = 0; x < 2; x++) {
                vmmc_request_t rq;
                size_t i = 0;
                for (size_t pos = 0; pos < SLICE; pos += chunk_len(pos, pass), i++) {
                    size_t off = slice_off(me, t) + pos, len = chunk_len(pos, pass);
                    unsigned fl = i % 16 == 0 ? VMMC_SEND_NOTIFY : 0;
                    if (pass % 2 == 0) {
                        uint64_t imm = fl ? (uint64_t)t << 32 | ++*sq : 0;
                        VT_OK(vmmc_send_imm(px[p][x], off, src + pos, len, fl, imm));
                    } else {
                        if (fl)
                            ++*sq; /* no imm on asynchronous sends: send the number after */
                        int rc = vmmc_send_async(px[p][x], off, src + pos, len, 0, &rq);
                        if (rc == VMMC_INPROGRESS)
                            rc = vmmc_request_wait(&rq, (int)(conf_timeout() * 1000));
                        VT_OK(rc);
                        if (fl)
                            VT_OK(vmmc_send_imm(px[p][x], off, src + pos, 0, VMMC_SEND_NOTIFY,
                                                (uint64_t)t << 32 | *sq));
                    }
                }
            }
        }
        /* The source is refilled only after every send of the pass
         * returned (synchronous) or completed (asynchronous); the last
         * pass's bytes land last because one thread's sends are ordered. */
    }
    free(src);
    __atomic_add_fetch(&threads_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(int argc, char **argv)
{
    ep = conf_init(0);
    if (argc > 1)
        passes = atoi(argv[1]);
    VT_CHECK(passes > 0);
    chunks_init();
    me = vmmc_rank(ep);
    np = vmmc_size(ep);
    VT_CHECK(np <= MAXR);
    for (int x = 0; x < 2; x++) {
        conf_region_alloc(ep, &reg[x], x ? CONF_MEM : CONF_HEAP, (size_t)np * NT * SLICE);
        conf_export(ep, &reg[x], x ? "thr.mem" : "thr.heap", VMMC_EXPORT_READ, on_note, NULL);
    }
    for (int p = 0; p < np; p++)
        if (p != me) {
            px[p][0] = conf_import(ep, p, "thr.heap");
            px[p][1] = conf_import(ep, p, "thr.mem");
        }
    VT_OK(vmmc_barrier(ep));
    double t0 = vt_now();
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        VT_CHECK(pthread_create(&th[t], NULL, sender, (void *)(intptr_t)t) == 0);
    /* Serve notifications (the senders' queues drain only through them). */
    CONF_WAIT(ep, __atomic_load_n(&threads_done, __ATOMIC_ACQUIRE) == NT, "the sending threads");
    for (int t = 0; t < NT; t++)
        VT_CHECK(pthread_join(th[t], NULL) == 0);
    CONF_WAIT(ep, notes == (uint64_t)NT * notes_per_thread(), "every notification");
    VT_OK(vmmc_barrier(ep));
    for (int x = 0; x < 2; x++) {
        for (int s = 0; s < np; s++)
            for (int t = 0; t < NT; t++) {
                size_t off = slice_off(s, t);
                if (s == me) {
                    for (size_t i = 0; i < SLICE; i++)
                        VT_CHECK(reg[x].p[off + i] == 0);
                    continue;
                }
                conf_check(reg[x].p + off, SLICE, seed_of(s, t, passes - 1), off,
                           "slice of rank %d thread %d in %s", s, t, x ? "thr.mem" : "thr.heap");
            }
        conf_guard_check(&reg[x]);
    }
    VT_CHECK(notes == (uint64_t)NT * notes_per_thread());
    conf_ok(me, "%d threads x %d passes into %d ranks, every byte in place (%.2f s)", NT, passes,
            np - 1, vt_now() - t0);
    VT_OK(vmmc_barrier(ep));
    VT_OK(vmmc_finalize(ep));
    conf_region_release(&reg[0]);
    return 0;
}
