/* Communication contexts. Every context maps onto the PE's one vmmc
 * endpoint; a context is an ordering and completion domain: shm_quiet(ctx)
 * waits for that context's own non-blocking operations. The options
 * (SERIALIZED, PRIVATE, NOSTORE) only promise less, so every one is
 * accepted; SHMEM_CTX_INVALID is a no-op for every operation. */
#include <stdlib.h>

#include "shmem/shmem_core.h"

struct shmem_ctx_s shmem_ctx_default_s;

#define CTX_OPTIONS (SHMEM_CTX_SERIALIZED | SHMEM_CTX_PRIVATE | SHMEM_CTX_NOSTORE)

static int ctx_new(const char *fn, shmem_team_t team, long options, shmem_ctx_t *ctx)
{
    shm_check_init(fn);
    if (!ctx)
        shm_fatal(fn, "NULL context pointer (%p)", (void *)ctx);
    if (options & ~CTX_OPTIONS) {
        *ctx = SHMEM_CTX_INVALID;
        return -1; /* unknown option: the standard's non-zero failure */
    }
    struct shmem_ctx_s *c = calloc(1, sizeof *c);
    if (!c) {
        *ctx = SHMEM_CTX_INVALID;
        return -1;
    }
    c->options = options;
    c->team = team;
    *ctx = c;
    return 0;
}

int shmem_ctx_create(long options, shmem_ctx_t *ctx)
{
    return ctx_new("shmem_ctx_create", SHMEM_TEAM_WORLD, options, ctx);
}

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx)
{
    const char *fn = "shmem_team_create_ctx";
    shm_check_init(fn);
    if (team == SHMEM_TEAM_INVALID) {
        if (ctx)
            *ctx = SHMEM_CTX_INVALID;
        return -1;
    }
    if (team->size < 1 || team->size > shm_g.npes || team->my_pe < 0) {
        /* not a team this PE belongs to (the standard: a non-zero return) */
        if (ctx)
            *ctx = SHMEM_CTX_INVALID;
        return -1;
    }
    return ctx_new(fn, team, options, ctx);
}

void shmem_ctx_destroy(shmem_ctx_t ctx)
{
    shm_check_init("shmem_ctx_destroy");
    if (ctx == SHMEM_CTX_INVALID)
        return;
    if (ctx == SHMEM_CTX_DEFAULT)
        shm_fatal("shmem_ctx_destroy", "cannot destroy SHMEM_CTX_DEFAULT (%p)", (void *)ctx);
    /* destroying a context completes its operations, as quiet does */
    shm_quiet(ctx);
    free(ctx);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)
{
    shm_check_init("shmem_ctx_get_team");
    if (!team)
        return -1;
    if (ctx == SHMEM_CTX_INVALID) {
        *team = SHMEM_TEAM_INVALID;
        return -1;
    }
    *team = ctx == SHMEM_CTX_DEFAULT ? SHMEM_TEAM_WORLD : ctx->team;
    return 0;
}
