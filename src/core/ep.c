/* The endpoint: joining the job, peers, barrier, death, settings, info. */
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
    {"NOTIFY_QUEUE", "256", "notification records queued per sender before it waits",
     VMMC_CFG_INT, &vmmc_core_cfg.notify_queue, 2, 1 << 20},
    {"MAX_EXPORTS", "4096", "exports per endpoint", VMMC_CFG_INT, &vmmc_core_cfg.max_exports,
     1, 1 << 24},
    {"TRANSPORT", "auto", "auto (shm on this host, udp elsewhere), shm, or udp (force udp everywhere)",
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

uint64_t vmmc_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

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

const char *vmmc_card_get(const char *card, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = card; p && *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            size_t vl = len - kl - 1;
            if (vl >= cap)
                vl = cap - 1;
            memcpy(out, p + kl + 1, vl);
            out[vl] = 0;
            return out;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

vmmc_peer_t *vmmc_peer_get(vmmc_ep_t *ep, int rank, int *status)
{
    if (rank < 0 || rank >= ep->size) {
        *status = vmmc_error(VMMC_ERR_INVALID, "rank %d is not in the job (size %d)", rank, ep->size);
        return NULL;
    }
    vmmc_peer_t *p = __atomic_load_n(&ep->peers[rank], __ATOMIC_ACQUIRE);
    if (VMMC_LIKELY(p != NULL))
        return p;
    pthread_mutex_lock(&ep->lock);
    p = ep->peers[rank];
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&ep->lock);
            *status = vmmc_error(VMMC_ERR_NOMEM, "out of memory for peer %d", rank);
            return NULL;
        }
        p->rank = rank;
        p->ep = ep;
        p->dead_status = -1;
        pthread_mutex_init(&p->lock, NULL);
        char other[96] = "";
        const char *card = ep->boot.peers ? ep->boot.peers[rank].card : NULL;
        p->same_host = rank == ep->rank ||
                       (card && vmmc_card_get(card, "host", other, sizeof other) && !strcmp(other, ep->host_id));
        if (ep->boot.peers)
            p->pid = ep->boot.peers[rank].pid;
        int force_udp = !strcmp(vmmc_core_cfg.transport, "udp");
        if (p->same_host && !force_udp)
            p->tl = &vmmc_tl_shm;
        else if (ep->udp)
            p->tl = &vmmc_tl_udp;
        else
            p->tl = NULL; /* unreachable: reported at connect */
        __atomic_store_n(&ep->peers[rank], p, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&ep->lock);
    return p;
}

int vmmc_peer_connect(vmmc_ep_t *ep, vmmc_peer_t *p, int timeout_ms)
{
    int s = atomic_load_explicit(&p->state, memory_order_acquire);
    if (VMMC_LIKELY(s == PEER_UP))
        return VMMC_OK;
    if (s == PEER_DEAD)
        return vmmc_peer_error(p);
    if (!p->tl)
        return vmmc_error(VMMC_ERR_PEER_UNREACHABLE,
                          "rank %d is on another host and no inter-host transport is available",
                          p->rank);
    pthread_mutex_lock(&p->lock);
    int rc = VMMC_OK;
    s = atomic_load(&p->state);
    if (s == PEER_DEAD)
        rc = vmmc_peer_error(p);
    else if (s != PEER_UP) {
        rc = p->tl->peer_connect(ep, p, timeout_ms);
        if (rc == VMMC_OK)
            atomic_store_explicit(&p->state, PEER_UP, memory_order_release);
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int vmmc_peer_error(const vmmc_peer_t *p)
{
    if (atomic_load(&p->state) != PEER_DEAD)
        return VMMC_OK;
    return vmmc_error(VMMC_ERR_PEER_DEAD, "rank %d is dead: %s", p->rank, p->dead_why);
}

void vmmc_peer_mark_dead(vmmc_ep_t *ep, int rank, int wstatus, const char *why)
{
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    if (!p || rank == ep->rank)
        return;
    pthread_mutex_lock(&ep->lock);
    /* The reason is written before the state says DEAD: readers look at it
     * only after seeing DEAD (markers serialise on ep->lock). */
    int was = atomic_load(&p->state);
    if (was != PEER_DEAD) {
        p->dead_status = wstatus;
        if (why)
            snprintf(p->dead_why, sizeof p->dead_why, "%s", why);
        else if (wstatus >= 0 && WIFSIGNALED(wstatus))
            snprintf(p->dead_why, sizeof p->dead_why, "killed by signal %d (%s)", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
        else if (wstatus >= 0 && WIFEXITED(wstatus))
            snprintf(p->dead_why, sizeof p->dead_why, "exited with status %d", WEXITSTATUS(wstatus));
        else
            snprintf(p->dead_why, sizeof p->dead_why, "reported dead by the launcher");
        was = atomic_exchange(&p->state, PEER_DEAD);
    } else if (wstatus >= 0 && p->dead_status < 0) {
        /* The launcher's verdict is more precise than "connection closed". */
        p->dead_status = wstatus;
        if (WIFSIGNALED(wstatus))
            snprintf(p->dead_why, sizeof p->dead_why, "killed by signal %d (%s)", WTERMSIG(wstatus),
                     strsignal(WTERMSIG(wstatus)));
    }
    pthread_mutex_unlock(&ep->lock);
    if (was == PEER_DEAD)
        return;
    vmmc_debug("rank %d is dead: %s", rank, p->dead_why);
    if (p->tl && p->tl->peer_dead)
        p->tl->peer_dead(ep, p);
    vmmc_import_peer_dead(ep, rank);
    vmmc_export_peer_dead(ep, rank);
    atomic_fetch_add(&ep->deaths, 1);
    pthread_mutex_lock(&ep->lock);
    pthread_cond_broadcast(&ep->cond);
    pthread_mutex_unlock(&ep->lock);
    vmmc_ep_wake(ep);
}

int vmmc_init(const vmmc_ep_params_t *params, vmmc_ep_t **out)
{
    if (!out)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_init: NULL result pointer");
    int cfg_rc = vmmc_config_load(); /* a refused VMMC_* value: say so, do not run */
    if (cfg_rc != VMMC_OK)
        return cfg_rc;
    vmmc_ep_t *ep = calloc(1, sizeof *ep);
    if (!ep)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory for the endpoint");
    ep->epfd = ep->ctl_wake_fd = ep->evfd = -1;
    ep->boot.fd = -1;
    ep->boot_dead_rank = -1;
    vmmc_wait_init(ep);
    ep->pid = getpid();
    pthread_mutex_init(&ep->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ep->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&ep->mem_lock, NULL);
    pthread_mutex_init(&ep->progress_lock, NULL);
    pthread_mutex_init(&ep->hooks_lock, NULL);
    pthread_mutex_init(&ep->remote_lock, NULL);
    pthread_mutex_init(&ep->dma_lock, NULL);
    pthread_cond_init(&ep->dma_cond, NULL);
    ep->sleeping = &ep->sleeping_local;
    ep->spin_ns = vmmc_core_cfg.spin_ns;
    int service = vmmc_core_cfg.service_thread;
    if (params) {
        if (params->field_mask & VMMC_EP_PARAM_SPIN_NS)
            ep->spin_ns = params->spin_ns;
        if (params->field_mask & VMMC_EP_PARAM_SERVICE_THREAD)
            service = params->service_thread;
    }
    if (vmmc_core_cfg.max_exports < 1 || vmmc_core_cfg.max_exports > (1 << 24) ||
        vmmc_core_cfg.notify_queue < 2 || vmmc_core_cfg.notify_queue > (1 << 20)) {
        free(ep);
        return vmmc_error(VMMC_ERR_INVALID,
                          "VMMC_MAX_EXPORTS must be 1..16M and VMMC_NOTIFY_QUEUE 2..1M");
    }
    if (strcmp(vmmc_core_cfg.transport, "auto") && strcmp(vmmc_core_cfg.transport, "shm") &&
        strcmp(vmmc_core_cfg.transport, "udp")) {
        free(ep);
        return vmmc_error(VMMC_ERR_INVALID, "VMMC_TRANSPORT=%s: use auto, shm or udp",
                          vmmc_core_cfg.transport);
    }
    ep->max_exports = (uint32_t)vmmc_core_cfg.max_exports;
    int rc;
    char card[512];
    ep->exports = calloc(ep->max_exports, sizeof *ep->exports);
    ep->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!ep->exports) {
        rc = vmmc_error(VMMC_ERR_NOMEM, "out of memory for the export table");
        goto fail;
    }
    if (ep->evfd < 0) {
        rc = vmmc_error_sys("eventfd");
        goto fail;
    }
    if ((rc = vmmc_ctl_start(ep)) != VMMC_OK)
        goto fail;
    host_id(ep->host_id, sizeof ep->host_id);
    snprintf(card, sizeof card, "host=%s;", ep->host_id);
    if ((rc = vmmc_tl_shm.ep_open(ep, card + strlen(card), sizeof card - strlen(card))) != VMMC_OK)
        goto fail;
    if (vmmc_tl_udp.ep_open &&
        (rc = vmmc_tl_udp.ep_open(ep, card + strlen(card), sizeof card - strlen(card))) != VMMC_OK)
        goto fail;
    if ((rc = vmmc_boot_init(&ep->boot, card, (int)(vmmc_core_cfg.connect_timeout_ns / 1000000) * 3)) !=
        VMMC_OK)
        goto fail;
    ep->rank = ep->boot.rank;
    ep->size = ep->boot.size;
    ep->peers = calloc((size_t)ep->size, sizeof *ep->peers);
    if (!ep->peers) {
        rc = vmmc_error(VMMC_ERR_NOMEM, "out of memory for %d peers", ep->size);
        goto fail;
    }
    if ((rc = vmmc_tl_shm.ep_start(ep)) != VMMC_OK)
        goto fail;
    if (ep->udp && vmmc_tl_udp.ep_start && (rc = vmmc_tl_udp.ep_start(ep)) != VMMC_OK)
        goto fail;
    if ((rc = vmmc_ctl_run(ep)) != VMMC_OK)
        goto fail;
    if (service && (rc = vmmc_service_start(ep)) != VMMC_OK)
        goto fail;
    *out = ep;
    return VMMC_OK;
fail:
    vmmc_finalize(ep);
    return rc;
}

int vmmc_finalize(vmmc_ep_t *ep)
{
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_finalize: NULL endpoint");
    ep->closing = 1;
    vmmc_service_stop_internal(ep);
    vmmc_stats_dump(ep); /* while the transports still hold their counters */
    vmmc_dma_stop(ep);
    vmmc_export_all_revoke(ep); /* nothing of importers lands after we return */
    vmmc_ctl_stop(ep);
    if (ep->udp && vmmc_tl_udp.ep_close)
        vmmc_tl_udp.ep_close(ep);
    vmmc_mkey_cache_destroy(ep);
    vmmc_import_all_destroy(ep);
    vmmc_export_all_destroy(ep);
    vmmc_tl_shm.ep_close(ep);
    vmmc_boot_fini(&ep->boot);
    for (int r = 0; ep->peers && r < ep->size; r++) {
        if (ep->peers[r]) {
            pthread_mutex_destroy(&ep->peers[r]->lock);
            free(ep->peers[r]);
        }
    }
    free(ep->peers);
    for (vmmc_mem_t *m = ep->mem, *n; m; m = n) {
        n = m->next;
        vmmc_mem_release(m);
    }
    free(ep->exports);
    free(ep->pending);
    free(ep->remote);
    vmmc_wait_fini(ep);
    if (ep->evfd >= 0)
        close(ep->evfd);
    pthread_mutex_destroy(&ep->lock);
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
    if (!ep)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_peer_alive: NULL endpoint");
    int st;
    vmmc_peer_t *p = vmmc_peer_get(ep, rank, &st);
    if (!p)
        return st;
    return atomic_load(&p->state) != PEER_DEAD;
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
    if (ep->udp && vmmc_tl_udp.flush) {
        int frc = vmmc_tl_udp.flush(ep);
        if (frc != VMMC_OK)
            return frc;
    }
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
    const char *udp = "yes (reliable link over UDP datagrams)";
    struct { const char *k, *v; } facts[] = {
        {"version", VMMC_VERSION_STRING},
        {"transport.shm", "yes (memfd mappings, process_vm_writev)"},
        {"transport.udp", udp},
        {"bootstrap.launcher", "yes (vmmc run)"},
        {"bootstrap.tcp", "yes (VMMC_BOOTSTRAP=host:port)"},
        {"bootstrap.pmix", VMMC_HAVE_PMIX ? "yes" : "no (built without libpmix-dev)"},
        {"limit.export_name_bytes", limits[0]},
        {"limit.exports_per_endpoint", limits[1]},
        {"limit.page_size", limits[2]},
        {"limit.notifications_queued_per_sender", limits[3]},
        {"limit.max_ranks", "1024"},
    };
    if (i < 0 || i >= (int)(sizeof facts / sizeof facts[0]))
        return VMMC_ERR_NOT_FOUND;
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
        "notifications_refused", "atomics_served", "atomics_refused"};
    if (!ep || i < 0)
        return VMMC_ERR_NOT_FOUND;
    if (i >= CNT_MAX) /* then the transports' (udp: datagrams, drops by reason, ...) */
        return ep->udp && vmmc_tl_udp.counter_get
                   ? vmmc_tl_udp.counter_get(ep, i - CNT_MAX, name, value)
                   : VMMC_ERR_NOT_FOUND;
    if (name)
        *name = names[i];
    if (value)
        *value = atomic_load(&ep->counters[i]);
    return VMMC_OK;
}
