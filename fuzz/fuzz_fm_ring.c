/* libFuzzer target: FM's receive side against a hostile sender.
 *
 * Rank 1 (fuzz_fm_fake.h) writes our ring for it and its control lines,
 * and its own region (where our descriptors and its offer word live): packet
 * headers and payloads, SKIP/ZC/DIRECT/OFFER/PULLED flags, lying lengths,
 * offers with forged keys, credit requests. Rank 0 extracts with handlers that
 * read in every way a handler may (whole, in pieces, into communication
 * memory so that placement and split copies start, a prefix only, nothing),
 * and runs the progress hook. Anything is fine except a crash, a sanitizer
 * report, a hang, or an FM that cannot be finalized once rank 1 is dead.
 *
 * Input: byte 0 mode (bit 0: rank 1's region is mapped), then records
 *   0 off:u16 len:u8 bytes   raw write into our ring
 *   1 off:u8  len:u8 bytes   raw write into our control lines for rank 1
 *   2 off:u16 len:u8 bytes   raw write into rank 1's region for us
 *   3 id:u8 flags:u8 len:u16 n:u8 bytes   a packet where a sender would put
 *                            it (head, seq kept here; SKIP added when needed);
 *                            payload n bytes, then, with OFFER, an offer whose
 *                            key names rank 1's memory when id's top bit is set
 *   4 budget:u16             fm_extract(budget; 0: all)
 *   5                        progress hook (poll, arm)
 *   6 v:u8                   offer word in rank 1's region := v (0 OFFERED
 *                            for the last offer written, else raw)
 * Records are also applied one at a time whenever FM calls into the core. */
#include <stdio.h>

#include "fm/fm_int.h"
#include "fuzz_fm_fake.h"

#define RING 4096u
#define PACKET 512u

static const uint8_t *in;
static size_t in_len, in_pos;
static fm_t *fm;
static uint64_t s_head;
static uint32_t s_seq;
static uint64_t s_oseq;
static int in_fm; /* FM is running: only memory writes from fake_turn */

static int take(void *dst, size_t n)
{
    if (in_len - in_pos < n)
        return 0;
    memcpy(dst, in + in_pos, n);
    in_pos += n;
    return 1;
}

static void put_packet(uint16_t id, uint8_t flags, uint16_t len, uint8_t n)
{
    fm_peer_t *p = &fm->peers[1];
    unsigned fl = flags & ~FM_F_SKIP;
    uint64_t slot = fm_slot(len, fl);
    if (slot > RING)
        slot = RING;
    uint64_t off = s_head & (RING - 1);
    if (RING - off < slot) { /* a SKIP to the ring's end, as a sender would */
        uint64_t w[2] = {(uint64_t)FM_F_SKIP << 16, s_seq};
        memcpy(p->ring + off, w, sizeof w);
        s_head += RING - off;
        s_seq = fm_seq_next(s_seq);
        off = 0;
    }
    char *h = p->ring + off;
    size_t room = RING - off - FM_HDR;
    size_t c = n < room ? n : room;
    if (in_len - in_pos < c)
        c = in_len - in_pos;
    memcpy(h + FM_HDR, in + in_pos, c);
    in_pos += c;
    if ((fl & FM_F_OFFER) && FM_HDR + ((len + 7u) & ~7u) + FM_OFFER_BYTES <= RING - off) {
        char *o = h + FM_HDR + ((len + 7u) & ~7u);
        uint64_t ooff = len, seq = ++s_oseq;
        vmmc_mkey_t k;
        fake_peer_key(&k, (uint64_t)id * 977, 4096 + (uint64_t)n * 97);
        if (!(id & 0x8000))
            take(&k, sizeof k); /* forged */
        memcpy(o, &ooff, 8);
        memcpy(o + 8, &seq, 8);
        memcpy(o + 16, &k, sizeof k);
        uint64_t w = fm_oword(seq, FM_O_OFFERED);
        memcpy(fake_peer_region + FM_OFFER_OFF, &w, 8);
    }
    uint64_t w0 = (uint64_t)(id & 0x7fff) | ((uint64_t)fl << 16);
    uint64_t w1 = (uint64_t)s_seq | ((uint64_t)len << 32);
    memcpy(h, &w0, 8);
    __atomic_store_n((uint64_t *)(h + 8), w1, __ATOMIC_RELEASE);
    s_head += slot;
    s_seq = fm_seq_next(s_seq);
}

/* Apply one record; returns 0 at the end of the input. */
static int step_input(void)
{
    uint8_t kind;
    if (!take(&kind, 1))
        return 0;
    fm_peer_t *p = &fm->peers[1];
    switch (kind % 7) {
    case 0: {
        uint16_t off;
        uint8_t len;
        if (!take(&off, 2) || !take(&len, 1))
            return 0;
        off %= RING;
        size_t c = len < RING - off ? len : RING - off;
        take(p->ring + off, c);
        break;
    }
    case 1: {
        uint8_t off, len;
        if (!take(&off, 1) || !take(&len, 1))
            return 0;
        off %= FM_CTRL;
        size_t c = len < FM_CTRL - off ? len : FM_CTRL - off;
        take(p->ctrl + off, c);
        break;
    }
    case 2: {
        uint16_t off;
        uint8_t len;
        if (!take(&off, 2) || !take(&len, 1))
            return 0;
        off %= fake_peer_region_len;
        size_t c = len < fake_peer_region_len - off ? len : fake_peer_region_len - off;
        take(fake_peer_region + off, c);
        break;
    }
    case 3: {
        uint16_t id, len;
        uint8_t flags, n;
        if (!take(&id, 2) || !take(&flags, 1) || !take(&len, 2) || !take(&n, 1))
            return 0;
        put_packet(id, flags, len, n);
        break;
    }
    case 4: {
        uint16_t b;
        if (!take(&b, 2))
            return 0;
        if (!in_fm)
            fm_extract(fm, b ? b : FM_EXTRACT_ALL);
        break;
    }
    case 5:
        if (!in_fm && fake_poll) {
            fake_poll(fake_hook_arg);
            fake_arm(fake_hook_arg);
        }
        break;
    case 6: {
        uint8_t v;
        if (!take(&v, 1))
            return 0;
        uint64_t w = v ? v : fm_oword(s_oseq, FM_O_OFFERED);
        memcpy(fake_peer_region + FM_OFFER_OFF, &w, 8);
        break;
    }
    }
    return 1;
}

static void fake_turn(void)
{
    in_fm++;
    if (!step_input())
        fake_alive = 0;
    in_fm--;
}

/* Handlers: every way of reading. */
static uint8_t *cmem; /* communication memory */
static uint8_t heap[20000];

static void h_all_mem(fm_stream_t *s, int sender, void *arg)
{
    (void)sender, (void)arg;
    while (fm_receive(cmem, s, 16384) == 16384)
        ;
}
static void h_pieces(fm_stream_t *s, int sender, void *arg)
{
    (void)sender, (void)arg;
    while (fm_receive(heap, s, 100) == 100)
        ;
}
static void h_prefix(fm_stream_t *s, int sender, void *arg)
{
    (void)sender, (void)arg;
    uint8_t b[8];
    fm_receive(b, s, sizeof b);
}
static void h_header_then_mem(fm_stream_t *s, int sender, void *arg)
{
    (void)sender, (void)arg;
    uint8_t b[24];
    if (fm_receive(b, s, sizeof b) == (ssize_t)sizeof b)
        fm_receive(cmem + 64, s, 12000);
}
static void h_nothing(fm_stream_t *s, int sender, void *arg) { (void)s, (void)sender, (void)arg; }
static void h_overask(fm_stream_t *s, int sender, void *arg)
{
    (void)sender, (void)arg;
    fm_receive(heap, s, sizeof heap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once) {
        once = 1;
        setenv("VMMC_LOG_LEVEL", "error", 0);
    }
    if (size < 1)
        return 0;
    in = data;
    in_len = size;
    in_pos = 1;
    s_head = 0;
    s_seq = 1;
    s_oseq = 0;
    fake_reset(FM_CTRL + RING, data[0] & 1);
    fm_params_t pa = {.field_mask = FM_PARAM_RING_SIZE | FM_PARAM_PACKET_SIZE |
                                    FM_PARAM_MAX_HANDLERS,
                      .ring_size = RING, .packet_size = PACKET, .max_handlers = 8};
    if (fm_init(&fake_ep, &pa, &fm) != VMMC_OK)
        abort();
    if (fake_peer_imports() != VMMC_OK) /* rank 1's ring here */
        abort();
    if (vmmc_mem_alloc(&fake_ep, 16384 + 64, (void **)&cmem) != VMMC_OK)
        abort();
    fm_handler_t hs[] = {h_all_mem, h_pieces, h_prefix, h_header_then_mem, h_nothing, h_overask};
    for (int i = 0; i < 6; i++)
        fm_register_handler(fm, i, hs[i], NULL);
    while (step_input())
        ;
    fm_extract(fm, FM_EXTRACT_ALL);
    /* Rank 1 dies: a handler suspended in its message gets the error, and
     * FM must finalize. */
    fake_alive = 0;
    fm->peers[1].broken = 1;
    fm_rlock(fm);
    fm_dead_check(fm);
    fm_runlock(fm);
    vmmc_mem_free(&fake_ep, cmem);
    if (fm_finalize(fm) != VMMC_OK) {
        fprintf(stderr, "fm_finalize: %s\n", vmmc_last_error());
        abort();
    }
    return 0;
}
