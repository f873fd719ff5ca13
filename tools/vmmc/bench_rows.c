/* vmmc bench: the rows and notes of a run.
 *
 * Reads the result lines the suites write (bench_report.c) into rows and
 * notes, then computes each row's ratio to its named reference measured in
 * the same run, and flags a figure beyond its own floor or ceiling. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_int.h"

/* How far past its bound's extreme repetition a figure must be to be flagged:
 * the spread of repetitions on a quiet machine. */
#define BOUND_MARGIN 0.03

row_t *rows;
size_t nrows;
static size_t caprows;
note_t *notes;
size_t nnotes;
static size_t capnotes;

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "vmmc bench: out of memory\n");
        exit(1);
    }
    return q;
}

char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d) {
        fprintf(stderr, "vmmc bench: out of memory\n");
        exit(1);
    }
    return d;
}

void add_note(const char *suite, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (nnotes == capnotes) {
        capnotes = capnotes ? 2 * capnotes : 16;
        notes = xrealloc(notes, capnotes * sizeof *notes);
    }
    notes[nnotes].suite = xstrdup(suite);
    notes[nnotes].text = xstrdup(buf);
    nnotes++;
}

/* Parse one line from a suite; lines without the tag are diagnostics and go
 * to stderr. Returns 1 for a row or note, 0 otherwise. */
int parse_line(const char *suite, char *line)
{
    char *tag = strstr(line, ROW_TAG "\t");
    if (!tag) {
        if (*line)
            fprintf(stderr, "[%s] %s\n", suite, line);
        return 0;
    }
    char *f[12];
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(tag, "\t", &save); t && n < 12; t = strtok_r(NULL, "\t", &save))
        f[n++] = t;
    /* strtok_r drops empty fields: the only optional one is the last (ref). */
    if (n >= 3 && !strcmp(f[1], "note")) {
        add_note(suite, "%s", f[2]);
        return 1;
    }
    if (n < 9 || strcmp(f[1], "row")) {
        fprintf(stderr, "vmmc bench: [%s] malformed result line ignored\n", suite);
        return 0;
    }
    if (nrows == caprows) {
        caprows = caprows ? 2 * caprows : 64;
        rows = xrealloc(rows, caprows * sizeof *rows);
    }
    row_t *r = &rows[nrows++];
    memset(r, 0, sizeof *r);
    r->suite = xstrdup(suite);
    r->transport = xstrdup(f[2]);
    r->metric = xstrdup(f[3]);
    r->size = (size_t)strtoull(f[4], NULL, 10);
    r->unit = xstrdup(f[5]);
    r->value = strtod(f[6], NULL);
    r->min = strtod(f[7], NULL);
    r->max = strtod(f[8], NULL);
    r->ref = n > 9 ? xstrdup(f[9]) : NULL;
    if (r->ref && !strncmp(r->ref, BOUND_TAG, strlen(BOUND_TAG))) {
        memmove(r->ref, r->ref + strlen(BOUND_TAG), strlen(r->ref) - strlen(BOUND_TAG) + 1);
        r->bound = 1;
    }
    r->ratio = NAN;
    return 1;
}

/* Time units are converted to ns; other units must match exactly. */
static int unit_scale(const char *u, double *scale, const char **family)
{
    if (!strcmp(u, "ns")) {
        *scale = 1;
        *family = "time";
    } else if (!strcmp(u, "us")) {
        *scale = 1e3;
        *family = "time";
    } else if (!strcmp(u, "ms")) {
        *scale = 1e6;
        *family = "time";
    } else {
        *scale = 1;
        *family = u;
    }
    return 0;
}

static double size_distance(size_t a, size_t b)
{
    return fabs(log2((double)(a ? a : 1)) - log2((double)(b ? b : 1)));
}

void compute_ratios(void)
{
    for (size_t i = 0; i < nrows; i++) {
        row_t *r = &rows[i];
        if (!r->ref || !*r->ref)
            continue;
        const char *slash = strchr(r->ref, '/');
        if (!slash)
            continue;
        size_t slen = (size_t)(slash - r->ref);
        const row_t *best = NULL;
        double bestd = INFINITY;
        for (size_t j = 0; j < nrows; j++) {
            const row_t *q = &rows[j];
            if (q == r || strlen(q->suite) != slen || strncmp(q->suite, r->ref, slen) ||
                strcmp(q->metric, slash + 1))
                continue;
            double d = size_distance(q->size, r->size);
            /* same size wins; among equals prefer the same transport */
            if (!strcmp(q->transport, r->transport))
                d -= 0.01;
            if (d < bestd) {
                bestd = d;
                best = q;
            }
        }
        if (!best)
            continue;
        double s1, s2;
        const char *f1, *f2;
        unit_scale(r->unit, &s1, &f1);
        unit_scale(best->unit, &s2, &f2);
        if (strcmp(f1, f2) || best->value == 0)
            continue;
        r->ratio = (r->value * s1) / (best->value * s2);
        char buf[256];
        if (best->size)
            snprintf(buf, sizeof buf, "%s@%zu", r->ref, best->size);
        else
            snprintf(buf, sizeof buf, "%s", r->ref);
        r->ratio_to = xstrdup(buf);
        /* A figure beyond its own floor or ceiling, measured the same way in
         * this run, is impossible: flag it rather than let it be quoted.
         * Beyond means past every repetition of the bound (below the floor's
         * min, above the ceiling's max) by more than BOUND_MARGIN, so that
         * neither the bound's noise nor the figure's raises the flag. */
        if (r->bound && best->size == r->size) {
            int is_time = !strcmp(f1, "time");
            if (is_time ? r->value * s1 < best->min * s2 * (1 - BOUND_MARGIN)
                        : r->value * s1 > best->max * s2 * (1 + BOUND_MARGIN)) {
                char sz[32];
                r->flag = is_time ? "below-floor" : "above-ceiling";
                snprintf(sz, sizeof sz, "%zu B", r->size);
                add_note(r->suite,
                         "! %s at %s is %.3gx its %s %s, measured the same way in this run, "
                         "and more than 3 %% beyond every repetition of it: impossible, so the "
                         "two did not see "
                         "the same machine (the cpus moved or other work ran) or the path "
                         "skipped work it owes; do not quote it",
                         r->metric, r->size ? sz : "-", r->ratio,
                         is_time ? "floor" : "ceiling", r->ratio_to);
            }
        }
    }
}

/* --bound METRIC:BOUND (both "suite/metric"): treat BOUND as METRIC's floor
 * (times) or ceiling (rates), as suites do for their own figures. */
void apply_bounds(const opts_t *o)
{
    for (int b = 0; b < o->nbounds; b++) {
        const char *colon = strchr(o->bounds[b], ':');
        const char *slash = strchr(o->bounds[b], '/');
        if (!colon || !slash || slash > colon)
            continue;
        for (size_t i = 0; i < nrows; i++) {
            row_t *r = &rows[i];
            size_t sl = (size_t)(slash - o->bounds[b]), ml = (size_t)(colon - slash - 1);
            if (strlen(r->suite) != sl || strncmp(r->suite, o->bounds[b], sl) ||
                strlen(r->metric) != ml || strncmp(r->metric, slash + 1, ml))
                continue;
            free(r->ref);
            r->ref = xstrdup(colon + 1);
            r->bound = 1;
        }
    }
}
