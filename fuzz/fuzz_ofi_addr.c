/* libFuzzer target: a provider name (fi_getname bytes) another process
 * wrote, as the libfabric provider reads it (src/ofi/ofi_addr.c,
 * src/ofi/ofi_av.c).
 *
 * Byte 0 picks the reader; the rest is the name(s):
 *   even  vofi_addr_unpack alone. A name it takes must give a valid vmmc
 *         address that packs back to the very same bytes. Bit 1: make the
 *         name's CRC right first, as a hostile writer would, so that the
 *         checks of the fields behind it are reached.
 *   odd   fi_av_insert of (byte 0 >> 1) % 4 names, back to back, into a
 *         map or a table (bit 3). Each one inserted must be found again,
 *         whole, by fi_av_lookup and vofi_av_find, and must unpack.
 * Anything else is a bug: a crash, a sanitizer report, or abort() here. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "ofi/ofi.h"

void vofi_warn(const char *fmt, ...) {}
void vofi_info(const char *fmt, ...) {}

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_ofi_addr: %s\n", what);
        abort();
    }
}

/* CRC-16/CCITT of a 63-byte name's first 61 bytes, into its last 2. */
static void reseal(uint8_t *p)
{
    uint16_t c = 0xffff;
    for (int i = 0; i < 61; i++) {
        c ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
    }
    p[61] = (uint8_t)(c >> 8);
    p[62] = (uint8_t)c;
}

static void unpack_one(const uint8_t *d, size_t n, int seal)
{
    uint8_t copy[63];
    if (seal && n == sizeof copy) {
        memcpy(copy, d, n);
        reseal(copy);
        d = copy;
    }
    char text[VMMC_ADDR_MAX + 1];
    size_t tl = VMMC_ADDR_MAX;
    if (vofi_addr_unpack(d, n, NULL, 0, text, &tl) != 0)
        return;
    must(tl > 0 && tl < VMMC_ADDR_MAX, "unpacked length");
    text[tl] = 0;
    uint8_t chk[VMMC_ADDR_MAX], again[VOFI_MAX_EP_ADDR];
    size_t cl = sizeof chk, al = sizeof again;
    must(vmmc_addr_parse(text, chk, &cl) == VMMC_OK, "unpacked text is no vmmc address");
    must(vofi_addr_pack(text, tl, again, &al) == 0, "unpacked text does not pack");
    must(al == n && !memcmp(again, d, n), "pack(unpack(name)) != name");
}

static void insert_list(const uint8_t *d, size_t n, size_t count, int table)
{
    static uint8_t buf[4 * VOFI_MAX_EP_ADDR]; /* names are read up to their length byte */
    memset(buf, 0, sizeof buf);
    memcpy(buf, d, n < sizeof buf ? n : sizeof buf);
    static vofi_domain_t dom;
    struct fi_av_attr attr = {.type = table ? FI_AV_TABLE : FI_AV_MAP};
    struct fid_av *av;
    must(vofi_av_open(&dom.fid, &attr, &av, NULL) == 0, "fi_av_open");
    fi_addr_t fa[4];
    int err[4];
    int r = fi_av_insert(av, buf, count, fa, FI_SYNC_ERR, err);
    must(r >= 0 && (size_t)r <= count, "insert count");
    int got = 0;
    for (size_t i = 0; i < count; i++) {
        must((err[i] == 0) == (fa[i] != FI_ADDR_NOTAVAIL), "error array and fi_addr disagree");
        if (fa[i] == FI_ADDR_NOTAVAIL)
            continue;
        got++;
        uint8_t name[VOFI_MAX_EP_ADDR];
        size_t len = sizeof name;
        must(fi_av_lookup(av, fa[i], name, &len) == 0 && len <= VOFI_MAX_EP_ADDR, "lookup");
        must(vofi_av_find((vofi_av_t *)av, name, len) != FI_ADDR_NOTAVAIL, "find");
        char text[VMMC_ADDR_MAX];
        size_t tl = sizeof text;
        must(vofi_addr_unpack(name, len, NULL, 0, text, &tl) == 0, "an inserted name unpacks");
    }
    must(got == r, "inserted count");
    char s[16];
    size_t sl = sizeof s;
    fi_av_straddr(av, buf, s, &sl);
    must(strlen(s) < sizeof s, "straddr truncation");
    must(fi_close(&av->fid) == 0, "fi_close");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!(data[0] & 1))
        unpack_one(data + 1, size - 1, data[0] & 2);
    else
        insert_list(data + 1, size - 1, (size_t)(data[0] >> 1) % 4, data[0] & 8);
    return 0;
}
