/* Bad RMA calls end the job with one clear line naming the call, never a
 * crash or a silent write: run by t_rma_fatal.sh once per case, which
 * checks the exit status and the message. */
#include "shmem_test.h"

#include <stdint.h>
#include <string.h>

static uint64_t s_words[4];

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    long src[4] = {1, 2, 3, 4};
    if (strcmp(c, "noinit") == 0) {
        shmem_putmem(s_words, src, 8, 0);
        return 0;
    }
    shmem_init();
    int npes = shmem_n_pes(), right = (shmem_my_pe() + 1) % npes;
    long *heap = shmem_malloc(64);
    uint64_t *sig = shmem_malloc(16);
    shmem_barrier_all();
    if (strcmp(c, "sigop") == 0)
        shmem_putmem_signal(heap, src, 8, sig, 1, 7, right);
    else if (strcmp(c, "sigop_nbi") == 0)
        shmem_ctx_long_put_signal_nbi(SHMEM_CTX_DEFAULT, heap, src, 1, sig, 1, -1, right);
    else if (strcmp(c, "sigalign") == 0)
        shmem_long_put_signal(heap, src, 1, (uint64_t *)((char *)sig + 4), 1, SHMEM_SIGNAL_SET,
                              right);
    else if (strcmp(c, "sigfetch") == 0)
        shmem_signal_fetch(&(uint64_t){0});
    else if (strcmp(c, "pe") == 0)
        shmem_putmem(heap, src, 8, npes);
    else if (strcmp(c, "pe_neg") == 0)
        (void)shmem_int_g((int *)heap, -1);
    else if (strcmp(c, "nonsym") == 0)
        shmem_long_put(src + 2, src, 1, right);
    else if (strcmp(c, "overflow") == 0)
        shmem_long_put(heap, src, SIZE_MAX / 4, right);
    else if (strcmp(c, "past_heap") == 0)
        shmem_getmem(src, heap, (size_t)1 << 40, right);
    else if (strcmp(c, "stride0") == 0)
        shmem_long_iput(heap, src, 0, 1, 2, right);
    else if (strcmp(c, "sig_pe") == 0)
        shmem_putmem_signal_nbi(heap, src, 8, sig, 1, SHMEM_SIGNAL_ADD, -3);
    else
        ST_FAIL("unknown case '%s'", c);
    fprintf(stderr, "case %s: the bad call returned\n", c);
    return 0;
}
