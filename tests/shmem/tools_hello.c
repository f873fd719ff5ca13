/* A small OpenSHMEM program that the oshcc/oshrun tests build and launch:
 * each PE writes its number into the next PE's heap and static data, and
 * reads it back after a barrier.
 *   tools_hello          prints "PE i of N ok" on every PE
 *   tools_hello fail S   PE 1 exits with status S after init (0 elsewhere) */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long from_static;

int main(int argc, char **argv)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    if (argc > 2 && !strcmp(argv[1], "fail")) {
        if (me == 1)
            exit(atoi(argv[2]));
        shmem_finalize();
        return 0;
    }
    long *from_heap = shmem_malloc(sizeof *from_heap);
    if (!from_heap) {
        fprintf(stderr, "PE %d: shmem_malloc failed\n", me);
        return 1;
    }
    *from_heap = -1;
    shmem_barrier_all();
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    shmem_long_p(from_heap, 1000 + me, next);
    shmem_long_put(&from_static, &(long){2000 + me}, 1, next);
    shmem_barrier_all();
    if (*from_heap != 1000 + prev || from_static != 2000 + prev) {
        fprintf(stderr, "PE %d: got %ld and %ld, expected %d and %d\n", me, *from_heap,
                from_static, 1000 + prev, 2000 + prev);
        return 1;
    }
    printf("PE %d of %d ok\n", me, n);
    shmem_free(from_heap);
    shmem_finalize();
    return 0;
}
