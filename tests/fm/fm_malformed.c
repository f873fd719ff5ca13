/* Malformed packets from a peer: rank 1 writes bad headers straight into its
 * ring at rank 0 (through its own import of that ring, bypassing FM). Rank 0
 * must report them (protocol_error counter, warning), ignore that sender,
 * and keep delivering rank 2's messages intact. Each case runs on a fresh
 * FM instance. */
#include "fm/fm_int.h"
#include "fm_test.h"

#define GOOD 20
static uint64_t good_seen;

static void h_good(fm_stream_t *s, int sender, void *arg)
{
    uint64_t v[4];
    VT_CHECK(sender == 2);
    VT_CHECK(fm_receive(v, s, sizeof v) == (ssize_t)sizeof v);
    VT_CHECK(v[0] == good_seen && v[1] == ~good_seen);
    good_seen++;
}

static void h_any(fm_stream_t *s, int sender, void *arg)
{
    uint8_t b[256];
    while (fm_receive(b, s, sizeof b) == (ssize_t)sizeof b)
        ;
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    if (vmmc_size(ep) != 3)
        VT_SKIP("needs 3 ranks");
    int me = vmmc_rank(ep);
    unsigned long long rng = 4242;
    for (int kase = 0; kase < 7; kase++) {
        fm_t *fm;
        fm_params_t pa = {.field_mask = FM_PARAM_RING_SIZE, .ring_size = 64 * 1024};
        VT_OK(fm_init(ep, &pa, &fm));
        VT_CHECK(fm_register_handler(fm, 1, h_good, NULL) == 1);
        for (int h = 2; h < 256; h++)
            VT_CHECK(fm_register_handler(fm, h, h_any, NULL) == h);
        VT_OK(vmmc_barrier(ep));
        if (me == 1) {
            vmmc_proxy_t *px;
            VT_OK(vmmc_import(ep, 0, "fm.ring.1", 5000, &px));
            uint64_t w[2];
            switch (kase) {
            case 0: /* longer than the ring */
                w[0] = 1 | ((uint64_t)(FM_F_FIRST | FM_F_LAST) << 16);
                w[1] = 1 | ((uint64_t)0x7fffffff << 32);
                break;
            case 1: /* a continuation packet with no message open */
                w[0] = 1;
                w[1] = 1 | ((uint64_t)8 << 32);
                break;
            case 2: /* runs past the end of the ring by one line */
                w[0] = 1 | ((uint64_t)(FM_F_FIRST | FM_F_LAST) << 16);
                w[1] = 1 | ((uint64_t)(64 * 1024) << 32);
                break;
            case 3: /* a message that starts with placed data */
                w[0] = 2 | ((uint64_t)(FM_F_FIRST | FM_F_DIRECT) << 16);
                w[1] = 1 | ((uint64_t)4096 << 32);
                break;
            case 4: { /* placed data that no descriptor asked for */
                uint64_t d[2] = {2 | ((uint64_t)FM_F_DIRECT << 16), 2 | ((uint64_t)4096 << 32)};
                VT_OK(vmmc_send(px, FM_CTRL + 64, d, sizeof d, 0));
                w[0] = 2 | ((uint64_t)(FM_F_FIRST | FM_F_ZC) << 16);
                w[1] = 1;
                break;
            }
            case 6: { /* a split copy nobody asked for: a first packet offering
                       * a forged key, then bytes "pulled" by the receiver */
                uint8_t offer[FM_OFFER_BYTES];
                unsigned long long r6 = 66;
                for (size_t i = 0; i < sizeof offer; i++)
                    offer[i] = (uint8_t)vt_rand(&r6);
                VT_OK(vmmc_send(px, FM_CTRL + FM_HDR, offer, sizeof offer, 0));
                uint64_t d[2] = {2 | ((uint64_t)(FM_F_DIRECT | FM_F_PULLED) << 16),
                                 2 | ((uint64_t)4096 << 32)};
                VT_OK(vmmc_send(px, FM_CTRL + fm_slot(0, FM_F_OFFER), d, sizeof d, 0));
                w[0] = 2 | ((uint64_t)(FM_F_FIRST | FM_F_ZC | FM_F_OFFER) << 16);
                w[1] = 1;
                break;
            }
            default: /* random flags, handler and length, valid sequence */
                w[0] = vt_rand(&rng);
                w[1] = 1 | (vt_rand(&rng) & 0xffffffff00000000ull);
                break;
            }
            static uint8_t junk[64 * 1024];
            for (size_t i = 0; i < sizeof junk; i++)
                junk[i] = (uint8_t)vt_rand(&rng);
            if (kase != 4 && kase != 6)
                VT_OK(vmmc_send(px, FM_CTRL + FM_HDR, junk, sizeof junk - FM_HDR, 0));
            VT_OK(vmmc_send(px, FM_CTRL, w, sizeof w, 0));
            VT_OK(vmmc_barrier(ep)); /* A: the bad packet is in place */
            VT_OK(vmmc_unimport(px));
        } else if (me == 2) {
            for (uint64_t i = 0; i < GOOD; i++) {
                uint64_t v[4] = {good_seen + i, ~(good_seen + i), 0, 0};
                VT_OK(fm_send(fm, 0, 1, v, sizeof v));
            }
            VT_OK(vmmc_barrier(ep)); /* A */
        } else {
            VT_OK(vmmc_barrier(ep)); /* A: everything below is already in the rings */
            uint64_t want = (uint64_t)(kase + 1) * GOOD;
            while (good_seen < want ||
                   (kase != 5 && fm_counter(fm, "protocol_error") == 0))
                VT_CHECK(fm_extract_wait(fm, FM_EXTRACT_ALL, 1000) >= 0);
            if (kase != 5)
                VT_CHECK(fm_counter(fm, "protocol_error") == 1);
            VT_CHECK(fm_extract(fm, FM_EXTRACT_ALL) >= 0);
            /* The random header (fixed seed) must have been met one way or another. */
            if (kase == 5)
                VT_CHECK(fm_counter(fm, "protocol_error") + fm_counter(fm, "unknown_handler") +
                             fm_counter(fm, "msg_recv") > GOOD);
            printf("case %d: protocol errors %llu, unknown handler %llu, %llu good messages\n",
                   kase, (unsigned long long)fm_counter(fm, "protocol_error"),
                   (unsigned long long)fm_counter(fm, "unknown_handler"),
                   (unsigned long long)good_seen);
        }
        if (me != 0)
            good_seen += GOOD;
        VT_OK(vmmc_barrier(ep));
        VT_OK(fm_finalize(fm));
        VT_OK(vmmc_barrier(ep));
    }
    VT_OK(vmmc_finalize(ep));
    return 0;
}
