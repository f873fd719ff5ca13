/* TSP: travelling salesman by branch and bound, with a shared work pool
 * and a shared best tour, each under its own DSM lock (as in the TreadMarks
 * and MILLIPAGE versions).
 *
 * n cities at pseudo-random points of a 1000 x 1000 square, integer
 * Euclidean distances (a shared matrix that rank 0 fills). Partial tours
 * of fewer than max(2, n - 11) cities are expanded into the pool (a LIFO stack under
 * POOL_LOCK); longer ones are solved by a private depth-first search that
 * prunes with the shared best length (read without the lock: a stale bound
 * only prunes less) and updates the best tour under BEST_LOCK. A rank with
 * nothing to do while others still expand sleeps between looks at the pool
 * (50 us, doubling up to 1 ms: it does not spin). The lower bound of a partial tour is its
 * length plus the cheapest edge out of its last city and out of every
 * unvisited city. -i solves that many instances (different cities).
 * Rank 0 solves each instance sequentially with the same search and checks
 * that the lengths are equal and that the shared tour is a tour of that
 * length (exact).
 *
 * usage: tsp [-n cities] [-i instances]     (vmmc run -n 2 -- tsp) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsm_app.h"

#define MAXC 18
#define POOL_MAX 112 /* the pool stays within one 4 KiB page */
#define POOL_LOCK 0
#define BEST_LOCK 1

typedef struct tour {
    short len;           /* cities on the path */
    signed char path[MAXC];
    int cost;            /* length of the path so far */
    unsigned visited;    /* bit per city */
} tour_t;

typedef struct pool {
    int top;      /* tours in t[] */
    int active;   /* ranks working on a tour taken from the pool */
    tour_t t[POOL_MAX];
} pool_t;

typedef struct best {
    int cost;
    signed char path[MAXC];
} best_t;

typedef struct problem {
    int n, split;
    const int *dist;    /* n x n */
    int minout[MAXC];   /* cheapest edge out of each city */
} problem_t;

static void make_cities(int *dist, int n, long instance)
{
    double x[MAXC], y[MAXC];
    for (int i = 0; i < n; i++) {
        x[i] = 1000 * app_unit((uint64_t)instance * 1000003u + 2 * (uint64_t)i);
        y[i] = 1000 * app_unit((uint64_t)instance * 1000003u + 2 * (uint64_t)i + 1);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double dx = x[i] - x[j], dy = y[i] - y[j];
            dist[i * n + j] = (int)(__builtin_sqrt(dx * dx + dy * dy) + 0.5);
        }
}

static void setup(problem_t *p, const int *dist, int n)
{
    p->n = n;
    p->dist = dist;
    p->split = n > 13 ? n - 11 : 2;
    for (int i = 0; i < n; i++) {
        int m = 1 << 30;
        for (int j = 0; j < n; j++)
            if (j != i && dist[i * n + j] < m)
                m = dist[i * n + j];
        p->minout[i] = m;
    }
}

static int bound(const problem_t *p, const tour_t *t)
{
    int b = t->cost + p->minout[(int)t->path[t->len - 1]];
    for (int c = 0; c < p->n; c++)
        if (!(t->visited >> c & 1))
            b += p->minout[c];
    return b;
}

static tour_t extend(const problem_t *p, const tour_t *t, int c)
{
    tour_t u = *t;
    u.cost += p->dist[t->path[t->len - 1] * p->n + c];
    u.path[u.len++] = (signed char)c;
    u.visited |= 1u << c;
    return u;
}

/* Depth-first search below a tour. best->cost is read at every node (the
 * shared best, or a private one); a shorter whole tour replaces it, under
 * BEST_LOCK when @app is set (the shared one). */
typedef struct search {
    const problem_t *p;
    best_t *best;
    dsm_app_t *app;
} search_t;

static void found(search_t *s, const tour_t *t, int cost)
{
    best_t *b = s->best;
    if (s->app)
        app_lock(s->app, BEST_LOCK);
    if (cost < b->cost) {
        b->cost = cost;
        memcpy(b->path, t->path, sizeof b->path);
    }
    if (s->app)
        app_unlock(s->app, BEST_LOCK);
}

static void dfs(search_t *s, const tour_t *t)
{
    const problem_t *p = s->p;
    if (t->len == p->n) {
        int total = t->cost + p->dist[t->path[t->len - 1] * p->n + 0];
        if (total < *(volatile int *)&s->best->cost)
            found(s, t, total);
        return;
    }
    if (bound(p, t) >= *(volatile int *)&s->best->cost)
        return;
    for (int c = 1; c < p->n; c++)
        if (!(t->visited >> c & 1)) {
            tour_t u = extend(p, t, c);
            dfs(s, &u);
        }
}

static tour_t root_tour(void)
{
    tour_t t;
    memset(&t, 0, sizeof t);
    t.len = 1;
    t.visited = 1;
    return t;
}

/* Take tours from the pool until it is empty and nobody works on one
 * (giving back the previous tour and taking the next in one critical
 * section: the pool's minipage moves once per tour, not twice). */
static void work(dsm_app_t *a, const problem_t *p, pool_t *pool, best_t *best)
{
    search_t s = {p, best, a};
    long nap_ns = 50000;
    int busy = 0; /* this rank counts in pool->active */
    for (;;) {
        app_lock(a, POOL_LOCK);
        if (busy)
            pool->active--;
        busy = 0;
        if (pool->top == 0) {
            int idle = pool->active == 0;
            app_unlock(a, POOL_LOCK);
            if (idle)
                return;
            struct timespec ts = {0, nap_ns};
            nanosleep(&ts, NULL);
            nap_ns = nap_ns < 1000000 ? 2 * nap_ns : nap_ns;
            continue;
        }
        nap_ns = 50000;
        tour_t t = pool->t[--pool->top];
        pool->active++;
        busy = 1;
        app_unlock(a, POOL_LOCK);
        if (t.len >= p->split) {
            dfs(&s, &t);
        } else if (bound(p, &t) < best->cost) {
            tour_t kids[MAXC];
            int nk = 0;
            for (int c = p->n - 1; c >= 1; c--)
                if (!(t.visited >> c & 1)) {
                    tour_t u = extend(p, &t, c);
                    if (bound(p, &u) < best->cost)
                        kids[nk++] = u;
                }
            app_lock(a, POOL_LOCK);
            int room = POOL_MAX - pool->top, k = 0;
            for (; k < nk && k < room; k++)
                pool->t[pool->top++] = kids[k];
            app_unlock(a, POOL_LOCK);
            for (; k < nk; k++) /* the pool is full: solve the rest here */
                dfs(&s, &kids[k]);
        }
    }
}

/* Is @path a tour of every city with length @cost? */
static int valid_tour(const problem_t *p, const signed char *path, int cost)
{
    unsigned seen = 0;
    int len = 0;
    for (int i = 0; i < p->n; i++) {
        int c = path[i];
        if (c < 0 || c >= p->n || (seen >> c & 1))
            return 0;
        seen |= 1u << c;
        len += p->dist[c * p->n + path[(i + 1) % p->n]];
    }
    return path[0] == 0 && len == cost;
}

int main(int argc, char **argv)
{
    dsm_app_t a;
    app_start(&a, "tsp", argc, argv, 13, 3, MAXC, 1, 1000);
    int n = (int)a.n;
    int *dist = app_shared(&a, (size_t)n * n * sizeof(int), -1);
    pool_t *pool = app_shared(&a, sizeof(pool_t), -1);
    best_t *best = app_shared(&a, sizeof(best_t), -1);
    long *results = app_shared(&a, (size_t)a.iters * sizeof(long), -1);
    double t_par = 0, t_seq = 0;
    long sum = 0;
    int mismatch = 0;
    char why[200] = "";
    for (long inst = 0; inst < a.iters; inst++) {
        if (a.rank == 0) {
            make_cities(dist, n, inst);
            pool->top = 1;
            pool->active = 0;
            pool->t[0] = root_tour();
            best->cost = 1 << 30;
        }
        problem_t p;
        app_barrier(&a);
        setup(&p, dist, n);
        app_par_begin(&a);
        work(&a, &p, pool, best);
        app_par_end(&a);
        t_par += a.t_par;
        if (a.rank == 0) {
            results[inst] = best->cost;
            int *sd = app_private(&a, (size_t)n * n * sizeof(int));
            make_cities(sd, n, inst);
            problem_t sp;
            setup(&sp, sd, n);
            best_t sb = {.cost = 1 << 30};
            search_t s = {&sp, &sb, NULL};
            tour_t root = root_tour();
            app_seq_begin(&a);
            dfs(&s, &root);
            app_seq_end(&a);
            t_seq += a.t_seq;
            sum += sb.cost;
            if (!mismatch && (best->cost != sb.cost || !valid_tour(&sp, best->path, best->cost))) {
                mismatch = 1;
                snprintf(why, sizeof why,
                         "instance %ld: shared best %d (%s), sequential %d", inst, best->cost,
                         valid_tour(&sp, best->path, best->cost) ? "a valid tour"
                                                                 : "NOT a valid tour of that length",
                         sb.cost);
            }
            free(sd);
        }
        app_barrier(&a);
    }
    a.t_par = t_par;
    a.t_seq = t_seq;
    if (a.rank == 0) {
        if (mismatch)
            app_verdict(&a, 0, "%s", why);
        else
            app_verdict(&a, 1, "%d cities, %ld instances, tour lengths sum %ld (exact comparison)",
                        n, a.iters, sum);
    }
    return app_finish(&a);
}
