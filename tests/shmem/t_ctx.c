/* Contexts: create with every option, get_team, team_create_ctx (a team
 * this PE belongs to; SHMEM_TEAM_INVALID refused), SHMEM_CTX_INVALID as a
 * no-op, destroy completing what the context issued, and four threads
 * (SHMEM_THREAD_MULTIPLE) each quieting its own private context. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "shmem/shmem_int.h"
#include "shmem_test.h"

#define NT 4
#define M 512
static long *buf;
static int me, n;

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg, to = (me + 1) % n;
    shmem_ctx_t ctx;
    if (shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) != 0)
        ST_FAIL("thread %d: shmem_ctx_create failed", t);
    long src[M];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < M; i++)
            src[i] = ((long)me << 40) | ((long)t << 32) | (round * M + i);
        shm_put_nbi_bytes("t", ctx, buf + t * M, src, sizeof src, to);
        shm_quiet(ctx); /* src is reused at once */
    }
    shmem_ctx_destroy(ctx);
    return NULL;
}

int main(void)
{
    int provided = -1;
    ST_CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0);
    ST_EQ(provided, SHMEM_THREAD_MULTIPLE);
    me = shmem_my_pe(), n = shmem_n_pes();
    buf = shmem_calloc(NT * M + 8, sizeof(long));

    long opts[] = {0, SHMEM_CTX_SERIALIZED, SHMEM_CTX_PRIVATE, SHMEM_CTX_NOSTORE,
                   SHMEM_CTX_SERIALIZED | SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        shmem_ctx_t c = SHMEM_CTX_INVALID;
        ST_EQ(shmem_ctx_create(opts[i], &c), 0);
        ST_CHECK(c != SHMEM_CTX_INVALID && c != SHMEM_CTX_DEFAULT);
        shmem_team_t t = SHMEM_TEAM_INVALID;
        ST_EQ(shmem_ctx_get_team(c, &t), 0);
        ST_CHECK(t == SHMEM_TEAM_WORLD);
        shmem_ctx_destroy(c);
    }
    shmem_ctx_t c = SHMEM_CTX_DEFAULT;
    ST_CHECK(shmem_ctx_create(1L << 20, &c) != 0); /* unknown option */
    ST_CHECK(c == SHMEM_CTX_INVALID);
    shmem_team_t t = SHMEM_TEAM_INVALID;
    ST_EQ(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &t), 0);
    ST_CHECK(t == SHMEM_TEAM_WORLD);
    ST_CHECK(shmem_ctx_get_team(SHMEM_CTX_INVALID, &t) != 0);
    ST_CHECK(t == SHMEM_TEAM_INVALID);
    ST_EQ(shmem_team_create_ctx(SHMEM_TEAM_WORLD, 0, &c), 0);
    ST_EQ(shmem_ctx_get_team(c, &t), 0);
    ST_CHECK(t == SHMEM_TEAM_WORLD);
    shmem_ctx_destroy(c);
    ST_CHECK(shmem_team_create_ctx(SHMEM_TEAM_INVALID, 0, &c) != 0);
    ST_CHECK(c == SHMEM_CTX_INVALID);
    shmem_ctx_destroy(SHMEM_CTX_INVALID); /* no-op */
    ST_OK("create, options, get_team, team_create_ctx, invalid team");

    /* SHMEM_CTX_INVALID: nothing moves */
    long v = 42;
    shm_put_bytes("t", SHMEM_CTX_INVALID, &buf[NT * M], &v, sizeof v, (me + 1) % n);
    shm_quiet(SHMEM_CTX_INVALID);
    shmem_barrier_all();
    ST_EQ(buf[NT * M], 0);
    ST_OK("SHMEM_CTX_INVALID is a no-op");

    /* destroy completes the context's non-blocking puts */
    ST_EQ(shmem_ctx_create(0, &c), 0);
    long w = 7 + me;
    shm_put_nbi_bytes("t", c, &buf[NT * M + 1], &w, sizeof w, (me + 1) % n);
    shmem_ctx_destroy(c);
    shmem_barrier_all();
    ST_EQ(buf[NT * M + 1], 7 + (me + n - 1) % n);
    ST_OK("shmem_ctx_destroy completes the context's operations");

    pthread_t th[NT];
    for (int i = 0; i < NT; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    shmem_barrier_all();
    int from = (me + n - 1) % n;
    for (int tt = 0; tt < NT; tt++)
        for (int i = 0; i < M; i++)
            ST_EQ(buf[tt * M + i], ((long)from << 40) | ((long)tt << 32) | (19 * M + i));
    ST_OK("four threads, each quieting its own private context");
    shmem_free(buf);
    shmem_finalize();
    return 0;
}
