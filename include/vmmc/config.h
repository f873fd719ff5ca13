/**
 * @file config.h
 * @brief VMMC_* settings of libraries built on vmmc: register a table at load time.
 *
 * Every layer of the stack reads its settings from `VMMC_*` environment
 * variables through one registry, so that `vmmc info -c` lists them all,
 * every value is checked the same way (units, ranges, clear refusals) and a
 * mistyped name is warned about. The layers inside libvmmc are known to it
 * at build time; a library built outside it (a libfabric provider, an
 * OpenSHMEM or sockets library, a preload library) registers its own table
 * from its constructor and withdraws it from its destructor:
 *
 * @code
 * static uint64_t window;
 * static const vmmc_config_entry_t entries[] = {
 *     {"OFI_WINDOW", "64K", "bytes in flight per peer", VMMC_CONFIG_SIZE, &window, 4096, 1 << 30},
 * };
 * static const vmmc_config_table_t table = {sizeof(vmmc_config_entry_t), "ofi", "OFI_",
 *                                           entries, 1};
 * __attribute__((constructor)) static void init(void) { vmmc_config_register(&table); }
 * __attribute__((destructor)) static void fini(void) { vmmc_config_unregister("ofi"); }
 * @endcode
 *
 * **Names.** Every name of a table starts with the table's prefix. Names
 * under the prefixes reserved for the project's layers that live outside
 * libvmmc (`VMMC_OFI_*`, `VMMC_SOCK_*`, `VMMC_PRELOAD_*`, `VMMC_SHMEM_*`,
 * `VMMC_RPC_*`, `VMMC_DSM_*`, `VMMC_FABRIC_*`) and under `VMMC_EXT_*` (for
 * libraries outside the project: `VMMC_EXT_<NAME>_*`) are not warned about
 * while no table with that prefix is registered: they belong to a layer this
 * process has not loaded. When the layer registers, every `VMMC_<prefix>*`
 * variable it does not declare is warned about, so a typo is reported in
 * every process that uses the layer. Any other unknown `VMMC_*` name is
 * warned about at the first vmmc_init() or vmmc_config_check().
 *
 * **Syntax and checks** (the same for every layer): sizes take K/M/G/T
 * suffixes (64K = 65536); times need a unit, ns/us/ms/s ("50us"; only 0 may
 * go without); booleans y/n/yes/no/1/0/on/off/true/false. A value that does
 * not parse, does not fit in 64 bits or lies outside [min, max] is refused:
 * the entry keeps its default, vmmc_config_register() returns
 * VMMC_ERR_INVALID with vmmc_last_error() naming the variable, the reason and
 * the valid range, and vmmc_config_check() and vmmc_init() fail the same way
 * while the table stays registered.
 *
 * Threading: registration, withdrawal and reading are thread-safe; the
 * strings vmmc_config_get() returns for a table stay valid until that table
 * is unregistered.
 */
#ifndef VMMC_CONFIG_H
#define VMMC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "vmmc/vmmc.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief How a setting's value is parsed, and the type of its destination. */
typedef enum vmmc_config_type {
    VMMC_CONFIG_SIZE,   /**< uint64_t, bytes: "4096", "64K", "1M" */
    VMMC_CONFIG_TIME,   /**< uint64_t, nanoseconds: "50us", "2s", "0"; a unit is required */
    VMMC_CONFIG_INT,    /**< int64_t */
    VMMC_CONFIG_BOOL,   /**< int (0 or 1) */
    VMMC_CONFIG_STRING, /**< const char * (points into the registry's copy) */
    VMMC_CONFIG_JOB     /**< const char *: a variable a launcher sets, checked by
                             the layer that reads it; listed so that it is known
                             and shown by `vmmc info -c` */
} vmmc_config_type_t;

/** @brief One setting. */
typedef struct vmmc_config_entry {
    const char *name;  /**< without "VMMC_", e.g. "OFI_WINDOW"; starts with the table's prefix */
    const char *deflt; /**< default, in the syntax a user would write ("" for none) */
    const char *help;  /**< one line */
    vmmc_config_type_t type;
    void *dst;         /**< where the parsed value goes (the type above) */
    /** Valid range, inclusive, in the entry's unit (bytes, ns, the integer);
     *  min == max == 0: any value the type can hold. */
    uint64_t min, max;
} vmmc_config_entry_t;

/** @brief A layer's table of settings. The registry keeps pointers to it,
 *  its strings and its entries until vmmc_config_unregister(). */
typedef struct vmmc_config_table {
    size_t entry_size;  /**< sizeof(vmmc_config_entry_t) as the caller was built */
    const char *component; /**< short unique name ("ofi"), shown by `vmmc info -c` */
    const char *prefix;    /**< every entry's name starts with it ("OFI_"); it ends with '_' */
    const vmmc_config_entry_t *entries;
    size_t count;
} vmmc_config_table_t;

/**
 * @brief Register a table: parse each entry's default, then its variable
 * from the environment, into its destination, and warn (once, on stderr)
 * about every `VMMC_<prefix>*` variable the table does not declare.
 *
 * @return VMMC_OK; VMMC_ERR_INVALID for a malformed table (NULL fields, a
 * name outside the prefix, an unknown type or entry size: nothing is
 * registered) or for a refused value (the table is registered, the entry
 * keeps its default; vmmc_last_error() names each refused variable, the
 * reason and the valid range); VMMC_ERR_EXISTS when the component or one of
 * the names is already registered; VMMC_ERR_NOMEM.
 */
VMMC_API int vmmc_config_register(const vmmc_config_table_t *table);

/** @brief Withdraw the table of @p component (call it before the memory
 *  that holds the table goes away, e.g. from the library's destructor).
 *  Returns VMMC_OK or VMMC_ERR_NOT_FOUND. */
VMMC_API int vmmc_config_unregister(const char *component);

#ifdef __cplusplus
}
#endif
#endif /* VMMC_CONFIG_H */
