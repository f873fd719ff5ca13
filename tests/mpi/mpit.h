/* Helpers shared by the MPI test programs: every MPI call is checked, every
 * result is compared exactly, and the first mismatch ends the job with a
 * non-zero status and a message naming the rank and what differed. */
#ifndef VMMC_MPIT_H
#define VMMC_MPIT_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mpit_rank = -1;

#define MPIT_FAIL(...)                                                                     \
    do {                                                                                   \
        fprintf(stderr, "rank %d: %s:%d: ", mpit_rank, __FILE__, __LINE__);                \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                             \
        fflush(stderr);                                                                    \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        exit(1);                                                                           \
    } while (0)

/* An MPI call that must succeed. */
#define MPIT(call)                                                                         \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != MPI_SUCCESS) {                                                          \
            char s_[MPI_MAX_ERROR_STRING];                                                 \
            int l_ = 0;                                                                    \
            MPI_Error_string(rc_, s_, &l_);                                                \
            MPIT_FAIL("%s: %s", #call, s_);                                                \
        }                                                                                  \
    } while (0)

#define MPIT_EQ(a, b)                                                                      \
    do {                                                                                   \
        long long a_ = (long long)(a), b_ = (long long)(b);                                \
        if (a_ != b_)                                                                      \
            MPIT_FAIL("%s = %lld, expected %s = %lld", #a, a_, #b, b_);                    \
    } while (0)

/* The byte at offset @i of a message from @src to @dst with tag @tag: every
 * message has contents of its own, so a misplaced one is seen. */
static inline unsigned char mpit_byte(int src, int dst, int tag, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + (uint64_t)src * 131 +
                 (uint64_t)dst * 7919 + (uint64_t)tag * 104729;
    return (unsigned char)(x >> 56 ^ x >> 13 ^ x);
}

static inline void mpit_fill(void *buf, size_t n, int src, int dst, int tag)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        p[i] = mpit_byte(src, dst, tag, i);
}

/* The first offset where @buf differs from the message's contents, or -1. */
static inline long mpit_check(const void *buf, size_t n, int src, int dst, int tag)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != mpit_byte(src, dst, tag, i))
            return (long)i;
    return -1;
}

#define MPIT_DATA(buf, n, src, dst, tag)                                                   \
    do {                                                                                   \
        long off_ = mpit_check(buf, n, src, dst, tag);                                     \
        if (off_ >= 0)                                                                     \
            MPIT_FAIL("message %d->%d tag %d of %zu bytes differs at byte %ld",            \
                      (int)(src), (int)(dst), (int)(tag), (size_t)(n), off_);              \
    } while (0)

/* MPI_Init, rank and size; the program needs at least @min ranks. */
static inline void mpit_init(int *argc, char ***argv, int *rank, int *size, int min)
{
    MPIT(MPI_Init(argc, argv));
    MPIT(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    MPIT(MPI_Comm_size(MPI_COMM_WORLD, size));
    mpit_rank = *rank;
    if (*size < min)
        MPIT_FAIL("needs at least %d ranks, got %d", min, *size);
}

static inline void *mpit_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        MPIT_FAIL("out of memory (%zu bytes)", n);
    return p;
}

/* When MPIT_EXPECT_LIB names a library (libvmmc-fi.so), it must be mapped in
 * this process: the job did go through that provider. Then MPI_Finalize. */
static inline void mpit_finish(const char *what)
{
    const char *lib = getenv("MPIT_EXPECT_LIB");
    if (lib && *lib) {
        FILE *f = fopen("/proc/self/maps", "r");
        char line[4096];
        int found = 0;
        while (f && !found && fgets(line, sizeof line, f))
            found = strstr(line, lib) != NULL;
        if (f)
            fclose(f);
        if (!found)
            MPIT_FAIL("%s is not loaded in this process: MPI did not use that provider", lib);
    }
    MPIT(MPI_Barrier(MPI_COMM_WORLD));
    if (mpit_rank == 0)
        printf("%s: ok\n", what);
    MPIT(MPI_Finalize());
}

#endif
