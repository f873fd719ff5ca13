/* The endpoint: opening one (vmmc_ep_open), the job layer on top of it
 * (vmmc_init: bootstrap, one peer per rank, barrier), closing, settings, info. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/export.h"
#include "util/config.h"
#include "vmmc_build_config.h"

vmmc_core_cfg_t vmmc_core_cfg;

static const vmmc_cfg_entry_t core_entries[] = {
    {"SPIN", "50us", "how long vmmc_wait() spins before it sleeps (a cross-core wake costs ~30us here)",
     VMMC_CFG_TIME, &vmmc_core_cfg.spin_ns, 0, 10000000000ull},
    {"DMA_SPIN", "200us", "how long the copy engine spins for new work before it sleeps",
     VMMC_CFG_TIME, &vmmc_core_cfg.dma_spin_ns, 0, 10000000000ull},
    {"ASYNC_INLINE", "16K", "asynchronous sends up to this size are done inline by the caller",
     VMMC_CFG_SIZE, &vmmc_core_cfg.async_inline_max},
    {"NOTIFY_QUEUE", "256",
     "notification records queued per sender before it waits (a power of two finds ring slots "
     "without a division)",
     VMMC_CFG_INT, &vmmc_core_cfg.notify_queue, 2, 1 << 20},
    {"MAX_EXPORTS", "4096", "exports per endpoint", VMMC_CFG_INT, &vmmc_core_cfg.max_exports,
     1, 1 << 24},
    {"TRANSPORT", "auto", "auto (per peer, the registered transport that reaches it best: shm on this host, udp "
     "elsewhere), or a transport's name (`vmmc info` lists them): only that one",
     VMMC_CFG_STRING, &vmmc_core_cfg.transport},
    {"SERVICE_THREAD", "no", "start the notification service thread at vmmc_init()",
     VMMC_CFG_BOOL, &vmmc_core_cfg.service_thread},
    {"DMA_CPU", "auto", "where the copy engine runs: auto (any CPU but the caller's), inherit, or a CPU number",
     VMMC_CFG_STRING, &vmmc_core_cfg.dma_cpu},
    {"STATS", "", "at vmmc_finalize, write this endpoint's counters (the ones vmmc_counter_get "
     "lists: notifications, wake-ups, udp datagrams, refusals by reason, ...) to stdout, stderr, "
     "or a file (%r: rank, %p: pid; appended); empty: nowhere", VMMC_CFG_STRING,
     &vmmc_core_cfg.stats},
    {"CONNECT_TIMEOUT", "10s", "how long to wait for a peer's control handshake",
     VMMC_CFG_TIME, &vmmc_core_cfg.connect_timeout_ns, 1000000ull, 86400000000000ull},
};
VMMC_CONFIG_TABLE(core_cfg_table, "core", core_entries);

/* Same host means same kernel and same network namespace (abstract Unix
 * sockets live in the network namespace). */
static void host_id(char *buf, size_t cap)
{
    char boot[64] = "unknown";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        close(fd);
        if (n > 0) {
            boot[n] = 0;
            char *nl = strchr(boot, '\n');
            if (nl)
                *nl = 0;
        }
    }
    struct stat st;
    unsigned long ns = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
    snprintf(buf, cap, "%s-%lu", boot, ns);
}

/* Everything an endpoint needs before it has peers: settings, tables,
 * control thread (not running yet), transports' sockets, its address. */
static int ep_create(const vmmc_ep_params_t *params, vmmc_ep_t **out, int *service)
{
    int cfg_rc = vmmc_config_load(); /* a refused VMMC_* value: say so, do not run */
    if (cfg_rc != VMMC_OK)
        return cfg_rc;
    vmmc_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the endpoint");
    ep->epfd = ep->ctl_wake_fd = ep->evfd = -1;
    ep->boot.fd = -1;
    ep->boot_dead_rank = -1;
    ep->size = 1;
    vmmc_wait_init(ep);
    ep->pid = getpid();
    pthread_mutex_init(&ep->lock, NULL);
    pthread_mutex_init(&ep->peers_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ep->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&ep->mem_lock, NULL);
    pthread_mutex_init(&ep->progress_lock, NULL);
    pthread_mutex_init(&ep->hooks_lock, NULL);
    pthread_mutex_init(&ep->dma_lock, NULL);
    pthread_cond_init(&ep->dma_cond, NULL);
    ep->sleeping = &ep->sleeping_local;
    ep->spin_ns = vmmc_core_cfg.spin_ns;
    *service = vmmc_core_cfg.service_thread;
    if (params) {
        if (params->field_mask & VMMC_EP_PARAM_SPIN_NS)
            ep->spin_ns = params->spin_ns;
        if (params->field_mask & VMMC_EP_PARAM_SERVICE_THREAD)
            *service = params->service_thread;
    }
    *out = ep;
    if (vmmc_core_cfg.max_exports < 1 || vmmc_core_cfg.max_exports > (1 << 24) ||
        vmmc_core_cfg.notify_queue < 2 || vmmc_core_cfg.notify_queue > (1 << 20))
        return vmmc_error(VMMC_ERR_INVALID,
                          "VMMC_MAX_EXPORTS must be 1..16M and VMMC_NOTIFY_QUEUE 2..1M");
    int rc;
    if ((rc = vmmc_tl_check_choice()) != VMMC_OK)
        return rc;
    ep->max_exports = (uint32_t)vmmc_core_cfg.max_exports;
    ep->exports = calloc(ep->max_exports, sizeof *ep->exports);
    ep->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!ep->exports)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the export table");
    if (ep->evfd < 0)
        return vmmc_error_sys("eventfd");
    if ((rc = vmmc_ctl_start(ep)) != VMMC_OK)
        return rc;
    host_id(ep->host_id, sizeof ep->host_id);
    char *card = ep->addr;
    size_t cap = sizeof ep->addr;
    snprintf(card, cap, "host=%s;pid=%d;", ep->host_id, (int)ep->pid);
    if ((rc = vmmc_tl_open_all(ep, card, cap)) != VMMC_OK)
        return rc;
    ep->addr_len = strlen(card);
    if ((rc = vmmc_addr_check(ep->addr, ep->addr_len)) != VMMC_OK) /* our own: a bug if not */
        return rc;
    return VMMC_OK;
}

/* Peers known: start the transports, the control thread, the service. */
static int ep_run(vmmc_ep_t *ep, int service)
{
    int rc;
    if ((rc = vmmc_tl_start_all(ep)) != VMMC_OK)
        return rc;
    if ((rc = vmmc_ctl_run(ep)) != VMMC_OK)
        return rc;
    if (service && (rc = vmmc_service_start(ep)) != VMMC_OK)
        return rc;
    return VMMC_OK;
}

int vmmc_ep_open(const vmmc_ep_params_t *params, vmmc_ep_t **out)
{
    if (!out)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_ep_open: NULL result pointer");
    vmmc_ep_t *ep = NULL;
    int service, rc = ep_create(params, &ep, &service);
    if (rc == VMMC_OK) {
        ep->rank = 0; /* handle 0 is the endpoint itself */
        rc = vmmc_peer_insert(ep, ep->addr, ep->addr_len, ep->pid);
        if (rc >= 0)
            rc = ep_run(ep, service);
    }
    if (rc != VMMC_OK) {
        if (ep)
            vmmc_finalize(ep);
        return rc;
    }
    *out = ep;
    return VMMC_OK;
}

int vmmc_ep_close(vmmc_ep_t *ep)
{
    return vmmc_finalize(ep);
}

int vmmc_init(const vmmc_ep_params_t *params, vmmc_ep_t **out)
{
    if (!out)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_init: NULL result pointer");
    vmmc_ep_t *ep = NULL;
    int service, rc = ep_create(params, &ep, &service);
    if (rc != VMMC_OK)
        goto fail;
    ep->in_job = 1;
    if ((rc = vmmc_boot_init(&ep->boot, ep->addr,
                             (int)(vmmc_core_cfg.connect_timeout_ns / 1000000) * 3)) != VMMC_OK)
        goto fail;
    ep->rank = ep->boot.rank;
    ep->size = ep->boot.size;
    /* Every rank's address, in rank order: the handle of rank r is r. The
     * cards come from the other ranks: each is checked as any address is. */
    for (int r = 0; r < ep->size; r++) {
        const char *card = r == ep->rank ? ep->addr : ep->boot.peers[r].card;
        size_t len = card ? strlen(card) : 0;
        if (r != ep->rank && (rc = vmmc_addr_check(card, len)) != VMMC_OK) {
            rc = vmmc_error(VMMC_ERR_PROTOCOL, "rank %d published a malformed address: %s", r,
                            vmmc_last_error());
            goto fail;
        }
        rc = vmmc_peer_insert(ep, card, len, r == ep->rank ? ep->pid : ep->boot.peers[r].pid);
        if (rc < 0)
            goto fail;
        if (rc != r) {
            rc = vmmc_error(VMMC_ERR_ENDPOINT, "rank %d got handle %d", r, rc);
            goto fail;
        }
    }
    if ((rc = ep_run(ep, service)) != VMMC_OK)
        goto fail;
    if ((rc = vmmc_fork_track(ep)) != VMMC_OK)
        goto fail;
    if (vmmc_counters_open(ep) != VMMC_OK) /* not fatal: the job runs, unobserved */
        vmmc_warn("counters not published: %s", vmmc_last_error());
    *out = ep;
    return VMMC_OK;
fail:
    if (ep)
        vmmc_finalize(ep);
    return rc;
}

int vmmc_finalize(vmmc_ep_t *ep)
{
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_finalize: NULL endpoint");
    if (atomic_load(&ep->forked))
        return VMMC_OK; /* the parent's: this child drops its copy and tells nobody (fork.c) */
    vmmc_fork_untrack(ep);
    ep->closing = 1;
    vmmc_service_stop_internal(ep);
    vmmc_stats_dump(ep); /* while the transports still hold their counters */
    vmmc_dma_stop(ep);
    vmmc_export_all_revoke(ep); /* nothing of importers lands after we return */
    vmmc_ctl_stop(ep);
    vmmc_counters_close(ep);
    vmmc_tl_stop_all(ep);
    vmmc_mkey_cache_destroy(ep);
    vmmc_import_all_destroy(ep);
    vmmc_export_all_destroy(ep);
    vmmc_tl_close_all(ep);
    vmmc_boot_fini(&ep->boot);
    vmmc_peer_table_free(ep);
    for (vmmc_mem_t *m = ep->mem, *n; m; m = n) {
        n = m->next;
        vmmc_mem_release(m);
    }
    free(ep->exports);
    free(ep->pending);
    vmmc_wait_fini(ep);
    if (ep->evfd >= 0)
        close(ep->evfd);
    pthread_mutex_destroy(&ep->lock);
    pthread_mutex_destroy(&ep->peers_lock);
    pthread_cond_destroy(&ep->cond);
    free(ep);
    return VMMC_OK;
}

int vmmc_rank(const vmmc_ep_t *ep)
{
    return ep ? ep->rank : VMMC_ERR_INVALID;
}

int vmmc_size(const vmmc_ep_t *ep)
{
    return ep ? ep->size : VMMC_ERR_INVALID;
}

int vmmc_peer_alive(vmmc_ep_t *ep, int rank)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_peer_alive: NULL endpoint");
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    if (!p)
        return st;
    return atomic_load(&p->state) != PEER_DEAD;
}

int vmmc_peer_local(vmmc_ep_t *ep, int rank)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_peer_local: NULL endpoint");
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    if (!p)
        return st;
    if (!p->tl)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE, "vmmc_peer_local: no transport reaches rank %d",
                          rank);
    return VMMC_TL_CAN_MAP(p->tl) ? 1 : 0;
}

typedef struct barrier_wait {
    vmmc_ep_t *ep;
    uint64_t epoch;
} barrier_wait_t;

static int barrier_over(void *arg)
{
    barrier_wait_t *bw = arg;
    vmmc_ep_t *ep = bw->ep;
    pthread_mutex_lock(&ep->lock);
    int over = ep->barrier_done >= bw->epoch || ep->launcher_closed || ep->boot_dead_rank >= 0;
    pthread_mutex_unlock(&ep->lock);
    return over;
}

/* The barrier cannot complete: say which rank the bootstrap reported dead. */
static int barrier_dead(vmmc_ep_t *ep, int dead, const char *what)
{
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, dead, &st);
    if (p && atomic_load(&p->state) == PEER_DEAD)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "barrier %s: rank %d is dead: %s", what, dead,
                          p->dead_why);
    return vmmc_error(VMMC_ERR_PEER_DEAD, "barrier %s: rank %d is dead", what, dead);
}

int vmmc_barrier(vmmc_ep_t *ep)
{
    VMMC_FORK_CHECK(ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_barrier: NULL endpoint");
    if (ep->boot.fd < 0 && ep->size == 1)
        return VMMC_OK;
    /* A barrier of the job cannot succeed once a rank of it has died. Only
     * the bootstrap's death notices count: they are ordered with its barrier
     * completions, whereas a rank that finished the barrier and then left
     * may close its connections to us before we see the completion. */
    pthread_mutex_lock(&ep->lock);
    int dead = ep->boot_dead_rank;
    uint64_t epoch = dead < 0 ? ++ep->barrier_epoch : 0;
    pthread_mutex_unlock(&ep->lock);
    if (dead >= 0)
        return barrier_dead(ep, dead, "refused");
    /* What was sent before the barrier has landed when the barrier ends. */
    int frc = vmmc_tl_flush_all(ep);
    if (frc != VMMC_OK)
        return frc;
    int rc = vmmc_boot_barrier_send(&ep->boot, epoch);
    if (rc != VMMC_OK)
        return rc;
    /* Keep serving handlers and progress hooks while waiting (a peer may
     * need our credits or answers to reach the barrier at all). */
    barrier_wait_t bw = {ep, epoch};
    vmmc_wait_until(ep, barrier_over, &bw, -1);
    /* The bootstrap completes a barrier without the ranks that died (after
     * telling us of them): only a completion that came before any death
     * notice is a success. */
    pthread_mutex_lock(&ep->lock);
    int ok = ep->barrier_ok >= epoch;
    int closed = ep->launcher_closed;
    dead = ep->boot_dead_rank;
    pthread_mutex_unlock(&ep->lock);
    if (ok)
        return VMMC_OK;
    if (dead >= 0)
        return barrier_dead(ep, dead, "failed");
    if (closed)
        return vmmc_error(VMMC_ERR_PEER_DEAD, "barrier failed: the launcher connection closed");
    return vmmc_error(VMMC_ERR_PEER_DEAD, "barrier failed: a rank died");
}

/* ---- introspection ---- */

int vmmc_info_get(int i, const char **key, const char **value)
{
    static char limits[4][64];
    vmmc_config_load();
    snprintf(limits[0], sizeof limits[0], "%d", VMMC_NAME_MAX - 1);
    snprintf(limits[1], sizeof limits[1], "%lld", (long long)vmmc_core_cfg.max_exports);
    snprintf(limits[2], sizeof limits[2], "%ld", sysconf(_SC_PAGESIZE));
    snprintf(limits[3], sizeof limits[3], "%lld", (long long)vmmc_core_cfg.notify_queue);
    struct { const char *k, *v; } facts[] = {
        {"version", VMMC_VERSION_STRING},
        {"bootstrap.launcher", "yes (vmmc run)"},
        {"bootstrap.tcp", "yes (VMMC_BOOTSTRAP=host:port)"},
        {"bootstrap.pmix", VMMC_HAVE_PMIX ? "yes" : "no (built without libpmix-dev)"},
        {"limit.export_name_bytes", limits[0]},
        {"limit.exports_per_endpoint", limits[1]},
        {"limit.page_size", limits[2]},
        {"limit.notifications_queued_per_sender", limits[3]},
        {"limit.max_ranks", "1024"},
    };
    enum { NF = sizeof facts / sizeof facts[0] };
    if (i < 0)
        return VMMC_ERR_NOT_FOUND;
    if (i >= NF) /* then one "transport.<name>" per registered transport */
        return vmmc_tl_info(i - NF, key, value);
    if (key)
        *key = facts[i].k;
    if (value)
        *value = facts[i].v;
    return VMMC_OK;
}

int vmmc_counter_get(vmmc_ep_t *ep, int i, const char **name, uint64_t *value)
{
    static const char *names[CNT_MAX] = {
        "notifications_sent", "notifications_run", "notifications_dropped",
        "async_sends_by_engine", "wakeups_sent", "sleeps", "imports_served", "exports",
        "redirect_bytes_direct", "redirect_bytes_copied", "control_messages_dropped",
        "notifications_refused", "connections_refused", "peers_accepted", "atomics_served",
        "atomics_refused", "notifications_waited", "service_borrows"};
    if (!ep || i < 0)
        return VMMC_ERR_NOT_FOUND;
    if (i >= CNT_MAX) /* then the transports' (udp: datagrams, drops by reason, ...) */
        return vmmc_tl_counter_get(ep, i - CNT_MAX, name, value);
    if (name)
        *name = names[i];
    if (value)
        *value = atomic_load(&ep->counters[i]);
    return VMMC_OK;
}
