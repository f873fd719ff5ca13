/* SHMEM_TEAM_SHARED from the table of which PEs share this host
 * (shm_team_shared_set, no job needed): strided layouts give the host's
 * PEs, any other layout gives the calling PE alone. */
#include <stdio.h>
#include <stdlib.h>

#include "shmem/shmem_coll.h"

static int fails;

static void check(const char *layout, int me, int w_start, int w_stride, int w_size)
{
    int n = 0, same[32];
    for (; layout[n]; n++)
        same[n] = layout[n] == 'x';
    int start = -2, stride = -2, size = -2;
    shm_team_shared_set(same, n, me, &start, &stride, &size);
    if (start != w_start || stride != w_stride || size != w_size) {
        fprintf(stderr, "FAIL layout %s, PE %d: (%d, %d, %d), expected (%d, %d, %d)\n", layout,
                me, start, stride, size, w_start, w_stride, w_size);
        fails++;
    }
}

int main(void)
{
    check("xxxx", 1, 0, 1, 4);   /* one host */
    check("xx..", 0, 0, 1, 2);   /* blocks of two */
    check("..xx", 3, 2, 1, 2);
    check("x.x.", 2, 0, 2, 2);   /* round robin */
    check(".x.x.x", 5, 1, 2, 3);
    check("x...", 0, 0, 1, 1);   /* alone on its host */
    check("...x", 3, 3, 1, 1);
    check("xx.x", 3, 3, 1, 1);   /* 0, 1, 3: not strided -> this PE alone */
    check("xx.x", 0, 0, 1, 1);
    check("x.xx.", 2, 2, 1, 1);
    check(".x", 0, 0, 1, 2);     /* this PE counts even if its own flag is 0 */
    if (fails)
        return 1;
    printf("ok   SHMEM_TEAM_SHARED from host layouts (strided, and this PE alone otherwise)\n");
    return 0;
}
