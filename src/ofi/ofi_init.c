/* The provider "vmmc": fi_prov_ini, its settings (VMMC_OFI_*), logging
 * through libfabric and the vmmc status -> FI_E* mapping. fi_getinfo is in
 * ofi_info.c.
 *
 * Settings are registered with vmmc's registry (vmmc/config.h) when
 * libfabric loads the provider and withdrawn by its cleanup, so `vmmc info
 * -c` lists them in a process that has the provider loaded and every
 * VMMC_OFI_* name is checked the way the other layers' names are. A refused
 * value (bad syntax, out of range) keeps the provider from offering itself:
 * fi_getinfo fails with -FI_EINVAL, and says why once on stderr and at
 * every call in libfabric's log. A second copy of the provider loaded into
 * the same process (two directories in FI_PROVIDER_PATH) finds the names
 * taken and stays out of the way (fi_getinfo: -FI_ENODATA). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <rdma/providers/fi_log.h>

#include "ofi/ofi.h"
#include "vmmc/config.h"

/* Compiled-in defaults, so that code reading the settings before
 * registration (unit tests linking a few files) sees sane values. */
vofi_settings_t vofi_set = {
    .eager = 16384,
    .inject = 4096,
    .unexp_max = 16u << 20,
    .rdv_chunk = 4u << 20,
    .cq_size = 4096,
    .import_ms = 5000,
    .progress_thread = 0,
    .progress_manual = 0,
};

static uint64_t cfg_eager, cfg_inject, cfg_unexp, cfg_chunk, cfg_cq, cfg_import;
static const char *cfg_progress;

static const vmmc_config_entry_t ofi_entries[] = {
    {"OFI_EAGER", "16K", "largest message the libfabric provider sends eagerly (larger ones go by "
     "rendezvous into the posted buffer)", VMMC_CONFIG_SIZE, &cfg_eager, 64, 256u << 10},
    {"OFI_INJECT", "4K", "largest fi_inject/fi_tinject (inject_size; at most VMMC_OFI_EAGER)",
     VMMC_CONFIG_SIZE, &cfg_inject, 0, 1u << 20},
    {"OFI_UNEXPECTED", "16M", "bytes of unexpected eager messages an endpoint holds before its "
     "senders are paced (at least VMMC_OFI_EAGER)", VMMC_CONFIG_SIZE, &cfg_unexp, 4096,
     1ull << 40},
    {"OFI_RDV_CHUNK", "4M", "bytes a rendezvous moves per step into the posted buffer",
     VMMC_CONFIG_SIZE, &cfg_chunk, 4096, 1u << 30},
    {"OFI_CQ_SIZE", "4096", "entries of a completion queue opened with size 0 (more wait in an "
     "overflow list: none is lost)", VMMC_CONFIG_SIZE, &cfg_cq, 1, 1u << 24},
    {"OFI_IMPORT_WAIT", "5s", "how long a first RMA or rendezvous to a peer waits for the peer's "
     "export before the operation fails", VMMC_CONFIG_TIME, &cfg_import, 1000000ull,
     3600000000000ull},
    {"OFI_PROGRESS", "", "data progress of the provider's endpoints: empty follows the domain's "
     "data_progress (a thread per endpoint only for FI_PROGRESS_AUTO); auto: every endpoint runs "
     "a progress thread and fi_getinfo offers FI_PROGRESS_AUTO by default; manual: no thread, "
     "FI_PROGRESS_AUTO is refused", VMMC_CONFIG_STRING, &cfg_progress},
};

static const vmmc_config_table_t ofi_table = {sizeof(vmmc_config_entry_t), "ofi", "OFI_",
                                              ofi_entries,
                                              sizeof ofi_entries / sizeof ofi_entries[0]};

static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static int set_state;        /* 0: not yet, 1: registered, -1: another copy owns the names */
static int set_bad;          /* a value was refused */
static char set_msg[512];    /* why (refused value, or who owns the names) */
static int set_told;         /* set_msg went to stderr once */

static void apply(void)
{
    vofi_set.eager = cfg_eager;
    vofi_set.inject = cfg_inject < cfg_eager ? cfg_inject : cfg_eager;
    vofi_set.unexp_max = cfg_unexp < cfg_eager ? cfg_eager : cfg_unexp;
    vofi_set.rdv_chunk = cfg_chunk;
    vofi_set.cq_size = cfg_cq;
    vofi_set.import_ms = cfg_import / 1000000u;
    vofi_set.progress_thread = 0;
    vofi_set.progress_manual = 0;
    const char *p = cfg_progress ? cfg_progress : "";
    if (!strcasecmp(p, "auto")) {
        vofi_set.progress_thread = 1;
    } else if (!strcasecmp(p, "manual")) {
        vofi_set.progress_manual = 1;
    } else if (*p) {
        set_bad = 1;
        snprintf(set_msg, sizeof set_msg, "VMMC_OFI_PROGRESS=%s: expected auto, manual or "
                 "nothing", p);
    }
}

int vofi_settings_init(void)
{
    int rc = 0;
    pthread_mutex_lock(&set_lock);
    if (set_state == 0) {
        int st = vmmc_config_register(&ofi_table);
        if (st == VMMC_ERR_EXISTS) {
            set_state = -1;
            snprintf(set_msg, sizeof set_msg, "another copy of the provider owns the VMMC_OFI_* "
                     "settings (%s); this one (loaded twice?) offers nothing", vmmc_last_error());
        } else if (st == VMMC_OK || st == VMMC_ERR_INVALID) {
            /* INVALID after parsing: the table is registered, the refused
             * entries keep their defaults. */
            set_state = 1;
            set_bad = st != VMMC_OK;
            if (set_bad)
                snprintf(set_msg, sizeof set_msg, "%s", vmmc_last_error());
            apply();
        } else {
            snprintf(set_msg, sizeof set_msg, "registering the VMMC_OFI_* settings: %s",
                     vmmc_last_error());
        }
    }
    if (set_state < 0)
        rc = -FI_ENODATA;
    else if (set_state == 0)
        rc = -FI_ENOMEM;
    else if (set_bad)
        rc = -FI_EINVAL;
    if (rc == -FI_EINVAL || rc == -FI_ENOMEM) {
        if (!set_told)
            fprintf(stderr, "vmmc: libfabric provider vmmc disabled: %s\n", set_msg);
        set_told = 1;
        vofi_warn("provider disabled: %s", set_msg);
    } else if (rc) {
        vofi_info("%s", set_msg);
    }
    pthread_mutex_unlock(&set_lock);
    return rc;
}

static void vofi_cleanup(void)
{
    pthread_mutex_lock(&set_lock);
    if (set_state == 1)
        vmmc_config_unregister("ofi");
    set_state = 0;
    set_bad = 0;
    set_told = 0;
    pthread_mutex_unlock(&set_lock);
}

struct fi_provider vofi_prov = {
    .name = VOFI_NAME,
    .version = VOFI_PROV_VERSION,
    .fi_version = VOFI_FI_VERSION,
    .getinfo = vofi_getinfo,
    .fabric = vofi_fabric_open,
    .cleanup = vofi_cleanup,
};

FI_EXT_INI
{
    /* Failures are reported by fi_getinfo, which libfabric logs; the
     * provider stays registered so that the reason can be seen. */
    (void)vofi_settings_init();
    return &vofi_prov;
}

static void vlog(enum fi_log_level level, const char *fmt, va_list ap)
{
    char buf[512];
    if (!fi_log_enabled(&vofi_prov, level, FI_LOG_CORE))
        return;
    vsnprintf(buf, sizeof buf, fmt, ap);
    fi_log(&vofi_prov, level, FI_LOG_CORE, "vmmc", 0, "%s\n", buf);
}

void vofi_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(FI_LOG_WARN, fmt, ap);
    va_end(ap);
}

void vofi_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(FI_LOG_INFO, fmt, ap);
    va_end(ap);
}

/* The libfabric conventions: an argument the call cannot accept is
 * FI_EINVAL (a range outside a region included); a peer that died is
 * FI_EIO (as rxm/tcp report a broken connection to an RDM user) and one
 * that cannot be reached FI_EHOSTUNREACH; a handle whose object was
 * withdrawn (unexported MR, closed import) FI_ENOENT; a name in use
 * FI_EBUSY; a malformed message from a peer FI_EREMOTEIO. The vmmc status itself
 * travels in prov_errno of error completions. */
int vofi_err(int st)
{
    if (st >= 0)
        return st == VMMC_OK ? 0 : -FI_EINPROGRESS;
    switch (st) {
    case VMMC_ERR_INVALID:
    case VMMC_ERR_BOUNDS:
        return -FI_EINVAL;
    case VMMC_ERR_NOT_FOUND:
    case VMMC_ERR_STALE:
        return -FI_ENOENT;
    case VMMC_ERR_TRUNCATED:
        return -FI_ETRUNC;
    case VMMC_ERR_OVERFLOW:
        return -FI_EOVERFLOW;
    case VMMC_ERR_AGAIN:
        return -FI_EAGAIN;
    case VMMC_ERR_NOMEM:
        return -FI_ENOMEM;
    case VMMC_ERR_TIMEOUT:
        return -FI_ETIMEDOUT;
    case VMMC_ERR_EXISTS: /* the name is taken */
    case VMMC_ERR_BUSY:
        return -FI_EBUSY;
    case VMMC_ERR_PERMISSION:
        return -FI_EACCES;
    case VMMC_ERR_UNSUPPORTED:
        return -FI_EOPNOTSUPP;
    case VMMC_ERR_ENDPOINT:
        return -FI_EOPBADSTATE;
    case VMMC_ERR_PROTOCOL: /* a peer sent what the protocol does not allow */
        return -FI_EREMOTEIO;
    case VMMC_ERR_PEER_DEAD:
        return -FI_EIO;
    case VMMC_ERR_PEER_UNREACHABLE:
        return -FI_EHOSTUNREACH;
    case VMMC_ERR_SYSTEM:
    default:
        return -FI_EOTHER;
    }
}
