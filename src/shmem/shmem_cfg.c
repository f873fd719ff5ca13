/* Settings of the OpenSHMEM layer: VMMC_SHMEM_* through the vmmc registry
 * (listed by `vmmc info -c`, checked like every other layer's), and the
 * standard SHMEM_* variables, which every OpenSHMEM reads. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmem/shmem_core.h"
#include "vmmc/config.h"

shm_cfg_t shm_cfg;

static const vmmc_config_entry_t shmem_entries[] = {
    {"SHMEM_SPIN", "20us",
     "a PE waiting for symmetric memory to change (wait_until, barriers) spins this long "
     "before it sleeps (with PEs on other hosts: this long after the last request of a peer it "
     "served)",
     VMMC_CONFIG_TIME, &shm_cfg.spin_ns, 0, 10000000000ull},
    {"SHMEM_SLEEP", "1ms",
     "longest sleep of a waiting PE before it looks again (a plain put rings no bell)",
     VMMC_CONFIG_TIME, &shm_cfg.sleep_ns, 1000ull, 1000000000ull},
    {"SHMEM_EXIT_POLL", "10ms",
     "when PEs run on several hosts, how often a PE looks for another's shmem_global_exit "
     "while it computes",
     VMMC_CONFIG_TIME, &shm_cfg.exit_poll_ns, 100000ull, 10000000000ull},
    {"SHMEM_NBI_DEPTH", "1024",
     "non-blocking puts and gets to other hosts in flight per PE before a new one waits",
     VMMC_CONFIG_SIZE, &shm_cfg.nbi_depth, 16, 1u << 20},
    {"SHMEM_MALLOC_FATAL", "n",
     "a symmetric allocation beyond SHMEM_SYMMETRIC_SIZE ends the job (n: it returns NULL "
     "after a message)",
     VMMC_CONFIG_BOOL, &shm_cfg.malloc_fatal},
    {"SHMEM_MAP_DATA", "y",
     "static data (global variables) moves onto shared memory at shmem_init, so that PEs of "
     "this host map each other's: puts, gets and atomics on it are plain memory operations "
     "and shmem_ptr() works on it (n: other PEs use process_vm_writev/readv and this PE's "
     "progress)",
     VMMC_CONFIG_BOOL, &shm_cfg.map_data},
};
static const vmmc_config_table_t shmem_table = {sizeof(vmmc_config_entry_t), "shmem",
                                                "SHMEM_", shmem_entries,
                                                sizeof shmem_entries / sizeof *shmem_entries};

static char cfg_error[512];

__attribute__((constructor)) static void shmem_cfg_init(void)
{
    shm_cfg.spin_ns = 20000;
    shm_cfg.sleep_ns = 1000000;
    shm_cfg.exit_poll_ns = 10000000;
    shm_cfg.nbi_depth = 1024;
    shm_cfg.map_data = 1;
    int st = vmmc_config_register(&shmem_table);
    if (st != VMMC_OK && st != VMMC_ERR_EXISTS)
        snprintf(cfg_error, sizeof cfg_error, "%s", vmmc_last_error());
}

__attribute__((destructor)) static void shmem_cfg_fini(void)
{
    (void)vmmc_config_unregister("shmem");
}

int shm_parse_size(const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: return -1;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0')
        return -1;
    if (shift && v > (~0ull >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    /* The standard's variables are set to mean "on" (SOS: any value but 0/no). */
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "n") != 0 &&
           strcasecmp(v, "no") != 0 && strcasecmp(v, "off") != 0 &&
           strcasecmp(v, "false") != 0;
}

/* Largest heap we accept: the allocator keeps offsets in size_t, and a
 * mistyped huge value should be refused with a message, not an ENOMEM. */
#define SHM_SYMMETRIC_MAX (1ull << 40)

const shm_cfg_t *shm_cfg_load(const char *fn)
{
    if (cfg_error[0])
        shm_fatal(fn, "%s", cfg_error);
    const char *v = getenv("SHMEM_SYMMETRIC_SIZE");
    size_t size = 256u << 20;
    if (v && *v) {
        if (shm_parse_size(v, &size) != 0 || size == 0 || size > SHM_SYMMETRIC_MAX)
            shm_fatal(fn,
                      "bad SHMEM_SYMMETRIC_SIZE=%s: give bytes from 1 to 1T, with an optional "
                      "k/K, m/M, g/G or t/T suffix (e.g. 512M)",
                      v);
    }
    /* whole pages: every PE computes the same size from the same value */
    shm_cfg.symmetric_size = (size + 4095) & ~(size_t)4095;
    shm_cfg.debug = env_flag("SHMEM_DEBUG");
    shm_cfg.info = env_flag("SHMEM_INFO");
    shm_cfg.version = env_flag("SHMEM_VERSION");
    return &shm_cfg;
}
