/* OpenSHMEM 1.5 over vmmc (libvmmc-shmem).
 *
 * A symmetric heap is one vmmc_mem_alloc() allocation per PE, exported whole
 * and imported by every other PE: on one host the importers map it, so a put
 * is a memcpy into the peer's mapping, a get a load from it and an atomic one
 * instruction on it (shmem_ptr() returns that pointer). Across hosts a put is
 * a deliberate update, a get a remote read and an atomic is executed by the
 * target's progress thread while it computes. Symmetric static and global
 * data (the program's .data and .bss) moves onto shared memory at
 * shmem_init and is exported and mapped the same way (VMMC_SHMEM_MAP_DATA=n
 * leaves it private: then it is reached through the same calls, but not
 * mapped by other PEs).
 *
 * Compile with `oshcc`, launch with `oshrun -n N prog` (or `vmmc run`, or
 * mpirun/srun with PMIx). See docs/shmem.md.
 *
 * The typed families are declared once per type through the type lists
 * below (the OpenSHMEM 1.5 tables); the lists stay defined for programs that
 * want to generate code over the same types.
 */
#ifndef VMMC_SHMEM_H
#define VMMC_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Library constants */

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 256
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "vmmc OpenSHMEM"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_LE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_GE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_LE SHMEM_CMP_LE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_GE SHMEM_CMP_GE

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* shmem_malloc_with_hints() */
#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

/* Context options (shmem_ctx_create) */
#define SHMEM_CTX_SERIALIZED 1L
#define SHMEM_CTX_PRIVATE 2L
#define SHMEM_CTX_NOSTORE 4L

/* Deprecated active-set collectives: sizes of pSync (in longs) and pWrk. */
#define SHMEM_SYNC_VALUE (-1L)
#define SHMEM_BCAST_SYNC_SIZE 64
#define SHMEM_BARRIER_SYNC_SIZE 64
#define SHMEM_REDUCE_SYNC_SIZE 64
#define SHMEM_COLLECT_SYNC_SIZE 64
#define SHMEM_ALLTOALL_SYNC_SIZE 64
#define SHMEM_ALLTOALLS_SYNC_SIZE 64
#define SHMEM_SYNC_SIZE 64
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE
#define _SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_ALLTOALLS_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

/* ------------------------------------------------------------------------- */
/* Handles */

/** A communication context: an ordering and completion domain. Every
 *  context maps onto the PE's one vmmc endpoint. */
typedef struct shmem_ctx_s *shmem_ctx_t;
extern struct shmem_ctx_s shmem_ctx_default_s;
#define SHMEM_CTX_DEFAULT (&shmem_ctx_default_s)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)

/** A team: an ordered set of PEs (start, stride, size of the world's). */
typedef struct shmem_team_s *shmem_team_t;
extern shmem_team_t SHMEM_TEAM_WORLD;
extern shmem_team_t SHMEM_TEAM_SHARED;
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)

typedef struct {
    int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS 1L

/* ------------------------------------------------------------------------- */
/* Type lists: X(C type, TYPENAME) */

/* Standard RMA types (table 5 of OpenSHMEM 1.5), also broadcast/collect/alltoall. */
#define VSHMEM_RMA_TYPES(X)                                                                    \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(long double, longdouble)                                                                 \
    X(char, char)                                                                              \
    X(signed char, schar)                                                                      \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
    X(unsigned char, uchar)                                                                    \
    X(unsigned short, ushort)                                                                  \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int8_t, int8)                                                                            \
    X(int16_t, int16)                                                                          \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint8_t, uint8)                                                                          \
    X(uint16_t, uint16)                                                                        \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)                                                                        \
    X(size_t, size)                                                                            \
    X(ptrdiff_t, ptrdiff)

/* Standard AMO types (every atomic operation). */
#define VSHMEM_AMO_TYPES(X)                                                                    \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)                                                                        \
    X(size_t, size)                                                                            \
    X(ptrdiff_t, ptrdiff)

/* Extended AMO types (fetch, set, swap, and their _nbi forms): the standard
 * ones plus these. */
#define VSHMEM_AMO_EXT_TYPES(X)                                                                \
    X(float, float)                                                                            \
    X(double, double)

/* Bitwise AMO types (and, or, xor and their fetch forms). */
#define VSHMEM_AMO_BIT_TYPES(X)                                                                \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)

/* Point-to-point synchronisation types (wait_until, test). */
#define VSHMEM_P2P_TYPES(X)                                                                    \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
    X(unsigned short, ushort)                                                                  \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)                                                                        \
    X(size_t, size)                                                                            \
    X(ptrdiff_t, ptrdiff)

/* Reduction types: bitwise (and, or, xor). */
#define VSHMEM_REDUCE_BIT_TYPES(X)                                                             \
    X(unsigned char, uchar)                                                                    \
    X(unsigned short, ushort)                                                                  \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int8_t, int8)                                                                            \
    X(int16_t, int16)                                                                          \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint8_t, uint8)                                                                          \
    X(uint16_t, uint16)                                                                        \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)                                                                        \
    X(size_t, size)

/* Reduction types: comparison (max, min); sum and prod take these and the
 * complex ones below. */
#define VSHMEM_REDUCE_CMP_TYPES(X)                                                             \
    X(char, char)                                                                              \
    X(signed char, schar)                                                                      \
    X(short, short)                                                                            \
    X(int, int)                                                                                \
    X(long, long)                                                                              \
    X(long long, longlong)                                                                     \
    X(ptrdiff_t, ptrdiff)                                                                      \
    X(unsigned char, uchar)                                                                    \
    X(unsigned short, ushort)                                                                  \
    X(unsigned int, uint)                                                                      \
    X(unsigned long, ulong)                                                                    \
    X(unsigned long long, ulonglong)                                                           \
    X(int8_t, int8)                                                                            \
    X(int16_t, int16)                                                                          \
    X(int32_t, int32)                                                                          \
    X(int64_t, int64)                                                                          \
    X(uint8_t, uint8)                                                                          \
    X(uint16_t, uint16)                                                                        \
    X(uint32_t, uint32)                                                                        \
    X(uint64_t, uint64)                                                                        \
    X(size_t, size)                                                                            \
    X(float, float)                                                                            \
    X(double, double)                                                                          \
    X(long double, longdouble)

#define VSHMEM_REDUCE_COMPLEX_TYPES(X)                                                         \
    X(double _Complex, complexd)                                                               \
    X(float _Complex, complexf)

/* Sized RMA: X(bits) */
#define VSHMEM_SIZES(X) X(8) X(16) X(32) X(64) X(128)

/* Deprecated active-set reductions: X(C type, TYPENAME) per operation group. */
#define VSHMEM_OLD_REDUCE_BIT_TYPES(X)                                                         \
    X(short, short) X(int, int) X(long, long) X(long long, longlong)
#define VSHMEM_OLD_REDUCE_CMP_TYPES(X)                                                         \
    X(short, short) X(int, int) X(long, long) X(long long, longlong) X(float, float)           \
    X(double, double) X(long double, longdouble)
#define VSHMEM_OLD_REDUCE_ARITH_TYPES(X)                                                       \
    VSHMEM_OLD_REDUCE_CMP_TYPES(X) X(double _Complex, complexd) X(float _Complex, complexf)

/* ------------------------------------------------------------------------- */
/* Library setup, exit and query */

void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_finalize(void);
void shmem_global_exit(int status) __attribute__((noreturn));
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);

/* Deprecated names */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);
int my_pe(void);
int num_pes(void);

/* ------------------------------------------------------------------------- */
/* Memory management */

void *shmem_malloc(size_t size);
void *shmem_malloc_with_hints(size_t size, long hints);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);
void *shmalloc(size_t size);
void *shmemalign(size_t alignment, size_t size);
void *shrealloc(void *ptr, size_t size);
void shfree(void *ptr);

/* ------------------------------------------------------------------------- */
/* Teams */

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t *xaxis_config, long xaxis_mask,
                        shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team);
void shmem_team_destroy(shmem_team_t team);

/* ------------------------------------------------------------------------- */
/* Contexts */

int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);

/* ------------------------------------------------------------------------- */
/* RMA */

#define VSHMEM_DECL_RMA(T, N)                                                                  \
    void shmem_##N##_put(T *dest, const T *source, size_t nelems, int pe);                    \
    void shmem_ctx_##N##_put(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe); \
    void shmem_##N##_put_nbi(T *dest, const T *source, size_t nelems, int pe);                \
    void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,    \
                                 int pe);                                                      \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe);                    \
    void shmem_ctx_##N##_get(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe); \
    void shmem_##N##_get_nbi(T *dest, const T *source, size_t nelems, int pe);                \
    void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,    \
                                 int pe);                                                      \
    void shmem_##N##_p(T *dest, T value, int pe);                                              \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe);                         \
    T shmem_##N##_g(const T *source, int pe);                                                  \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe);                             \
    void shmem_##N##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe);                                              \
    void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,       \
                              ptrdiff_t sst, size_t nelems, int pe);                           \
    void shmem_##N##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe);                                              \
    void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,       \
                              ptrdiff_t sst, size_t nelems, int pe);                           \
    void shmem_##N##_put_signal(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,  \
                                uint64_t signal, int sig_op, int pe);                          \
    void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);  \
    void shmem_##N##_put_signal_nbi(T *dest, const T *source, size_t nelems,                  \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);  \
    void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T *dest, const T *source,            \
                                        size_t nelems, uint64_t *sig_addr, uint64_t signal,    \
                                        int sig_op, int pe);
VSHMEM_RMA_TYPES(VSHMEM_DECL_RMA)
#undef VSHMEM_DECL_RMA

#define VSHMEM_DECL_SIZED(B)                                                                   \
    void shmem_put##B(void *dest, const void *source, size_t nelems, int pe);                 \
    void shmem_ctx_put##B(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,     \
                          int pe);                                                             \
    void shmem_put##B##_nbi(void *dest, const void *source, size_t nelems, int pe);           \
    void shmem_ctx_put##B##_nbi(shmem_ctx_t ctx, void *dest, const void *source,              \
                                size_t nelems, int pe);                                        \
    void shmem_get##B(void *dest, const void *source, size_t nelems, int pe);                 \
    void shmem_ctx_get##B(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,     \
                          int pe);                                                             \
    void shmem_get##B##_nbi(void *dest, const void *source, size_t nelems, int pe);           \
    void shmem_ctx_get##B##_nbi(shmem_ctx_t ctx, void *dest, const void *source,              \
                                size_t nelems, int pe);                                        \
    void shmem_iput##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe);                                                 \
    void shmem_ctx_iput##B(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,    \
                           ptrdiff_t sst, size_t nelems, int pe);                              \
    void shmem_iget##B(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe);                                                 \
    void shmem_ctx_iget##B(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,    \
                           ptrdiff_t sst, size_t nelems, int pe);                              \
    void shmem_put##B##_signal(void *dest, const void *source, size_t nelems,                 \
                               uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);       \
    void shmem_ctx_put##B##_signal(shmem_ctx_t ctx, void *dest, const void *source,           \
                                   size_t nelems, uint64_t *sig_addr, uint64_t signal,         \
                                   int sig_op, int pe);                                        \
    void shmem_put##B##_signal_nbi(void *dest, const void *source, size_t nelems,             \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);   \
    void shmem_ctx_put##B##_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source,       \
                                       size_t nelems, uint64_t *sig_addr, uint64_t signal,     \
                                       int sig_op, int pe);
VSHMEM_SIZES(VSHMEM_DECL_SIZED)
#undef VSHMEM_DECL_SIZED

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe);
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe);
void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                         uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                                 uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);

/* ------------------------------------------------------------------------- */
/* Atomics */

#define VSHMEM_DECL_AMO_EXT(T, N)                                                              \
    T shmem_##N##_atomic_fetch(const T *source, int pe);                                       \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe);                  \
    void shmem_##N##_atomic_set(T *dest, T value, int pe);                                     \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe);                                       \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe);                  \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe);                      \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe); \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe);                      \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe);
#define VSHMEM_DECL_AMO_STD(T, N)                                                              \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe);                       \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe);  \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe);                                           \
    T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T *dest, int pe);                      \
    void shmem_##N##_atomic_inc(T *dest, int pe);                                              \
    void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T *dest, int pe);                         \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe);                                  \
    T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T *dest, T value, int pe);             \
    void shmem_##N##_atomic_add(T *dest, T value, int pe);                                     \
    void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe);      \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond,   \
                                                 T value, int pe);                             \
    void shmem_##N##_atomic_fetch_inc_nbi(T *fetch, T *dest, int pe);                          \
    void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T *fetch, T *dest, int pe);     \
    void shmem_##N##_atomic_fetch_add_nbi(T *fetch, T *dest, T value, int pe);                 \
    void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe);
#define VSHMEM_DECL_AMO_BIT(T, N)                                                              \
    T shmem_##N##_atomic_fetch_and(T *dest, T value, int pe);                                  \
    T shmem_ctx_##N##_atomic_fetch_and(shmem_ctx_t ctx, T *dest, T value, int pe);             \
    void shmem_##N##_atomic_and(T *dest, T value, int pe);                                     \
    void shmem_ctx_##N##_atomic_and(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    T shmem_##N##_atomic_fetch_or(T *dest, T value, int pe);                                   \
    T shmem_ctx_##N##_atomic_fetch_or(shmem_ctx_t ctx, T *dest, T value, int pe);              \
    void shmem_##N##_atomic_or(T *dest, T value, int pe);                                      \
    void shmem_ctx_##N##_atomic_or(shmem_ctx_t ctx, T *dest, T value, int pe);                 \
    T shmem_##N##_atomic_fetch_xor(T *dest, T value, int pe);                                  \
    T shmem_ctx_##N##_atomic_fetch_xor(shmem_ctx_t ctx, T *dest, T value, int pe);             \
    void shmem_##N##_atomic_xor(T *dest, T value, int pe);                                     \
    void shmem_ctx_##N##_atomic_xor(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    void shmem_##N##_atomic_fetch_and_nbi(T *fetch, T *dest, T value, int pe);                 \
    void shmem_ctx_##N##_atomic_fetch_and_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe);                                         \
    void shmem_##N##_atomic_fetch_or_nbi(T *fetch, T *dest, T value, int pe);                  \
    void shmem_ctx_##N##_atomic_fetch_or_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,      \
                                             int pe);                                          \
    void shmem_##N##_atomic_fetch_xor_nbi(T *fetch, T *dest, T value, int pe);                 \
    void shmem_ctx_##N##_atomic_fetch_xor_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe);
VSHMEM_AMO_TYPES(VSHMEM_DECL_AMO_EXT)
VSHMEM_AMO_EXT_TYPES(VSHMEM_DECL_AMO_EXT)
VSHMEM_AMO_TYPES(VSHMEM_DECL_AMO_STD)
VSHMEM_AMO_BIT_TYPES(VSHMEM_DECL_AMO_BIT)
#undef VSHMEM_DECL_AMO_EXT
#undef VSHMEM_DECL_AMO_STD
#undef VSHMEM_DECL_AMO_BIT

/* Deprecated atomic names (OpenSHMEM 1.3), as SOS keeps them. */
#define VSHMEM_DECL_AMO_OLD(T, N)                                                              \
    T shmem_##N##_fadd(T *dest, T value, int pe);                                              \
    T shmem_##N##_finc(T *dest, int pe);                                                       \
    void shmem_##N##_add(T *dest, T value, int pe);                                            \
    void shmem_##N##_inc(T *dest, int pe);                                                     \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe);
#define VSHMEM_DECL_AMO_OLD_EXT(T, N)                                                          \
    T shmem_##N##_swap(T *dest, T value, int pe);                                              \
    T shmem_##N##_fetch(const T *source, int pe);                                              \
    void shmem_##N##_set(T *dest, T value, int pe);
#define VSHMEM_OLD_AMO_TYPES(X) X(int, int) X(long, long) X(long long, longlong)
VSHMEM_OLD_AMO_TYPES(VSHMEM_DECL_AMO_OLD)
VSHMEM_OLD_AMO_TYPES(VSHMEM_DECL_AMO_OLD_EXT)
VSHMEM_AMO_EXT_TYPES(VSHMEM_DECL_AMO_OLD_EXT)
#undef VSHMEM_DECL_AMO_OLD
#undef VSHMEM_DECL_AMO_OLD_EXT
long shmem_swap(long *dest, long value, int pe);

/* ------------------------------------------------------------------------- */
/* Point-to-point synchronisation */

#define VSHMEM_DECL_P2P(T, N)                                                                  \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value);                                \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T cmp_value);                                              \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp,     \
                                      T cmp_value);                                            \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices,               \
                                       const int *status, int cmp, T cmp_value);               \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status,         \
                                           int cmp, T *cmp_values);                            \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status,       \
                                             int cmp, T *cmp_values);                          \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices,        \
                                              const int *status, int cmp, T *cmp_values);      \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value);                                       \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp,              \
                             T cmp_value);                                                     \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp,           \
                                T cmp_value);                                                  \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status,  \
                                 int cmp, T cmp_value);                                        \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T *cmp_values);                                            \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp,    \
                                       T *cmp_values);                                         \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices,              \
                                        const int *status, int cmp, T *cmp_values);
VSHMEM_P2P_TYPES(VSHMEM_DECL_P2P)
#undef VSHMEM_DECL_P2P

uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);

/* Deprecated: wait while *ivar == value. */
void shmem_wait(long *ivar, long cmp_value);
#define VSHMEM_DECL_WAIT_OLD(T, N) void shmem_##N##_wait(T *ivar, T cmp_value);
VSHMEM_OLD_REDUCE_BIT_TYPES(VSHMEM_DECL_WAIT_OLD)
#undef VSHMEM_DECL_WAIT_OLD

/* ------------------------------------------------------------------------- */
/* Memory ordering */

void shmem_fence(void);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_quiet(void);
void shmem_ctx_quiet(shmem_ctx_t ctx);

/* ------------------------------------------------------------------------- */
/* Distributed locks (a symmetric long, zero before first use) */

void shmem_set_lock(long *lock);
void shmem_clear_lock(long *lock);
int shmem_test_lock(long *lock);

/* ------------------------------------------------------------------------- */
/* Collectives: synchronisation */

void shmem_barrier_all(void);
void shmem_sync_all(void);
int shmem_team_sync(shmem_team_t team);
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync);

/* Collectives on teams (return 0 on success) */
#define VSHMEM_DECL_COLL(T, N)                                                                 \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems,      \
                              int PE_root);                                                    \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems);       \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems);      \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems);      \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst,      \
                              ptrdiff_t sst, size_t nelems);
VSHMEM_RMA_TYPES(VSHMEM_DECL_COLL)
#undef VSHMEM_DECL_COLL
int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems,
                       int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);

#define VSHMEM_DECL_REDUCE_BIT(T, N)                                                           \
    int shmem_##N##_and_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);   \
    int shmem_##N##_or_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);    \
    int shmem_##N##_xor_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define VSHMEM_DECL_REDUCE_CMP(T, N)                                                           \
    int shmem_##N##_max_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);   \
    int shmem_##N##_min_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define VSHMEM_DECL_REDUCE_ARITH(T, N)                                                         \
    int shmem_##N##_sum_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);   \
    int shmem_##N##_prod_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
VSHMEM_REDUCE_BIT_TYPES(VSHMEM_DECL_REDUCE_BIT)
VSHMEM_REDUCE_CMP_TYPES(VSHMEM_DECL_REDUCE_CMP)
VSHMEM_REDUCE_CMP_TYPES(VSHMEM_DECL_REDUCE_ARITH)
VSHMEM_REDUCE_COMPLEX_TYPES(VSHMEM_DECL_REDUCE_ARITH)
#undef VSHMEM_DECL_REDUCE_BIT
#undef VSHMEM_DECL_REDUCE_CMP
#undef VSHMEM_DECL_REDUCE_ARITH

/* Deprecated active-set collectives (PE_start, logPE_stride, PE_size, pSync) */
void shmem_broadcast32(void *dest, const void *source, size_t nelems, int PE_root, int PE_start,
                       int logPE_stride, int PE_size, long *pSync);
void shmem_broadcast64(void *dest, const void *source, size_t nelems, int PE_root, int PE_start,
                       int logPE_stride, int PE_size, long *pSync);
void shmem_collect32(void *dest, const void *source, size_t nelems, int PE_start,
                     int logPE_stride, int PE_size, long *pSync);
void shmem_collect64(void *dest, const void *source, size_t nelems, int PE_start,
                     int logPE_stride, int PE_size, long *pSync);
void shmem_fcollect32(void *dest, const void *source, size_t nelems, int PE_start,
                      int logPE_stride, int PE_size, long *pSync);
void shmem_fcollect64(void *dest, const void *source, size_t nelems, int PE_start,
                      int logPE_stride, int PE_size, long *pSync);
void shmem_alltoall32(void *dest, const void *source, size_t nelems, int PE_start,
                      int logPE_stride, int PE_size, long *pSync);
void shmem_alltoall64(void *dest, const void *source, size_t nelems, int PE_start,
                      int logPE_stride, int PE_size, long *pSync);
void shmem_alltoalls32(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                       size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync);
void shmem_alltoalls64(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,
                       size_t nelems, int PE_start, int logPE_stride, int PE_size, long *pSync);

#define VSHMEM_DECL_OLD_RED(T, N, OP)                                                          \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start,        \
                                   int logPE_stride, int PE_size, T *pWrk, long *pSync);
#define VSHMEM_DECL_OLD_RED_BIT(T, N)                                                          \
    VSHMEM_DECL_OLD_RED(T, N, and) VSHMEM_DECL_OLD_RED(T, N, or) VSHMEM_DECL_OLD_RED(T, N, xor)
#define VSHMEM_DECL_OLD_RED_CMP(T, N) VSHMEM_DECL_OLD_RED(T, N, max) VSHMEM_DECL_OLD_RED(T, N, min)
#define VSHMEM_DECL_OLD_RED_ARITH(T, N)                                                        \
    VSHMEM_DECL_OLD_RED(T, N, sum) VSHMEM_DECL_OLD_RED(T, N, prod)
VSHMEM_OLD_REDUCE_BIT_TYPES(VSHMEM_DECL_OLD_RED_BIT)
VSHMEM_OLD_REDUCE_CMP_TYPES(VSHMEM_DECL_OLD_RED_CMP)
VSHMEM_OLD_REDUCE_ARITH_TYPES(VSHMEM_DECL_OLD_RED_ARITH)
#undef VSHMEM_DECL_OLD_RED
#undef VSHMEM_DECL_OLD_RED_BIT
#undef VSHMEM_DECL_OLD_RED_CMP
#undef VSHMEM_DECL_OLD_RED_ARITH

/* Deprecated cache management: no-ops (the memory is coherent). */
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void *dest);
void shmem_set_cache_line_inv(void *dest);
void shmem_udcflush(void);
void shmem_udcflush_line(void *dest);

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------------- */
/* C11 type-generic interfaces (shmem_put(dest, src, n, pe), ...) */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#include "shmem_generic.h"
#endif

#endif /* VMMC_SHMEM_H */
