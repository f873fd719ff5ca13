/* The team-based broadcast/collect/fcollect/alltoall(s) calls: one
 * definition per type (VSHMEM_RMA_TYPES) and the *mem forms, all onto the
 * engines of shmem_coll.c. */
#include "shmem_coll.h"

#define SHM_COLL_TYPED(T, N)                                                                   \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems,      \
                              int PE_root)                                                     \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_broadcast";                                     \
        shm_check_init(fn);                                                                    \
        return shm_coll_bcast(fn, team, dest, source, shm_coll_bytes(fn, nelems, sizeof(T)),   \
                              PE_root, 1);                                                     \
    }                                                                                          \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems)       \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_collect";                                       \
        shm_check_init(fn);                                                                    \
        return shm_coll_collect(fn, team, dest, source,                                        \
                                shm_coll_bytes(fn, nelems, sizeof(T)), 0);                     \
    }                                                                                          \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems)      \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_fcollect";                                      \
        shm_check_init(fn);                                                                    \
        return shm_coll_collect(fn, team, dest, source,                                        \
                                shm_coll_bytes(fn, nelems, sizeof(T)), 1);                     \
    }                                                                                          \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems)      \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_alltoall";                                      \
        shm_check_init(fn);                                                                    \
        return shm_coll_alltoall(fn, team, dest, source,                                       \
                                 shm_coll_bytes(fn, nelems, sizeof(T)));                       \
    }                                                                                          \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst,     \
                              ptrdiff_t sst, size_t nelems)                                    \
    {                                                                                          \
        static const char fn[] = "shmem_" #N "_alltoalls";                                     \
        shm_check_init(fn);                                                                    \
        return shm_coll_alltoalls(fn, team, dest, source, dst, sst, sizeof(T), nelems);        \
    }
VSHMEM_RMA_TYPES(SHM_COLL_TYPED)

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems,
                       int PE_root)
{
    shm_check_init("shmem_broadcastmem");
    return shm_coll_bcast("shmem_broadcastmem", team, dest, source, nelems, PE_root, 1);
}

int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    shm_check_init("shmem_collectmem");
    return shm_coll_collect("shmem_collectmem", team, dest, source, nelems, 0);
}

int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    shm_check_init("shmem_fcollectmem");
    return shm_coll_collect("shmem_fcollectmem", team, dest, source, nelems, 1);
}

int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    shm_check_init("shmem_alltoallmem");
    return shm_coll_alltoall("shmem_alltoallmem", team, dest, source, nelems);
}

int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems)
{
    shm_check_init("shmem_alltoallsmem");
    return shm_coll_alltoalls("shmem_alltoallsmem", team, dest, source, dst, sst, 1, nelems);
}
