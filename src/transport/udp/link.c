#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sendmmsg, recvmmsg, ppoll */
#endif
/* UDP link: settings, set-up and teardown, counters. The send side is in
 * link_tx.c, the receive side in link_rx.c, the progress thread in
 * link_progress.c. */
#include "transport/udp/link_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "transport/udp/crc32c.h"
#include "util/config.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

/* ---- settings ----------------------------------------------------------- */

static uint64_t cfg_dgram, cfg_sockbuf, cfg_rto_min, cfg_rto_max, cfg_rto_init;
static uint64_t cfg_keepalive, cfg_peer_timeout, cfg_busy_retry;
uint64_t vmmc_udp_cfg_poll_quiet, vmmc_udp_cfg_poll_recheck, vmmc_udp_cfg_ack_delay;
uint64_t vmmc_udp_cfg_rpc_spin, vmmc_udp_cfg_serve_spin;
uint64_t vmmc_udp_cfg_coalesce, vmmc_udp_cfg_coalesce_max;
static int64_t cfg_window;
static const char *cfg_fault;
static const vmmc_cfg_entry_t udp_entries[] = {
    {"UDP_DGRAM_SIZE", "63K", "largest UDP datagram the link sends (header included; "
     "256 .. 65507; use 1472 on paths with a 1500-byte MTU)", VMMC_CFG_SIZE, &cfg_dgram, 256, 65507},
    {"UDP_WINDOW", "64", "datagrams in flight per peer and direction (2 .. 1024); also the "
     "receive reorder buffer", VMMC_CFG_INT, &cfg_window, 2, 1024},
    {"UDP_SOCKBUF", "8M", "socket send/receive buffer size requested", VMMC_CFG_SIZE,
     &cfg_sockbuf, 65536, 1ull << 30},
    {"UDP_RTO_MIN", "200us", "floor of the retransmission timeout (above it, the timeout "
     "follows the measured round trip)", VMMC_CFG_TIME, &cfg_rto_min, 10000, 10000000000ull},
    {"UDP_RTO_MAX", "20ms", "ceiling of the retransmission timeout (after backoff; while the "
     "peer stays silent, one datagram is resent per timeout)",
     VMMC_CFG_TIME, &cfg_rto_max, 10000, 60000000000ull},
    {"UDP_RTO_INIT", "20ms", "retransmission timeout before the first RTT sample",
     VMMC_CFG_TIME, &cfg_rto_init, 10000, 60000000000ull},
    {"UDP_KEEPALIVE", "250ms", "send a keep-alive to a peer after this long without sending",
     VMMC_CFG_TIME, &cfg_keepalive, 1000000, 60000000000ull},
    {"UDP_PEER_TIMEOUT", "3s", "declare a peer dead after this long without a datagram from "
     "it, or with a datagram unacknowledged", VMMC_CFG_TIME, &cfg_peer_timeout, 2000000, 3600000000000ull},
    {"UDP_BUSY_RETRY", "200us", "when the receiver cannot take data (e.g. a redirectable "
     "export's arrival log is full), offer it again after this long", VMMC_CFG_TIME,
     &cfg_busy_retry, 1000, 1000000000ull},
    {"UDP_ACK_DELAY", "50us", "a standalone ACK waits this long for data going back to carry "
     "it (sent at once after a quarter window); 0 acknowledges every receive at once",
     VMMC_CFG_TIME, &vmmc_udp_cfg_ack_delay},
    {"UDP_POLL_QUIET", "200us", "while the application polls (vmmc_progress) more often than "
     "this, the progress thread leaves the socket to it and only runs the timers (0: never)",
     VMMC_CFG_TIME, &vmmc_udp_cfg_poll_quiet},
    {"UDP_POLL_RECHECK", "1ms", "longest the progress thread leaves the socket to a polling "
     "application before it looks again (it starts at UDP_POLL_QUIET and doubles while the "
     "application keeps polling; a vmmc_wait() that goes to sleep hands the socket back at once)",
     VMMC_CFG_TIME, &vmmc_udp_cfg_poll_recheck},
    {"UDP_RPC_SPIN", "50us", "a remote read or atomic receives on the socket itself this long "
     "while it waits for its answer, before it sleeps until the progress thread has it "
     "(0: sleep at once; a wake-up across threads costs ~30us here)",
     VMMC_CFG_TIME, &vmmc_udp_cfg_rpc_spin, 0, 1000000000ull},
    {"UDP_SERVE_SPIN", "50us", "after the progress thread answered a remote read or atomic, "
     "it keeps polling the socket this long before it sleeps, "
     "so that the next request of a stream is answered without a wake-up (0: sleep at once)",
     VMMC_CFG_TIME, &vmmc_udp_cfg_serve_spin, 0, 1000000000ull},
    {"UDP_COALESCE", "20us", "small writes to a peer (up to 4 KiB) may wait this long in its "
     "open batch to leave with the next ones as one datagram; anything else sent to the peer, a "
     "flush, a poll or a sleep sends the batch at once (0: off)", VMMC_CFG_TIME,
     &vmmc_udp_cfg_coalesce, 0, 1000000000ull},
    {"UDP_COALESCE_MAX", "16K", "largest datagram a batch of small writes grows to (header "
     "included; at most UDP_DGRAM_SIZE); a batch leaves earlier, once it holds 1472 bytes and 4 "
     "records", VMMC_CFG_SIZE, &vmmc_udp_cfg_coalesce_max, 256, 65507},
    {"UDP_FAULT", "", "TEST FACILITY: inject faults on received datagrams, e.g. "
     "drop=0.05,dup=0.01,reorder=0.02,delay=200us,seed=7", VMMC_CFG_STRING, &cfg_fault},
};
VMMC_CONFIG_TABLE(udp_cfg, "udp", udp_entries);

static vmmc_udp_settings_t settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static uint64_t clampu(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void settings_load(void)
{
    vmmc_config_load();
    settings.dgram_size = clampu(cfg_dgram, 256, VMMC_UDP_MAX_DGRAM);
    settings.window = (uint64_t)(cfg_window < 2 ? 2 : cfg_window > 1024 ? 1024 : cfg_window);
    settings.sockbuf = clampu(cfg_sockbuf, 64 * 1024, 1ull << 30);
    settings.rto_min_ns = clampu(cfg_rto_min, 10000, 10000000000ull);
    settings.rto_max_ns = clampu(cfg_rto_max, settings.rto_min_ns, 60000000000ull);
    settings.rto_init_ns = clampu(cfg_rto_init, settings.rto_min_ns, settings.rto_max_ns);
    settings.keepalive_ns = clampu(cfg_keepalive, 1000000, 60000000000ull);
    settings.peer_timeout_ns = clampu(cfg_peer_timeout, 2 * settings.keepalive_ns,
                                      3600000000000ull);
    settings.busy_retry_ns = clampu(cfg_busy_retry, 1000, 1000000000ull);
    settings.fault = cfg_fault ? cfg_fault : "";
    if (vmmc_udp_cfg_poll_recheck < vmmc_udp_cfg_poll_quiet)
        vmmc_udp_cfg_poll_recheck = vmmc_udp_cfg_poll_quiet;
}

const vmmc_udp_settings_t *vmmc_udp_settings(void)
{
    pthread_once(&settings_once, settings_load);
    return &settings;
}

/* ---- helpers ------------------------------------------------------------ */

static void sockbuf(int fd, int opt_force, int opt, uint64_t size)
{
    int v = (int)size;
    if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof v) != 0)
        (void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v);
}

/* ---- open / close ------------------------------------------------------- */

int vmmc_udp_link_open(const vmmc_udp_link_params_t *p, vmmc_udp_link_t **out)
{
    const vmmc_udp_settings_t *s = vmmc_udp_settings();
    if (!p || !out || !p->deliver || (!p->bind_addr && !p->adopt_fd) || p->max_peers == 0 ||
        p->max_peers > (1u << 20))
        return vmmc_error(VMMC_ERR_INVALID, "udp link: bad parameters");
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (p->adopt_fd && getsockname(p->fd, (struct sockaddr *)&bound, &blen) != 0)
        return vmmc_error_sys("udp link: socket %d to adopt", p->fd);
    int fam = p->adopt_fd ? bound.ss_family : p->bind_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6)
        return vmmc_error(VMMC_ERR_INVALID, "udp link: address family %d is not IPv4/IPv6", fam);

    vmmc_udp_link_t *l = calloc(1, sizeof *l);
    if (!l)
        return vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory");
    int st;
    l->p = *p;
    l->fd = l->evfd = -1;
    l->window = (uint32_t)s->window;
    l->ring = l->window + 1;
    l->dgram = (uint32_t)s->dgram_size;
    if (fam == AF_INET6 && l->dgram > 65527)
        l->dgram = 65527;
    l->payload = l->dgram - VMMC_UDP_HDR_SIZE;
    l->coalesce_ns = vmmc_udp_cfg_coalesce;
    {
        uint64_t cm = vmmc_udp_cfg_coalesce_max < l->dgram ? vmmc_udp_cfg_coalesce_max : l->dgram;
        l->bat_max = cm > VMMC_UDP_HDR_SIZE ? (uint32_t)(cm - VMMC_UDP_HDR_SIZE) : 0;
    }
    l->recheck_ns = vmmc_udp_cfg_poll_quiet;

    if (p->bindings) {
        l->b = *p->bindings;
    } else if (s->fault[0]) {
        vmmc_udp_fault_spec_t spec;
        if ((st = vmmc_udp_fault_parse(s->fault, &spec)) != VMMC_OK)
            goto fail;
        if ((st = vmmc_udp_bindings_fault(&l->b, &spec, l->dgram)) != VMMC_OK)
            goto fail;
        vmmc_warn("udp link: fault injection on (VMMC_UDP_FAULT=%s): a test facility", s->fault);
    } else {
        vmmc_udp_bindings_plain(&l->b);
    }

    pthread_mutex_init(&l->rx_lock, NULL);
    pthread_mutex_init(&l->add_lock, NULL);
    l->nchunks = (p->max_peers + LINK_CHUNK - 1) / LINK_CHUNK;
    l->chunks = calloc(l->nchunks, sizeof *l->chunks);
    rid_tab_t *rids = calloc(1, sizeof *rids + 16 * sizeof rids->e[0]);
    if (rids)
        rids->cap = 16;
    l->rids = rids;
    if (!l->chunks || !rids) {
        st = vmmc_error(VMMC_ERR_NOMEM, "udp link: out of memory for %u peers", p->max_peers);
        goto fail;
    }

    if (p->adopt_fd) {
        l->fd = p->fd;
        int fl = fcntl(l->fd, F_GETFL);
        if (fl < 0 || fcntl(l->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
            st = vmmc_error_sys("udp link: fcntl");
            goto fail;
        }
    } else {
        l->fd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (l->fd < 0) {
            st = vmmc_error_sys("udp link: socket");
            goto fail;
        }
        if (fam == AF_INET6) {
            int on = 1;
            (void)setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
        }
    }
    sockbuf(l->fd, SO_RCVBUFFORCE, SO_RCVBUF, s->sockbuf);
    sockbuf(l->fd, SO_SNDBUFFORCE, SO_SNDBUF, s->sockbuf);
    if (!p->adopt_fd && bind(l->fd, p->bind_addr, p->bind_len) != 0) {
        st = vmmc_error_sys("udp link: bind");
        goto fail;
    }
    l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->evfd < 0) {
        st = vmmc_error_sys("udp link: eventfd");
        goto fail;
    }
    if ((errno = pthread_create(&l->thread, NULL, vmmc_udp__progress_main, l)) != 0) {
        st = vmmc_error_sys("udp link: cannot start the progress thread");
        goto fail;
    }
    l->thread_started = 1;
    *out = l;
    return VMMC_OK;

fail:
    if (l->evfd >= 0)
        close(l->evfd);
    if (l->fd >= 0 && !p->adopt_fd)
        close(l->fd); /* an adopted socket stays the caller's on failure */
    if (l->b.destroy)
        l->b.destroy(l->b.ctx);
    free(l->chunks);
    free(l->rids);
    free(l);
    return st;
}

static void wake_thread(vmmc_udp_link_t *l)
{
    __atomic_fetch_add(&l->c.thread_wakes, 1, __ATOMIC_RELAXED);
    uint64_t one = 1;
    ssize_t w = write(l->evfd, &one, sizeof one);
    (void)w;
}

void vmmc_udp_link_wake(vmmc_udp_link_t *l)
{
    wake_thread(l);
}

/* Wake the progress thread out of the sleep @su it published (sleep_until),
 * once: the first caller takes the published deadline away. A woken thread
 * that shares its cpu with a polling application may not run for a while,
 * and every poll meanwhile would otherwise write the eventfd again (a
 * system call per poll, hundreds in a row were seen). */
void vmmc_udp__wake_sleep(vmmc_udp_link_t *l, uint64_t su)
{
    if (atomic_compare_exchange_strong(&l->sleep_until, &su, 0))
        wake_thread(l);
}

VMMC_COLD unsigned vmmc_udp__rx_bufs(vmmc_udp_link_t *l, int nested, unsigned want)
{
    unsigned base = nested ? RX_BATCH : 0, *have = nested ? &l->rx_nested : &l->rx_outer;
    while (*have < want) {
        unsigned i = base + *have;
        if (!(l->rxbufs[i] = malloc(l->dgram)))
            break;
        l->rxiov[i].iov_base = l->rxbufs[i];
        l->rxiov[i].iov_len = l->dgram;
        memset(&l->rxmsg[i], 0, sizeof l->rxmsg[i]);
        l->rxmsg[i].msg_hdr.msg_iov = &l->rxiov[i];
        l->rxmsg[i].msg_hdr.msg_iovlen = 1;
        l->rxmsg[i].msg_hdr.msg_name = &l->rxaddr[i];
        ++*have;
    }
    return *have;
}

VMMC_COLD int vmmc_udp__slot_grow(const vmmc_udp_link_t *l, uint8_t **buf, uint32_t *cap,
                                  size_t need)
{
    size_t c = 256;
    while (c < need)
        c <<= 1;
    if (c > l->dgram)
        c = l->dgram;
    uint8_t *n = malloc(c);
    if (!n)
        return -1;
    free(*buf);
    *buf = n;
    *cap = (uint32_t)c;
    return 0;
}

/* The receive callback has room again. Every drain of notifications says
 * so; the progress thread is woken only if data was refused since the last
 * retry (a drain by a polling application would otherwise wake it for
 * every notification: a context switch on the poller's core each time). A
 * refusal that races with this retry is offered again by its peer's
 * back-off timer (VMMC_UDP_BUSY_RETRY) at the latest. */
void vmmc_udp_link_retry(vmmc_udp_link_t *l)
{
    atomic_store(&l->retry, 1);
    if (atomic_exchange(&l->held, 0)) {
        __atomic_fetch_add(&l->c.retry_wakes, 1, __ATOMIC_RELAXED);
        wake_thread(l);
    }
}

void vmmc_udp_link_close(vmmc_udp_link_t *l, int timeout_ms)
{
    if (!l)
        return;
    /* Let what was sent arrive, then say goodbye so peers do not wait for
     * the timeout to learn we left. */
    uint64_t deadline = vmmc_udp_now() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    FOR_PEERS(l, i, p) {
        uint64_t now = vmmc_udp_now();
        int left = now >= deadline ? 0 : (int)((deadline - now) / 1000000ull);
        if (p->state == PEER_ALIVE)
            (void)vmmc_udp_link_flush(l, i, left);
    }
    atomic_store(&l->closing, 1);
    FOR_PEERS(l, i, p) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    /* The progress thread says goodbye as it stops: it owns the receive
     * state, so its goodbye carries the final acknowledgements. */
    atomic_store(&l->stop, 1);
    wake_thread(l);
    if (l->thread_started && !pthread_equal(pthread_self(), l->thread))
        pthread_join(l->thread, NULL);
    close(l->fd);
    close(l->evfd);
    FOR_PEERS(l, i, p) {
        if (p->tx)
            for (uint32_t k = 0; k < l->window; k++)
                free(p->tx[k].buf);
        if (p->rx)
            for (uint32_t k = 0; k < l->ring; k++)
                free(p->rx[k].buf);
        free(p->tx);
        free(p->rx);
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
    }
    l->b.destroy(l->b.ctx);
    pthread_mutex_destroy(&l->rx_lock);
    pthread_mutex_destroy(&l->add_lock);
    for (uint32_t c = 0; c < l->nchunks; c++)
        free((void *)l->chunks[c]);
    free(l->chunks);
    for (rid_tab_t *t = l->rids, *o; t; t = o) {
        o = t->old;
        free(t);
    }
    for (unsigned i = 0; i < RX_BATCH + RX_BATCH_NESTED; i++)
        free(l->rxbufs[i]);
    free(l);
}

int vmmc_udp_link_local_addr(vmmc_udp_link_t *l, struct sockaddr_storage *ss, socklen_t *len)
{
    *len = sizeof *ss;
    if (getsockname(l->fd, (struct sockaddr *)ss, len) != 0)
        return vmmc_error_sys("udp link: getsockname");
    return VMMC_OK;
}

size_t vmmc_udp_link_payload_max(const vmmc_udp_link_t *l)
{
    return l->payload;
}

const vmmc_udp_bindings_t *vmmc_udp_link_bindings(const vmmc_udp_link_t *l)
{
    return &l->b;
}

/* ---- counters ----------------------------------------------------------- */

#define C(f) {#f, offsetof(vmmc_udp_counters_t, f)}
static const struct {
    const char *name;
    size_t off;
} counter_names[] = {
    C(tx_dgrams), C(tx_bytes), C(rx_dgrams), C(rx_bytes), C(tx_data), C(retransmits),
    C(fast_retransmits), C(rto_expiries), C(acks_sent), C(keepalives_sent),
    C(delivered_frags), C(delivered_bytes), C(drop_truncated), C(drop_magic),
    C(drop_version), C(drop_header), C(drop_auth), C(drop_unknown_peer), C(drop_bad_token),
    C(drop_window), C(drop_duplicate), C(drop_bad_ack), C(drop_replay), C(drop_dead_peer),
    C(peers_dead), C(loss_probes),
    C(send_errors), C(window_waits), C(deliver_busy), C(refusals_sent), C(refused_by_peer),
    C(linger_delivered), C(tx_coalesced), C(tx_batches), C(rx_records), C(drop_records),
    C(thread_wakes), C(retry_wakes),
};
#undef C

static uint64_t counter_sum(vmmc_udp_link_t *l, size_t off)
{
    uint64_t v = __atomic_load_n((uint64_t *)((char *)&l->c + off), __ATOMIC_RELAXED);
    FOR_PEERS(l, i, p)
        v += __atomic_load_n((uint64_t *)((char *)&p->c + off), __ATOMIC_RELAXED);
    return v;
}

void vmmc_udp_link_counters(vmmc_udp_link_t *l, vmmc_udp_counters_t *c)
{
    for (size_t i = 0; i < sizeof counter_names / sizeof counter_names[0]; i++)
        *(uint64_t *)((char *)c + counter_names[i].off) = counter_sum(l, counter_names[i].off);
}

int vmmc_udp_link_counter_get(vmmc_udp_link_t *l, int i, const char **name, uint64_t *value)
{
    if (i < 0 || (size_t)i >= sizeof counter_names / sizeof counter_names[0])
        return VMMC_ERR_NOT_FOUND;
    *name = counter_names[i].name;
    *value = counter_sum(l, counter_names[i].off);
    return VMMC_OK;
}
