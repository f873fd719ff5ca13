/* `vmmc run`: the command line and the launcher's own settings. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_int.h"
#include "vmmc/vmmc.h"

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: vmmc run -n N [options] [--] prog [args...]\n"
            "\n"
            "Start N processes of prog on this host as one vmmc job.\n"
            "\n"
            "options:\n"
            "  -n, --np N        number of ranks (1..%d), required\n"
            "  --timeout SEC     kill the job after SEC seconds (exit status 124)\n"
            "  --tag-output      prefix every output line with [rank]\n"
            "  --cpu-bind        pin rank r to the (r mod ncpus)-th allowed cpu\n"
            "  -h, --help        this text\n"
            "\n"
            "Each rank gets VMMC_RANK, VMMC_SIZE, VMMC_LOCAL_RANK, VMMC_JOB, VMMC_LAUNCHER.\n"
            "If a rank is killed by a signal or exits non-zero, the others get a death\n"
            "notice at once, then SIGTERM after VMMC_RUN_GRACE (default 500ms), then\n"
            "SIGKILL. SIGINT and SIGTERM are forwarded to every rank. The exit status is\n"
            "the first failure's (128+signal for a signal), else 0.\n"
            "The ranks' stderr passes through the launcher; a failed rank is named with\n"
            "the last line it wrote there. The VMMC_* settings are checked once, before\n"
            "any rank starts: a refused value stops the job (status 1), and warnings are\n"
            "printed once (the ranks get VMMC_SETTINGS_CHECKED).\n",
            RUN_MAX_RANKS);
}

/* "500ms", "2s", "1.5s", "100us", bare number = ns (the VMMC_* time syntax). */
static int parse_time_ms(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    double ms;
    if (!*end || !strcmp(end, "ns"))
        ms = v / 1e6;
    else if (!strcmp(end, "us"))
        ms = v / 1e3;
    else if (!strcmp(end, "ms"))
        ms = v;
    else if (!strcmp(end, "s"))
        ms = v * 1e3;
    else if (!strcmp(end, "m") || !strcmp(end, "min"))
        ms = v * 60e3;
    else
        return -1;
    if (ms > 1e9)
        ms = 1e9;
    *out = (int64_t)ms;
    return 0;
}

/* The grace period in effect, through the library's settings table. */
int64_t run_grace_ms(void)
{
    const char *name, *value;
    int64_t ms = 500;
    for (int i = 0; vmmc_config_get(i, &name, &value, NULL, NULL) == VMMC_OK; i++)
        if (!strcmp(name, "VMMC_RUN_GRACE") && parse_time_ms(value, &ms) != 0)
            ms = 500;
    return ms;
}

int run_parse_args(job_t *j, int argc, char **argv)
{
    int i;
    j->n = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--np") || !strncmp(a, "-n", 2) ||
                   !strncmp(a, "--np=", 5)) {
            const char *v = !strcmp(a, "-n") || !strcmp(a, "--np") ? (i + 1 < argc ? argv[++i] : NULL)
                            : a[1] == 'n' ? a + 2 : a + 5;
            char *end;
            long n = v ? strtol(v, &end, 10) : 0;
            if (!v || !*v || *end || n < 1 || n > RUN_MAX_RANKS) {
                fprintf(stderr, "vmmc run: -n needs a number of ranks in 1..%d (got '%s')\n",
                        RUN_MAX_RANKS, v ? v : "");
                return -1;
            }
            j->n = (int)n;
        } else if (!strcmp(a, "--timeout") || !strncmp(a, "--timeout=", 10)) {
            const char *v = a[9] == '=' ? a + 10 : (i + 1 < argc ? argv[++i] : NULL);
            char *end;
            double t = v ? strtod(v, &end) : 0;
            if (!v || !*v || *end || !(t > 0) || t > 1e7) {
                fprintf(stderr, "vmmc run: --timeout needs a positive number of seconds (got '%s')\n",
                        v ? v : "");
                return -1;
            }
            j->timeout_s = t;
        } else if (!strcmp(a, "--tag-output")) {
            j->tag_output = 1;
        } else if (!strcmp(a, "--cpu-bind")) {
            j->cpu_bind = 1;
        } else {
            fprintf(stderr, "vmmc run: unknown option '%s'\n", a);
            return -1;
        }
    }
    if (!j->n) {
        fprintf(stderr, "vmmc run: -n N is required\n");
        return -1;
    }
    if (i >= argc) {
        fprintf(stderr, "vmmc run: no program to run\n");
        return -1;
    }
    j->argv = argv + i;
    return 0;
}
