/* The registry of VMMC_* settings: the tables built into libvmmc (listed at
 * build time, read once per process) and the tables libraries register at
 * load time (vmmc/config.h).
 *
 * Unknown names. A process cannot know the settings of a layer it has not
 * loaded, and must not warn about them: `VMMC_OFI_WINDOW` in the environment
 * of a program that never loads the libfabric provider is not a typo. So the
 * project reserves one prefix per layer built outside libvmmc (and EXT_ for
 * libraries outside the project), and the check is split by owner:
 *  - at the first load, a VMMC_* name that no built-in table declares and
 *    that lies under no reserved or registered prefix is warned about;
 *  - a layer that registers checks its own prefix: every VMMC_<prefix>*
 *    variable it does not declare is warned about then.
 * A typo is thus reported in every process that uses the layer it was meant
 * for, and no process warns about a layer it does not use. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/log.h"
#include "vmmc/vmmc.h"

extern char **environ;

extern const vmmc_cfg_table_t *const __start_vmmc_cfg[] __attribute__((weak));
extern const vmmc_cfg_table_t *const __stop_vmmc_cfg[] __attribute__((weak));
#ifdef VMMC_CFG_LIST
/* Generated at build time (cmake/cfg_tables.cmake): every table in libvmmc.
 * Referring to it makes a static link bring every layer's table along. */
extern const vmmc_cfg_table_t *const vmmc_cfg_all[];
#endif

/* Prefixes of the layers built outside libvmmc (docs/core.md, "Settings"). */
static const char *const reserved[] = {"OFI_", "SOCK_", "PRELOAD_", "SHMEM_",
                                       "RPC_", "DSM_", "FABRIC_", "EXT_"};

#define MAX_BUILTIN 256
#define MAX_ENTRIES 1024 /* per registered table */

typedef struct {
    const vmmc_cfg_entry_t *e;
    char *value; /* in effect, as text */
    char *help;  /* the entry's help with its syntax and range */
    char *err;   /* why the variable's value was refused, or NULL */
    int owner;   /* 0: built in; else the registered layer's id */
} cfg_slot_t;

typedef struct {
    int id;
    char *component, *prefix;
} cfg_layer_t;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cfg_slot_t *slots;
static int nslots, capslots;
static const char *builtin[MAX_BUILTIN]; /* built-in components */
static int nbuiltin;
static cfg_layer_t *layers;
static int nlayers, next_id = 1;
static int load_failed; /* out of memory while loading the built-in tables */

static void slot_free(cfg_slot_t *s)
{
    free(s->value);
    free(s->help);
    free(s->err);
}

/* Append a slot for @e: its default, then its variable. Caller holds lock
 * (or runs the once-load). -1: out of memory (nothing appended). */
static int add_slot(const vmmc_cfg_entry_t *e, int owner)
{
    if (nslots == capslots) {
        int cap = capslots ? 2 * capslots : 128;
        cfg_slot_t *n = realloc(slots, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        slots = n;
        capslots = cap;
    }
    cfg_slot_t *sl = &slots[nslots];
    memset(sl, 0, sizeof *sl);
    sl->e = e;
    sl->owner = owner;
    sl->value = strdup(e->deflt);
    sl->help = vmmc_cfg_describe(e);
    if (!sl->value || !sl->help) {
        slot_free(sl);
        return -1;
    }
    char var[96], why[160], msg[512];
    snprintf(var, sizeof var, "VMMC_%s", e->name);
    if (vmmc_cfg_parse_into(e, sl->value, why, sizeof why) != 0) {
        snprintf(msg, sizeof msg, "default %s=%s: %s", var, e->deflt, why);
        sl->err = strdup(msg);
    }
    const char *env = getenv(var);
    if (env && !sl->err) {
        char *copy = strdup(env);
        if (!copy) {
            slot_free(sl);
            return -1;
        }
        if (vmmc_cfg_parse_into(e, copy, why, sizeof why) == 0) {
            free(sl->value);
            sl->value = copy;
        } else {
            vmmc_cfg_parse_into(e, sl->value, why, sizeof why); /* back to the default */
            snprintf(msg, sizeof msg, "%s=%s: %s", var, env, why);
            sl->err = strdup(msg);
            free(copy);
        }
    }
    nslots++;
    return 0;
}

static int declared(const char *name, size_t len)
{
    for (int i = 0; i < nslots; i++)
        if (strlen(slots[i].e->name) == len && !strncmp(slots[i].e->name, name, len))
            return 1;
    return 0;
}

static int under(const char *name, size_t len, const char *prefix)
{
    size_t p = strlen(prefix);
    return len > p && !strncmp(name, prefix, p);
}

/* Belongs to a layer built outside libvmmc, loaded or not. */
static int claimed(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (under(name, len, reserved[i]))
            return 1;
    for (int i = 0; i < nlayers; i++)
        if (under(name, len, layers[i].prefix))
            return 1;
    return 0;
}

/* Warn about each VMMC_* variable in the environment that nobody declares:
 * under @prefix only (a layer that registers), or outside every claimed
 * prefix (@prefix NULL: the built-in tables). Caller holds lock. */
static void warn_unknown(const char *prefix, const char *component)
{
    for (char **ev = environ; ev && *ev; ev++) {
        if (strncmp(*ev, "VMMC_", 5))
            continue;
        const char *name = *ev + 5, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (declared(name, len))
            continue;
        if (prefix ? !under(name, len, prefix) : claimed(name, len))
            continue;
        if (prefix)
            fprintf(stderr, "vmmc: warning: unknown setting VMMC_%.*s ignored (%s declares no "
                    "such setting; see `vmmc info -c`)\n", (int)len, name, component);
        else
            fprintf(stderr, "vmmc: warning: unknown setting VMMC_%.*s ignored (see `vmmc info "
                    "-c`)\n", (int)len, name);
    }
}

/* `vmmc run` checked the job's settings and sets VMMC_SETTINGS_CHECKED for
 * its ranks, which then do not repeat its warnings. It cannot check the
 * layers a rank loads, so their warnings come from rank 0 alone. */
static int quiet(int layer)
{
    const char *checked = getenv("VMMC_SETTINGS_CHECKED");
    if (!checked || !*checked)
        return 0;
    if (!layer)
        return 1;
    const char *rank = getenv("VMMC_RANK");
    return rank && strcmp(rank, "0") != 0;
}

static void load(void)
{
    pthread_mutex_lock(&lock);
    /* Every built-in table once: the generated list, then the linker section. */
    const vmmc_cfg_table_t *tabs[MAX_BUILTIN];
    int ntabs = 0;
#ifdef VMMC_CFG_LIST
    for (const vmmc_cfg_table_t *const *t = vmmc_cfg_all; *t && ntabs < MAX_BUILTIN; t++)
        tabs[ntabs++] = *t;
#endif
    const vmmc_cfg_table_t *const *b = __start_vmmc_cfg, *const *en = __stop_vmmc_cfg;
    for (const vmmc_cfg_table_t *const *t = b; t && t < en && ntabs < MAX_BUILTIN; t++)
        tabs[ntabs++] = *t;
    for (int t = 0; t < ntabs; t++) {
        int seen = 0;
        for (int k = 0; k < t && !seen; k++)
            seen = tabs[k] == tabs[t];
        if (seen)
            continue;
        builtin[nbuiltin++] = tabs[t]->component;
        for (size_t i = 0; i < tabs[t]->count; i++)
            if (add_slot(&tabs[t]->entries[i], 0) != 0)
                load_failed = 1;
    }
    vmmc_cfg_apply_util();
    if (!quiet(0))
        warn_unknown(NULL, NULL);
    pthread_mutex_unlock(&lock);
}

/* Every refused value of @owner (-1: all), "; "-separated, into @out. */
static int collect_errors(int owner, char *out, size_t cap)
{
    size_t o = 0;
    int n = 0;
    out[0] = 0;
    for (int i = 0; i < nslots; i++) {
        if (!slots[i].err || (owner >= 0 && slots[i].owner != owner))
            continue;
        int w = snprintf(out + o, cap - o, "%s%s", n ? "; " : "", slots[i].err);
        n++;
        if (w < 0 || (size_t)w >= cap - o)
            break;
        o += (size_t)w;
    }
    return n;
}

int vmmc_config_load(void)
{
    pthread_once(&once, load);
    char msg[1536];
    pthread_mutex_lock(&lock);
    int failed = load_failed;
    int bad = collect_errors(-1, msg, sizeof msg);
    pthread_mutex_unlock(&lock);
    if (failed)
        return vmmc_error(VMMC_ERR_NOMEM, "out of memory while reading the VMMC_* settings");
    if (bad)
        return vmmc_error(VMMC_ERR_INVALID, "bad setting: %s (`vmmc info -c` lists them all)",
                          msg);
    return VMMC_OK;
}

int vmmc_config_check(void)
{
    return vmmc_config_load();
}

int vmmc_config_get(int i, const char **name, const char **value, const char **deflt,
                    const char **help)
{
    pthread_once(&once, load);
    static __thread char namebuf[96];
    pthread_mutex_lock(&lock);
    if (i < 0 || i >= nslots) {
        pthread_mutex_unlock(&lock);
        return VMMC_ERR_NOT_FOUND;
    }
    const cfg_slot_t *s = &slots[i];
    snprintf(namebuf, sizeof namebuf, "VMMC_%s", s->e->name);
    if (name) *name = namebuf;
    if (value) *value = s->value ? s->value : "";
    if (deflt) *deflt = s->e->deflt;
    if (help) *help = s->help ? s->help : s->e->help;
    pthread_mutex_unlock(&lock);
    return VMMC_OK;
}

/* ---- tables registered at load time ---- */

static int word_ok(const char *s, size_t max, int upper)
{
    size_t n = 0;
    for (; s[n]; n++) {
        unsigned char c = (unsigned char)s[n];
        int ok = upper ? (isupper(c) || isdigit(c) || c == '_')
                       : (islower(c) || isdigit(c) || c == '_' || c == '-' || c == '.');
        if (!ok || n >= max)
            return 0;
    }
    return n > 0;
}

/* A malformed table: VMMC_ERR_INVALID naming what is wrong, or VMMC_OK. */
static int check_table(const vmmc_config_table_t *t)
{
    if (!t)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register: NULL table");
    if (t->entry_size != sizeof(vmmc_config_entry_t))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register: entry_size %zu, this library "
                          "takes %zu (built against another vmmc/config.h?)", t->entry_size,
                          sizeof(vmmc_config_entry_t));
    if (!t->component || !word_ok(t->component, 32, 0))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register: the component name must be "
                          "1-32 characters of a-z, 0-9, '_', '-', '.'");
    size_t pl = t->prefix ? strlen(t->prefix) : 0;
    if (!pl || !word_ok(t->prefix, 32, 1) || t->prefix[pl - 1] != '_')
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register(%s): the prefix must be 1-32 "
                          "characters of A-Z, 0-9, '_' and end with '_'", t->component);
    if (t->count > MAX_ENTRIES || (t->count && !t->entries))
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register(%s): %zu entries (at most %d, "
                          "and a non-NULL array)", t->component, t->count, MAX_ENTRIES);
    for (size_t i = 0; i < t->count; i++) {
        const vmmc_config_entry_t *e = &t->entries[i];
        if (!e->name || !word_ok(e->name, 80, 1) || strncmp(e->name, t->prefix, pl) ||
            strlen(e->name) == pl)
            return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register(%s): entry %zu: the name "
                              "must be A-Z, 0-9, '_' and start with the prefix %s", t->component,
                              i, t->prefix);
        if (!e->deflt || !e->help || !e->dst || (unsigned)e->type > VMMC_CONFIG_JOB ||
            e->min > e->max)
            return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register(%s): VMMC_%s needs a "
                              "default, a help line, a destination, a known type and min <= max",
                              t->component, e->name);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(t->entries[k].name, e->name))
                return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_register(%s): VMMC_%s twice",
                                  t->component, e->name);
    }
    return VMMC_OK;
}

/* Already registered: the component or a name. Caller holds lock. */
static int clash(const vmmc_config_table_t *t)
{
    for (int i = 0; i < nbuiltin; i++)
        if (!strcmp(builtin[i], t->component))
            return vmmc_error(VMMC_ERR_EXISTS, "vmmc_config_register: component %s is built "
                              "into libvmmc", t->component);
    for (int i = 0; i < nlayers; i++)
        if (!strcmp(layers[i].component, t->component))
            return vmmc_error(VMMC_ERR_EXISTS, "vmmc_config_register: component %s is already "
                              "registered", t->component);
    for (size_t i = 0; i < t->count; i++)
        if (declared(t->entries[i].name, strlen(t->entries[i].name)))
            return vmmc_error(VMMC_ERR_EXISTS, "vmmc_config_register(%s): VMMC_%s is already "
                              "declared by another table", t->component, t->entries[i].name);
    return VMMC_OK;
}

static void remove_owner(int id)
{
    int o = 0;
    for (int i = 0; i < nslots; i++) {
        if (slots[i].owner == id)
            slot_free(&slots[i]);
        else
            slots[o++] = slots[i];
    }
    nslots = o;
}

int vmmc_config_register(const vmmc_config_table_t *t)
{
    int rc = check_table(t);
    if (rc != VMMC_OK)
        return rc;
    pthread_once(&once, load);
    pthread_mutex_lock(&lock);
    if ((rc = clash(t)) != VMMC_OK) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    cfg_layer_t *nl = realloc(layers, (size_t)(nlayers + 1) * sizeof *nl);
    if (!nl)
        goto nomem;
    layers = nl;
    cfg_layer_t *l = &layers[nlayers];
    l->id = next_id++;
    l->component = strdup(t->component);
    l->prefix = strdup(t->prefix);
    if (!l->component || !l->prefix) {
        free(l->component);
        free(l->prefix);
        goto nomem;
    }
    for (size_t i = 0; i < t->count; i++) {
        if (add_slot(&t->entries[i], l->id) != 0) {
            remove_owner(l->id);
            free(l->component);
            free(l->prefix);
            goto nomem;
        }
    }
    nlayers++;
    if (!quiet(1))
        warn_unknown(l->prefix, l->component);
    char msg[1536];
    int bad = collect_errors(l->id, msg, sizeof msg);
    pthread_mutex_unlock(&lock);
    if (bad)
        return vmmc_error(VMMC_ERR_INVALID, "bad setting: %s (`vmmc info -c` lists them all)",
                          msg);
    return VMMC_OK;
nomem:
    pthread_mutex_unlock(&lock);
    return vmmc_error(VMMC_ERR_NOMEM, "vmmc_config_register(%s): out of memory", t->component);
}

int vmmc_config_unregister(const char *component)
{
    if (!component)
        return vmmc_error(VMMC_ERR_INVALID, "vmmc_config_unregister: NULL component");
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nlayers; i++) {
        if (strcmp(layers[i].component, component))
            continue;
        remove_owner(layers[i].id);
        free(layers[i].component);
        free(layers[i].prefix);
        layers[i] = layers[--nlayers];
        pthread_mutex_unlock(&lock);
        return VMMC_OK;
    }
    pthread_mutex_unlock(&lock);
    return vmmc_error(VMMC_ERR_NOT_FOUND, "vmmc_config_unregister: no component %s", component);
}
