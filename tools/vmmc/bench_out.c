/* vmmc bench: printing a run's rows (table, CSV, JSON) and drawing its
 * charts with gnuplot. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_int.h"
#include "bench_proc.h"

/* ------------------------------------------------------------------------- */
/* Output                                                                     */

static void fmt_size(size_t s, char *buf, size_t n)
{
    if (s == 0)
        snprintf(buf, n, "-");
    else if (s >= (1u << 30) && s % (1u << 30) == 0)
        snprintf(buf, n, "%zu GiB", s >> 30);
    else if (s >= (1u << 20) && s % (1u << 20) == 0)
        snprintf(buf, n, "%zu MiB", s >> 20);
    else if (s >= 1024 && s % 1024 == 0)
        snprintf(buf, n, "%zu KiB", s >> 10);
    else
        snprintf(buf, n, "%zu B", s);
}

static void fmt_num(double v, char *buf, size_t n)
{
    if (isnan(v))
        snprintf(buf, n, "-");
    else if (v != 0 && (fabs(v) >= 1e6 || fabs(v) < 1e-3))
        snprintf(buf, n, "%.3g", v);
    else if (fabs(v) >= 100)
        snprintf(buf, n, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(buf, n, "%.1f", v);
    else
        snprintf(buf, n, "%.3g", v);
}

int suite_rank(const char *name)
{
    for (size_t i = 0; i < suite_order_n; i++)
        if (!strcmp(suite_order[i], name))
            return (int)i;
    return 99;
}

static void machine_cpu(char *buf, size_t n);

/* How busy the cpus were just before the run (0..1, -1 unknown): other
 * work on the machine shows up in spinning two-core benchmarks. */
double g_busy_start = -1;

static int cpu_times(unsigned long long *busy, unsigned long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < 8; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4]; /* minus idle and iowait */
    return 0;
}

double sample_busy(double ms)
{
    unsigned long long b0, t0, b1, t1;
    if (cpu_times(&b0, &t0))
        return -1;
    usleep((useconds_t)(ms * 1000));
    if (cpu_times(&b1, &t1) || t1 == t0)
        return -1;
    return (double)(b1 - b0) / (double)(t1 - t0);
}

void print_table(FILE *f, const opts_t *o, const char *const *ran, int nran)
{
    static const char *hdr[] = {"suite", "transport", "size", "metric", "value",
                                "unit", "min", "max", "ratio", "ratio to"};
    enum { NC = 10 };
    int w[NC];
    for (int k = 0; k < NC; k++)
        w[k] = (int)strlen(hdr[k]);
    char cell[NC][128];
    char cpu[256];
    machine_cpu(cpu, sizeof cpu);
    struct utsname u;
    uname(&u);
    fprintf(f, "vmmc bench %s: %s, %ld cpus, Linux %s; transport %s", vmmc_version(), cpu,
            sysconf(_SC_NPROCESSORS_ONLN), u.release, o->transport);
    if (g_busy_start >= 0)
        fprintf(f, "; cpus %.0f%% busy before the run", 100 * g_busy_start);
    fputc('\n', f);
    if (g_busy_start >= 0.25)
        fprintf(f, "warning: other work was using %.0f%% of the cpus when the run started: "
                   "two-core figures are noisy; compare min, and rerun when it is idle\n",
                100 * g_busy_start);
    for (int pass = 0; pass < 2; pass++) {
        for (int si = 0; si < nran; si++) {
            const char *suite = ran[si];
            int any = 0;
            for (size_t i = 0; i < nrows; i++) {
                const row_t *r = &rows[i];
                if (strcmp(r->suite, suite))
                    continue;
                snprintf(cell[0], sizeof cell[0], "%s", r->suite);
                snprintf(cell[1], sizeof cell[1], "%s", r->transport);
                fmt_size(r->size, cell[2], sizeof cell[2]);
                snprintf(cell[3], sizeof cell[3], "%s", r->metric);
                fmt_num(r->value, cell[4], sizeof cell[4]);
                snprintf(cell[5], sizeof cell[5], "%s", r->unit);
                fmt_num(r->min, cell[6], sizeof cell[6]);
                fmt_num(r->max, cell[7], sizeof cell[7]);
                if (isnan(r->ratio))
                    snprintf(cell[8], sizeof cell[8], "-");
                else
                    snprintf(cell[8], sizeof cell[8], "%.3gx%s", r->ratio, r->flag ? " !" : "");
                snprintf(cell[9], sizeof cell[9], "%s",
                         r->ratio_to ? r->ratio_to
                                     : (r->ref && *r->ref ? "(reference not measured)" : ""));
                if (pass == 0) {
                    for (int k = 0; k < NC; k++)
                        if ((int)strlen(cell[k]) > w[k])
                            w[k] = (int)strlen(cell[k]);
                    continue;
                }
                if (!any) {
                    fprintf(f, "\n== %s ==\n", suite);
                    for (int k = 0; k < NC; k++)
                        fprintf(f, (k == 4 || (k >= 6 && k <= 8)) ? "%*s  " : "%-*s  ",
                                k == NC - 1 ? 0 : w[k], hdr[k]);
                    fputc('\n', f);
                }
                any = 1;
                for (int k = 0; k < NC; k++)
                    fprintf(f, (k == 4 || (k >= 6 && k <= 8)) ? "%*s  " : "%-*s  ",
                            k == NC - 1 ? 0 : w[k], cell[k]);
                fputc('\n', f);
            }
            if (pass == 1) {
                if (!any)
                    fprintf(f, "\n== %s ==\n(no figures)\n", suite);
                for (size_t i = 0; i < nnotes; i++)
                    if (!strcmp(notes[i].suite, suite))
                        fprintf(f, "note: %s\n", notes[i].text);
            }
        }
    }
    fprintf(f, "\nmedian of %d repetitions after warm-up%s; one-way latency = round trip / 2;"
               " GB/s = 1e9 B/s\n",
            o->reps, o->quick ? " (--quick)" : "");
    int flagged = 0;
    for (size_t i = 0; i < nrows; i++)
        flagged += rows[i].flag != NULL;
    if (flagged)
        fprintf(f, "! = %d figure%s beyond the floor or ceiling measured the same way in this "
                   "run (see the notes): not to be quoted\n",
                flagged, flagged == 1 ? "" : "s");
}

static void csv_field(FILE *f, const char *s)
{
    if (s && strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else if (s) {
        fputs(s, f);
    }
}

void print_csv(FILE *f)
{
    fprintf(f, "suite,transport,size,metric,value,unit,min,max,ratio,ratio_to,flag\n");
    for (size_t i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        csv_field(f, r->suite);
        fputc(',', f);
        csv_field(f, r->transport);
        fprintf(f, ",%zu,", r->size);
        csv_field(f, r->metric);
        fprintf(f, ",%.6g,", r->value);
        csv_field(f, r->unit);
        fprintf(f, ",%.6g,%.6g,", r->min, r->max);
        if (!isnan(r->ratio))
            fprintf(f, "%.6g", r->ratio);
        fputc(',', f);
        csv_field(f, r->ratio_to);
        fputc(',', f);
        csv_field(f, r->flag);
        fputc('\n', f);
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", f);
    else
        fprintf(f, "%.6g", v);
}

static void machine_cpu(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ')
                    c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

void print_json(FILE *f, const opts_t *o)
{
    struct utsname u;
    uname(&u);
    char cpu[256];
    machine_cpu(cpu, sizeof cpu);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    fprintf(f, "{\n  \"machine\": {\"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ", \"ncpu\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
    json_str(f, u.release);
    fprintf(f, ", \"date\": ");
    json_str(f, date);
    fprintf(f, ", \"busy_before\": ");
    json_num(f, g_busy_start);
    fprintf(f, "},\n  \"quick\": %s, \"reps\": %d, \"transport\": ", o->quick ? "true" : "false",
            o->reps);
    json_str(f, o->transport);
    fprintf(f, ",\n  \"rows\": [");
    for (size_t i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        fprintf(f, "%s\n    {\"suite\": ", i ? "," : "");
        json_str(f, r->suite);
        fprintf(f, ", \"transport\": ");
        json_str(f, r->transport);
        fprintf(f, ", \"size\": %zu, \"metric\": ", r->size);
        json_str(f, r->metric);
        fprintf(f, ", \"value\": ");
        json_num(f, r->value);
        fprintf(f, ", \"unit\": ");
        json_str(f, r->unit);
        fprintf(f, ", \"min\": ");
        json_num(f, r->min);
        fprintf(f, ", \"max\": ");
        json_num(f, r->max);
        fprintf(f, ", \"ratio\": ");
        json_num(f, r->ratio);
        fprintf(f, ", \"ratio_to\": ");
        if (r->ratio_to)
            json_str(f, r->ratio_to);
        else
            fputs("null", f);
        fprintf(f, ", \"flag\": ");
        if (r->flag)
            json_str(f, r->flag);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n  \"notes\": [");
    for (size_t i = 0; i < nnotes; i++) {
        fprintf(f, "%s\n    {\"suite\": ", i ? "," : "");
        json_str(f, notes[i].suite);
        fprintf(f, ", \"text\": ");
        json_str(f, notes[i].text);
        fputc('}', f);
    }
    fprintf(f, "\n  ]\n}\n");
}

/* ------------------------------------------------------------------------- */
/* Charts                                                                     */

static int is_latency(const row_t *r)
{
    size_t n = strlen(r->metric);
    return (!strcmp(r->unit, "ns") || !strcmp(r->unit, "us")) && r->size > 0 &&
           ((n > 4 && !strcmp(r->metric + n - 4, "_lat")) || strstr(r->metric, "_lat_") ||
            !strcmp(r->metric, "cacheline_oneway"));
}

/* Rows that restate another row against a second reference ("_vs_") are
 * left out of the charts. */
static int is_bandwidth(const row_t *r)
{
    return !strcmp(r->unit, "GB/s") && r->size > 0 && !strstr(r->metric, "_vs_");
}

/* One chart: every (suite, transport, metric) series that @want selects. */
static void plot_chart(FILE *gp, const char *png, const char *title, const char *ylabel,
                       int (*want)(const row_t *), int to_us)
{
    /* series keys, in row order */
    size_t *first = calloc(nrows ? nrows : 1, sizeof *first);
    size_t nser = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (!want(&rows[i]))
            continue;
        int seen = 0;
        for (size_t k = 0; k < nser; k++) {
            const row_t *q = &rows[first[k]];
            if (!strcmp(q->suite, rows[i].suite) && !strcmp(q->transport, rows[i].transport) &&
                !strcmp(q->metric, rows[i].metric))
                seen = 1;
        }
        if (!seen)
            first[nser++] = i;
    }
    if (!nser) {
        free(first);
        return;
    }
    for (size_t k = 0; k < nser; k++) {
        const row_t *q = &rows[first[k]];
        fprintf(gp, "$s%zu << EOD\n", k);
        /* sizes ascending */
        size_t last = 0;
        for (;;) {
            const row_t *best = NULL;
            for (size_t i = 0; i < nrows; i++) {
                const row_t *r = &rows[i];
                if (!want(r) || strcmp(r->suite, q->suite) || strcmp(r->transport, q->transport) ||
                    strcmp(r->metric, q->metric) || r->size <= last)
                    continue;
                if (!best || r->size < best->size)
                    best = r;
            }
            if (!best)
                break;
            double sc = to_us && !strcmp(best->unit, "ns") ? 1e-3 : 1;
            fprintf(gp, "%zu %g %g %g\n", best->size, best->value * sc, best->min * sc,
                    best->max * sc);
            last = best->size;
        }
        fprintf(gp, "EOD\n");
    }
    fprintf(gp,
            "set terminal pngcairo noenhanced size 880,520 font ',9'\n"
            "set output '%s'\n"
            "set title '%s'\n"
            "set logscale xy\n"
            "set xlabel 'message size (bytes)'\n"
            "set ylabel '%s'\n"
            "set format x '%%.0s%%cB'\n"
            "set key outside right top\n"
            "set grid\n"
            "plot ",
            png, title, ylabel);
    for (size_t k = 0; k < nser; k++) {
        const row_t *q = &rows[first[k]];
        int floor = !strcmp(q->suite, "limits");
        int peer = !strcmp(q->suite, "peers");
        fprintf(gp, "%s$s%zu using 1:2:3:4 with yerrorlines %s title '%s %s%s%s'", k ? ", " : "", k,
                floor ? "dashtype 2 lw 2" : peer ? "dashtype 3" : "lw 2", q->suite,
                q->metric, strcmp(q->transport, "-") ? " " : "",
                strcmp(q->transport, "-") ? q->transport : "");
    }
    fprintf(gp, "\nunset output\n");
    free(first);
}

int check_gnuplot(void)
{
    if (proc_in_path("gnuplot", NULL, 0))
        return 0;
    fprintf(stderr, "vmmc bench: --plot needs gnuplot, which is not installed; install it with\n"
                    "    apt-get install -y gnuplot-nox\n");
    return -1;
}

int make_plots(const char *dir)
{
    if (check_gnuplot())
        return -1;
    if (mkdir(dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "vmmc bench: cannot create %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (strchr(dir, '\'')) {
        fprintf(stderr, "vmmc bench: --plot directory name must not contain a quote\n");
        return -1;
    }
    char lat[PATH_MAX], bw[PATH_MAX];
    snprintf(lat, sizeof lat, "%s/latency.png", dir);
    snprintf(bw, sizeof bw, "%s/bandwidth.png", dir);
    FILE *gp = popen("gnuplot", "w");
    if (!gp) {
        fprintf(stderr, "vmmc bench: cannot start gnuplot: %s\n", strerror(errno));
        return -1;
    }
    plot_chart(gp, lat, "one-way latency by size (dashed: machine limits and peers)",
               "microseconds", is_latency, 1);
    plot_chart(gp, bw, "bandwidth by size (dashed: machine limits and peers)", "GB/s",
               is_bandwidth, 0);
    int st = pclose(gp);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "vmmc bench: gnuplot failed (status %d)\n", st);
        return -1;
    }
    int wrote = 0;
    struct stat sb;
    if (!stat(lat, &sb)) {
        fprintf(stderr, "vmmc bench: wrote %s\n", lat);
        wrote++;
    }
    if (!stat(bw, &sb)) {
        fprintf(stderr, "vmmc bench: wrote %s\n", bw);
        wrote++;
    }
    if (!wrote)
        fprintf(stderr, "vmmc bench: no latency or bandwidth figures to plot\n");
    return 0;
}

