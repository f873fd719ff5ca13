/* fork() with FM channels: two ranks stream messages to each other on
 * fm_init()'s channel (every byte checked), with a second channel from
 * fm_channel_open() beside it. Half-way, rank 0 opens a message to rank 1,
 * sends part of it, and forks from inside a handler (a message from rank 1
 * in progress). The child, which has no rings (they are not mapped in a
 * child of fork()), calls every kind of FM call on the inherited channels:
 * each fails with VMMC_ERR_ENDPOINT and a message naming fork(), never a
 * crash; closing the copies succeeds. Meanwhile the parent finishes the open
 * message and both ranks go on: every message arrives once, in order, whole,
 * and the second channel still works. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fm_test.h"

enum { H_MSG = 7, H_ASK = 8, H_TRIGGER = 9, H_CH = 3 };
#define MAXLEN 60000u
#define TRIGGER_LEN 20000u

static int me, peer, N;
static fm_t *fm, *ch;
static vmmc_ep_t *ep;
static uint64_t expect;          /* next message number from the peer */
static uint8_t rbuf[MAXLEN + 8];
static fm_stream_t *open_s;      /* rank 0: the message open at fork() */
static int want_trigger;         /* rank 1: rank 0 asked for the message it forks in */
static pid_t kid = -1;
static int ch_got;

static size_t len_of(uint64_t seq)
{
    return seq % 7 == 3 ? 20000 + (size_t)(seq * 37 % 40000) : (size_t)(seq * 131 % 3000);
}

#define REFUSED(expr)                                                                  \
    do {                                                                               \
        long r_ = (long)(expr);                                                        \
        if (r_ != VMMC_ERR_ENDPOINT || !strstr(vmmc_last_error(), "fork()"))           \
            VT_FAIL("in the child, %s returned %ld (%s), expected VMMC_ERR_ENDPOINT",  \
                    #expr, r_, vmmc_last_error());                                     \
    } while (0)

static void h_msg(fm_stream_t *s, int sender, void *arg);

/* In the child, inside the handler of @rs (rank 1's trigger message). */
static void child(fm_stream_t *rs)
{
    uint8_t b[256] = {0};
    fm_stream_t *s2;
    const char *name;
    uint64_t v;
    fm_t *x;
    REFUSED(fm_receive(b, rs, 100));
    REFUSED(fm_receive(b, rs, 1));
    REFUSED(fm_send(fm, peer, H_MSG, b, 10));
    REFUSED(fm_send(fm, peer, H_MSG, b, sizeof b));
    REFUSED(fm_send(fm, me, H_MSG, b, 10)); /* to itself: its own ring is gone too */
    REFUSED(fm_send_4(fm, peer, H_MSG, 1, 2, 3, 4));
    REFUSED(fm_begin_message(fm, peer, 100, H_MSG, &s2));
    REFUSED(fm_send_piece(open_s, b, 10)); /* the message open at fork() */
    REFUSED(fm_end_message(open_s));
    REFUSED(fm_send(ch, peer, H_CH, b, 10));
    REFUSED(fm_begin_message(ch, peer, 10, H_CH, &s2));
    REFUSED(fm_extract(fm, FM_EXTRACT_ALL));
    REFUSED(fm_extract(ch, FM_EXTRACT_ALL));
    REFUSED(fm_extract_wait(fm, FM_EXTRACT_ALL, 10));
    REFUSED(fm_extract_wait(ch, FM_EXTRACT_ALL, -1));
    REFUSED(fm_register_handler(fm, FM_ANY_ID, h_msg, NULL));
    REFUSED(fm_register_handler(ch, 2, h_msg, NULL));
    REFUSED(fm_nodeid(fm));
    REFUSED(fm_numnodes(fm));
    REFUSED(fm_channel_id(ch));
    REFUSED(fm_counter_get(fm, 0, &name, &v));
    /* A new channel on the inherited endpoint: the core refuses it. */
    REFUSED(fm_channel_open(ep, 5, NULL, &x));
    REFUSED(fm_channel_open(ep, H_CH, NULL, &x));
    REFUSED(fm_init(ep, NULL, &x));
    /* Dropping the copies: nothing to tell anyone. */
    VT_OK(fm_channel_close(ch));
    VT_OK(fm_finalize(fm));
    VT_OK(vmmc_finalize(ep));
    exit(0);
}

static void h_msg(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    uint64_t seq;
    VT_CHECK(sender == peer);
    VT_CHECK(fm_receive(&seq, s, 8) == 8);
    if (seq != expect)
        VT_FAIL("rank %d: message %llu arrived, expected %llu", me, (unsigned long long)seq,
                (unsigned long long)expect);
    size_t len = len_of(seq), off = 0;
    while (off < len) {
        size_t piece = len - off < 1000 ? len - off : 1000;
        VT_CHECK(fm_receive(rbuf + off, s, piece) == (ssize_t)piece);
        off += piece;
    }
    VT_CHECK(fm_receive(rbuf, s, 1) == 0);
    size_t bad = ft_check(rbuf, len, peer, seq, 0);
    if (bad != (size_t)-1)
        VT_FAIL("rank %d: byte %zu of message %llu wrong", me, bad, (unsigned long long)seq);
    expect++;
}

static void h_ask(fm_stream_t *s, int sender, void *arg)
{
    (void)s, (void)sender, (void)arg;
    want_trigger = 1;
}

/* Rank 0: fork in the middle of reading this message. */
static void h_trigger(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    VT_CHECK(fm_receive(rbuf, s, 64) == 64);
    fflush(stdout);
    fflush(stderr);
    kid = fork();
    VT_CHECK(kid >= 0);
    if (kid == 0)
        child(s);
    VT_CHECK(fm_receive(rbuf + 64, s, TRIGGER_LEN - 64) == (ssize_t)(TRIGGER_LEN - 64));
    VT_CHECK(ft_check(rbuf, TRIGGER_LEN, sender, 999999, 0) == (size_t)-1);
}

static void h_ch(fm_stream_t *s, int sender, void *arg)
{
    (void)arg;
    uint32_t w[4];
    VT_CHECK(fm_receive(w, s, sizeof w) == (ssize_t)sizeof w);
    VT_CHECK(w[0] == (uint32_t)sender && w[3] == 0xc3);
    ch_got++;
}

/* Everything a rank does while it waits. */
static void serve(int ms)
{
    int r = fm_extract_wait(fm, FM_EXTRACT_ALL, ms);
    VT_CHECK(r >= 0);
    if (want_trigger) {
        want_trigger = 0;
        static uint8_t t[TRIGGER_LEN];
        ft_fill(t, sizeof t, me, 999999);
        VT_OK(fm_send(fm, peer, H_TRIGGER, t, sizeof t));
    }
    if (kid > 0) {
        int st;
        pid_t w = waitpid(kid, &st, WNOHANG);
        if (w == kid) {
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                VT_FAIL("the child %s %d", WIFEXITED(st) ? "exited with status" : "died of signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            kid = 0; /* reaped */
        }
        VT_CHECK(w >= 0);
    }
}

static void send_msg(uint64_t seq, const uint8_t *body)
{
    size_t len = len_of(seq);
    fm_stream_t *s;
    int fork_here = me == 0 && seq == (uint64_t)N / 2;
    if (fork_here)
        VT_OK(fm_send(fm, peer, H_ASK, "?", 1)); /* (one open message per peer) */
    VT_OK(fm_begin_message(fm, peer, 8 + len, H_MSG, &s));
    VT_OK(fm_send_piece(s, &seq, 8));
    VT_OK(fm_send_piece(s, body, len / 2));
    if (fork_here) {
        /* Rank 1's trigger message forks this process in its handler. */
        open_s = s;
        double t0 = vt_now();
        while (kid < 0 && vt_now() - t0 < 60)
            serve(100);
        VT_CHECK(kid >= 0); /* forked (the child may be reaped already: 0) */
    }
    VT_OK(fm_send_piece(s, body + len / 2, len - len / 2));
    VT_OK(fm_end_message(s));
}

int main(int argc, char **argv)
{
    ft_open(&ep, &fm, NULL);
    me = fm_nodeid(fm);
    VT_CHECK(fm_numnodes(fm) == 2);
    peer = 1 - me;
    N = argc > 1 ? atoi(argv[1]) : 400;
    VT_OK(fm_channel_open(ep, H_CH, NULL, &ch));
    VT_CHECK(fm_register_handler(fm, H_MSG, h_msg, NULL) == H_MSG);
    VT_CHECK(fm_register_handler(fm, H_ASK, h_ask, NULL) == H_ASK);
    VT_CHECK(fm_register_handler(fm, H_TRIGGER, h_trigger, NULL) == H_TRIGGER);
    VT_CHECK(fm_register_handler(ch, H_CH, h_ch, NULL) == H_CH);
    VT_OK(vmmc_barrier(ep));
    /* The second channel in use before the fork. */
    VT_OK(fm_send_4(ch, peer, H_CH, (uint32_t)me, 0, 0, 0xc3));

    static uint8_t body[MAXLEN];
    for (int i = 0; i < N; i++) {
        ft_fill(body, len_of((uint64_t)i), me, (uint64_t)i);
        send_msg((uint64_t)i, body);
        VT_CHECK(fm_extract(fm, FM_EXTRACT_ALL) >= 0);
    }
    double t0 = vt_now();
    while ((expect < (uint64_t)N || kid > 0) && vt_now() - t0 < 60)
        serve(50);
    if (kid > 0)
        kill(kid, SIGKILL);
    printf("rank %d: %llu of %d messages received whole and in order\n", me,
           (unsigned long long)expect, N);
    VT_CHECK(expect == (uint64_t)N && kid <= 0);
    if (me == 0)
        VT_CHECK(kid == 0); /* the child ran and passed */
    /* The second channel after the fork. */
    VT_OK(fm_send_4(ch, peer, H_CH, (uint32_t)me, 1, 0, 0xc3));
    t0 = vt_now();
    while (ch_got < 2 && vt_now() - t0 < 60)
        VT_CHECK(fm_extract_wait(ch, FM_EXTRACT_ALL, 50) >= 0);
    VT_CHECK(ch_got == 2);
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_channel_close(ch));
    ft_close(ep, fm);
    return 0;
}
