/* Rings only for peers that talk: 6 ranks open channel 0 (fm_init) and
 * channel 7 (fm_channel_open); only ranks 0 and 1 exchange messages (100
 * each way on each channel, every byte and the order checked). Then on each
 * channel ranks 0 and 1 hold exactly one ring for a peer (each other's) and
 * ranks 2..5 none, besides the ring every channel makes for itself at open,
 * by FM's counters "rings" and "ring_bytes". Then ranks 2 and 3 start
 * talking on channel 7 while 0 and 1 still do: they get one ring each there,
 * none on channel 0, and nobody else gains one. Each rank prints what its
 * channels hold and how much address space opening and using them took. */
#include <stdio.h>
#include <string.h>

#include "fm_test.h"

#define M 100
#define LEN 200

static int got[2];

static void h(fm_stream_t *s, int sender, void *arg)
{
    int ch = (int)(intptr_t)arg;
    uint8_t b[LEN];
    VT_CHECK(fm_receive(b, s, sizeof b) == LEN);
    for (int i = 0; i < LEN; i++)
        VT_CHECK(b[i] == (uint8_t)(got[ch] * 7 + i + sender + ch));
    got[ch]++;
}

static long vm_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl))
            v = atol(line + kl + 1);
    if (f)
        fclose(f);
    return v;
}

/* Send M messages to @dest on channel @ch, then take M from it. */
static void exchange(fm_t *fm, int ch, int me, int dest, int first)
{
    uint8_t b[LEN];
    for (int turn = 0; turn < 2; turn++) {
        if ((turn == 0) == first) {
            for (int k = 0; k < M; k++) {
                for (int i = 0; i < LEN; i++)
                    b[i] = (uint8_t)(k * 7 + i + me + ch);
                VT_OK(fm_send(fm, dest, 1, b, LEN));
            }
        } else {
            double t0 = vt_now();
            while (got[ch] < M) {
                VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, 100) >= 0);
                VT_CHECK(vt_now() - t0 < 60);
            }
            got[ch] = 0;
        }
    }
}

/* @rings: rings for peers; the channel's own ring for itself comes on top. */
static void expect(fm_t *fm, const char *what, int me, uint64_t rings)
{
    uint64_t n = fm_counter(fm, "rings"), bytes = fm_counter(fm, "ring_bytes");
    if (n != rings + 1)
        VT_FAIL("rank %d, %s: %llu rings, expected %llu (its own and %llu for peers)", me, what,
                (unsigned long long)n, (unsigned long long)rings + 1, (unsigned long long)rings);
    VT_CHECK(bytes % n == 0 && bytes / n > 0);
    VT_CHECK(fm_counter(fm, "ring_refused") == 0);
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 6)
        VT_SKIP("needs 6 ranks");
    int me = vmmc_rank(ep);
    long vm0 = vm_kib("VmSize:"), rss0 = vm_kib("VmRSS:");
    fm_t *fm[2];
    VT_OK(fm_init(ep, NULL, &fm[0]));
    VT_OK(fm_channel_open(ep, 7, NULL, &fm[1]));
    long vm1 = vm_kib("VmSize:");
    for (int c = 0; c < 2; c++) {
        VT_CHECK(fm_register_handler(fm[c], 1, h, (void *)(intptr_t)c) == 1);
        expect(fm[c], "after open", me, 0);
    }
    VT_OK(vmmc_barrier(ep));
    if (me < 2)
        for (int c = 0; c < 2; c++)
            exchange(fm[c], c, me, 1 - me, me == 0);
    VT_OK(vmmc_barrier(ep));
    long vm2 = vm_kib("VmSize:"), rss2 = vm_kib("VmRSS:");
    for (int c = 0; c < 2; c++)
        expect(fm[c], c ? "channel 7" : "channel 0", me, me < 2 ? 1 : 0);
    printf("rank %d: channel 0 %llu rings of %llu bytes, channel 7 %llu rings; address space "
           "+%ld KiB at open, +%ld KiB after the exchange (RSS +%ld KiB)\n", me,
           (unsigned long long)fm_counter(fm[0], "rings"),
           (unsigned long long)fm_counter(fm[0], "ring_bytes"),
           (unsigned long long)fm_counter(fm[1], "rings"), vm1 - vm0, vm2 - vm0, rss2 - rss0);
    fflush(stdout);
    VT_OK(vmmc_barrier(ep));
    /* A new pair starts on channel 7 while the first one goes on. */
    if (me < 2)
        exchange(fm[1], 1, me, 1 - me, me == 0);
    else if (me < 4)
        exchange(fm[1], 1, me, 5 - me, me == 2);
    VT_OK(vmmc_barrier(ep));
    expect(fm[0], "channel 0 at the end", me, me < 2 ? 1 : 0);
    expect(fm[1], "channel 7 at the end", me, me < 4 ? 1 : 0);
    VT_OK(vmmc_barrier(ep));
    VT_OK(fm_channel_close(fm[1]));
    VT_OK(fm_finalize(fm[0]));
    VT_OK(vmmc_finalize(ep));
    return 0;
}
