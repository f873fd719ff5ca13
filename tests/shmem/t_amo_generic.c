/* The C11 type-generic names (shmem_generic.h) reach the atomics and the
 * point-to-point routines of the argument's type, with and without a
 * context: a wrong selection changes a guard or gives a wrong value. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "shmem_test.h"

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), npes = shmem_n_pes(), right = (me + 1) % npes;
    shmem_ctx_t ctx;
    ST_CHECK(shmem_ctx_create(0, &ctx) == 0);
    int *iw = shmem_calloc(4, sizeof(int));       /* [1] is the word, the rest guards */
    long *lw = shmem_calloc(4, sizeof(long));
    unsigned long long *uw = shmem_calloc(4, sizeof(unsigned long long));
    float *fw = shmem_calloc(4, sizeof(float));
    double *dw = shmem_calloc(4, sizeof(double));
    short *sv = shmem_calloc(2, sizeof(short));
    long *lv = shmem_calloc(4, sizeof(long));
    shmem_barrier_all();

    ST_EQ(shmem_atomic_fetch_add(&iw[1], -7, right), 0);
    ST_EQ(shmem_atomic_fetch_add(ctx, &iw[1], 2, right), -7);
    ST_EQ(shmem_atomic_fetch(&iw[1], right), -5);
    shmem_atomic_inc(&lw[1], right);
    ST_EQ(shmem_atomic_compare_swap(&lw[1], 1L, 1L << 40, right), 1);
    ST_EQ(shmem_atomic_swap(ctx, &lw[1], -1L, right), 1L << 40);
    shmem_atomic_set(&uw[1], ~0ull, right);
    ST_CHECK(shmem_atomic_fetch_and(&uw[1], 0xf0f0ull, right) == ~0ull);
    shmem_atomic_xor(ctx, &uw[1], 0xffull, right);
    ST_CHECK(shmem_atomic_fetch(&uw[1], right) == 0xf00full);
    shmem_atomic_set(&fw[1], -2.5f, right);
    ST_CHECK(shmem_atomic_swap(&fw[1], 0.25f, right) == -2.5f);
    shmem_atomic_set(ctx, &dw[1], 1e300, right);
    double d = 0;
    shmem_atomic_fetch_nbi(&d, &dw[1], right);
    shmem_quiet();
    ST_CHECK(d == 1e300);
    shmem_barrier_all();
    ST_EQ(iw[0] | iw[2] | iw[3], 0);
    ST_EQ(lw[0] | lw[2] | lw[3], 0);
    ST_CHECK((uw[0] | uw[2] | uw[3]) == 0);
    ST_CHECK(fw[0] == 0 && fw[2] == 0 && fw[3] == 0 && fw[1] == 0.25f);
    ST_CHECK(dw[0] == 0 && dw[2] == 0 && dw[3] == 0);
    ST_OK("generic atomics pick the routine of the word's type");

    usleep(10000);
    shmem_p(&sv[1], (short)-3, right);
    shmem_p(&lv[2], 12L, right);
    shmem_quiet();
    shmem_wait_until(&sv[1], SHMEM_CMP_LT, (short)0);
    ST_EQ(shmem_test(&sv[1], SHMEM_CMP_EQ, (short)-3), 1);
    ST_EQ(shmem_wait_until_any(lv, 4, NULL, SHMEM_CMP_EQ, 12L), 2);
    size_t idx[4];
    ST_EQ(shmem_test_some(lv, 4, idx, NULL, SHMEM_CMP_NE, 0L), 1);
    ST_EQ(idx[0], 2);
    ST_EQ(sv[0], 0);
    ST_OK("generic wait_until/test pick the routine of the ivar's type");

    shmem_barrier_all();
    shmem_ctx_destroy(ctx);
    shmem_finalize();
    return 0;
}
