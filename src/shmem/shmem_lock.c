/* OpenSHMEM distributed locks: shmem_set_lock, shmem_test_lock,
 * shmem_clear_lock on a symmetric long that is zero before its first use.
 *
 * A queue lock in the manner of Mellor-Crummey and Scott (as SOS does it):
 * the long is two 32-bit words,
 *   word 0  on PE 0 only: the tail of the queue, PE + 1 of the last PE that
 *           asked for the lock (0: free);
 *   word 1  on every PE: that PE's queue node, the PE + 1 of its successor
 *           (low 31 bits) and SHM_LOCK_GRANTED (bit 31), set when the lock
 *           is handed to it.
 * set_lock swaps itself into the tail; if there was a predecessor it writes
 * its own number into the predecessor's node and waits (shm_wait: spin,
 * then sleep on the doorbell that the remote atomic rings) until its node
 * says granted. clear_lock completes this PE's puts (shm_quiet), then hands
 * the lock to the successor in its node, or, with none yet, swings the tail
 * back to 0 (compare-swap); if a successor is enqueuing at that moment it
 * waits until that successor has written its number. Every PE is served in
 * the order it asked; a waiting PE sleeps, so more PEs than cores make
 * progress. test_lock takes the lock only if the tail is 0 and never waits.
 *
 * A holder's node keeps SHM_LOCK_GRANTED until clear_lock, which returns it
 * to zero once nobody will write it again; so a PE that sets a lock it
 * holds, or clears one it does not hold, gets an error instead of a
 * deadlock. A successor number beyond the job in a node is refused.
 */
#include <stdint.h>

#include "shmem_int.h"

#define SHM_LOCK_GRANTED 0x80000000u
#define SHM_LOCK_NEXT 0x7fffffffu

static uint32_t *lock_words(const char *fn, long *lock)
{
    shm_check_init(fn);
    if (lock == NULL || (uintptr_t)lock % _Alignof(long))
        shm_fatal(fn, "lock is not an aligned symmetric long (%p)", (void *)lock);
    if (!shm_is_symmetric(lock, sizeof *lock))
        shm_fatal(fn, "lock is not symmetric memory (%p)", (void *)lock);
    return (uint32_t *)(void *)lock;
}

static uint32_t lock_amo(const char *fn, uint32_t *word, int pe, vmmc_atomic_op_t op,
                         uint32_t operand, uint32_t compare, int fetch)
{
    return (uint32_t)shm_amo(fn, SHMEM_CTX_DEFAULT, word, pe, op, 4, operand, compare, fetch);
}

static uint32_t node_load(const uint32_t *node)
{
    return __atomic_load_n(node, __ATOMIC_ACQUIRE);
}

static int node_granted(void *node)
{
    return (node_load(node) & SHM_LOCK_GRANTED) != 0;
}

static int node_has_next(void *node)
{
    return (node_load(node) & SHM_LOCK_NEXT) != 0;
}

static void lock_check_free(const char *fn, const uint32_t *node)
{
    uint32_t v = node_load(node);
    if (v & SHM_LOCK_GRANTED)
        shm_fatal(fn, "this PE holds the lock already (node 0x%08x)", v);
    if (v != 0)
        shm_fatal(fn, "the lock was not zero before its first use (node 0x%08x)", v);
}

void shmem_set_lock(long *lock)
{
    uint32_t *w = lock_words(__func__, lock), me = (uint32_t)shm_g.me + 1;
    lock_check_free(__func__, &w[1]);
    uint32_t prev = lock_amo(__func__, &w[0], 0, VMMC_ATOMIC_SWAP, me, 0, 1);
    if (prev == 0) {
        /* A successor may be writing its number into our node already. */
        __atomic_fetch_or(&w[1], SHM_LOCK_GRANTED, __ATOMIC_ACQ_REL);
        return;
    }
    if (prev > (uint32_t)shm_g.npes)
        shm_fatal(__func__, "the lock's tail names no PE (%u): not a lock, or overwritten",
                  prev);
    lock_amo(__func__, &w[1], (int)prev - 1, VMMC_ATOMIC_OR, me, 0, 0);
    if (!node_granted(&w[1]))
        shm_wait(node_granted, &w[1]);
}

int shmem_test_lock(long *lock)
{
    uint32_t *w = lock_words(__func__, lock), me = (uint32_t)shm_g.me + 1;
    if (node_load(&w[1]) & SHM_LOCK_GRANTED)
        return 1; /* held by this PE: not available */
    lock_check_free(__func__, &w[1]);
    if (lock_amo(__func__, &w[0], 0, VMMC_ATOMIC_CSWAP, me, 0, 1) != 0)
        return 1;
    __atomic_fetch_or(&w[1], SHM_LOCK_GRANTED, __ATOMIC_ACQ_REL);
    return 0;
}

void shmem_clear_lock(long *lock)
{
    uint32_t *w = lock_words(__func__, lock), me = (uint32_t)shm_g.me + 1;
    uint32_t v = node_load(&w[1]);
    if (!(v & SHM_LOCK_GRANTED))
        shm_fatal(__func__, "this PE does not hold the lock (node 0x%08x)", v);
    /* What this PE wrote under the lock is complete before the next holder runs. */
    shm_quiet(SHMEM_CTX_DEFAULT);
    uint32_t next = v & SHM_LOCK_NEXT;
    if (next == 0) {
        if (lock_amo(__func__, &w[0], 0, VMMC_ATOMIC_CSWAP, 0, me, 1) == me) {
            __atomic_store_n(&w[1], 0, __ATOMIC_RELEASE);
            return;
        }
        /* A PE swapped itself into the tail and is writing its number here. */
        if (!node_has_next(&w[1]))
            shm_wait(node_has_next, &w[1]);
        next = node_load(&w[1]) & SHM_LOCK_NEXT;
    }
    if (next > (uint32_t)shm_g.npes)
        shm_fatal(__func__, "the lock's successor names no PE (%u): overwritten", next);
    /* Nobody writes our node any more: the successor wrote its number, and
     * only a predecessor grants. */
    __atomic_store_n(&w[1], 0, __ATOMIC_RELEASE);
    lock_amo(__func__, &w[1], (int)next - 1, VMMC_ATOMIC_OR, SHM_LOCK_GRANTED, 0, 0);
}
