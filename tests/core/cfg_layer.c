/* A layer built outside libvmmc, as the libfabric provider or the preload
 * library will be: loaded with dlopen, it registers its VMMC_EXT_CFGTEST_*
 * settings from its constructor and withdraws them from its destructor.
 * t_config_layer loads it and reads what it got through cfgtest_get(). */
#include <stdint.h>

#include "vmmc/config.h"

static uint64_t window, period;
static int64_t depth;
static int flag;
static const char *label;
static int register_rc = 1;

static const vmmc_config_entry_t entries[] = {
    {"EXT_CFGTEST_WINDOW", "64K", "bytes in flight", VMMC_CONFIG_SIZE, &window, 4096, 1u << 30},
    {"EXT_CFGTEST_PERIOD", "10ms", "how often to look", VMMC_CONFIG_TIME, &period, 0, 0},
    {"EXT_CFGTEST_DEPTH", "8", "queue depth", VMMC_CONFIG_INT, &depth, 1, 64},
    {"EXT_CFGTEST_FLAG", "no", "a switch", VMMC_CONFIG_BOOL, &flag, 0, 0},
    {"EXT_CFGTEST_LABEL", "none", "a name", VMMC_CONFIG_STRING, &label, 0, 0},
};
static const vmmc_config_table_t table = {sizeof(vmmc_config_entry_t), "cfgtest", "EXT_CFGTEST_",
                                          entries, sizeof entries / sizeof entries[0]};

__attribute__((constructor)) static void cfgtest_init(void)
{
    register_rc = vmmc_config_register(&table);
}

__attribute__((destructor)) static void cfgtest_fini(void)
{
    vmmc_config_unregister("cfgtest");
}

__attribute__((visibility("default"))) int cfgtest_get(uint64_t *w, uint64_t *p, int64_t *d,
                                                       int *f, const char **l);
int cfgtest_get(uint64_t *w, uint64_t *p, int64_t *d, int *f, const char **l)
{
    *w = window;
    *p = period;
    *d = depth;
    *f = flag;
    *l = label;
    return register_rc;
}
