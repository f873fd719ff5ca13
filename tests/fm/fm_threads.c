/* FM_THREADS: several threads use one FM at once, 3 ranks.
 * Rank 0 runs two sender threads, each streaming messages to ranks 1 and 2,
 * so two threads often send to the same rank at the same time; ranks 1 and
 * 2 each run one sender thread to rank 0. Every rank's main thread extracts
 * meanwhile, so handlers run in one thread while another thread sends
 * (which must block for credits, not be treated as a handler). Messages
 * are 0 B - 64 KiB with random gather pieces; half of them are received
 * into communication memory (placed directly), half into malloc() memory.
 * Each receiver checks per sending thread: order, length and every byte.
 * Handlers also try a reply (non-blocking) to exercise the send lock from
 * the extracting thread. */
#include <pthread.h>
#include <stdio.h>

#include "fm_test.h"

#define H_DATA 3
#define H_REPLY 4
#define MAXMSG (64 * 1024)
#define NTHREADS 2

typedef struct hdr {
    uint32_t thread, size;
    uint64_t seq;
} hdr_t;

static fm_t *fm;
static vmmc_ep_t *ep;
static int me;
static long nmsg;
static uint64_t next_seq[3][NTHREADS];
static uint8_t *membuf[3], *heapbuf[3]; /* per sender: their handlers interleave */
static long received, replies_sent, replies_got;
static volatile int senders_done;

static uint64_t msg_id(int sender, uint32_t thread, uint64_t seq)
{
    return ((uint64_t)sender << 40) | ((uint64_t)thread << 32) | seq;
}

static void h_data(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    hdr_t h;
    VT_CHECK(fm_receive(&h, s, sizeof h) == (ssize_t)sizeof h);
    VT_CHECK(h.thread < NTHREADS && h.size <= MAXMSG);
    if (h.seq != next_seq[sender][h.thread])
        VT_FAIL("rank %d thread %u: message %llu arrived, %llu expected", sender, h.thread,
                (unsigned long long)h.seq, (unsigned long long)next_seq[sender][h.thread]);
    next_seq[sender][h.thread]++;
    uint8_t *dst = (h.seq & 1) ? membuf[sender] : heapbuf[sender];
    VT_CHECK(fm_receive(dst, s, h.size) == (ssize_t)h.size);
    size_t bad = ft_check(dst, h.size, sender, msg_id(sender, h.thread, h.seq), 0);
    if (bad != (size_t)-1)
        VT_FAIL("rank %d thread %u message %llu: byte %zu of %u is wrong", sender, h.thread,
                (unsigned long long)h.seq, bad, h.size);
    received++;
    /* A reply from the handler never waits: it is sent or refused. */
    uint32_t v = (uint32_t)h.seq;
    int st = fm_send(fm, sender, H_REPLY, &v, sizeof v);
    VT_CHECK(st == VMMC_OK || st == VMMC_ERR_AGAIN);
    if (st == VMMC_OK)
        replies_sent++;
}

static void h_reply(fm_stream_t *s, int sender, void *arg)
{
    (void)s;
    (void)sender;
    (void)arg;
    replies_got++;
}

typedef struct targ {
    uint32_t thread;
} targ_t;

static void *sender_main(void *a)
{
    targ_t *t = a;
    uint8_t *src = malloc(MAXMSG);
    VT_CHECK(src != NULL);
    unsigned long long st = 99 + (unsigned long long)me * 7 + t->thread;
    int dests[2], nd = 0;
    if (me == 0) {
        dests[nd++] = 1;
        dests[nd++] = 2;
    } else {
        dests[nd++] = 0;
    }
    for (long i = 0; i < nmsg; i++) {
        for (int d = 0; d < nd; d++) {
            hdr_t h = {t->thread, 0, (uint64_t)i};
            switch (vt_rand(&st) % 4) {
            case 0:
                h.size = (uint32_t)(vt_rand(&st) % 64);
                break;
            case 1:
                h.size = (uint32_t)(vt_rand(&st) % 4096);
                break;
            default:
                h.size = (uint32_t)(vt_rand(&st) % MAXMSG);
                break;
            }
            ft_fill(src, h.size, me, msg_id(me, t->thread, h.seq));
            fm_stream_t *s;
            VT_OK(fm_begin_message(fm, dests[d], sizeof h + h.size, H_DATA, &s));
            VT_OK(fm_send_piece(s, &h, sizeof h));
            size_t off = 0;
            while (off < h.size) {
                size_t piece = 1 + (size_t)(vt_rand(&st) % (h.size - off));
                VT_OK(fm_send_piece(s, src + off, piece));
                off += piece;
            }
            VT_OK(fm_end_message(s));
        }
    }
    free(src);
    __atomic_add_fetch(&senders_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv)
{
    nmsg = argc > 1 ? atol(argv[1]) : 2000;
    VT_OK(vmmc_init(NULL, &ep));
    fm_params_t pa = {.field_mask = FM_PARAM_FLAGS, .flags = FM_THREADS};
    VT_OK(fm_init(ep, &pa, &fm));
    me = vmmc_rank(ep);
    if (vmmc_size(ep) != 3)
        VT_SKIP("needs 3 ranks");
    VT_CHECK(fm_register_handler(fm, H_DATA, h_data, NULL) == H_DATA);
    VT_CHECK(fm_register_handler(fm, H_REPLY, h_reply, NULL) == H_REPLY);
    for (int r = 0; r < 3; r++) {
        VT_OK(vmmc_mem_alloc(ep, MAXMSG, (void **)&membuf[r]));
        heapbuf[r] = malloc(MAXMSG);
        VT_CHECK(heapbuf[r] != NULL);
    }
    VT_OK(vmmc_barrier(ep));

    int nthreads = me == 0 ? NTHREADS : 1;
    pthread_t th[NTHREADS];
    targ_t ta[NTHREADS];
    for (int i = 0; i < nthreads; i++) {
        ta[i].thread = (uint32_t)i;
        VT_CHECK(pthread_create(&th[i], NULL, sender_main, &ta[i]) == 0);
    }
    /* The main thread extracts while its senders send. Another thread must
     * not be allowed to extract at the same time as a handler runs here. */
    long expect = me == 0 ? 2 * nmsg : NTHREADS * nmsg;
    double end = vt_now() + 150;
    while (received < expect || __atomic_load_n(&senders_done, __ATOMIC_SEQ_CST) < nthreads) {
        int r = fm_extract_wait(fm, FM_EXTRACT_ALL, 100);
        VT_CHECK(r >= 0);
        if (vt_now() > end)
            VT_FAIL("rank %d: %ld of %ld messages after 150 s", me, received, expect);
    }
    for (int i = 0; i < nthreads; i++)
        VT_CHECK(pthread_join(th[i], NULL) == 0);
    printf("rank %d: %ld messages checked from %d sending threads, %ld replies sent, %llu bytes "
           "placed directly\n",
           me, received, me == 0 ? 2 : NTHREADS, replies_sent,
           (unsigned long long)fm_counter(fm, "zcopy_bytes_recv"));
    VT_CHECK(fm_counter(fm, "protocol_error") == 0);
    /* Serve replies still in flight, then leave together. */
    VT_OK(vmmc_barrier(ep));
    while (fm_extract(fm, FM_EXTRACT_ALL) > 0)
        ;
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_finalize(fm));
    for (int r = 0; r < 3; r++)
        free(heapbuf[r]);
    VT_OK(vmmc_finalize(ep));
    return 0;
}
