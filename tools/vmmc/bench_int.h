/* vmmc bench: what the framework's files share (bench.c runs the suites;
 * bench_report.c writes the result lines a suite reports; bench_rows.c
 * reads them into rows and computes the ratios; bench_opts.c parses the
 * command line; bench_out.c prints the rows as a table, CSV or JSON and
 * draws the charts). Not for suites: they use bench.h. */
#ifndef VMMC_TOOLS_BENCH_INT_H
#define VMMC_TOOLS_BENCH_INT_H

#include <stddef.h>
#include <stdio.h>

#include "bench.h"

/* A result line: ROW_TAG, "row" or "note", then tab-separated fields. */
#define ROW_TAG "@@vmmc-bench"
#define BOUND_TAG "bound:" /* a row's reference that is its floor or ceiling */

typedef struct row {
    char *suite, *transport, *metric, *unit, *ref;
    size_t size;
    double value, min, max;
    double ratio;    /* NAN if none */
    char *ratio_to;  /* "suite/metric@size", NULL if none */
    int bound;       /* ref is a floor (times) or ceiling (rates) of this figure */
    const char *flag; /* "below-floor", "above-ceiling", or NULL */
} row_t;

typedef struct note {
    char *suite, *text;
} note_t;

typedef struct opts {
    int quick;
    const char *format; /* table, csv, json */
    const char *plot_dir;
    const char *transport;
    int reps;
    size_t min_size, max_size;
    int sizes_set;
    const char *worker;
    const char *crash; /* --crash-test: this suite kills itself (tests the failure path) */
    const char *bounds[8]; /* --bound METRIC:BOUND */
    int nbounds;
    int timeout_s;
    const char *suites[16];
    int nsuites;
} opts_t;

/* The order suites run in and are printed in: the floor first (bench.c). */
extern const char *const suite_order[];
extern const size_t suite_order_n;

/* bench_report.c: where this (suite's) process writes its result lines;
 * NULL in the tool itself. */
extern FILE *g_rows;

/* bench_rows.c: the rows and notes of this run. */
extern row_t *rows;
extern size_t nrows;
extern note_t *notes;
extern size_t nnotes;
void *xrealloc(void *p, size_t n); /* exit(1) when out of memory */
char *xstrdup(const char *s);      /* "" for NULL; exit(1) when out of memory */
void add_note(const char *suite, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One line from a suite; lines without ROW_TAG are diagnostics and go to
 * stderr. Returns 1 for a row or note, 0 otherwise. */
int parse_line(const char *suite, char *line);
/* --bound METRIC:BOUND: make BOUND the floor or ceiling of METRIC's rows. */
void apply_bounds(const opts_t *o);
/* Each row's ratio to its reference; flags a figure beyond its bound. */
void compute_ratios(void);

/* bench_opts.c */
int parse_opts(int argc, char **argv, opts_t *o);
const bench_suite_t *find_suite(const char *name);

/* bench_out.c */
double sample_busy(double ms);
extern double g_busy_start;
void print_table(FILE *f, const opts_t *o, const char *const *ran, int nran);
void print_csv(FILE *f);
void print_json(FILE *f, const opts_t *o);
int check_gnuplot(void);
int make_plots(const char *dir);
int suite_rank(const char *name);

#endif
