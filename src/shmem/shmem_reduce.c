/* Reductions: the engine, and the team-based and/or/xor/max/min/sum/prod
 * calls per type. Every member combines the members' sources in team order
 * (0, 1, ..., n-1), so that every member computes the same result, bit for
 * bit, for floating-point types too. */
#include "shmem_coll.h"

#include <stdlib.h>
#include <string.h>

/* Bytes of a peer's source read at a time from another host, and of
 * results held back at a time when the reduction is in place. */
#define RED_CHUNK 262144u

static int overlaps(const void *a, const void *b, size_t len)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + len && y < x + len;
}

int shm_coll_reduce(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                    size_t elem, size_t nreduce, shm_red_fn op)
{
    if (shm_team_check(fn, t))
        return -1;
    size_t nbytes = shm_coll_bytes(fn, nreduce, elem);
    if (nbytes && (!shm_is_symmetric(dest, nbytes) || !shm_is_symmetric(src, nbytes)))
        shm_fatal(fn, "%s is not symmetric (%p, %zu bytes)",
                  shm_is_symmetric(dest, nbytes) ? "source" : "dest",
                  shm_is_symmetric(dest, nbytes) ? src : dest, nbytes);
    /* dest may be source itself: then the results wait in a buffer until
     * every member has read that part of our source (a barrier per
     * RED_CHUNK bytes; the same count on every member, since every
     * member passes the same nreduce). */
    int inplace = nbytes && overlaps(dest, src, nbytes);
    size_t chunk = nbytes, bufsz = nbytes < RED_CHUNK ? nbytes : RED_CHUNK / elem * elem;
    unsigned char *held = NULL, *in = NULL;
    if (inplace) {
        chunk = bufsz;
        held = malloc(chunk);
        if (!held)
            shm_fatal(fn, "out of memory for an in-place reduction (%zu bytes)", chunk);
    }
    shm_coll_sync(fn, t);
    for (size_t off = 0; off < nbytes; off += chunk) {
        size_t clen = nbytes - off < chunk ? nbytes - off : chunk;
        unsigned char *acc = inplace ? held : (unsigned char *)dest + off;
        const char *s = (const char *)src + off;
        for (int i = 0; i < t->size; i++) {
            int pe = shm_team_pe(t, i);
            /* a peer's part of this chunk: straight from its mapped heap on
             * this host, through @in from another host */
            for (size_t o = 0; o < clen;) {
                size_t len = clen - o;
                const void *part = s + o;
                if (pe != shm_g.me) {
                    shm_loc_t loc;
                    shm_locate(fn, s + o, len, pe, &loc);
                    if (!loc.ptr) {
                        if (!in && !(in = malloc(bufsz)))
                            shm_fatal(fn, "out of memory for a reduction (%zu bytes)", bufsz);
                        len = len < bufsz ? len : bufsz;
                        shm_get_bytes(fn, SHMEM_CTX_DEFAULT, in, s + o, len, pe);
                    }
                    part = loc.ptr ? (const void *)loc.ptr : in;
                }
                if (i == 0)
                    memcpy(acc + o, part, len);
                else
                    op(acc + o, part, len / elem);
                o += len;
            }
        }
        if (inplace) {
            shm_coll_sync(fn, t);
            memcpy((char *)dest + off, acc, clen);
        }
    }
    free(in);
    free(held);
    if (!inplace)
        shm_coll_sync(fn, t); /* every member has read our source */
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Team-based calls */

#define SHM_RED_CALL(T, N, OP)                                                                 \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce) \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_" #OP "_reduce";                                \
        shm_check_init(fn);                                                                    \
        return shm_coll_reduce(fn, team, dest, source, sizeof(T), nreduce,                     \
                               shm_red_##N##_##OP);                                            \
    }

#define SHM_RED_BIT(T, N)                                                                      \
    SHM_RED_AND(T, N)                                                                          \
    SHM_RED_OR(T, N)                                                                           \
    SHM_RED_XOR(T, N)                                                                          \
    SHM_RED_CALL(T, N, and) SHM_RED_CALL(T, N, or) SHM_RED_CALL(T, N, xor)
#define SHM_RED_CMP(T, N)                                                                      \
    SHM_RED_MAX(T, N)                                                                          \
    SHM_RED_MIN(T, N)                                                                          \
    SHM_RED_CALL(T, N, max) SHM_RED_CALL(T, N, min)
#define SHM_RED_ARITH(T, N)                                                                    \
    SHM_RED_SUM(T, N)                                                                          \
    SHM_RED_PROD(T, N)                                                                         \
    SHM_RED_CALL(T, N, sum) SHM_RED_CALL(T, N, prod)

VSHMEM_REDUCE_BIT_TYPES(SHM_RED_BIT)
VSHMEM_REDUCE_CMP_TYPES(SHM_RED_CMP)
VSHMEM_REDUCE_CMP_TYPES(SHM_RED_ARITH)
VSHMEM_REDUCE_COMPLEX_TYPES(SHM_RED_ARITH)
