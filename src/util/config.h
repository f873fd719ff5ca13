/* VMMC_* settings: one declared table per component.
 *
 * A component declares its table with VMMC_CONFIG_TABLE(); every table in
 * libvmmc is known wherever the library is loaded (a list generated at build
 * time names them all, so a static link brings every layer's table along,
 * not only the layers the program calls). The loader parses defaults then the
 * environment once per process. Libraries built outside libvmmc register
 * their tables at load time (vmmc/config.h; config_reg.c keeps the registry).
 *
 * Syntax: sizes take K/M/G/T suffixes (binary: 64K = 65536); times need a
 * unit, ns/us/ms/s/min ("50us"; a bare number other than 0 is refused, so
 * that "50" is never silently taken as 50 ns); booleans y/n/yes/no/1/0/on/
 * off/true/false. A value that does not parse, needs more than 64 bits or
 * lies outside the entry's range [min, max] is refused: vmmc_config_check()
 * (and so vmmc_init()) fails with VMMC_ERR_INVALID and a message naming the
 * variable, the reason and the valid range. Unknown VMMC_* names are warned
 * about on stderr (except under the prefix of a layer built outside
 * libvmmc, which checks its own names when it registers: config_reg.c),
 * unless VMMC_SETTINGS_CHECKED is set (`vmmc run` checks the settings once
 * for the whole job and sets it for its ranks). */
#ifndef VMMC_UTIL_CONFIG_H
#define VMMC_UTIL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "vmmc/config.h"

/* The entry type is the public one (vmmc/config.h), so that a library
 * registered at load time and the tables built into libvmmc are one kind. */
typedef vmmc_config_entry_t vmmc_cfg_entry_t;
#define VMMC_CFG_SIZE VMMC_CONFIG_SIZE
#define VMMC_CFG_TIME VMMC_CONFIG_TIME
#define VMMC_CFG_INT VMMC_CONFIG_INT
#define VMMC_CFG_BOOL VMMC_CONFIG_BOOL
#define VMMC_CFG_STRING VMMC_CONFIG_STRING
#define VMMC_CFG_JOB VMMC_CONFIG_JOB
typedef vmmc_config_type_t vmmc_cfg_type_t;

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

/* For the registry (config_reg.c): parse @s into @e->dst, 0 or -1 with the
 * reason in @why; and the entry's help with its syntax and range (malloc). */
int vmmc_cfg_parse_into(const vmmc_cfg_entry_t *e, const char *s, char *why, size_t n);
char *vmmc_cfg_describe(const vmmc_cfg_entry_t *e);
/* Apply util's own settings (the log level) once they are parsed. */
void vmmc_cfg_apply_util(void);

#endif
