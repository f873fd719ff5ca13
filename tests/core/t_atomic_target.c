/* The target's side of a remote atomic (vmmc_deliver_atomic), as a hostile
 * or confused peer can drive it over udp or a control message: every field
 * of the request is checked before the word is touched (export id and
 * generation, capability token, importer list, bounds, the word's real
 * alignment, the read right for a fetch, operation, size and type), and a refused
 * request changes nothing and is counted. One process, white box. */
#include <string.h>

#include "core/core.h"
#include "core/deliver.h"
#include "vtest.h"

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    uint64_t *mem = NULL;
    VT_CHECK(posix_memalign((void **)&mem, 64, 256) == 0);
    memset(mem, 0, 256);
    int me = vmmc_rank(ep);
    vmmc_export_params_t p = {.field_mask = VMMC_EXPORT_PARAM_FLAGS, .flags = VMMC_EXPORT_READ,
                              .name = "rw", .addr = mem, .length = 128};
    vmmc_export_t *rw, *wo, *odd, *few;
    VT_OK(vmmc_export(ep, &p, &rw));
    p.flags = 0, p.name = "wo", p.addr = mem + 16, p.length = 64;
    VT_OK(vmmc_export(ep, &p, &wo));
    p.flags = VMMC_EXPORT_READ, p.name = "odd", p.addr = (char *)(mem + 24) + 4, p.length = 32;
    VT_OK(vmmc_export(ep, &p, &odd));
    /* An importer list of this rank only (a job of one: other ranks cannot
     * be listed); requests claiming another sender are refused. */
    p.field_mask |= VMMC_EXPORT_PARAM_IMPORTERS;
    p.importers = &me, p.num_importers = 1, p.name = "few", p.addr = mem + 28, p.length = 32;
    VT_OK(vmmc_export(ep, &p, &few));

    uint64_t old = 99, served0 = vt_counter(ep, "atomics_served");
    uint64_t refused0 = vt_counter(ep, "atomics_refused");
    const uint64_t *tok = rw->token;
    uint64_t bad[2] = {tok[0] ^ 1, tok[1]};
    int refused = 0;
#define REFUSE(st, ...)                                                                  \
    do {                                                                                 \
        VT_STATUS(st, vmmc_deliver_atomic(ep, __VA_ARGS__, &old));                       \
        VT_CHECK(old == 0);                                                              \
        old = 99;                                                                        \
        refused++;                                                                       \
    } while (0)
    REFUSE(VMMC_ERR_STALE, me, rw->id, rw->gen + 1, tok, 0, VMMC_ATOMIC_ADD, 8, 1, 1, 0);
    REFUSE(VMMC_ERR_STALE, me, rw->id + 7, rw->gen, tok, 0, VMMC_ATOMIC_ADD, 8, 1, 1, 0);
    REFUSE(VMMC_ERR_PERMISSION, me, rw->id, rw->gen, bad, 0, VMMC_ATOMIC_ADD, 8, 1, 1, 0);
    /* An export without an importer list takes every sender. */
    VT_OK(vmmc_deliver_atomic(ep, me + 1, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD, 8, 1, 1, 0,
                              &old));
    VT_CHECK(old == 0 && mem[0] == 1);
    old = 99;
    REFUSE(VMMC_ERR_PERMISSION, me + 1, few->id, few->gen, few->token, 0, VMMC_ATOMIC_ADD, 8, 0,
           1, 0);
    REFUSE(VMMC_ERR_BOUNDS, me, rw->id, rw->gen, tok, 128, VMMC_ATOMIC_ADD, 8, 0, 1, 0);
    REFUSE(VMMC_ERR_BOUNDS, me, rw->id, rw->gen, tok, 124, VMMC_ATOMIC_ADD, 8, 0, 1, 0);
    REFUSE(VMMC_ERR_BOUNDS, me, rw->id, rw->gen, tok, UINT64_MAX - 3, VMMC_ATOMIC_ADD, 4, 0, 1,
           0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 4, VMMC_ATOMIC_ADD, 8, 0, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, odd->id, odd->gen, odd->token, 0, VMMC_ATOMIC_ADD, 8, 0, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, 0, 8, 0, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_CSWAP_GT + 1, 8, 0, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, 255, 8, 0, 1, 0);
    /* The type in the size byte: bitwise and logical on floats, unknown
     * bits, both flags, a type without a width. */
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_AND,
           8 | VMMC_ATOMIC_FLOAT, 1, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_MSWAP,
           4 | VMMC_ATOMIC_FLOAT, 1, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_LXOR,
           8 | VMMC_ATOMIC_FLOAT, 1, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD, 8 | 0x40, 1, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD, 0xff, 1, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD,
           8 | VMMC_ATOMIC_SIGNED | VMMC_ATOMIC_FLOAT, 1, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD, VMMC_ATOMIC_FLOAT, 1,
           1, 0);
    VT_CHECK(strstr(vmmc_last_error(), "rank") != NULL);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD, 2, 0, 1, 0);
    REFUSE(VMMC_ERR_INVALID, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD, 16, 0, 1, 0);
    REFUSE(VMMC_ERR_PERMISSION, me, wo->id, wo->gen, wo->token, 0, VMMC_ATOMIC_ADD, 8, 1, 1, 0);
    REFUSE(VMMC_ERR_PERMISSION, me, wo->id, wo->gen, wo->token, 0, VMMC_ATOMIC_READ, 8, 0, 0, 0);
    /* Nothing moved but the one served add. */
    VT_CHECK(mem[0] == 1);
    for (int i = 1; i < 32; i++)
        VT_CHECK(mem[i] == 0);
    /* Served: an add without fetch on the write-only export, a 4-byte
     * compare-and-swap on the odd one at an aligned offset. */
    VT_OK(vmmc_deliver_atomic(ep, me, wo->id, wo->gen, wo->token, 8, VMMC_ATOMIC_ADD, 8, 0, 3, 0,
                              &old));
    VT_CHECK(old == 0 && mem[17] == 3);
    VT_OK(vmmc_deliver_atomic(ep, me, odd->id, odd->gen, odd->token, 4, VMMC_ATOMIC_CSWAP, 4, 1, 9,
                              0, &old));
    VT_CHECK(old == 0);
    uint32_t w;
    memcpy(&w, (char *)(mem + 24) + 8, 4);
    VT_CHECK(w == 9);
    /* A typed one: a double added to the last word of the export. */
    double d = 1.25;
    memcpy(&mem[15], &d, 8);
    VT_OK(vmmc_deliver_atomic(ep, me, rw->id, rw->gen, tok, 120, VMMC_ATOMIC_ADD,
                              8 | VMMC_ATOMIC_FLOAT, 1, vmmc_atomic_from_double(2.5), 0, &old));
    VT_CHECK(vmmc_atomic_to_double(old) == 1.25);
    memcpy(&d, &mem[15], 8);
    VT_CHECK(d == 3.75);
    VT_CHECK(vt_counter(ep, "atomics_served") == served0 + 4);
    VT_CHECK(vt_counter(ep, "atomics_refused") == refused0 + (uint64_t)refused);
    /* After unexport: stale. */
    VT_OK(vmmc_unexport(rw));
    REFUSE(VMMC_ERR_STALE, me, rw->id, rw->gen, tok, 0, VMMC_ATOMIC_ADD, 8, 1, 1, 0);
    VT_CHECK(mem[0] == 1);
    VT_OK(vmmc_finalize(ep));
    free(mem);
    printf("t_atomic_target: ok (%d refusals)\n", refused);
    return 0;
}
