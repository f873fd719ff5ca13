/* vmmc bench: a benchmark program run as a child, and its rows.
 *
 * The suites that measure through a program of their own (bench/ programs built
 * with mpicc, oshcc, ...) run it under a launcher and read its rows, one a
 * line: "<kind> <size> <median> <min> <max>". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_proc.h"

int bench_child_rows(bench_ctx_t *c, char *const argv[], char *const env[], double timeout_s,
                     const char *name, bench_row_fn row, void *arg)
{
    char *out = NULL;
    int rc = proc_run_capture(argv, env, -1, timeout_s, &out);
    int rows = 0;
    for (const char *l = out; l && *l;) {
        char kind[16];
        size_t size;
        bench_stat_t st;
        if (sscanf(l, "%15s %zu %lf %lf %lf", kind, &size, &st.median, &st.min, &st.max) == 5 &&
            row(c, arg, kind, size, st))
            rows++;
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    if (rc || !rows) {
        const char *o = out && *out ? out : "(no output)";
        size_t len = strlen(o);
        bench_note(c, "%s not measured: the run failed (%s): %.300s", name, proc_why(rc),
                   len > 300 ? o + len - 300 : o);
    }
    free(out);
    return rows;
}
