/* CRC32C: RFC 3720 (iSCSI) appendix B.4 vectors, the classic check value,
 * hardware (three interleaved chains, AVX-512 folding) and table
 * implementations agreeing, copying variants included, at
 * every length and alignment around the interleaving's boundaries, and
 * incremental use. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include "transport/udp/crc32c.h"
#include "vtest.h"

typedef uint32_t (*fn_t)(uint32_t, const void *, size_t);

static void vectors(const char *name, fn_t f)
{
    uint8_t buf[48];
    memset(buf, 0, 32);
    if (f(0, buf, 32) != 0x8A9136AAu)
        VT_FAIL("%s: 32 zero bytes gave %08x", name, f(0, buf, 32));
    memset(buf, 0xff, 32);
    if (f(0, buf, 32) != 0x62A8AB43u)
        VT_FAIL("%s: 32 0xff bytes gave %08x", name, f(0, buf, 32));
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    if (f(0, buf, 32) != 0x46DD794Eu)
        VT_FAIL("%s: incrementing bytes gave %08x", name, f(0, buf, 32));
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    if (f(0, buf, 32) != 0x113FDB5Cu)
        VT_FAIL("%s: decrementing bytes gave %08x", name, f(0, buf, 32));
    /* An iSCSI SCSI Read (10) command PDU. */
    static const uint8_t pdu[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    if (f(0, pdu, 48) != 0xD9963A56u)
        VT_FAIL("%s: iSCSI read PDU gave %08x", name, f(0, pdu, 48));
    if (f(0, "123456789", 9) != 0xE3069283u)
        VT_FAIL("%s: \"123456789\" gave %08x", name, f(0, "123456789", 9));
    if (f(0, buf, 0) != 0)
        VT_FAIL("%s: empty buffer", name);
}

int main(void)
{
    vectors("table", vmmc_crc32c_sw);
    vectors("dispatch", vmmc_crc32c);
    int hw = vmmc_crc32c_hw_available();
    if (hw)
        vectors("sse4.2", vmmc_crc32c_hw);
    int wide = vmmc_crc32c_wide_available();
    if (wide)
        vectors("avx512", vmmc_crc32c_wide);
    printf("sse4.2 crc32 instruction: %s; avx-512 vpclmulqdq folding: %s\n",
           hw ? "used" : "not available, table used", wide ? "used" : "not available");

    /* Random buffers at every alignment and length: all agree, pieces too. */
    unsigned long long rng = 42;
    static uint8_t big[70000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)vt_rand(&rng);
    for (int t = 0; t < 2000; t++) {
        size_t off = vt_rand(&rng) % 64, len = vt_rand(&rng) % (t < 1000 ? 100 : 65536);
        uint32_t a = vmmc_crc32c_sw(0, big + off, len);
        if (hw && vmmc_crc32c_hw(0, big + off, len) != a)
            VT_FAIL("hw and table differ at off %zu len %zu", off, len);
        size_t cut = len ? vt_rand(&rng) % len : 0;
        uint32_t b = vmmc_crc32c(vmmc_crc32c(0, big + off, cut), big + off + cut, len - cut);
        if (b != a)
            VT_FAIL("incremental CRC differs at off %zu len %zu cut %zu", off, len, cut);
    }
    /* Every length across the lane boundaries of the interleaved hardware
     * path (rounds of 3 x 128 and 3 x 2048 bytes, the tail after them), at
     * several alignments, continuing a non-zero CRC: hardware == table. */
    if (hw) {
        static const size_t offs[] = {0, 1, 3, 7, 8, 13};
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
            for (size_t len = 0; len <= 2 * 3 * 2048 + 3 * 128 + 40; len++) {
                uint32_t seed = (uint32_t)(len * 2654435761u);
                uint32_t a = vmmc_crc32c_sw(seed, big + offs[o], len);
                uint32_t h = vmmc_crc32c_hw(seed, big + offs[o], len);
                if (a != h)
                    VT_FAIL("hw %08x and table %08x differ at off %zu len %zu", h, a, offs[o],
                            len);
                if (wide && (h = vmmc_crc32c_wide(seed, big + offs[o], len)) != a)
                    VT_FAIL("avx512 %08x and table %08x differ at off %zu len %zu", h, a, offs[o],
                            len);
                for (int w = 0; w <= wide; w++) {
                    static uint8_t copy[16384];
                    memset(copy, 0x5a, len + 16);
                    uint32_t c = vmmc_crc32c_copy_hw(seed, copy + 3, big + offs[o], len, w);
                    if (c != a)
                        VT_FAIL("copying CRC (wide %d) %08x, table %08x at off %zu len %zu", w, c,
                                a, offs[o], len);
                    if (memcmp(copy + 3, big + offs[o], len) || copy[0] != 0x5a ||
                        copy[2] != 0x5a || copy[len + 3] != 0x5a || copy[len + 15] != 0x5a)
                        VT_FAIL("copying CRC (wide %d): bad copy at off %zu len %zu", w, offs[o],
                                len);
                }
            }
        /* Whole datagrams of the default size and the largest one. */
        for (size_t len = 64000; len <= 65507; len += 101) {
            uint32_t a = vmmc_crc32c_sw(0, big + 5, len);
            VT_CHECK(vmmc_crc32c_hw(0, big + 5, len) == a);
            VT_CHECK(!wide || vmmc_crc32c_wide(0, big + 5, len) == a);
            VT_CHECK(vmmc_crc32c(0, big + 5, len) == a);
        }
    }
    /* A single flipped bit is always detected. */
    uint32_t ref = vmmc_crc32c(0, big, 4096);
    for (int bit = 0; bit < 4096 * 8; bit += 97) {
        big[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        VT_CHECK(vmmc_crc32c(0, big, 4096) != ref);
        big[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    printf("PASS\n");
    return 0;
}
