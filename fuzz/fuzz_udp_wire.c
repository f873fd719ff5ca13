/* libFuzzer target: the datagram header parser. Whatever the bytes, decode
 * must not crash or read out of bounds, and what it accepts must encode back
 * to the same bytes. */
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
    uint8_t *copy = malloc(size ? size : 1); /* exact size: overreads are caught */
    memcpy(copy, data, size);
    vmmc_udp_hdr_t h;
    if (vmmc_udp_decode(copy, size, &h) == VMMC_UDP_OK) {
        if (h.hlen < VMMC_UDP_HDR_MIN || h.hlen > VMMC_UDP_HDR_SIZE || h.length != size - h.hlen)
            abort();
        uint8_t re[VMMC_UDP_HDR_SIZE];
        unsigned hl = vmmc_udp_encode(re, &h, vmmc_crc32c(0, copy + h.hlen, h.length));
        if (hl != h.hlen || memcmp(re, copy, hl) != 0)
            abort();
    }
    free(copy);
    return 0;
}
