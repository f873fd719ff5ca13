/* vmmc bench: what the framework's files share (bench.c runs the suites and
 * collects their rows; bench_out.c prints them as a table, CSV or JSON and
 * draws the charts). Not for suites: they use bench.h. */
#ifndef VMMC_TOOLS_BENCH_INT_H
#define VMMC_TOOLS_BENCH_INT_H

#include <stddef.h>
#include <stdio.h>

#include "bench.h"

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

/* The rows and notes of this run (bench.c). */
extern row_t *rows;
extern size_t nrows;
extern note_t *notes;
extern size_t nnotes;
/* The order suites run in and are printed in: the floor first. */
extern const char *const suite_order[];
extern const size_t suite_order_n;

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
