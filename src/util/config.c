/* VMMC_* settings: the parsers (units, ranges) and the tables of util and of
 * the job variables. The registry of every table is config_reg.c. */
#include "util/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"
#include "vmmc/vmmc.h"

/* The logging level is the config module's own entry. */
static int64_t log_level_cfg;
static const vmmc_cfg_entry_t util_entries[] = {
    {"LOG_LEVEL", "1", "log verbosity: 0 error, 1 warn, 2 info, 3 debug, 4 trace",
     VMMC_CFG_INT, &log_level_cfg, 0, 4},
};
VMMC_CONFIG_TABLE(util_cfg, "util", util_entries);

void vmmc_cfg_apply_util(void)
{
    vmmc_log_level = (int)log_level_cfg;
}

/* Variables a launcher sets for its ranks (or a user sets to form a job by
 * hand). The job layer reads and checks them; listing them here makes them
 * known and visible in `vmmc info -c`. */
static const char *job_vars[8];
static const vmmc_cfg_entry_t job_entries[] = {
    {"BOOTSTRAP", "", "host:port of the TCP rendezvous for a job started without `vmmc run` "
     "(with VMMC_RANK and VMMC_SIZE; see docs/launcher.md)", VMMC_CFG_JOB, &job_vars[0]},
    {"RANK", "", "this process's rank, 0 .. VMMC_SIZE-1 (set by `vmmc run`, or by hand with "
     "VMMC_BOOTSTRAP)", VMMC_CFG_JOB, &job_vars[1]},
    {"SIZE", "", "number of ranks in the job (set by `vmmc run`, or by hand with VMMC_BOOTSTRAP)",
     VMMC_CFG_JOB, &job_vars[2]},
    {"LOCAL_RANK", "", "rank among the job's processes on this host (set by `vmmc run`)",
     VMMC_CFG_JOB, &job_vars[3]},
    {"JOB", "", "job identifier (set by `vmmc run`)", VMMC_CFG_JOB, &job_vars[4]},
    {"LAUNCHER", "", "the launcher's socket (set by `vmmc run`)", VMMC_CFG_JOB, &job_vars[5]},
    {"SETTINGS_CHECKED", "", "set by `vmmc run` once it has checked the job's settings: the "
     "ranks do not repeat its warnings", VMMC_CFG_JOB, &job_vars[6]},
    {"BENCH_DIR", "", "vmmc bench: the source tree's bench/ directory, where the MPI peer "
     "programs are (default: the copy built into the tool)", VMMC_CFG_JOB, &job_vars[7]},
};
VMMC_CONFIG_TABLE(job_cfg, "job", job_entries);

/* A decimal number with an optional suffix; -1 bad syntax. */
static int parse_number(const char *s, double *v, const char **rest)
{
    char *end;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s) && *s != '.')
        return -1; /* no sign, no "inf"/"nan", no hex */
    errno = 0;
    *v = strtod(s, &end);
    if (end == s || errno || !isfinite(*v) || *v < 0)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    *rest = end;
    return 0;
}

/* v * mult as a uint64_t; -3 if it does not fit. */
static int to_u64(double v, double mult, uint64_t *out)
{
    double x = v * mult;
    if (!(x < 18446744073709551616.0))
        return -3;
    *out = (uint64_t)x;
    return 0;
}

int vmmc_cfg_parse_size(const char *s, uint64_t *out)
{
    double v;
    const char *end;
    if (parse_number(s, &v, &end))
        return -1;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 0x1p10; end++; break;
    case 'M': mult = 0x1p20; end++; break;
    case 'G': mult = 0x1p30; end++; break;
    case 'T': mult = 0x1p40; end++; break;
    default: break;
    }
    if (mult > 1 && toupper((unsigned char)*end) == 'I')
        end++;
    if (toupper((unsigned char)*end) == 'B')
        end++;
    if (*end)
        return -1;
    return to_u64(v, mult, out);
}

int vmmc_cfg_parse_time(const char *s, uint64_t *out)
{
    double v;
    const char *end;
    if (parse_number(s, &v, &end))
        return -1;
    double mult;
    if (!*end) {
        if (v != 0)
            return -2;
        mult = 1;
    } else if (!strcmp(end, "ns")) {
        mult = 1;
    } else if (!strcmp(end, "us")) {
        mult = 1e3;
    } else if (!strcmp(end, "ms")) {
        mult = 1e6;
    } else if (!strcmp(end, "s")) {
        mult = 1e9;
    } else if (!strcmp(end, "m") || !strcmp(end, "min")) {
        mult = 60e9;
    } else {
        return -1;
    }
    return to_u64(v, mult, out);
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

/* A size or time in the largest unit that keeps it exact. */
static void fmt_amount(char *b, size_t n, vmmc_cfg_type_t t, uint64_t v)
{
    static const char *const su[] = {"", "K", "M", "G", "T"};
    static const char *const tu[] = {"ns", "us", "ms", "s"};
    int k = 0;
    if (t == VMMC_CFG_SIZE) {
        while (k < 4 && v && v % 1024 == 0) {
            v /= 1024;
            k++;
        }
        snprintf(b, n, "%" PRIu64 "%s", v, su[k]);
    } else if (t == VMMC_CFG_TIME) {
        while (k < 3 && v && v % 1000 == 0) {
            v /= 1000;
            k++;
        }
        snprintf(b, n, "%" PRIu64 "%s", v, v ? tu[k] : "");
    } else {
        snprintf(b, n, "%" PRId64, (int64_t)v);
    }
}

static int ranged(const vmmc_cfg_entry_t *e)
{
    return e->min || e->max;
}

/* Parse @s into @e->dst; 0, or a reason in @why. */
int vmmc_cfg_parse_into(const vmmc_cfg_entry_t *e, const char *s, char *why, size_t n)
{
    uint64_t u = 0;
    int rc = 0;
    switch (e->type) {
    case VMMC_CFG_SIZE:
    case VMMC_CFG_TIME:
        rc = e->type == VMMC_CFG_SIZE ? vmmc_cfg_parse_size(s, &u) : vmmc_cfg_parse_time(s, &u);
        if (rc == -2) {
            snprintf(why, n, "give a unit: ns, us, ms, s (e.g. %s)", e->deflt);
            return -1;
        }
        if (rc == -3) {
            snprintf(why, n, "too large");
            return -1;
        }
        if (rc) {
            snprintf(why, n, e->type == VMMC_CFG_SIZE ? "not a size (e.g. 4096, 64K, 1M)"
                                                      : "not a time (e.g. 500us, 10ms, 2s)");
            return -1;
        }
        break;
    case VMMC_CFG_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 0);
        if (end == s || *end || errno) {
            snprintf(why, n, errno == ERANGE ? "too large" : "not an integer");
            return -1;
        }
        if (ranged(e) && (v < (long long)e->min || v > (long long)e->max))
            goto out_of_range;
        *(int64_t *)e->dst = v;
        return 0;
    }
    case VMMC_CFG_BOOL:
        if (vmmc_cfg_parse_bool(s, e->dst)) {
            snprintf(why, n, "not a boolean (yes/no, y/n, 1/0, on/off, true/false)");
            return -1;
        }
        return 0;
    case VMMC_CFG_STRING:
    case VMMC_CFG_JOB:
        *(const char **)e->dst = s; /* s is a private copy kept in slots */
        return 0;
    }
    if (ranged(e) && (u < e->min || u > e->max))
        goto out_of_range;
    *(uint64_t *)e->dst = u;
    return 0;
out_of_range: {
    char lo[32], hi[32];
    fmt_amount(lo, sizeof lo, e->type, e->min);
    fmt_amount(hi, sizeof hi, e->type, e->max);
    snprintf(why, n, "out of range: valid values are %s .. %s", lo, hi);
    return -1;
}
}

/* The help text with the entry's syntax and range. */
char *vmmc_cfg_describe(const vmmc_cfg_entry_t *e)
{
    char range[96] = "";
    if (ranged(e)) {
        char lo[32], hi[32];
        fmt_amount(lo, sizeof lo, e->type, e->min);
        fmt_amount(hi, sizeof hi, e->type, e->max);
        snprintf(range, sizeof range, ", %s .. %s", lo, hi);
    }
    const char *kind = "";
    switch (e->type) {
    case VMMC_CFG_SIZE: kind = "size in bytes, K/M/G suffixes"; break;
    case VMMC_CFG_TIME: kind = "time, unit required: ns, us, ms, s"; break;
    case VMMC_CFG_INT: kind = "integer"; break;
    case VMMC_CFG_BOOL: kind = "yes/no"; break;
    case VMMC_CFG_STRING: kind = "text"; break;
    case VMMC_CFG_JOB: kind = "job variable"; break;
    }
    size_t n = strlen(e->help) + strlen(kind) + strlen(range) + 8;
    char *h = malloc(n);
    if (h)
        snprintf(h, n, "%s [%s%s]", e->help, kind, range);
    return h;
}

