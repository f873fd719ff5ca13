/* Allocation, transfer and reuse under churn: in each phase every rank
 * allocates objects of mixed sizes (small minipages sharing pages, chunked
 * ones, large ones spanning pages), fills them with a pattern of its own,
 * publishes them in its slot table; after a barrier every rank checks every
 * object of every rank (and writes a mark into some of them, which their
 * owner checks after the next barrier); then every rank frees a part of its
 * objects. Space freed by one rank is reused by others in later phases, so a
 * stale copy or an unzeroed reuse shows up as a wrong byte. */
#include <stdint.h>
#include <string.h>

#include "dsm_test.h"

#define SLOTS 40
#define PHASES 12

typedef struct obj {
    uint32_t rank, id, size, mark;
    unsigned char body[];
} obj_t;

static uint32_t rng(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static unsigned char pat(uint32_t rank, uint32_t id, size_t i)
{
    return (unsigned char)(rank * 31 + id * 7 + i);
}

int main(void)
{
    /* a small area, so that freed pages are handed out again within the run
     * (page mode never reuses space: it gets room for everything) */
    int page = getenv("VMMC_DSM_PAGE") && atoi(getenv("VMMC_DSM_PAGE"));
    vmmc_dsm_params_t p = {page ? 16u << 20 : 1u << 20, 16};
    DT_OK(vmmc_dsm_init(&p));
    int me = vmmc_dsm_rank(), n = vmmc_dsm_size();
    obj_t ***slots = NULL; /* slots[r][k] */
    if (me == 0) {
        slots = vmmc_dsm_malloc((size_t)n * sizeof *slots);
        if (!slots)
            DT_FAIL("malloc: %s", vmmc_dsm_last_error());
        for (int r = 0; r < n; r++)
            if (!(slots[r] = vmmc_dsm_malloc(SLOTS * sizeof(obj_t *))))
                DT_FAIL("malloc: %s", vmmc_dsm_last_error());
    }
    DT_OK(vmmc_dsm_bcast_ptr((void **)&slots, 0));
    obj_t **mine = slots[me];
    uint32_t seed = 1234u + (uint32_t)me * 77u, next_id = 1;
    for (int ph = 0; ph < PHASES; ph++) {
        for (int k = 0; k < SLOTS; k++) {
            if (mine[k])
                continue;
            uint32_t kind = rng(&seed) % 10;
            size_t size = kind < 6 ? 8 + rng(&seed) % 200 : kind < 9 ? 300 + rng(&seed) % 2000
                                                                      : 4096 + rng(&seed) % 9000;
            obj_t *o = kind == 5 ? vmmc_dsm_malloc_chunk(sizeof *o + size, me)
                                 : vmmc_dsm_malloc(sizeof *o + size);
            if (!o)
                DT_FAIL("phase %d: malloc %zu: %s", ph, size, vmmc_dsm_last_error());
            if (o->rank || o->id || o->size || o->mark)
                DT_FAIL("phase %d: a new allocation is not zero-filled", ph);
            o->rank = (uint32_t)me;
            o->id = next_id++;
            o->size = (uint32_t)size;
            for (size_t i = 0; i < size; i++)
                o->body[i] = pat(o->rank, o->id, i);
            mine[k] = o;
        }
        DT_OK(vmmc_dsm_barrier());
        for (int r = 0; r < n; r++)
            for (int k = 0; k < SLOTS; k++) {
                obj_t *o = slots[r][k];
                if (!o)
                    DT_FAIL("phase %d: rank %d slot %d empty", ph, r, k);
                if (o->rank != (uint32_t)r)
                    DT_FAIL("phase %d: rank %d slot %d holds rank %u's object", ph, r, k,
                            o->rank);
                for (size_t i = 0; i < o->size; i++)
                    if (o->body[i] != pat(o->rank, o->id, i))
                        DT_FAIL("phase %d: rank %d object %u byte %zu: %u, expected %u", ph, r,
                                o->id, i, o->body[i], pat(o->rank, o->id, i));
                if ((k + ph) % n == me && r != me)
                    o->mark = (uint32_t)(me + 1) * 1000 + (uint32_t)ph;
            }
        DT_OK(vmmc_dsm_barrier());
        for (int k = 0; k < SLOTS; k++) {
            int marker = (k + ph) % n;
            uint32_t want = marker == me ? 0 : (uint32_t)(marker + 1) * 1000 + (uint32_t)ph;
            DT_EQ(mine[k]->mark, want);
            mine[k]->mark = 0;
            if (rng(&seed) % 2) {
                vmmc_dsm_free(mine[k]);
                mine[k] = NULL;
            }
        }
        DT_OK(vmmc_dsm_barrier());
    }
    DT_PASS("objects allocated, checked everywhere, marked and freed over phases");
    DT_OK(vmmc_dsm_finalize());
    return 0;
}
