/* The data-moving collectives' engines: broadcast, collect, fcollect,
 * alltoall, alltoalls and the library's own small allreduce. Every engine
 * is "entry barrier, pull, exit barrier" (shmem_coll.h). */
#include "shmem_coll.h"

#include <string.h>

size_t shm_coll_bytes(const char *fn, size_t nelems, size_t elem)
{
    if (elem && nelems > SIZE_MAX / elem)
        shm_fatal(fn, "nelems too large (%zu elements of %zu bytes)", nelems, elem);
    return nelems * elem;
}

static void check_sym(const char *fn, const char *what, const void *p, size_t len)
{
    if (len && !shm_is_symmetric(p, len))
        shm_fatal(fn, "%s is not symmetric (%p, %zu bytes)", what, p, len);
}

/* Copy @len bytes at symmetric @src of world PE @pe into local @dst. */
static void pull(const char *fn, void *dst, const void *src, size_t len, int pe)
{
    if (!len)
        return;
    if (pe == shm_g.me) {
        if (dst != src)
            memmove(dst, src, len);
    } else {
        shm_get_bytes(fn, SHMEM_CTX_DEFAULT, dst, src, len, pe);
    }
}

int shm_coll_bcast(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                   size_t nbytes, int root, int root_too)
{
    if (shm_team_check(fn, t))
        return -1;
    if (root < 0 || root >= t->size) {
        shm_coll_error(fn, "PE_root %d is not in the team (of %d PEs)", root, t->size);
        return -1;
    }
    check_sym(fn, "dest", dest, nbytes);
    check_sym(fn, "source", src, nbytes);
    shm_coll_sync(fn, t); /* the root's source holds the data */
    if (t->my_pe != root)
        pull(fn, dest, src, nbytes, shm_team_pe(t, root));
    else if (root_too && dest != src)
        memmove(dest, src, nbytes);
    shm_coll_sync(fn, t); /* every member has read the root's source */
    return 0;
}

int shm_coll_collect(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                     size_t nbytes, int fixed)
{
    if (shm_team_check(fn, t))
        return -1;
    int n = t->size;
    check_sym(fn, "source", src, nbytes);
    if (fixed) {
        size_t total = shm_coll_bytes(fn, nbytes, (size_t)n);
        check_sym(fn, "dest", dest, total);
        shm_coll_sync(fn, t);
        for (int i = 0; i < n; i++)
            pull(fn, (char *)dest + (size_t)i * nbytes, src, nbytes, shm_team_pe(t, i));
        shm_coll_sync(fn, t);
        return 0;
    }
    /* Each PE publishes its count; every member reads them all and places
     * PE i's block at the sum of the counts before it. */
    size_t off = shm_coll_word_off(t, SHM_W_COUNT);
    *(uint64_t *)(void *)(shm_g.heap + off) = nbytes;
    shm_coll_sync(fn, t);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        uint64_t len = nbytes;
        int pe = shm_team_pe(t, i);
        if (pe != shm_g.me)
            shm_get_bytes(fn, SHMEM_CTX_DEFAULT, &len, shm_g.heap + off, sizeof(len), pe);
        if (len > SIZE_MAX - at)
            shm_fatal(fn, "PE %d announced %llu bytes: the total overflows", pe,
                      (unsigned long long)len);
        /* a count from another PE is checked against dest before a byte moves */
        check_sym(fn, "dest (with the sizes the team announced)", dest, at + (size_t)len);
        pull(fn, (char *)dest + at, src, (size_t)len, pe);
        at += (size_t)len;
    }
    shm_coll_sync(fn, t); /* sources and counts read by every member */
    return 0;
}

int shm_coll_alltoall(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                      size_t nbytes)
{
    if (shm_team_check(fn, t))
        return -1;
    int n = t->size;
    size_t total = shm_coll_bytes(fn, nbytes, (size_t)n);
    check_sym(fn, "dest", dest, total);
    check_sym(fn, "source", src, total);
    shm_coll_sync(fn, t);
    /* block me of member i's source goes to block i of dest; start with the
     * next member so that the members do not all read the same PE at once */
    for (int k = 0; k < n; k++) {
        int i = (t->my_pe + k) % n;
        pull(fn, (char *)dest + (size_t)i * nbytes, (const char *)src + (size_t)t->my_pe * nbytes,
             nbytes, shm_team_pe(t, i));
    }
    shm_coll_sync(fn, t);
    return 0;
}

int shm_coll_alltoalls(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                       ptrdiff_t dst, ptrdiff_t sst, size_t elem, size_t nelems)
{
    if (shm_team_check(fn, t))
        return -1;
    if (dst < 1 || sst < 1) {
        shm_coll_error(fn, "strides must be positive (dst %td, sst %td)", dst, sst);
        return -1;
    }
    int n = t->size;
    size_t cnt = shm_coll_bytes(fn, nelems, (size_t)n);
    if (cnt) {
        /* extent of n*nelems elements at stride s: ((cnt - 1) * s + 1) elements */
        size_t dext = shm_coll_bytes(fn, shm_coll_bytes(fn, cnt - 1, (size_t)dst) + 1, elem);
        size_t sext = shm_coll_bytes(fn, shm_coll_bytes(fn, cnt - 1, (size_t)sst) + 1, elem);
        check_sym(fn, "dest", dest, dext);
        check_sym(fn, "source", src, sext);
    }
    shm_coll_sync(fn, t);
    for (int k = 0; nelems && k < n; k++) {
        int i = (t->my_pe + k) % n, pe = shm_team_pe(t, i);
        char *d = (char *)dest + (size_t)i * nelems * (size_t)dst * elem;
        const char *s = (const char *)src + (size_t)t->my_pe * nelems * (size_t)sst * elem;
        if (pe == shm_g.me) {
            for (size_t j = 0; j < nelems; j++)
                memmove(d + j * (size_t)dst * elem, s + j * (size_t)sst * elem, elem);
        } else {
            shm_iget_bytes(fn, SHMEM_CTX_DEFAULT, d, s, dst, sst, elem, nelems, pe);
        }
    }
    shm_coll_sync(fn, t);
    return 0;
}

void shm_coll_allreduce_u64(const char *fn, struct shmem_team_s *t, int w, char op,
                            const uint64_t *in, uint64_t *out, int k)
{
    uint64_t *mine = (uint64_t *)(void *)(shm_g.heap + shm_coll_word_off(t, w));
    memcpy(mine, in, (size_t)k * 8);
    memcpy(out, in, (size_t)k * 8);
    shm_coll_sync(fn, t);
    for (int i = 0; i < t->size; i++) {
        uint64_t v[4];
        int pe = shm_team_pe(t, i);
        if (pe == shm_g.me)
            continue;
        shm_get_bytes(fn, SHMEM_CTX_DEFAULT, v, mine, (size_t)k * 8, pe);
        for (int j = 0; j < k; j++) {
            if (op == 'a')
                out[j] &= v[j];
            else if (op == 'm')
                out[j] = v[j] < out[j] ? v[j] : out[j];
            else
                out[j] = v[j] > out[j] ? v[j] : out[j];
        }
    }
    shm_coll_sync(fn, t);
}
