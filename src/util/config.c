#include "util/config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"
#include "vmmc/vmmc.h"

extern char **environ;

/* The logging level is the config module's own entry. */
static int64_t log_level_cfg;
static const vmmc_cfg_entry_t util_entries[] = {
    {"LOG_LEVEL", "1", "log verbosity: 0 error, 1 warn, 2 info, 3 debug, 4 trace",
     VMMC_CFG_INT, &log_level_cfg},
};
VMMC_CONFIG_TABLE(util_cfg, "util", util_entries);

extern const vmmc_cfg_table_t *const __start_vmmc_cfg[] __attribute__((weak));
extern const vmmc_cfg_table_t *const __stop_vmmc_cfg[] __attribute__((weak));

/* Flat view of all entries with the value in effect as text. */
typedef struct {
    const vmmc_cfg_entry_t *e;
    char *value;
} cfg_slot_t;
static cfg_slot_t *slots;
static int nslots;
static pthread_once_t once = PTHREAD_ONCE_INIT;

int vmmc_cfg_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    uint64_t mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'I')
        end++;
    if (toupper((unsigned char)*end) == 'B')
        end++;
    if (*end)
        return -1;
    *out = (uint64_t)(v * (double)mult);
    return 0;
}

int vmmc_cfg_parse_time(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    double mult;
    if (!*end || !strcmp(end, "ns"))
        mult = 1;
    else if (!strcmp(end, "us"))
        mult = 1e3;
    else if (!strcmp(end, "ms"))
        mult = 1e6;
    else if (!strcmp(end, "s"))
        mult = 1e9;
    else if (!strcmp(end, "m") || !strcmp(end, "min"))
        mult = 60e9;
    else
        return -1;
    *out = (uint64_t)(v * mult);
    return 0;
}

int vmmc_cfg_parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"1", "y", "yes", "on", "true"};
    static const char *no[] = {"0", "n", "no", "off", "false"};
    for (size_t i = 0; i < 5; i++) {
        if (!strcasecmp(s, yes[i])) { *out = 1; return 0; }
        if (!strcasecmp(s, no[i])) { *out = 0; return 0; }
    }
    return -1;
}

static int parse_into(const vmmc_cfg_entry_t *e, const char *s)
{
    switch (e->type) {
    case VMMC_CFG_SIZE: return vmmc_cfg_parse_size(s, e->dst);
    case VMMC_CFG_TIME: return vmmc_cfg_parse_time(s, e->dst);
    case VMMC_CFG_BOOL: return vmmc_cfg_parse_bool(s, e->dst);
    case VMMC_CFG_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 0);
        if (end == s || *end || errno)
            return -1;
        *(int64_t *)e->dst = v;
        return 0;
    }
    case VMMC_CFG_STRING:
        *(const char **)e->dst = s; /* s is a private copy kept in slots */
        return 0;
    }
    return -1;
}

static void load(void)
{
    const vmmc_cfg_table_t *const *b = __start_vmmc_cfg, *const *en = __stop_vmmc_cfg;
    int n = 0;
    for (const vmmc_cfg_table_t *const *t = b; t && t < en; t++)
        n += (int)(*t)->count;
    slots = calloc((size_t)n, sizeof *slots);
    if (!slots)
        return;
    for (const vmmc_cfg_table_t *const *t = b; t && t < en; t++) {
        for (size_t i = 0; i < (*t)->count; i++) {
            const vmmc_cfg_entry_t *e = &(*t)->entries[i];
            char var[96];
            snprintf(var, sizeof var, "VMMC_%s", e->name);
            const char *env = getenv(var);
            cfg_slot_t *sl = &slots[nslots++];
            sl->e = e;
            sl->value = strdup(e->deflt);
            if (parse_into(e, sl->value) != 0)
                vmmc_log(VMMC_LOG_ERROR, "bad built-in default %s=%s", var, e->deflt);
            if (env) {
                char *copy = strdup(env);
                if (copy && parse_into(e, copy) == 0) {
                    free(sl->value);
                    sl->value = copy;
                } else {
                    fprintf(stderr, "vmmc: warning: %s=%s is not a valid value (%s); using %s\n",
                            var, env, e->help, e->deflt);
                    parse_into(e, sl->value);
                    free(copy);
                }
            }
        }
    }
    vmmc_log_level = (int)log_level_cfg;
    /* Warn about VMMC_* variables nobody declared (typos). */
    for (char **ev = environ; ev && *ev; ev++) {
        if (strncmp(*ev, "VMMC_", 5))
            continue;
        const char *eq = strchr(*ev, '=');
        size_t len = eq ? (size_t)(eq - *ev) - 5 : strlen(*ev) - 5;
        int known = 0;
        for (int i = 0; i < nslots && !known; i++)
            known = strlen(slots[i].e->name) == len && !strncmp(slots[i].e->name, *ev + 5, len);
        /* Variables the launcher sets for its ranks are not settings. */
        static const char *const job_vars[] = {"RANK", "SIZE", "JOB", "LAUNCHER", "LOCAL_RANK",
                                               "BOOTSTRAP", "HOST_ID", NULL};
        for (int j = 0; job_vars[j] && !known; j++)
            known = strlen(job_vars[j]) == len && !strncmp(job_vars[j], *ev + 5, len);
        if (!known)
            fprintf(stderr, "vmmc: warning: unknown setting %.*s ignored (see `vmmc info -c`)\n",
                    (int)(len + 5), *ev);
    }
}

void vmmc_config_load(void)
{
    pthread_once(&once, load);
}

int vmmc_config_get(int i, const char **name, const char **value, const char **deflt,
                    const char **help)
{
    vmmc_config_load();
    if (i < 0 || i >= nslots)
        return VMMC_ERR_NOT_FOUND;
    static __thread char namebuf[96];
    snprintf(namebuf, sizeof namebuf, "VMMC_%s", slots[i].e->name);
    if (name) *name = namebuf;
    if (value) *value = slots[i].value;
    if (deflt) *deflt = slots[i].e->deflt;
    if (help) *help = slots[i].e->help;
    return VMMC_OK;
}
