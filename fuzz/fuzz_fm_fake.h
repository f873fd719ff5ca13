/* A stand-in for the VMMC core under the FM fuzz targets: a job of two ranks
 * in one process. Rank 0 runs the real FM code; rank 1 is the hostile peer,
 * whose every write into FM's memory comes from the fuzzer's input:
 *
 *   - our region for rank 1 (peers[1].ctrl: credit word, credit requests,
 *     placement descriptor, offer word, then the ring rank 1 writes);
 *   - rank 1's region for us (what we map or vmmc_send into), where rank 1
 *     writes its half of the split-copy protocol too;
 *   - memory keys: only keys naming a range of rank 1's one allocation
 *     (fake_peer_mem) attach; any other key is refused as the core would.
 *
 * Calls the core would block in (vmmc_wait, vmmc_peer_alive, vmmc_signal)
 * give the fuzzer a turn: rank 1 applies one record of the input (fake_step,
 * defined by the target), and "dies" when the input is used up, so every
 * wait in FM must end. The input is byte 0, the mode (bit 0: rank 1's region
 * is mapped), then the target's records, read with fake_take(). */
#ifndef VMMC_FUZZ_FM_FAKE_H
#define VMMC_FUZZ_FM_FAKE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmc/fm.h"
#include "vmmc/vmmc.h"

#define FAKE_PEER_MEM 65536u

struct vmmc_ep {
    int unused;
};
struct vmmc_export {
    int unused;
};
struct vmmc_proxy {
    char *mem;
    size_t len;
};

static struct vmmc_ep fake_ep;
static struct vmmc_export fake_export;
static struct vmmc_proxy fake_px;
static char *fake_peer_region;           /* rank 1's region for us */
static size_t fake_peer_region_len;
static uint8_t fake_peer_mem[FAKE_PEER_MEM]; /* rank 1's communication memory */
static int fake_mapped;                  /* proxy_map succeeds */
static int fake_alive;                   /* rank 1 is alive */
static vmmc_progress_fn_t fake_poll, fake_arm;
static void *fake_hook_arg;

/* Our allocations (for keys): at most a few live at a time. */
#define FAKE_ALLOCS 16
static struct {
    char *base;
    size_t len;
} fake_alloc[FAKE_ALLOCS];

#define FAKE_KEY_MAGIC 0x6b65796b65796b65ull

/* The input of the run (fake_fm_open), consumed record by record. */
static const uint8_t *fake_in;
static size_t fake_in_len, fake_in_pos;
static int fake_in_fm; /* FM is running: a record may only write memory */

/* The next @n bytes of input into @dst; 0 (nothing taken) at its end. */
static int fake_take(void *dst, size_t n)
{
    if (fake_in_len - fake_in_pos < n)
        return 0;
    memcpy(dst, fake_in + fake_in_pos, n);
    fake_in_pos += n;
    return 1;
}

/* Apply the next record of the input; 0 at its end. Defined by the target. */
static int fake_step(void);

/* Rank 1's turn, from inside a core call FM made. */
static void fake_turn(void)
{
    fake_in_fm++;
    if (!fake_step())
        fake_alive = 0;
    fake_in_fm--;
}

int vmmc_rank(const vmmc_ep_t *ep) { return ep ? 0 : VMMC_ERR_INVALID; }
int vmmc_size(const vmmc_ep_t *ep) { return ep ? 2 : VMMC_ERR_INVALID; }
int vmmc_barrier(vmmc_ep_t *ep) { return ep ? VMMC_OK : VMMC_ERR_INVALID; }
/* The two ranks of the stand-in job are all its peers. */
int vmmc_peer_count(const vmmc_ep_t *ep) { return ep ? 2 : VMMC_ERR_INVALID; }
int vmmc_ep_addr(vmmc_ep_t *ep, void *addr, size_t *len)
{
    (void)ep, (void)addr, (void)len;
    return VMMC_ERR_UNSUPPORTED;
}
int vmmc_peer_addr(vmmc_ep_t *ep, int peer, void *addr, size_t *len)
{
    (void)ep, (void)peer, (void)addr, (void)len;
    return VMMC_ERR_UNSUPPORTED;
}

int vmmc_peer_alive(vmmc_ep_t *ep, int rank)
{
    (void)ep;
    if (rank != 1)
        return 1;
    fake_turn();
    return fake_alive;
}

int vmmc_mem_alloc(vmmc_ep_t *ep, size_t size, void **ptr)
{
    (void)ep;
    for (int i = 0; i < FAKE_ALLOCS; i++) {
        if (!fake_alloc[i].base) {
            size_t len = (size + 4095) & ~(size_t)4095;
            char *m = aligned_alloc(4096, len);
            if (!m)
                return vmmc_error(VMMC_ERR_NOMEM, "fake: no memory");
            memset(m, 0, len);
            fake_alloc[i].base = m;
            fake_alloc[i].len = size;
            *ptr = m;
            return VMMC_OK;
        }
    }
    return vmmc_error(VMMC_ERR_NOMEM, "fake: too many allocations");
}

int vmmc_mem_free(vmmc_ep_t *ep, void *ptr)
{
    (void)ep;
    for (int i = 0; i < FAKE_ALLOCS; i++) {
        if (fake_alloc[i].base == ptr) {
            free(ptr);
            fake_alloc[i].base = NULL;
            return VMMC_OK;
        }
    }
    return vmmc_error(VMMC_ERR_INVALID, "fake: vmmc_mem_free of %p", ptr);
}

int vmmc_export(vmmc_ep_t *ep, const vmmc_export_params_t *p, vmmc_export_t **ex)
{
    (void)ep, (void)p;
    *ex = &fake_export;
    return VMMC_OK;
}
int vmmc_unexport(vmmc_export_t *ex) { return ex ? VMMC_OK : VMMC_ERR_INVALID; }

int vmmc_import(vmmc_ep_t *ep, int rank, const char *name, int timeout_ms, vmmc_proxy_t **px)
{
    (void)ep, (void)name, (void)timeout_ms;
    if (rank != 1)
        return vmmc_error(VMMC_ERR_NOT_FOUND, "fake: no rank %d", rank);
    fake_px.mem = fake_peer_region;
    fake_px.len = fake_peer_region_len;
    *px = &fake_px;
    return VMMC_OK;
}
int vmmc_unimport(vmmc_proxy_t *px) { return px ? VMMC_OK : VMMC_ERR_INVALID; }
/* (FM imports rank 1's region on its first send.) */
int vmmc_import_start(vmmc_ep_t *ep, int rank, const char *name, int timeout_ms,
                      vmmc_proxy_t **px)
{
    int st = vmmc_import(ep, rank, name, timeout_ms, px);
    return st == VMMC_OK ? VMMC_INPROGRESS : st;
}
int vmmc_import_test(vmmc_proxy_t *px) { return px ? VMMC_OK : VMMC_ERR_INVALID; }
int vmmc_fetch(vmmc_proxy_t *px, size_t offset, void *dst, size_t len)
{
    if (!px || offset > px->len || len > px->len - offset)
        return VMMC_ERR_BOUNDS;
    memcpy(dst, (char *)px->mem + offset, len);
    return VMMC_OK;
}
size_t vmmc_proxy_length(const vmmc_proxy_t *px) { return px->len; }

int vmmc_proxy_map(vmmc_proxy_t *px, void **ptr)
{
    if (!fake_mapped)
        return vmmc_error(VMMC_ERR_UNSUPPORTED, "fake: not mapped");
    *ptr = px->mem;
    return VMMC_OK;
}

int vmmc_send(vmmc_proxy_t *px, size_t offset, const void *src, size_t len, unsigned flags)
{
    (void)flags;
    if (!fake_alive)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "fake: rank 1 died");
    if (len == 0 || offset > px->len || len > px->len - offset)
        abort(); /* FM must never send outside the region it imported */
    memcpy(px->mem + offset, src, len);
    return VMMC_OK;
}

int vmmc_signal(vmmc_ep_t *ep, int rank)
{
    /* Our own endpoint (FM wakes it when a ring joins its active list):
     * nobody else is in this call, so no turn for the peer either. */
    if (rank == vmmc_rank(ep))
        return VMMC_OK;
    fake_turn();
    return VMMC_OK;
}

int vmmc_wait(vmmc_ep_t *ep, int timeout_ms)
{
    (void)ep, (void)timeout_ms;
    fake_turn();
    return fake_alive ? 0 : VMMC_ERR_PEER_DEAD;
}

/* The hostile peer's bytes are already in place: progress has nothing to
 * drive (FM calls it for senders reached over a transport like udp). */
int vmmc_progress(vmmc_ep_t *ep) { return ep ? 0 : VMMC_ERR_INVALID; }

int vmmc_progress_hook_add(vmmc_ep_t *ep, vmmc_progress_fn_t poll, vmmc_progress_fn_t arm,
                           void *arg)
{
    (void)ep;
    fake_poll = poll;
    fake_arm = arm;
    fake_hook_arg = arg;
    return VMMC_OK;
}

int vmmc_progress_hook_remove(vmmc_ep_t *ep, vmmc_progress_fn_t poll, void *arg)
{
    (void)ep, (void)poll, (void)arg;
    fake_poll = fake_arm = NULL;
    return VMMC_OK;
}

/* Rings are made when the peer first imports them: FM's function for the
 * "fm.ring." prefix, which fake_peer_imports() calls as the core would when
 * rank 1's import of its ring arrives. */
static vmmc_demand_fn_t fake_demand;
static void *fake_demand_arg;

int vmmc_export_on_demand(vmmc_ep_t *ep, const char *prefix, vmmc_demand_fn_t fn, void *arg)
{
    (void)ep;
    if (!strcmp(prefix, "fm.ring.")) {
        fake_demand = fn;
        fake_demand_arg = arg;
    }
    return VMMC_OK;
}

int vmmc_export_on_demand_remove(vmmc_ep_t *ep, const char *prefix)
{
    (void)ep;
    if (!strcmp(prefix, "fm.ring."))
        fake_demand = NULL;
    return VMMC_OK;
}

static inline int fake_peer_imports(void)
{
    return fake_demand ? fake_demand(&fake_ep, "fm.ring.1", 1, fake_demand_arg)
                       : VMMC_ERR_NOT_FOUND;
}

/* Keys: (magic, which side, offset, length). Ours name one of our
 * allocations; rank 1's name a range of fake_peer_mem. */
int vmmc_mem_key(vmmc_ep_t *ep, const void *addr, size_t len, int rank, vmmc_mkey_t *key)
{
    (void)ep;
    const char *a = addr;
    if (rank != 1 || len == 0)
        return vmmc_error(VMMC_ERR_INVALID, "fake: key for rank %d, %zu bytes", rank, len);
    for (int i = 0; i < FAKE_ALLOCS; i++) {
        char *b = fake_alloc[i].base;
        if (b && a >= b && a + len >= a && a + len <= b + fake_alloc[i].len) {
            key->opaque[0] = FAKE_KEY_MAGIC;
            key->opaque[1] = 0;
            key->opaque[2] = (uint64_t)(a - b) | (uint64_t)i << 48;
            key->opaque[3] = len;
            return VMMC_OK;
        }
    }
    return vmmc_error(VMMC_ERR_UNSUPPORTED, "fake: %p is not in an allocation", addr);
}

size_t vmmc_mkey_len(const vmmc_mkey_t *key) { return (size_t)key->opaque[3]; }

int vmmc_mem_attach(vmmc_ep_t *ep, int rank, const vmmc_mkey_t *key, int timeout_ms, void **ptr)
{
    (void)ep, (void)timeout_ms;
    uint64_t off = key->opaque[2], len = key->opaque[3];
    if (rank != 1 || key->opaque[0] != FAKE_KEY_MAGIC || key->opaque[1] != 1 || len == 0 ||
        off > FAKE_PEER_MEM || len > FAKE_PEER_MEM - off)
        return vmmc_error(VMMC_ERR_PERMISSION, "fake: key refused");
    *ptr = fake_peer_mem + off;
    return VMMC_OK;
}

int vmmc_mem_detach(vmmc_ep_t *ep, void *ptr)
{
    (void)ep;
    return ptr ? VMMC_OK : VMMC_ERR_INVALID;
}

/* A key of rank 1's for [off, off + len) of its memory (clamped). */
static inline void fake_peer_key(vmmc_mkey_t *k, uint64_t off, uint64_t len)
{
    k->opaque[0] = FAKE_KEY_MAGIC;
    k->opaque[1] = 1;
    k->opaque[2] = off % FAKE_PEER_MEM;
    k->opaque[3] = len;
}

static inline void fake_reset(size_t peer_region_len, int mapped)
{
    free(fake_peer_region);
    /* Exactly its length (a multiple of 64): a stray write is a heap overflow. */
    fake_peer_region = aligned_alloc(64, peer_region_len);
    memset(fake_peer_region, 0, peer_region_len);
    fake_peer_region_len = peer_region_len;
    fake_mapped = mapped;
    fake_alive = 1;
}

/* Start a run on @data (@size >= 1): rank 1 alive, with a region of
 * @region_len bytes for us, mapped if the mode says so; FM opened on the
 * stand-in job with a ring of @ring bytes, packets of @packet. */
static inline fm_t *fake_fm_open(const uint8_t *data, size_t size, size_t region_len,
                                 uint32_t ring, uint32_t packet)
{
    static int once;
    if (!once) {
        once = 1;
        setenv("VMMC_LOG_LEVEL", "error", 0);
    }
    fake_in = data;
    fake_in_len = size;
    fake_in_pos = 1;
    fake_reset(region_len, data[0] & 1);
    fm_params_t pa = {.field_mask = FM_PARAM_RING_SIZE | FM_PARAM_PACKET_SIZE |
                                    FM_PARAM_MAX_HANDLERS,
                      .ring_size = ring, .packet_size = packet, .max_handlers = 8};
    fm_t *fm;
    if (fm_init(&fake_ep, &pa, &fm) != VMMC_OK)
        abort();
    if (fake_peer_imports() != VMMC_OK) /* rank 1's ring here */
        abort();
    return fm;
}

/* End a run: FM must finalize, whatever rank 1 did. */
static inline void fake_fm_close(fm_t *fm)
{
    if (fm_finalize(fm) != VMMC_OK) {
        fprintf(stderr, "fm_finalize: %s\n", vmmc_last_error());
        abort();
    }
}

#endif
