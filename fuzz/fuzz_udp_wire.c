/* libFuzzer target: the datagram header parser and its authentication.
 * Whatever the bytes, decode and the tag check must not crash or read out of
 * bounds; what decode accepts must encode back to the same bytes (all but
 * the tag, which is then right exactly when the tag check passed). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/udp/crc32c.h"
#include "transport/udp/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const vmmc_udp_key_t key = {{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull}};
    uint8_t *copy = malloc(size ? size : 1); /* exact size: overreads are caught */
    memcpy(copy, data, size);
    vmmc_udp_hdr_t h;
    if (vmmc_udp_decode(copy, size, &h) == VMMC_UDP_OK) {
        if (h.hlen < VMMC_UDP_HDR_MIN || h.hlen > VMMC_UDP_HDR_SIZE || h.length != size - h.hlen)
            abort();
        int authentic = vmmc_udp_auth(copy, &h, &key) == VMMC_UDP_OK;
        uint8_t re[VMMC_UDP_HDR_SIZE];
        unsigned hl = vmmc_udp_encode(re, &h, vmmc_crc32c(0, copy + h.hlen, h.length), &key);
        if (hl != h.hlen || memcmp(re, copy, hl - 8) != 0)
            abort();
        if (authentic != !memcmp(re + hl - 8, copy + hl - 8, 8))
            abort();
    }
    free(copy);
    return 0;
}
