/* OpenSHMEM collectives: the words they keep in the heaps' reserved head,
 * and the engines every typed call maps onto (src/shmem/shmem_coll*.c,
 * shmem_reduce*.c, shmem_active.c, shmem_team.c).
 *
 * Synchronisation is a dissemination barrier: in round r (r = 0, 1, ...
 * while 2^r < n) team member i tells member i + 2^r (mod n) that it arrived
 * and waits for member i - 2^r to tell it the same; after ceil(log2 n)
 * rounds every member knows that every other one arrived. A team's signals
 * are sequence numbers: the k-th barrier of a team stores k into flag[r] of
 * the receiver's team scratch, and the receiver waits until flag[r] >= k.
 * Each flag has one writer, and the values only grow, so a member that
 * runs ahead into barrier k+1 never confuses one still in barrier k.
 * Active sets (the deprecated PE_start/logPE_stride/PE_size forms) have no
 * slot of their own: their signals are counters per pair of world PEs in
 * shm_hdr.coll (the receiver counts the signals it expects from each
 * sender), which holds for any set as long as every pair of PEs calls the
 * collectives they share in the same order, as the standard requires.
 *
 * Data moves by pulling: after an entry barrier each member reads what it
 * needs from the others' symmetric source (a load from the peer's mapping
 * on one host, a remote read across hosts) into its own dest, and an exit
 * barrier keeps every source unchanged until all members have read it. No
 * PE ever writes into another's dest, so a member that is late into the
 * call never has its dest overwritten before it entered, and dest may be
 * the same array as source where the standard allows it (reductions).
 *
 * Every word here is written by other PEs: hostile input. A count found in
 * a peer's words is bounded by the symmetric memory it is copied into. */
#ifndef VMMC_SHMEM_COLL_H
#define VMMC_SHMEM_COLL_H

#include "shmem_int.h"

#define SHM_COLL_ROUNDS 32 /* ceil(log2 n) for any int n */
#define SHM_COLL_WORDS 8

/* Team slot i's scratch (heap + SHM_TEAM_OFF(i)). */
typedef struct shm_team_scratch {
    _Atomic uint64_t flag[SHM_COLL_ROUNDS]; /* barrier round r: sequence, one writer */
    uint64_t word[SHM_COLL_WORDS];          /* values this PE publishes to the team */
} shm_team_scratch_t;
_Static_assert(sizeof(shm_team_scratch_t) <= SHM_TEAM_SCRATCH, "team scratch fits");

/* Word indices of shm_team_scratch.word / shm_coll_hdr.word */
#define SHM_W_COUNT 0  /* collect: this PE's byte count */
#define SHM_W_MASK 1   /* team split: free slots of this PE */
#define SHM_W_MINMAX 2 /* shm_world_minmax: this PE's value */

/* shm_hdr.coll */
typedef struct shm_coll_hdr {
    uint64_t word[SHM_COLL_WORDS]; /* values published to an active set */
    _Atomic uint32_t cnt[];        /* active-set signals received from world PE i */
} shm_coll_hdr_t;
#define SHM_ASET_MAX_PES ((sizeof(((shm_hdr_t *)0)->coll) - sizeof(shm_coll_hdr_t)) / 4)

static inline shm_coll_hdr_t *shm_coll_hdr(void)
{
    return (shm_coll_hdr_t *)(void *)shm_hdr()->coll;
}

/* Offset in every heap of the words a team (slot >= 0) or an active set
 * (slot < 0) publishes. */
static inline size_t shm_coll_word_off(const struct shmem_team_s *t, int w)
{
    if (t->slot >= 0)
        return SHM_TEAM_OFF(t->slot) + offsetof(shm_team_scratch_t, word) + 8u * (size_t)w;
    return offsetof(shm_hdr_t, coll) + offsetof(shm_coll_hdr_t, word) + 8u * (size_t)w;
}

/* A reduction operator: acc[i] = acc[i] OP in[i] for n elements. */
typedef void (*shm_red_fn)(void *acc, const void *in, size_t n);

/* Print "shmem: <fn>: <message>" on stderr (a call that returns non-zero). */
void shm_coll_error(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* shmem_team.c: the team or active set a call works on. Returns 0, or
 * non-zero after a message when @t is invalid or this PE is not in it. */
int shm_team_check(const char *fn, const struct shmem_team_s *t);
/* shmem_team_split.c: bit i set while slot i holds a team of this PE
 * (under shm_g.lock). */
extern uint64_t shm_team_slots_used;
/* SHMEM_TEAM_SHARED of PE @me: the PEs i with @same_host[i] (and @me) if
 * they form a (start, stride, size) set of the world, else @me alone. */
void shm_team_shared_set(const int *same_host, int npes, int me, int *start, int *stride,
                         int *size);
/* Free the per-PE state of the active sets (shm_teams_fini). */
void shm_aset_fini(void);

/* shmem_active.c: the descriptor of the active set (PE_start,
 * 2^logPE_stride, PE_size); shm_fatal if it is malformed or this PE is not
 * in it. */
void shm_aset(const char *fn, int PE_start, int logPE_stride, int PE_size,
              struct shmem_team_s *t);

/* shmem_coll_sync.c: barrier of @t's members, no completion of puts. */
void shm_coll_sync(const char *fn, struct shmem_team_s *t);
/* Allocate the active-set counters' expectations (shm_teams_init). */
int shm_aset_init(void);

/* shmem_coll.c: the engines (sizes in bytes). Return 0 or non-zero after
 * a message; shm_fatal on a non-symmetric address. @root_too: the root's
 * dest receives the data too (teams), or not (active sets). */
int shm_coll_bcast(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                   size_t nbytes, int root, int root_too);
/* @fixed: every PE brings @nbytes (fcollect); else each its own (collect). */
int shm_coll_collect(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                     size_t nbytes, int fixed);
int shm_coll_alltoall(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                      size_t nbytes);
int shm_coll_alltoalls(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                       ptrdiff_t dst, ptrdiff_t sst, size_t elem, size_t nelems);
/* Allreduce of @k (<= 4) 64-bit words with op 'a'nd, 'm'in or 'M'ax
 * through the words a team publishes (starting at word @w). */
void shm_coll_allreduce_u64(const char *fn, struct shmem_team_s *t, int w, char op,
                            const uint64_t *in, uint64_t *out, int k);

/* shmem_reduce.c */
int shm_coll_reduce(const char *fn, struct shmem_team_s *t, void *dest, const void *src,
                    size_t elem, size_t nreduce, shm_red_fn op);

/* Bytes of @nelems elements of @elem, or shm_fatal naming @fn on overflow. */
size_t shm_coll_bytes(const char *fn, size_t nelems, size_t elem);

/* Operators, defined once per type and operation by the reduction files:
 * SHM_RED_OP(T, N, and, a[i] &= b[i]) -> static shm_red_N_and(). */
#define SHM_RED_OP(T, N, OP, STMT)                                                           \
    static void shm_red_##N##_##OP(void *a_, const void *b_, size_t n)                        \
    {                                                                                          \
        T *a = a_;                                                                             \
        const T *b = b_;                                                                       \
        for (size_t i = 0; i < n; i++) {                                                       \
            STMT;                                                                              \
        }                                                                                      \
    }
#define SHM_RED_AND(T, N) SHM_RED_OP(T, N, and, a[i] &= b[i])
#define SHM_RED_OR(T, N) SHM_RED_OP(T, N, or, a[i] |= b[i])
#define SHM_RED_XOR(T, N) SHM_RED_OP(T, N, xor, a[i] ^= b[i])
#define SHM_RED_MAX(T, N) SHM_RED_OP(T, N, max, if (b[i] > a[i]) a[i] = b[i])
#define SHM_RED_MIN(T, N) SHM_RED_OP(T, N, min, if (b[i] < a[i]) a[i] = b[i])
#define SHM_RED_SUM(T, N) SHM_RED_OP(T, N, sum, a[i] += b[i])
#define SHM_RED_PROD(T, N) SHM_RED_OP(T, N, prod, a[i] *= b[i])

#endif /* VMMC_SHMEM_COLL_H */
