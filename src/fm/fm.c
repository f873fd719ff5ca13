/* Fast Messages: settings, set-up and tear-down, handler table, counters.
 * See fm_int.h for the wire format, fm_send.h and fm_recv.h for the paths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fm/fm_int.h"
#include "util/config.h"

static uint64_t cfg_packet;
static uint64_t cfg_ring;
static uint64_t cfg_ring_total;
static uint64_t cfg_batch;
static uint64_t cfg_stack;
static int64_t cfg_handlers;
static int cfg_map;
static int cfg_nonblock;
static int cfg_threads;
static uint64_t cfg_zcopy;
static uint64_t cfg_zcopy_wait;
static uint64_t cfg_split;

static const vmmc_cfg_entry_t fm_entries[] = {
    {"FM_PACKET", "8K", "largest payload of one FM packet (the unit of credit and of extract pacing)",
     VMMC_CFG_SIZE, &cfg_packet},
    {"FM_RING", "512K", "FM receive ring per sender (the credits one sender can have outstanding; see FM_RING_TOTAL)",
     VMMC_CFG_SIZE, &cfg_ring},
    {"FM_RING_TOTAL", "64M", "receive rings of all senders together: a large job gets smaller rings "
     "(at least two packets each; 0: no limit)", VMMC_CFG_SIZE, &cfg_ring_total},
    {"FM_CREDIT_BATCH", "0", "FM returns credits after consuming this many bytes (0: ring/4)",
     VMMC_CFG_SIZE, &cfg_batch},
    {"FM_STACK", "256K", "stack of an FM handler that is suspended in fm_receive", VMMC_CFG_SIZE,
     &cfg_stack},
    {"FM_HANDLERS", "256", "FM handler ids per endpoint", VMMC_CFG_INT, &cfg_handlers},
    {"FM_MAP", "y", "FM writes packets through a mapping of the receiver's ring when possible",
     VMMC_CFG_BOOL, &cfg_map},
    {"FM_ZCOPY", "8K", "FM messages of at least this bound may be placed straight into the "
     "handler's buffer when it is vmmc_mem_alloc() memory on this host (0: never)",
     VMMC_CFG_SIZE, &cfg_zcopy},
    {"FM_ZCOPY_WAIT", "20us", "how long an FM sender waits for the receiver's buffer before it "
     "sends the rest of such a message in packets", VMMC_CFG_TIME, &cfg_zcopy_wait},
    {"FM_SPLIT", "32K", "placed FM messages of at least this bound whose data is vmmc_mem_alloc() "
     "memory too are copied by both ranks: the receiver copies the front of each piece of 8 KiB or "
     "more from the sender's memory while the sender copies the rest (0: the sender copies all)",
     VMMC_CFG_SIZE, &cfg_split},
    {"FM_THREADS", "n", "several threads may use one FM at once (a send lock per peer)",
     VMMC_CFG_BOOL, &cfg_threads},
    {"FM_NONBLOCK", "n", "FM sends never wait for credits (VMMC_ERR_AGAIN instead)", VMMC_CFG_BOOL,
     &cfg_nonblock},
};
VMMC_CONFIG_TABLE(fm_cfg, "fm", fm_entries);

static const char *const cnt_names[FM_C_COUNT] = {
    [FM_C_MSG_SENT] = "msg_sent",         [FM_C_PKT_SENT] = "pkt_sent",
    [FM_C_BYTES_SENT] = "bytes_sent",     [FM_C_MSG_RECV] = "msg_recv",
    [FM_C_PKT_RECV] = "pkt_recv",         [FM_C_BYTES_RECV] = "bytes_recv",
    [FM_C_INLINE] = "handler_inline",     [FM_C_SUSPEND] = "handler_suspend",
    [FM_C_UNKNOWN] = "unknown_handler",   [FM_C_DRAINED] = "bytes_discarded",
    [FM_C_CREDIT_WAIT] = "credit_wait",   [FM_C_AGAIN] = "send_again",
    [FM_C_CREDIT_RET] = "credit_return",  [FM_C_CREDIT_REQ] = "credit_request",
    [FM_C_PROTOCOL] = "protocol_error",   [FM_C_MAPPED] = "peers_mapped",
    [FM_C_ZC_MSG] = "zcopy_msg",          [FM_C_ZC_SENT] = "zcopy_bytes_sent",
    [FM_C_ZC_RECV] = "zcopy_bytes_recv",
    [FM_C_ZC_POST] = "zcopy_desc",        [FM_C_ZC_WAIT] = "zcopy_wait",
    [FM_C_SPLIT_SENT] = "split_bytes_sent", [FM_C_SPLIT_RECV] = "split_bytes_recv",
    [FM_C_SPLIT_VOID] = "split_bytes_void",
};

int fm_counter_get(const fm_t *fm, int i, const char **name, uint64_t *value)
{
    if (!fm || !name || !value)
        return vmmc_error(VMMC_ERR_INVALID, "fm_counter_get: NULL argument");
    if (i < 0 || i >= FM_C_COUNT)
        return VMMC_ERR_NOT_FOUND;
    *name = cnt_names[i];
    *value = __atomic_load_n(&fm->cnt[i], __ATOMIC_RELAXED);
    return VMMC_OK;
}

uint64_t fm_counter(const fm_t *fm, const char *name)
{
    if (!fm || !name)
        return 0;
    for (int i = 0; i < FM_C_COUNT; i++)
        if (!strcmp(cnt_names[i], name))
            return __atomic_load_n(&fm->cnt[i], __ATOMIC_RELAXED);
    return 0;
}

int fm_nodeid(const fm_t *fm) { return fm ? fm->rank : VMMC_ERR_INVALID; }
int fm_numnodes(const fm_t *fm) { return fm ? fm->size : VMMC_ERR_INVALID; }

int fm_register_handler(fm_t *fm, int id, fm_handler_t h, void *arg)
{
    if (!fm || !h)
        return vmmc_error(VMMC_ERR_INVALID, "fm_register_handler: NULL %s", fm ? "handler" : "fm");
    if (id == FM_ANY_ID) {
        for (id = 0; id < fm->max_handlers && fm->handlers[id].fn; id++)
            ;
        if (id == fm->max_handlers)
            return vmmc_error(VMMC_ERR_NOMEM, "fm_register_handler: all %d handler ids are taken "
                              "(raise VMMC_FM_HANDLERS)", fm->max_handlers);
    } else if (id < 0 || id >= fm->max_handlers) {
        return vmmc_error(VMMC_ERR_INVALID, "fm_register_handler: id %d outside 0..%d", id,
                          fm->max_handlers - 1);
    }
    fm->handlers[id].fn = h;
    fm->handlers[id].arg = arg;
    fm->handlers[id].warned = 0;
    return id;
}

/* Settings, overridden by @p params; validated together. */
static int fm_setup_params(fm_t *fm, const fm_params_t *pa)
{
    vmmc_config_load();
    fm->flags = (cfg_nonblock ? FM_NONBLOCK : 0) | (cfg_map ? 0 : FM_NO_MAP) |
                (cfg_threads ? FM_THREADS : 0);
    fm->ring_size = cfg_ring;
    fm->packet_size = cfg_packet;
    fm->credit_batch = cfg_batch;
    fm->stack_size = cfg_stack;
    fm->zc_min = cfg_zcopy;
    fm->zc_wait_ns = cfg_zcopy_wait;
    fm->split_min = cfg_split;
    fm->max_handlers = (int)cfg_handlers;
    if (pa) {
        if (pa->field_mask & FM_PARAM_FLAGS) {
            if (pa->flags & ~(unsigned)(FM_NONBLOCK | FM_NO_MAP | FM_THREADS))
                return vmmc_error(VMMC_ERR_INVALID, "fm_init: unknown flags 0x%x", pa->flags);
            fm->flags = pa->flags;
        }
        if (pa->field_mask & FM_PARAM_RING_SIZE)
            fm->ring_size = pa->ring_size;
        if (pa->field_mask & FM_PARAM_PACKET_SIZE)
            fm->packet_size = pa->packet_size;
        if (pa->field_mask & FM_PARAM_CREDIT_BATCH)
            fm->credit_batch = pa->credit_batch;
        if (pa->field_mask & FM_PARAM_MAX_HANDLERS)
            fm->max_handlers = pa->max_handlers;
    }
    if (fm->packet_size < 8 || fm->packet_size > (1u << 30))
        return vmmc_error(VMMC_ERR_INVALID, "fm_init: packet size %zu outside 8 B..1 GiB",
                          fm->packet_size);
    /* A power of two, so that ring offsets are a mask, not a division. */
    if (fm->ring_size > (1ull << 40))
        return vmmc_error(VMMC_ERR_INVALID, "fm_init: ring of %llu bytes is too large",
                          (unsigned long long)fm->ring_size);
    uint64_t r2 = FM_LINE;
    while (r2 < fm->ring_size)
        r2 <<= 1;
    uint64_t slot = fm_align64(FM_HDR + fm->packet_size);
    /* Rings from the settings share VMMC_FM_RING_TOTAL among the senders,
     * so that a large job does not spend R bytes per peer: the largest
     * power of two that fits the share, but never less than two packets. */
    if (!(pa && (pa->field_mask & FM_PARAM_RING_SIZE)) && fm->size > 1 && cfg_ring_total) {
        uint64_t share = cfg_ring_total / (uint64_t)(fm->size - 1), p2 = FM_LINE, min2 = FM_LINE;
        while (p2 * 2 <= share)
            p2 <<= 1;
        while (min2 < 2 * slot)
            min2 <<= 1;
        if (p2 < min2)
            p2 = min2;
        if (r2 > p2)
            r2 = p2;
    }
    fm->ring_size = r2;
    if (fm->ring_size < 2 * slot)
        return vmmc_error(VMMC_ERR_INVALID, "fm_init: ring of %llu bytes holds fewer than two "
                          "packets of %zu bytes (VMMC_FM_RING >= 2 * (VMMC_FM_PACKET + 64))",
                          (unsigned long long)fm->ring_size, fm->packet_size);
    if (fm->credit_batch == 0)
        fm->credit_batch = fm->ring_size / 4;
    if (fm->credit_batch > fm->ring_size / 2)
        return vmmc_error(VMMC_ERR_INVALID, "fm_init: credit batch %llu exceeds half the ring "
                          "(%llu bytes)", (unsigned long long)fm->credit_batch,
                          (unsigned long long)fm->ring_size);
    if (fm->max_handlers < 1 || fm->max_handlers > 65536)
        return vmmc_error(VMMC_ERR_INVALID, "fm_init: %d handler ids (1..65536)", fm->max_handlers);
    if (fm->stack_size < 16384)
        fm->stack_size = 16384;
    fm->mt = (fm->flags & FM_THREADS) != 0;
    return VMMC_OK;
}

static int fm_connect_peer(fm_t *fm, fm_peer_t *p)
{
    char name[64];
    if (p->rank == fm->rank) {
        /* Loopback: our own region for ourselves, written directly. */
        p->map = p->ctrl;
        p->R = p->rR;
    } else {
        snprintf(name, sizeof name, "fm.ring.%d", fm->rank);
        int st = vmmc_import(fm->ep, p->rank, name, -1, &p->px);
        if (st != VMMC_OK)
            return st;
        size_t len = vmmc_proxy_length(p->px);
        if (len < FM_CTRL + 2 * 128 || ((len - FM_CTRL) & (len - FM_CTRL - 1)))
            return vmmc_error(VMMC_ERR_PROTOCOL, "fm_init: rank %d's ring '%s' has a bad length %zu",
                              p->rank, name, len);
        p->R = len - FM_CTRL;
        void *m = NULL;
        if (!(fm->flags & FM_NO_MAP)) {
            st = vmmc_proxy_map(p->px, &m);
            if (st == VMMC_OK) {
                p->map = m;
                FM_CNT(fm, FM_C_MAPPED, 1);
            }
            else if (st != VMMC_ERR_UNSUPPORTED)
                return st;
        }
    }
    if (!p->map)
        fm->unmapped++;
    /* Largest payload whose slot still leaves room for two in the ring. */
    uint64_t maxpay = p->R / 2 - FM_HDR;
    maxpay &= ~(uint64_t)(FM_LINE - 1);
    p->paymax = fm->packet_size < maxpay ? fm->packet_size : (size_t)maxpay;
    /* Staging packet: every packet when unmapped; short messages when
     * mapped (see fm_send.c). */
    size_t stage = p->map ? (p->paymax < FM_STAGE_MAX ? p->paymax : FM_STAGE_MAX) : p->paymax;
    p->staging = aligned_alloc(FM_LINE, fm_align64(FM_HDR + stage));
    if (!p->staging)
        return vmmc_error(VMMC_ERR_NOMEM, "fm_init: no memory for a staging packet");
    p->seq = 1;
    p->zc_ok = 1;
    return VMMC_OK;
}

int fm_init(vmmc_ep_t *ep, const fm_params_t *params, fm_t **out)
{
    if (!ep || !out)
        return vmmc_error(VMMC_ERR_INVALID, "fm_init: NULL %s", ep ? "output" : "endpoint");
    int st;
    fm_t *fm = calloc(1, sizeof *fm);
    if (!fm)
        return vmmc_error(VMMC_ERR_NOMEM, "fm_init: no memory");
    fm->ep = ep;
    fm->rank = vmmc_rank(ep);
    fm->size = vmmc_size(ep);
    atomic_init(&fm->rx_owner, 0);
    atomic_init(&fm->rlock, 0);
    if ((st = fm_setup_params(fm, params)) != VMMC_OK)
        goto fail;
    if (fm->rank < 0 || fm->size < 1) {
        st = vmmc_error(VMMC_ERR_ENDPOINT, "fm_init: endpoint has no rank");
        goto fail;
    }
    fm->handlers = calloc((size_t)fm->max_handlers, sizeof *fm->handlers);
    fm->peers = calloc((size_t)fm->size, sizeof *fm->peers);
    fm->exports = calloc((size_t)fm->size, sizeof *fm->exports);
    if (!fm->handlers || !fm->peers || !fm->exports) {
        st = vmmc_error(VMMC_ERR_NOMEM, "fm_init: no memory for %d peers", fm->size);
        goto fail;
    }
    /* Each sender's ring and control lines are an allocation of their own,
     * exported whole to that sender alone: the core maps only a whole
     * allocation, and a mapping of one allocation reaches nothing of the
     * other senders' rings. Reads are granted too (a writable page is
     * readable anyway): the sender sees only what it wrote and what we
     * write back to it (credits, descriptors, the offer word). */
    size_t region = FM_CTRL + fm->ring_size;
    for (int r = 0; r < fm->size; r++) {
        fm_peer_t *p = &fm->peers[r];
        void *mem;
        if ((st = vmmc_mem_alloc(ep, region, &mem)) != VMMC_OK)
            goto fail;
        p->fm = fm;
        p->rank = r;
        p->ctrl = mem;
        p->ring = p->ctrl + FM_CTRL;
        p->rR = fm->ring_size;
        p->rseq = 1;
        p->seen_seq = 1;
        p->credit_word = (_Atomic uint64_t *)(p->ctrl + FM_CREDIT_OFF);
        p->ss.fm = p->rs.fm = fm;
        p->ss.peer = p->rs.peer = p;
        p->ss.kind = FM_SEND;
        p->rs.kind = FM_RECV;
        if (r == fm->rank)
            continue;
        char name[64];
        snprintf(name, sizeof name, "fm.ring.%d", r);
        vmmc_export_params_t ep_params = {
            .field_mask = VMMC_EXPORT_PARAM_IMPORTERS | VMMC_EXPORT_PARAM_FLAGS,
            .name = name,
            .addr = p->ctrl,
            .length = region,
            .flags = VMMC_EXPORT_READ,
            .importers = &p->rank,
            .num_importers = 1,
        };
        if ((st = vmmc_export(ep, &ep_params, &fm->exports[r])) != VMMC_OK)
            goto fail;
    }
    if (fm->size > 1 && (st = vmmc_barrier(ep)) != VMMC_OK)
        goto fail;
    for (int r = 0; r < fm->size; r++)
        if ((st = fm_connect_peer(fm, &fm->peers[r])) != VMMC_OK)
            goto fail;
    if ((st = vmmc_progress_hook_add(ep, fm_hook_poll, fm_hook_arm, fm)) != VMMC_OK)
        goto fail;
    fm->hook_added = 1;
    *out = fm;
    return VMMC_OK;
fail:
    fm->in_handler = 0;
    fm_finalize(fm);
    return st;
}

int fm_finalize(fm_t *fm)
{
    if (!fm)
        return vmmc_error(VMMC_ERR_INVALID, "fm_finalize: NULL fm");
    if (fm_in_handler(fm))
        return vmmc_error(VMMC_ERR_INVALID, "fm_finalize called from a handler");
    if (fm->peers) {
        for (int r = 0; r < fm->size; r++) {
            if (fm->peers[r].ctx)
                return vmmc_error(VMMC_ERR_BUSY, "fm_finalize: a handler for a message from rank "
                                  "%d is suspended", r);
            if (fm->peers[r].ss.open)
                return vmmc_error(VMMC_ERR_BUSY, "fm_finalize: a message to rank %d is open", r);
        }
    }
    if (fm->hook_added) {
        vmmc_progress_hook_remove(fm->ep, fm_hook_poll, fm);
        /* A concurrent arm call (made outside the core's progress lock) may
         * still be inside the hook: it holds the receive lock meanwhile. */
        fm_rlock(fm);
        fm_runlock(fm);
    }
    if (fm->peers) {
        for (int r = 0; r < fm->size; r++) {
            fm_peer_t *p = &fm->peers[r];
            if (p->px)
                vmmc_unimport(p->px);
            free(p->staging);
            if (fm->exports && fm->exports[r])
                vmmc_unexport(fm->exports[r]);
            if (p->ctrl)
                vmmc_mem_free(fm->ep, p->ctrl);
        }
    }
    fm_ctx_free_all(fm);
    free(fm->exports);
    free(fm->peers);
    free(fm->handlers);
    free(fm);
    return VMMC_OK;
}
