/* vmmc bench: the command line (options, sizes, suites). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_int.h"

extern const bench_suite_t *const __start_vmmc_bench[];
extern const bench_suite_t *const __stop_vmmc_bench[];
/* ------------------------------------------------------------------------- */
/* Options                                                                    */


static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc bench [options] [suite...]\n"
            "\n"
            "Measure latency, bandwidth and overheads, with this machine's limits\n"
            "and the installed peer libraries measured in the same run. Every figure\n"
            "is the median over repetitions after warm-up, with min and max; the\n"
            "ratio column compares it with the named reference of the same run.\n"
            "Two-rank suites run through `vmmc run -n 2 --cpu-bind` on cpus 0 and 1.\n"
            "\n"
            "options:\n"
            "  --quick               a short run (< 30 s): the headline figures only\n"
            "  --format FMT          table (default), csv or json\n"
            "  --plot DIR            write latency.png and bandwidth.png into DIR (gnuplot)\n"
            "  --transport T         shm (default), udp or fabric (the provider from\n"
            "                        VMMC_FABRIC_PROVIDER), for the two-rank suites\n"
            "  --reps N              repetitions per figure (default 7, quick 5)\n"
            "  --sizes MIN:MAX       message sizes to cover, e.g. 8:1M (K/M/G suffixes)\n"
            "  --timeout S           give up on a suite after S seconds (default 600,\n"
            "                        quick 60)\n"
            "  --crash-test SUITE    make SUITE die at start (checks that the others\n"
            "                        still run and the failure is reported)\n"
            "  --bound S/M:S2/M2     also check figure S/M against S2/M2 as its floor\n"
            "                        (times) or ceiling (rates)\n"
            "  -h, --help            this text\n"
            "\n"
            "suites (all by default):\n");
    const char *const *o = suite_order;
    for (size_t i = 0; i < suite_order_n; i++) {
        const bench_suite_t *s = NULL;
        for (const bench_suite_t *const *p = __start_vmmc_bench; p < __stop_vmmc_bench; p++)
            if (!strcmp((*p)->name, o[i]))
                s = *p;
        fprintf(f, "  %-8s %s%s\n", o[i], s ? s->help : "(not built in)",
                s && s->nranks == 2 ? " [2 ranks]" : "");
    }
    fprintf(f,
            "\n"
            "examples:\n"
            "  vmmc bench --quick\n"
            "  vmmc bench limits vmmc --sizes 8:4M --format csv > run.csv\n"
            "  vmmc bench --plot docs/img\n");
}

const bench_suite_t *find_suite(const char *name)
{
    for (const bench_suite_t *const *p = __start_vmmc_bench; p < __stop_vmmc_bench; p++)
        if (!strcmp((*p)->name, name))
            return *p;
    return NULL;
}

/* "64", "4K", "1M", "1G": binary multiples. Returns 0 or -1. */
static int parse_size(const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned long long mul = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mul = 1ull << 10; break;
        case 'M': mul = 1ull << 20; break;
        case 'G': mul = 1ull << 30; break;
        case 'B': mul = 1; break;
        default: return -1;
        }
        end++;
        if (mul > 1 && (*end == 'i' || *end == 'I'))
            end++;
        if (mul > 1 && (*end == 'B' || *end == 'b'))
            end++;
        if (*end)
            return -1;
    }
    if (v > (unsigned long long)SIZE_MAX / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

int parse_opts(int argc, char **argv, opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->format = "table";
    o->transport = "shm";
    o->min_size = 1;
    o->max_size = (size_t)16 << 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        /* --opt=value and --opt value */
        char name[64];
        const char *eq = strchr(a, '=');
        if (!strncmp(a, "--", 2) && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
            a = name;
        }
#define NEED_VAL()                                                                      \
    do {                                                                                \
        if (!val) {                                                                     \
            if (i + 1 >= argc) {                                                        \
                fprintf(stderr, "vmmc bench: %s needs a value (see --help)\n", a);      \
                return -1;                                                              \
            }                                                                           \
            val = argv[++i];                                                            \
        }                                                                               \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bench_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--format")) {
            NEED_VAL();
            if (strcmp(val, "table") && strcmp(val, "csv") && strcmp(val, "json")) {
                fprintf(stderr, "vmmc bench: unknown format '%s' (table, csv or json)\n", val);
                return -1;
            }
            o->format = val;
        } else if (!strcmp(a, "--plot")) {
            NEED_VAL();
            if (!*val) {
                fprintf(stderr, "vmmc bench: --plot needs a directory\n");
                return -1;
            }
            o->plot_dir = val;
        } else if (!strcmp(a, "--transport")) {
            NEED_VAL();
            if (strcmp(val, "shm") && strcmp(val, "udp") && strcmp(val, "fabric")) {
                fprintf(stderr, "vmmc bench: unknown transport '%s' (shm, udp or fabric)\n", val);
                return -1;
            }
            o->transport = val;
        } else if (!strcmp(a, "--reps")) {
            NEED_VAL();
            char *end;
            errno = 0;
            long r = strtol(val, &end, 10);
            if (errno || *end || end == val || r < 1 || r > 1000) {
                fprintf(stderr, "vmmc bench: --reps must be a number from 1 to 1000, not '%s'\n",
                        val);
                return -1;
            }
            o->reps = (int)r;
        } else if (!strcmp(a, "--timeout")) {
            NEED_VAL();
            char *end;
            errno = 0;
            long t = strtol(val, &end, 10);
            if (errno || *end || end == val || t < 1 || t > 86400) {
                fprintf(stderr, "vmmc bench: --timeout must be 1..86400 seconds, not '%s'\n", val);
                return -1;
            }
            o->timeout_s = (int)t;
        } else if (!strcmp(a, "--sizes")) {
            NEED_VAL();
            const char *colon = strchr(val, ':');
            char lo[32];
            if (!colon || (size_t)(colon - val) >= sizeof lo) {
                fprintf(stderr, "vmmc bench: --sizes wants MIN:MAX, e.g. 8:4M, not '%s'\n", val);
                return -1;
            }
            memcpy(lo, val, (size_t)(colon - val));
            lo[colon - val] = 0;
            if (parse_size(lo, &o->min_size) || parse_size(colon + 1, &o->max_size) ||
                o->min_size < 1 || o->min_size > o->max_size ||
                o->max_size > ((size_t)1 << 30)) {
                fprintf(stderr,
                        "vmmc bench: bad --sizes '%s': want 1 <= MIN <= MAX <= 1G, e.g. 8:4M\n",
                        val);
                return -1;
            }
            o->sizes_set = 1;
        } else if (!strcmp(a, "--worker")) {
            NEED_VAL();
            o->worker = val;
        } else if (!strcmp(a, "--crash-test")) {
            NEED_VAL();
            o->crash = val;
        } else if (!strcmp(a, "--bound")) {
            NEED_VAL();
            const char *colon = strchr(val, ':');
            if (o->nbounds == 8 || !colon || !strchr(val, '/') || strchr(val, '/') > colon ||
                !strchr(colon, '/')) {
                fprintf(stderr, "vmmc bench: bad --bound '%s': give SUITE/METRIC:SUITE/METRIC "
                                "(at most 8)\n", val);
                return -1;
            }
            o->bounds[o->nbounds++] = val;
        } else if (a[0] == '-') {
            fprintf(stderr, "vmmc bench: unknown option '%s' (see --help)\n", a);
            return -1;
        } else {
            if (val) {
                fprintf(stderr, "vmmc bench: unknown option '%s' (see --help)\n", argv[i]);
                return -1;
            }
            if (!find_suite(a)) {
                fprintf(stderr, "vmmc bench: unknown suite '%s' (see --help)\n", a);
                return -1;
            }
            for (int k = 0; k < o->nsuites; k++)
                if (!strcmp(o->suites[k], a)) {
                    a = NULL;
                    break;
                }
            if (!a)
                continue;
            if (o->nsuites == (int)(sizeof o->suites / sizeof *o->suites)) {
                fprintf(stderr, "vmmc bench: too many suites\n");
                return -1;
            }
            o->suites[o->nsuites++] = a;
        }
#undef NEED_VAL
    }
    if (!o->reps)
        o->reps = o->quick ? 5 : 7;
    if (!o->timeout_s)
        o->timeout_s = o->quick ? 60 : 600;
    return 0;
}

