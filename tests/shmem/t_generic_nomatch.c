/* Must not compile: shmem_put has no routine for float _Complex, and
 * shmem_atomic_and none for long long (t_generic_nomatch expects the
 * compiler's error naming that). */
#include <shmem.h>

void nomatch(shmem_ctx_t ctx);
void nomatch(shmem_ctx_t ctx)
{
    static float _Complex z[2];
    static long long l;
    shmem_put(z, z + 1, 1, 0);
    shmem_atomic_and(ctx, &l, 1, 0);
}
