/* The deprecated active-set collectives (PE_start, logPE_stride, PE_size,
 * pSync): each call describes its set as a team without a slot, whose
 * barriers count signals per pair of PEs (shmem_coll.h). pSync is not used
 * (its contents stay as the caller left them, SHMEM_SYNC_VALUE), and the
 * same pSync may be passed to back-to-back calls. */
#include "shmem_coll.h"

void shm_aset(const char *fn, int PE_start, int logPE_stride, int PE_size,
              struct shmem_team_s *t)
{
    if (PE_start < 0 || logPE_stride < 0 || logPE_stride > 30 || PE_size < 1)
        shm_fatal(fn, "invalid active set (PE_start %d, logPE_stride %d, PE_size %d)", PE_start,
                  logPE_stride, PE_size);
    long long stride = 1ll << logPE_stride;
    long long last = PE_start + (long long)(PE_size - 1) * stride;
    if (last >= shm_g.npes)
        shm_fatal(fn, "active set (PE_start %d, logPE_stride %d, PE_size %d) ends at PE %lld of %d",
                  PE_start, logPE_stride, PE_size, last, shm_g.npes);
    long long d = shm_g.me - PE_start;
    if (d < 0 || d % stride || d / stride >= PE_size)
        shm_fatal(fn, "this PE (%d) is not in the active set (PE_start %d, logPE_stride %d, "
                      "PE_size %d)", shm_g.me, PE_start, logPE_stride, PE_size);
    if ((size_t)shm_g.npes > SHM_ASET_MAX_PES && PE_size > 1)
        shm_fatal(fn, "active sets work with at most %zu PEs (the job has %d): use teams",
                  (size_t)SHM_ASET_MAX_PES, shm_g.npes);
    t->start = PE_start;
    t->stride = (int)stride;
    t->size = PE_size;
    t->my_pe = (int)(d / stride);
    t->slot = -1;
    t->config_mask = 0;
    t->seq = 0;
}

/* Index of world PE @root in @t, or shm_fatal. */
static int aset_root(const char *fn, const struct shmem_team_s *t, int root)
{
    if (root < 0 || root >= t->size)
        shm_fatal(fn, "PE_root %d is not an index in the active set of %d PEs", root, t->size);
    return root;
}

#define SHM_ASET_SIZED(BITS)                                                                   \
    void shmem_broadcast##BITS(void *dest, const void *source, size_t nelems, int PE_root,     \
                               int PE_start, int logPE_stride, int PE_size, long *pSync)       \
    {                                                                                          \
        static const char fn[] = "shmem_broadcast" #BITS;                                      \
        struct shmem_team_s t;                                                                 \
        (void)pSync;                                                                           \
        shm_check_init(fn);                                                                    \
        shm_aset(fn, PE_start, logPE_stride, PE_size, &t);                                     \
        shm_coll_bcast(fn, &t, dest, source, shm_coll_bytes(fn, nelems, BITS / 8),             \
                       aset_root(fn, &t, PE_root), 0);                                         \
    }                                                                                          \
    void shmem_collect##BITS(void *dest, const void *source, size_t nelems, int PE_start,      \
                             int logPE_stride, int PE_size, long *pSync)                       \
    {                                                                                          \
        static const char fn[] = "shmem_collect" #BITS;                                       \
        struct shmem_team_s t;                                                                 \
        (void)pSync;                                                                           \
        shm_check_init(fn);                                                                    \
        shm_aset(fn, PE_start, logPE_stride, PE_size, &t);                                     \
        shm_coll_collect(fn, &t, dest, source, shm_coll_bytes(fn, nelems, BITS / 8), 0);       \
    }                                                                                          \
    void shmem_fcollect##BITS(void *dest, const void *source, size_t nelems, int PE_start,     \
                              int logPE_stride, int PE_size, long *pSync)                      \
    {                                                                                          \
        static const char fn[] = "shmem_fcollect" #BITS;                                       \
        struct shmem_team_s t;                                                                 \
        (void)pSync;                                                                           \
        shm_check_init(fn);                                                                    \
        shm_aset(fn, PE_start, logPE_stride, PE_size, &t);                                     \
        shm_coll_collect(fn, &t, dest, source, shm_coll_bytes(fn, nelems, BITS / 8), 1);       \
    }                                                                                          \
    void shmem_alltoall##BITS(void *dest, const void *source, size_t nelems, int PE_start,     \
                              int logPE_stride, int PE_size, long *pSync)                      \
    {                                                                                          \
        static const char fn[] = "shmem_alltoall" #BITS;                                       \
        struct shmem_team_s t;                                                                 \
        (void)pSync;                                                                           \
        shm_check_init(fn);                                                                    \
        shm_aset(fn, PE_start, logPE_stride, PE_size, &t);                                     \
        shm_coll_alltoall(fn, &t, dest, source, shm_coll_bytes(fn, nelems, BITS / 8));         \
    }                                                                                          \
    void shmem_alltoalls##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,   \
                               size_t nelems, int PE_start, int logPE_stride, int PE_size,     \
                               long *pSync)                                                    \
    {                                                                                          \
        static const char fn[] = "shmem_alltoalls" #BITS;                                      \
        struct shmem_team_s t;                                                                 \
        (void)pSync;                                                                           \
        shm_check_init(fn);                                                                    \
        shm_aset(fn, PE_start, logPE_stride, PE_size, &t);                                     \
        if (shm_coll_alltoalls(fn, &t, dest, source, dst, sst, BITS / 8, nelems))              \
            shm_fatal(fn, "bad arguments (dst %td, sst %td)", dst, sst);                       \
    }
SHM_ASET_SIZED(32)
SHM_ASET_SIZED(64)
