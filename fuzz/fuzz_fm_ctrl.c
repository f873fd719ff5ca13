/* libFuzzer target: FM's send side against a hostile receiver.
 *
 * Rank 0 sends (short messages, large ones from communication memory, which
 * are placed and offered for split copies, large ones from malloc memory)
 * while rank 1 (fuzz_fm_fake.h) writes what a receiver writes into our
 * memory: credit words, placement descriptors (keys into its memory, lying
 * lengths, pull lengths), the offer word (claims, ends, garbage). Anything is
 * fine except a crash, a sanitizer report, a hang, a write outside rank 1's
 * region or outside the ranges rank 1's keys grant, or a send call that
 * returns while rank 1 holds a claim on its buffer.
 *
 * Input: byte 0 mode (bit 0: rank 1's region is mapped), then records, each
 * applied when FM calls into the core (it signals, waits, checks liveness)
 * or between sends:
 *   0 v:u64                    credit word := v
 *   1 fix:u8 d:u64[4] len:u16  descriptor (seq last); fix bit 0: seq and
 *                              message number of the message being sent,
 *                              bit 1: a key of rank 1's for [d2, +len)
 *   2 v:u8                     offer word := CLAIMED (1), DONE (2) of the
 *                              current offer, or raw v
 *   3                          credit word := everything sent so far
 *   4 op:u8 n:u16              send: op 0 short, 1 from communication
 *                              memory, 2 from malloc memory; n bytes (scaled)
 *   5 off:u8 v:u64             raw write into our control lines */
#include <stdio.h>

#include "fm/fm_int.h"
#include "fuzz_fm_fake.h"

#define RING 4096u
#define PACKET 512u
#define BIG 49152u

static fm_t *fm;
static uint8_t granted[FAKE_PEER_MEM];

static void do_send(uint8_t op, uint16_t n16);

static int fake_step(void)
{
    uint8_t kind;
    if (!fake_take(&kind, 1))
        return 0;
    fm_peer_t *p = &fm->peers[1];
    _Atomic uint64_t *ctrl = (_Atomic uint64_t *)p->ctrl;
    switch (kind % 6) {
    case 0: {
        uint64_t v;
        if (!fake_take(&v, 8))
            return 0;
        atomic_store(&ctrl[FM_CREDIT_OFF / 8], v);
        break;
    }
    case 1: {
        uint8_t fix;
        uint64_t d[4];
        uint16_t len;
        if (!fake_take(&fix, 1) || !fake_take(d, sizeof d) || !fake_take(&len, 2))
            return 0;
        uint64_t w[FM_D_WORDS] = {0};
        w[FM_D_SEQ] = d[0];
        w[FM_D_MSG] = d[1];
        w[FM_D_OFF] = d[2];
        w[FM_D_LEN] = d[3];
        if (fix & 1) {
            w[FM_D_SEQ] = p->dseen + 1;
            w[FM_D_MSG] = (p->smsg & 0xffffffffu) | (d[1] & 0xffffffff00000000ull);
        }
        vmmc_mkey_t k;
        if (fix & 2) {
            fake_peer_key(&k, d[2] % FAKE_PEER_MEM, len);
        } else {
            k.opaque[0] = d[0] ^ d[1];
            k.opaque[1] = 1;
            k.opaque[2] = d[2];
            k.opaque[3] = d[3];
        }
        /* What a key of rank 1's grants, FM may write. */
        uint64_t ko = k.opaque[2], kl = k.opaque[3];
        if (k.opaque[0] == FAKE_KEY_MAGIC && ko < FAKE_PEER_MEM && kl <= FAKE_PEER_MEM - ko)
            memset(granted + ko, 1, kl);
        memcpy(&w[FM_D_KEY], &k, sizeof k);
        for (int i = 1; i < FM_D_WORDS; i++)
            atomic_store(&ctrl[FM_DESC_OFF / 8 + i], w[i]);
        atomic_store(&ctrl[FM_DESC_OFF / 8], w[FM_D_SEQ]);
        break;
    }
    case 2: {
        uint8_t v;
        if (!fake_take(&v, 1))
            return 0;
        uint64_t oseq = p->ss.oseq, w = v == 1   ? fm_oword(oseq, FM_O_CLAIMED)
                                        : v == 2 ? fm_oword(oseq, FM_O_DONE)
                                                 : v;
        atomic_store(&ctrl[FM_OFFER_OFF / 8], w);
        break;
    }
    case 3:
        atomic_store(&ctrl[FM_CREDIT_OFF / 8], p->head);
        break;
    case 4: {
        uint8_t op;
        uint16_t n;
        if (!fake_take(&op, 1) || !fake_take(&n, 2))
            return 0;
        if (!fake_in_fm)
            do_send(op, n);
        break;
    }
    case 5: {
        uint8_t off;
        uint64_t v;
        if (!fake_take(&off, 1) || !fake_take(&v, 8))
            return 0;
        atomic_store(&ctrl[(off % (FM_CTRL / 8))], v);
        break;
    }
    }
    return 1;
}

/* Rank 1 may still claim the offer of a send call that is running; once
 * the call returned, a claim it holds is a protocol violation FM reported,
 * or FM waited for its end. */
static int claim_held(void)
{
    uint64_t w = atomic_load((_Atomic uint64_t *)(fm->peers[1].ctrl + FM_OFFER_OFF));
    return (w & 3) == FM_O_CLAIMED && w >> 2 == fm->peers[1].ss.oseq && fm->peers[1].ss.oseq;
}

static uint8_t *cmem;
static uint8_t heap[BIG];

static void do_send(uint8_t op, uint16_t n16)
{
    if (fm->peers[1].sdead)
        return;
    int st;
    switch (op % 3) {
    case 0:
        st = fm_send(fm, 1, 1, heap, n16 % 700);
        break;
    default: {
        size_t n = 8192 + (size_t)n16 % (BIG - 8192 - 16); /* 16 + n fit in the buffer */
        const uint8_t *src = op % 3 == 1 ? cmem : heap;
        fm_stream_t *s;
        uint64_t offers = fm->peers[1].oseq;
        st = fm_begin_message(fm, 1, n + 16, 1, &s);
        if (st != VMMC_OK)
            break;
        st = fm_send_piece(s, src, 16);
        if (st == VMMC_OK)
            st = fm_send_piece(s, src + 16, n);
        /* The piece's call returned: rank 1 may read it no more. */
        if (st == VMMC_OK && fm->peers[1].oseq != offers && claim_held())
            abort();
        int st2 = fm_end_message(s);
        st = st ? st : st2;
        break;
    }
    }
    (void)st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    setenv("VMMC_FM_ZCOPY_WAIT", "2us", 0);
    memset(fake_peer_mem, 0xA5, sizeof fake_peer_mem);
    memset(granted, 0, sizeof granted);
    fm = fake_fm_open(data, size, FM_CTRL + RING, RING, PACKET);
    if (vmmc_mem_alloc(&fake_ep, BIG, (void **)&cmem) != VMMC_OK)
        abort();
    while (fake_step())
        ;
    /* Only what rank 1's keys granted may have been written. */
    for (size_t i = 0; i < FAKE_PEER_MEM; i++)
        if (!granted[i] && fake_peer_mem[i] != 0xA5) {
            fprintf(stderr, "byte %zu of rank 1's memory written without a key for it\n", i);
            abort();
        }
    fake_alive = 0;
    vmmc_mem_free(&fake_ep, cmem);
    fake_fm_close(fm);
    return 0;
}
