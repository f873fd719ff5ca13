/* VMMC_* settings: one declared table per component.
 *
 * A component declares its table with VMMC_CONFIG_TABLE(); the loader parses
 * defaults then the environment once per process, warns about unknown VMMC_*
 * names and bad values (keeping the default), and `vmmc info -c` lists every
 * entry through vmmc_config_get(). Sizes take K/M/G suffixes (binary), times
 * take ns/us/ms/s (plain numbers are the entry's unit: see VMMC_CFG_TIME_*). */
#ifndef VMMC_UTIL_CONFIG_H
#define VMMC_UTIL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    VMMC_CFG_SIZE,   /* uint64_t, bytes: "64K", "1M" */
    VMMC_CFG_TIME,   /* uint64_t, nanoseconds: "50us", "2s"; bare number = ns */
    VMMC_CFG_INT,    /* int64_t */
    VMMC_CFG_BOOL,   /* int: y/n/yes/no/1/0/on/off/true/false */
    VMMC_CFG_STRING  /* const char * (points into a private copy) */
} vmmc_cfg_type_t;

typedef struct vmmc_cfg_entry {
    const char *name;  /* without the VMMC_ prefix, e.g. "SPIN" */
    const char *deflt; /* default, in the syntax the user would write */
    const char *help;  /* one line */
    vmmc_cfg_type_t type;
    void *dst;         /* where the parsed value goes */
} vmmc_cfg_entry_t;

typedef struct vmmc_cfg_table {
    const char *component;
    const vmmc_cfg_entry_t *entries;
    size_t count;
} vmmc_cfg_table_t;

/* Declare a component table. Tables are collected by the linker section
 * "vmmc_cfg" so that a component needs no edit anywhere else. */
#define VMMC_CONFIG_TABLE(var, comp, arr)                                          \
    static const vmmc_cfg_table_t var = {comp, arr, sizeof(arr) / sizeof((arr)[0])}; \
    static const vmmc_cfg_table_t *const var##_ptr                                  \
        __attribute__((used, section("vmmc_cfg"))) = &var

/* Parse everything once (thread-safe, idempotent). */
void vmmc_config_load(void);

/* Parsers, exposed for tests. Return 0 or -1. */
int vmmc_cfg_parse_size(const char *s, uint64_t *out);
int vmmc_cfg_parse_time(const char *s, uint64_t *out);
int vmmc_cfg_parse_bool(const char *s, int *out);

#endif
