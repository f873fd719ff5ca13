/* Fast Messages: settings, parameters, handler table, counters. Channels
 * are opened and closed in fm_channel.c; see fm_int.h for the wire format,
 * fm_send.h and fm_recv.h for the paths. */
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
static int64_t cfg_channels;
static uint64_t cfg_open_wait;

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
    {"FM_CHANNELS", "16", "FM channels that may be open on one endpoint at once (each has its own "
     "rings, up to FM_RING_TOTAL)", VMMC_CFG_INT, &cfg_channels, 1, FM_CHANNEL_MAX},
    {"FM_OPEN_WAIT", "30s", "how long a blocking FM send waits for the destination to open the "
     "channel before it fails with VMMC_ERR_TIMEOUT", VMMC_CFG_TIME, &cfg_open_wait, 1000000ull,
     86400000000000ull},
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
    [FM_C_RINGS] = "rings",               [FM_C_RING_BYTES] = "ring_bytes",
    [FM_C_RING_REFUSED] = "ring_refused",
};

int fm_counter_get(const fm_t *fm, int i, const char **name, uint64_t *value)
{
    if (!fm || !name || !value)
        return vmmc_error(VMMC_ERR_INVALID, "fm_counter_get: NULL argument");
    if (fm->forked)
        return fm_forked_error(fm, "fm_counter_get");
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

int fm_cfg_channels(void)
{
    vmmc_config_load();
    return (int)cfg_channels;
}

int fm_nodeid(const fm_t *fm)
{
    if (!fm)
        return vmmc_error(VMMC_ERR_INVALID, "fm_nodeid: NULL fm");
    return fm->forked ? fm_forked_error(fm, "fm_nodeid") : fm->rank;
}

int fm_numnodes(const fm_t *fm)
{
    if (!fm)
        return vmmc_error(VMMC_ERR_INVALID, "fm_numnodes: NULL fm");
    return fm->forked ? fm_forked_error(fm, "fm_numnodes") : fm->size;
}

int fm_register_handler(fm_t *fm, int id, fm_handler_t h, void *arg)
{
    if (!fm || !h)
        return vmmc_error(VMMC_ERR_INVALID, "fm_register_handler: NULL %s", fm ? "handler" : "fm");
    if (fm->forked)
        return fm_forked_error(fm, "fm_register_handler");
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
int fm_setup_params(fm_t *fm, const fm_params_t *pa)
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
    fm->open_wait_ms = (int)(cfg_open_wait / 1000000u);
    if (pa) {
        if (pa->field_mask & FM_PARAM_FLAGS) {
            if (pa->flags & ~(unsigned)(FM_NONBLOCK | FM_NO_MAP | FM_THREADS))
                return vmmc_error(VMMC_ERR_INVALID, "fm: unknown flags 0x%x", pa->flags);
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
        if (pa->field_mask & FM_PARAM_OPEN_WAIT) {
            if (pa->open_wait_ms <= 0)
                return vmmc_error(VMMC_ERR_INVALID, "fm: open_wait_ms %d must be > 0",
                                  pa->open_wait_ms);
            fm->open_wait_ms = pa->open_wait_ms;
        }
    }
    if (fm->packet_size < 8 || fm->packet_size > (1u << 30))
        return vmmc_error(VMMC_ERR_INVALID, "fm: packet size %zu outside 8 B..1 GiB",
                          fm->packet_size);
    /* A power of two, so that ring offsets are a mask, not a division. */
    if (fm->ring_size > (1ull << 40))
        return vmmc_error(VMMC_ERR_INVALID, "fm: ring of %llu bytes is too large",
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
        return vmmc_error(VMMC_ERR_INVALID, "fm: ring of %llu bytes holds fewer than two "
                          "packets of %zu bytes (VMMC_FM_RING >= 2 * (VMMC_FM_PACKET + 64))",
                          (unsigned long long)fm->ring_size, fm->packet_size);
    if (fm->credit_batch == 0)
        fm->credit_batch = fm->ring_size / 4;
    if (fm->credit_batch > fm->ring_size / 2)
        return vmmc_error(VMMC_ERR_INVALID, "fm: credit batch %llu exceeds half the ring "
                          "(%llu bytes)", (unsigned long long)fm->credit_batch,
                          (unsigned long long)fm->ring_size);
    if (fm->max_handlers < 1 || fm->max_handlers > 65536)
        return vmmc_error(VMMC_ERR_INVALID, "fm: %d handler ids (1..65536)", fm->max_handlers);
    if (fm->stack_size < 16384)
        fm->stack_size = 16384;
    fm->mt = (fm->flags & FM_THREADS) != 0;
    return VMMC_OK;
}
