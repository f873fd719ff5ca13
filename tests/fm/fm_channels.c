/* FM channels: several clients on one endpoint (2 ranks).
 *
 * Channel 0 (fm_init) carries the test's own control messages; channels A,
 * B and C (ids 5, 17, 200) carry data. Every data channel registers handler
 * ids 1, 2 and 3, but only its own id (A 1, B 2, C 3) is ever sent on it: a
 * message delivered into the wrong channel fails at once, and every byte is
 * checked (payload derived from sender, channel and sequence number).
 *
 *  1. Traffic on A, B and C at once, each channel driven by its own thread on
 *     each rank (sends to the peer and to itself, 0-24 KiB, blocking on A
 *     and B, FM_NONBLOCK on C), interleaved with extraction.
 *  2. Rank 1 stops extracting A and C: rank 0's blocking sender on A waits
 *     for credits and its non-blocking sender on C gets VMMC_ERR_AGAIN,
 *     while 500 messages on B still flow; then A and C drain, nothing lost.
 *  3. Rank 1 closes C while B keeps flowing between two other threads: rank
 *     0's sends on C fail with VMMC_ERR_STALE; a reopen on one side alone
 *     is refused with VMMC_ERR_STALE on both sides; once both reopened, C
 *     works again.
 *  4. A channel the peer has not opened: a blocking send waits open_wait_ms
 *     and fails with VMMC_ERR_TIMEOUT, a non-blocking one gets
 *     VMMC_ERR_AGAIN; once the peer opens it, the message goes through and
 *     is the only one delivered there.
 * Also: ids out of range, a second open of an id and a 17th open channel
 * are refused. */
#include <pthread.h>
#include <unistd.h>

#include "fm_test.h"

#define NCH 3
#define N1 300
#define N2_B 500
#define N2_A 64
#define N2_C 200
#define MAXLEN (24 * 1024)
#define TIMEOUT_S 120.0

static const int chan_id[NCH] = {5, 17, 200};

typedef struct {
    uint32_t chan, hid;
    uint64_t seq, len;
} hdr_t;

typedef struct chan {
    int id, hid;
    fm_t *fm;
    uint64_t next[2]; /* next sequence number expected from each rank */
    uint8_t *buf[2]; /* per sender: their handlers may be suspended in turns */
} chan_t;

typedef struct {
    chan_t *c;
    int hid;
} hreg_t;

static chan_t ch[NCH];
static hreg_t regs[NCH][3];
static int me, peer;
static vmmc_ep_t *ep;
static fm_t *ctl;
static volatile int ctl_code;
static volatile int b_final; /* rank 0's last message of phase 3 on B arrived */

static void deadline_check(double t0, const char *what)
{
    if (vt_now() - t0 > TIMEOUT_S)
        VT_FAIL("timed out: %s", what);
}

static uint8_t msg_byte(int sender, int chan, uint64_t seq, size_t i)
{
    return ft_byte(sender * 1000 + chan, seq, i);
}

static void h_data(fm_stream_t *s, int sender, void *arg)
{
    hreg_t *r = arg;
    chan_t *c = r->c;
    hdr_t h;
    VT_CHECK(fm_receive(&h, s, sizeof h) == (ssize_t)sizeof h);
    if (r->hid != c->hid || h.chan != (uint32_t)c->id || h.hid != (uint32_t)c->hid)
        VT_FAIL("channel %d (handler %d) got a message for channel %u handler %u", c->id, r->hid,
                h.chan, h.hid);
    if (sender < 0 || sender > 1 || h.seq != c->next[sender])
        VT_FAIL("channel %d: message %llu from %d, expected %llu", c->id,
                (unsigned long long)h.seq, sender, (unsigned long long)c->next[sender]);
    VT_CHECK(h.len <= MAXLEN);
    VT_CHECK(fm_receive(c->buf[sender], s, h.len) == (ssize_t)h.len);
    for (size_t i = 0; i < h.len; i++)
        if (c->buf[sender][i] != msg_byte(sender, c->id, h.seq, i))
            VT_FAIL("channel %d: byte %zu of message %llu from %d is wrong", c->id, i,
                    (unsigned long long)h.seq, sender);
    VT_CHECK(fm_receive(c->buf[sender], s, 1) == 0); /* nothing after the payload */
    c->next[sender]++;
    if (c == &ch[1] && h.len == 0 && h.seq >= N1 + N2_B)
        b_final = 1; /* the end of phase 3 */
}

static void h_ctl(fm_stream_t *s, int sender, void *arg)
{
    (void)arg, (void)sender;
    int code;
    VT_CHECK(fm_receive(&code, s, sizeof code) == (ssize_t)sizeof code);
    ctl_code = code;
}

static void send_ctl(int code)
{
    VT_OK(fm_send(ctl, peer, 9, &code, sizeof code));
}

static void wait_ctl(int code)
{
    double t0 = vt_now();
    while (ctl_code != code) {
        VT_CHECK(fm_extract_wait(ctl, FM_EXTRACT_ALL, 100) >= 0);
        deadline_check(t0, "control message");
    }
}

/* Send message @seq of channel @c to @dest; VMMC_ERR_AGAIN comes back to
 * the caller (non-blocking channel). */
static int send_msg(chan_t *c, int dest, uint64_t seq, size_t len, uint8_t *tmp)
{
    hdr_t h = {(uint32_t)c->id, (uint32_t)c->hid, seq, len};
    for (size_t i = 0; i < len; i++)
        tmp[i] = msg_byte(me, c->id, seq, i);
    fm_stream_t *s;
    int st = fm_begin_message(c->fm, dest, sizeof h + len, c->hid, &s);
    if (st != VMMC_OK)
        return st;
    VT_OK(fm_send_piece(s, &h, sizeof h));
    VT_OK(fm_send_piece(s, tmp, len));
    return fm_end_message(s);
}

/* Send until it goes (extracting meanwhile when the channel says AGAIN). */
static void send_retry(chan_t *c, int dest, uint64_t seq, size_t len, uint8_t *tmp,
                       uint64_t *again)
{
    double t0 = vt_now();
    int st;
    while ((st = send_msg(c, dest, seq, len, tmp)) == VMMC_ERR_AGAIN) {
        if (again)
            ++*again;
        VT_CHECK(fm_extract(c->fm, FM_EXTRACT_ALL) >= 0);
        usleep(50);
        deadline_check(t0, "non-blocking send");
    }
    VT_OK(st);
}

/* A send that must end in VMMC_ERR_STALE (non-blocking: AGAIN until the
 * peer's region is imported and found stale). */
static void expect_stale(chan_t *c, int dest, uint8_t *tmp)
{
    double t0 = vt_now();
    int st;
    while ((st = send_msg(c, dest, 0, 10, tmp)) == VMMC_ERR_AGAIN) {
        usleep(100);
        deadline_check(t0, "a stale channel");
    }
    VT_STATUS(VMMC_ERR_STALE, st);
}

static void open_chan(int k, unsigned flags, size_t ring)
{
    chan_t *c = &ch[k];
    fm_params_t pa = {.field_mask = FM_PARAM_FLAGS, .flags = flags};
    if (ring) {
        pa.field_mask |= FM_PARAM_RING_SIZE | FM_PARAM_PACKET_SIZE;
        pa.ring_size = ring;
        pa.packet_size = 4096;
    }
    VT_OK(fm_channel_open(ep, chan_id[k], &pa, &c->fm));
    VT_CHECK(fm_channel_id(c->fm) == chan_id[k]);
    memset(c->next, 0, sizeof c->next);
    for (int h = 0; h < 3; h++) {
        regs[k][h] = (hreg_t){c, h + 1};
        VT_CHECK(fm_register_handler(c->fm, h + 1, h_data, &regs[k][h]) == h + 1);
    }
}

/* ---- 1: all channels at once, a thread each ---- */
static void *phase1(void *arg)
{
    chan_t *c = arg;
    uint8_t *tmp = malloc(MAXLEN);
    unsigned long long rnd = 0x1234567ull + (unsigned long long)c->id * 7919 + (unsigned)me;
    uint64_t to_self = 0;
    for (uint64_t i = 0; i < N1; i++) {
        size_t len = (size_t)(vt_rand(&rnd) % MAXLEN);
        if (c == &ch[2])
            len %= 8000; /* non-blocking: a message must fit C's 16 KiB ring */
        if (i % 3 == 0)
            len %= 200;
        send_retry(c, peer, i, len, tmp, NULL);
        if (i % 5 == 0)
            send_retry(c, me, to_self++, len / 2, tmp, NULL);
        VT_CHECK(fm_extract(c->fm, 16384) >= 0);
    }
    double t0 = vt_now();
    while (c->next[peer] < N1 || c->next[me] < to_self) {
        VT_CHECK(fm_extract_wait(c->fm, FM_EXTRACT_ALL, 100) >= 0);
        deadline_check(t0, "phase 1 messages");
    }
    free(tmp);
    return NULL;
}

/* ---- 2: rank 0's senders on A (blocking) and C (non-blocking) ---- */
static uint64_t c_again;
static void *phase2_a(void *arg)
{
    (void)arg;
    uint8_t *tmp = malloc(MAXLEN);
    for (uint64_t i = 0; i < N2_A; i++)
        VT_OK(send_msg(&ch[0], peer, N1 + i, 4000, tmp));
    free(tmp);
    return NULL;
}

static void *phase2_c(void *arg)
{
    (void)arg;
    uint8_t *tmp = malloc(MAXLEN);
    for (uint64_t i = 0; i < N2_C; i++) {
        int st;
        double t0 = vt_now();
        while ((st = send_msg(&ch[2], peer, N1 + i, 2000, tmp)) == VMMC_ERR_AGAIN) {
            __atomic_add_fetch(&c_again, 1, __ATOMIC_RELAXED);
            usleep(100);
            deadline_check(t0, "phase 2 C");
        }
        VT_OK(st);
    }
    free(tmp);
    return NULL;
}

/* ---- 3: B keeps flowing while C closes and reopens ---- */
static volatile int b_stop;
static void *phase3_b(void *arg)
{
    (void)arg;
    chan_t *c = &ch[1];
    uint8_t *tmp = malloc(MAXLEN);
    double t0 = vt_now();
    if (me == 0) {
        uint64_t seq = N1 + N2_B;
        while (!b_stop) {
            VT_OK(send_msg(c, peer, seq++, 3000, tmp));
            VT_CHECK(fm_extract(c->fm, FM_EXTRACT_ALL) >= 0);
            deadline_check(t0, "phase 3 B sender");
        }
        VT_OK(send_msg(c, peer, seq++, 0, tmp)); /* the last one: length 0 */
    } else {
        while (!b_final) {
            VT_CHECK(fm_extract_wait(c->fm, FM_EXTRACT_ALL, 100) >= 0);
            deadline_check(t0, "phase 3 B receiver");
        }
    }
    free(tmp);
    return NULL;
}

int main(void)
{
    VT_OK(vmmc_init(NULL, &ep));
    vt_require_transport();
    if (vmmc_size(ep) != 2)
        VT_SKIP("needs 2 ranks");
    me = vmmc_rank(ep);
    peer = 1 - me;
    VT_OK(fm_init(ep, NULL, &ctl));
    VT_CHECK(fm_channel_id(ctl) == 0);
    VT_CHECK(fm_register_handler(ctl, 9, h_ctl, NULL) == 9);
    for (int k = 0; k < NCH; k++) {
        ch[k].id = chan_id[k];
        ch[k].hid = k + 1;
        ch[k].buf[0] = malloc(MAXLEN);
        ch[k].buf[1] = malloc(MAXLEN);
    }
    open_chan(0, 0, 16 * 1024);
    open_chan(1, 0, 0);
    open_chan(2, FM_NONBLOCK, 16 * 1024);

    /* Bad ids and second opens are refused and change nothing. */
    fm_t *x;
    VT_STATUS(VMMC_ERR_INVALID, fm_channel_open(ep, -1, NULL, &x));
    VT_STATUS(VMMC_ERR_INVALID, fm_channel_open(ep, FM_CHANNEL_MAX, NULL, &x));
    VT_STATUS(VMMC_ERR_INVALID, fm_channel_open(NULL, 1, NULL, &x));
    VT_STATUS(VMMC_ERR_INVALID, fm_channel_open(ep, 1, NULL, NULL));
    VT_STATUS(VMMC_ERR_INVALID, fm_channel_close(NULL));
    VT_STATUS(VMMC_ERR_INVALID, fm_channel_id(NULL));
    fm_params_t bad = {.field_mask = FM_PARAM_OPEN_WAIT, .open_wait_ms = 0};
    VT_STATUS(VMMC_ERR_INVALID, fm_channel_open(ep, 1, &bad, &x));
    VT_STATUS(VMMC_ERR_EXISTS, fm_channel_open(ep, chan_id[1], NULL, &x));
    VT_CHECK(strstr(vmmc_last_error(), "already open") != NULL);
    VT_STATUS(VMMC_ERR_EXISTS, fm_init(ep, NULL, &x));
    /* At most VMMC_FM_CHANNELS (16) open: 4 are, 12 more fit. */
    fm_t *more[12];
    for (int i = 0; i < 12; i++)
        VT_OK(fm_channel_open(ep, 30 + i, NULL, &more[i]));
    VT_STATUS(VMMC_ERR_AGAIN, fm_channel_open(ep, 29, NULL, &x));
    VT_CHECK(strstr(vmmc_last_error(), "VMMC_FM_CHANNELS") != NULL);
    for (int i = 0; i < 12; i++)
        VT_OK(fm_channel_close(more[i]));
    VT_OK(vmmc_barrier(ep));

    /* 1 */
    pthread_t t[NCH];
    for (int k = 0; k < NCH; k++)
        VT_CHECK(pthread_create(&t[k], NULL, phase1, &ch[k]) == 0);
    for (int k = 0; k < NCH; k++)
        VT_CHECK(pthread_join(t[k], NULL) == 0);
    for (int k = 0; k < NCH; k++) {
        VT_CHECK(fm_counter(ch[k].fm, "unknown_handler") == 0);
        VT_CHECK(fm_counter(ch[k].fm, "protocol_error") == 0);
        VT_CHECK(fm_counter(ch[k].fm, "msg_recv") == ch[k].next[0] + ch[k].next[1]);
    }
    printf("rank %d: 1: %d messages each way on 3 channels from 3 threads, all checked\n", me, N1);
    VT_OK(vmmc_barrier(ep));

    /* 2 */
    if (me == 0) {
        pthread_t ta, tc;
        VT_CHECK(pthread_create(&ta, NULL, phase2_a, NULL) == 0);
        VT_CHECK(pthread_create(&tc, NULL, phase2_c, NULL) == 0);
        double t0 = vt_now();
        while (fm_counter(ch[0].fm, "credit_wait") == 0 ||
               __atomic_load_n(&c_again, __ATOMIC_RELAXED) == 0) {
            usleep(1000);
            deadline_check(t0, "A blocked and C full");
        }
        uint8_t *tmp = malloc(MAXLEN);
        for (uint64_t i = 0; i < N2_B; i++)
            VT_OK(send_msg(&ch[1], peer, N1 + i, i % 7 == 0 ? 9000 : 300, tmp));
        free(tmp);
        send_ctl(2); /* B is through: release A and C */
        VT_CHECK(pthread_join(ta, NULL) == 0);
        VT_CHECK(pthread_join(tc, NULL) == 0);
        printf("rank 0: 2: A waited for credits (%llu times), C got AGAIN %llu times, while B "
               "flowed\n", (unsigned long long)fm_counter(ch[0].fm, "credit_wait"),
               (unsigned long long)c_again);
        wait_ctl(3);
    } else {
        uint64_t a0 = fm_counter(ch[0].fm, "msg_recv"), c0 = fm_counter(ch[2].fm, "msg_recv");
        double t0 = vt_now();
        while (ch[1].next[0] < N1 + N2_B) {
            VT_CHECK(fm_extract_wait(ch[1].fm, FM_EXTRACT_ALL, 100) >= 0);
            deadline_check(t0, "B while A and C are full");
        }
        /* Not one message of A or C was handled meanwhile. */
        VT_CHECK(fm_counter(ch[0].fm, "msg_recv") == a0 && fm_counter(ch[2].fm, "msg_recv") == c0);
        wait_ctl(2);
        while (ch[0].next[0] < N1 + N2_A || ch[2].next[0] < N1 + N2_C) {
            VT_CHECK(fm_extract(ch[0].fm, FM_EXTRACT_ALL) >= 0);
            VT_CHECK(fm_extract(ch[2].fm, FM_EXTRACT_ALL) >= 0);
            usleep(100);
            deadline_check(t0, "A and C after the stop");
        }
        printf("rank 1: 2: %d messages on B while A and C were full, then all of A and C\n",
               N2_B);
        send_ctl(3);
    }
    VT_OK(vmmc_barrier(ep));

    /* 3 */
    pthread_t tb;
    b_stop = b_final = 0;
    VT_CHECK(pthread_create(&tb, NULL, phase3_b, NULL) == 0);
    uint8_t *tmp = malloc(MAXLEN);
    if (me == 1) {
        VT_OK(fm_channel_close(ch[2].fm));
        send_ctl(31); /* C closed here */
        wait_ctl(32);
        open_chan(2, FM_NONBLOCK, 16 * 1024); /* alone: rank 0 has the old one open */
        VT_CHECK(fm_extract(ch[2].fm, FM_EXTRACT_ALL) == 0);
        expect_stale(&ch[2], 0, tmp);
        VT_CHECK(strstr(vmmc_last_error(), "close the channel too") != NULL);
        send_ctl(33);
        wait_ctl(34); /* rank 0 closed and reopened too */
        send_retry(&ch[2], 0, 0, 5000, tmp, NULL);
        double t0 = vt_now();
        while (ch[2].next[0] < 1) {
            VT_CHECK(fm_extract_wait(ch[2].fm, FM_EXTRACT_ALL, 100) >= 0);
            deadline_check(t0, "reopened C");
        }
        send_ctl(35);
    } else {
        wait_ctl(31);
        /* Seen in order after the close: refused at once, nothing sent. */
        uint64_t sent = fm_counter(ch[2].fm, "msg_sent");
        VT_STATUS(VMMC_ERR_STALE, send_msg(&ch[2], 1, N1 + N2_C, 10, tmp));
        VT_CHECK(strstr(vmmc_last_error(), "closed FM channel 200") != NULL);
        VT_STATUS(VMMC_ERR_STALE, fm_send(ch[2].fm, 1, 3, tmp, 8));
        VT_CHECK(fm_counter(ch[2].fm, "msg_sent") == sent);
        /* A still works. */
        VT_OK(send_msg(&ch[0], 0, ch[0].next[0], 100, tmp));
        VT_CHECK(fm_extract(ch[0].fm, FM_EXTRACT_ALL) == 1);
        send_ctl(32);
        wait_ctl(33);
        VT_STATUS(VMMC_ERR_STALE, send_msg(&ch[2], 1, N1 + N2_C, 10, tmp));
        VT_OK(fm_channel_close(ch[2].fm));
        open_chan(2, FM_NONBLOCK, 16 * 1024);
        send_ctl(34);
        double t0 = vt_now();
        while (ch[2].next[1] < 1) {
            VT_CHECK(fm_extract_wait(ch[2].fm, FM_EXTRACT_ALL, 100) >= 0);
            deadline_check(t0, "reopened C");
        }
        send_retry(&ch[2], 1, 0, 7000, tmp, NULL);
        wait_ctl(35);
    }
    b_stop = 1;
    VT_CHECK(pthread_join(tb, NULL) == 0);
    if (me == 1)
        printf("rank 1: 3: C closed, refused, reopened while %llu messages flowed on B\n",
               (unsigned long long)(ch[1].next[0] - N1 - N2_B));
    VT_OK(vmmc_barrier(ep));

    /* 4: channels 99 (blocking, open_wait 300 ms) and 100 (non-blocking),
     * open at rank 0 only at first. */
    fm_t *w99, *w100;
    static chan_t c99 = {.id = 99, .hid = 1}, c100 = {.id = 100, .hid = 1};
    static hreg_t r99 = {&c99, 1}, r100 = {&c100, 1};
    c99.buf[0] = c100.buf[0] = malloc(MAXLEN); /* (only rank 0 sends on them) */
    if (me == 0) {
        fm_params_t pa = {.field_mask = FM_PARAM_OPEN_WAIT, .open_wait_ms = 300};
        VT_OK(fm_channel_open(ep, 99, &pa, &w99));
        fm_params_t pb = {.field_mask = FM_PARAM_FLAGS, .flags = FM_NONBLOCK};
        VT_OK(fm_channel_open(ep, 100, &pb, &w100));
        c99.fm = w99;
        c100.fm = w100;
        double t0 = vt_now();
        int st;
        VT_STATUS(VMMC_ERR_TIMEOUT, send_msg(&c99, 1, 0, 100, tmp));
        VT_CHECK(vt_now() - t0 >= 0.25);
        VT_CHECK(strstr(vmmc_last_error(), "did not open FM channel 99") != NULL);
        for (int i = 0; i < 20; i++) {
            VT_STATUS(VMMC_ERR_AGAIN, send_msg(&c100, 1, 0, 100, tmp));
            usleep(10000);
        }
        send_ctl(41); /* now open them */
        /* Waits for the open (again, if rank 1 took more than 300 ms). */
        while ((st = send_msg(&c99, 1, 0, 100, tmp)) == VMMC_ERR_TIMEOUT)
            deadline_check(t0, "channel 99 at rank 1");
        VT_OK(st);
        send_retry(&c100, 1, 0, 9000, tmp, NULL);
        wait_ctl(42);
        VT_CHECK(fm_counter(w99, "msg_sent") == 1 && fm_counter(w100, "msg_sent") == 1);
    } else {
        wait_ctl(41);
        VT_OK(fm_channel_open(ep, 99, NULL, &w99));
        VT_OK(fm_channel_open(ep, 100, NULL, &w100));
        c99.fm = w99;
        c100.fm = w100;
        VT_CHECK(fm_register_handler(w99, 1, h_data, &r99) == 1);
        VT_CHECK(fm_register_handler(w100, 1, h_data, &r100) == 1);
        double t0 = vt_now();
        while (c99.next[0] < 1 || c100.next[0] < 1) {
            VT_CHECK(fm_extract(w99, FM_EXTRACT_ALL) >= 0);
            VT_CHECK(fm_extract(w100, FM_EXTRACT_ALL) >= 0);
            usleep(200);
            deadline_check(t0, "channels 99 and 100");
        }
        usleep(100000);
        VT_CHECK(fm_extract(w99, FM_EXTRACT_ALL) == 0 && fm_extract(w100, FM_EXTRACT_ALL) == 0);
        VT_CHECK(fm_counter(w99, "msg_recv") == 1 && fm_counter(w100, "msg_recv") == 1);
        for (int k = 0; k < NCH; k++)
            VT_CHECK(fm_counter(ch[k].fm, "unknown_handler") == 0);
        printf("rank 1: 4: a message for a channel not open here waited or failed clearly, and "
               "went through once it was\n");
        send_ctl(42);
    }
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_channel_close(w99));
    VT_OK(fm_channel_close(w100));
    for (int k = 0; k < NCH; k++)
        VT_OK(fm_channel_close(ch[k].fm));
    free(tmp);
    ft_close(ep, ctl);
    return 0;
}
