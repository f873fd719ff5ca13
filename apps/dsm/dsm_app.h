/* What the DSM applications share (the programs of apps/dsm): the command line
 * (`app [-n size] [-i iters]`), joining and leaving the DSM, timing of the
 * parallel and the sequential run, and the verdict.
 *
 * Every application computes with the shared memory of vmmc/dsm.h on all
 * ranks, then rank 0 recomputes the same problem sequentially in private
 * memory, compares, and prints
 *     "<app>: result matches sequential (<t>s parallel, <t>s sequential)"
 * or "<app>: result DIFFERS from sequential: <what>" and every rank leaves
 * with a non-zero status. Any failing DSM call ends the rank with the call,
 * the status and the library's message. */
#ifndef VMMC_APPS_DSM_APP_H
#define VMMC_APPS_DSM_APP_H

#include <stddef.h>
#include <stdint.h>

#include <vmmc/dsm.h>

typedef struct dsm_app {
    const char *name;
    long n;           /* problem size (-n) */
    long iters;       /* iterations (-i) */
    int rank, size;
    int *verdict;     /* shared: rank 0's comparison, 1 = matches */
    double t_par, t_seq;
    double t0;
    char detail[256]; /* what was compared and how closely */
} dsm_app_t;

/* Parse the command line (defaults and upper limits for -n and -i), join
 * the DSM and allocate the shared verdict. Exits 2 on a bad argument, 1 if
 * the DSM cannot start. */
void app_start(dsm_app_t *a, const char *name, int argc, char **argv, long def_n, long min_n,
               long max_n, long def_iters, long max_iters);

/* Leave with the call's name, status and message if @rc is an error. */
void app_ok(const dsm_app_t *a, int rc, const char *what);

/* Rank 0 allocates @n shared bytes (vmmc_dsm_malloc, or a chunk when
 * @chunk >= 0); every rank gets the same address back. Collective. */
void *app_shared(dsm_app_t *a, size_t n, int chunk);

/* Rank @owner allocates, every rank gets the address. Collective. */
void *app_shared_by(dsm_app_t *a, size_t n, int owner);

/* vmmc_dsm_malloc by this rank alone, or the rank leaves with the
 * library's reason (the limit and the setting that raises it). */
void *app_malloc(const dsm_app_t *a, size_t n, const char *what);

/* Private, zeroed, or the rank leaves with a message. */
void *app_private(const dsm_app_t *a, size_t n);

void app_barrier(const dsm_app_t *a);
void app_lock(const dsm_app_t *a, int id);
void app_unlock(const dsm_app_t *a, int id);

/* Around the parallel computation (collective: a barrier each), and around
 * rank 0's sequential one. */
void app_par_begin(dsm_app_t *a);
void app_par_end(dsm_app_t *a);
void app_seq_begin(dsm_app_t *a);
void app_seq_end(dsm_app_t *a);

/* Rank 0: the comparison's outcome and what it compared (printf). */
void app_verdict(dsm_app_t *a, int matches, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Collective: rank 0's verdict to all, leave the DSM. Returns the exit
 * status for main (0 matches, 1 differs). */
int app_finish(dsm_app_t *a);

/* Rank's share [lo, hi) of @n items split in contiguous blocks. */
void app_block(const dsm_app_t *a, long n, long *lo, long *hi);

/* A deterministic pseudo-random value of @x (splitmix64): the same in every
 * rank and in the sequential run, so each rank fills its own part. */
static inline uint64_t app_hash(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A value in [0, 1) from @x. */
static inline double app_unit(uint64_t x)
{
    return (double)(app_hash(x) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
