/* VMMC_* settings: one declared table per component.
 *
 * A component declares its table with VMMC_CONFIG_TABLE(); every table in
 * libvmmc is known wherever the library is loaded (a list generated at build
 * time names them all, so a static link brings every layer's table along,
 * not only the layers the program calls). The loader parses defaults then the
 * environment once per process.
 *
 * Syntax: sizes take K/M/G/T suffixes (binary: 64K = 65536); times need a
 * unit, ns/us/ms/s/min ("50us"; a bare number other than 0 is refused, so
 * that "50" is never silently taken as 50 ns); booleans y/n/yes/no/1/0/on/
 * off/true/false. A value that does not parse, needs more than 64 bits or
 * lies outside the entry's range [min, max] is refused: vmmc_config_check()
 * (and so vmmc_init()) fails with VMMC_ERR_INVALID and a message naming the
 * variable, the reason and the valid range. Unknown VMMC_* names are warned
 * about on stderr, unless VMMC_SETTINGS_CHECKED is set (`vmmc run` checks
 * the settings once for the whole job and sets it for its ranks). */
#ifndef VMMC_UTIL_CONFIG_H
#define VMMC_UTIL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    VMMC_CFG_SIZE,   /* uint64_t, bytes: "64K", "1M" */
    VMMC_CFG_TIME,   /* uint64_t, nanoseconds: "50us", "2s", "0"; a unit is required */
    VMMC_CFG_INT,    /* int64_t */
    VMMC_CFG_BOOL,   /* int: y/n/yes/no/1/0/on/off/true/false */
    VMMC_CFG_STRING, /* const char * (points into a private copy) */
    VMMC_CFG_JOB     /* const char *: set by a launcher, read by the job layer,
                        which checks it; listed here so that `vmmc info -c`
                        shows it and it is never "unknown" */
} vmmc_cfg_type_t;

typedef struct vmmc_cfg_entry {
    const char *name;  /* without the VMMC_ prefix, e.g. "SPIN" */
    const char *deflt; /* default, in the syntax the user would write */
    const char *help;  /* one line */
    vmmc_cfg_type_t type;
    void *dst;         /* where the parsed value goes */
    /* Valid range, inclusive, in the entry's unit (bytes, ns, or the
     * integer); min == max == 0: any value the type can hold. */
    uint64_t min, max;
} vmmc_cfg_entry_t;

typedef struct vmmc_cfg_table {
    const char *component;
    const vmmc_cfg_entry_t *entries;
    size_t count;
} vmmc_cfg_table_t;

/* Declare a component table. The build lists every table of libvmmc
 * (cmake/cfg_tables.cmake scans the sources for this macro); the linker
 * section "vmmc_cfg" also collects them, for objects linked on their own. */
#define VMMC_CONFIG_TABLE(var, comp, arr)                                               \
    const vmmc_cfg_table_t vmmc_cfgtab_##var = {comp, arr, sizeof(arr) / sizeof((arr)[0])}; \
    static const vmmc_cfg_table_t *const var##_ptr                                       \
        __attribute__((used, section("vmmc_cfg"))) = &vmmc_cfgtab_##var

/* Parse everything once (thread-safe, idempotent). Returns VMMC_OK, or
 * VMMC_ERR_INVALID with vmmc_last_error() naming every refused value; the
 * refused entries keep their defaults. Each call reports it again. */
int vmmc_config_load(void);

/* Parsers, exposed for tests and for settings with their own syntax.
 * Return 0, or -1 for bad syntax, -2 for a time without a unit, -3 for a
 * value that does not fit in 64 bits. */
int vmmc_cfg_parse_size(const char *s, uint64_t *out);
int vmmc_cfg_parse_time(const char *s, uint64_t *out);
int vmmc_cfg_parse_bool(const char *s, int *out);

#endif
