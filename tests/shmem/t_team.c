/* Teams: world and shared, split_strided (evens and odds), split_2d,
 * translate_pe, get_config, collectives and barriers on sub-teams, slot
 * reuse after destroy, running out of slots, and bad arguments. */
#include "shmem_test.h"

#include <string.h>
#include <unistd.h>

static int me, npes;

/* Puts into every member's word, quiet, team_sync: afterwards every word
 * holds this round (a member leaving the sync early reads a stale one).
 * Round numbers keep growing from call to call (every PE makes the same
 * calls). The last member is slow on purpose in the first round of a
 * call, so that a sync that does not wait is caught. */
static long round_no;

static void sync_rounds(shmem_team_t t, long *bank, int rounds)
{
    int tn = shmem_team_n_pes(t), tme = shmem_team_my_pe(t);
    long first = round_no + 1;
    for (long r = first; r < first + rounds; r++) {
        long *b = bank + (r & 1) * npes;
        round_no = r;
        if (r == first && tme == tn - 1)
            usleep(20000);
        for (int i = 0; i < tn; i++) {
            int pe = shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD);
            if (i != tme)
                shmem_long_p(&b[me], r, pe);
        }
        shmem_quiet();
        ST_EQ(shmem_team_sync(t), 0);
        for (int i = 0; i < tn; i++) {
            int pe = shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD);
            if (i != tme && b[pe] != r)
                ST_FAIL("team sync round %ld: word of PE %d holds %ld", r, pe, b[pe]);
        }
    }
}

/* Collectives on @t: broadcast from the last member, sum of world ids,
 * fcollect of world ids. */
static void team_colls(shmem_team_t t, long *a, long *b)
{
    int tn = shmem_team_n_pes(t), tme = shmem_team_my_pe(t);
    long sum = 0;
    for (int i = 0; i < tn; i++)
        sum += shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD);
    a[0] = me * 10 + 3;
    shmem_team_sync(t);
    ST_EQ(shmem_long_broadcast(t, b, a, 1, tn - 1), 0);
    ST_EQ(b[0], shmem_team_translate_pe(t, tn - 1, SHMEM_TEAM_WORLD) * 10 + 3);
    a[0] = me;
    ST_EQ(shmem_long_sum_reduce(t, b, a, 1), 0);
    ST_EQ(b[0], sum);
    ST_EQ(shmem_long_fcollect(t, b, a, 1), 0);
    for (int i = 0; i < tn; i++)
        ST_EQ(b[i], shmem_team_translate_pe(t, i, SHMEM_TEAM_WORLD));
    ST_EQ(shmem_team_translate_pe(t, tme, SHMEM_TEAM_WORLD), me);
    ST_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, t), tme);
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    long *bank = shmem_calloc(2 * (size_t)npes, sizeof(long));
    long *a = shmem_malloc(sizeof(long) * (size_t)npes);
    long *b = shmem_malloc(sizeof(long) * (size_t)npes);
    ST_CHECK(bank && a && b);

    ST_EQ(shmem_team_my_pe(SHMEM_TEAM_WORLD), me);
    ST_EQ(shmem_team_n_pes(SHMEM_TEAM_WORLD), npes);
    team_colls(SHMEM_TEAM_WORLD, a, b);
    ST_OK("world team");

    /* shared: the PEs of this host, every one reachable by a pointer */
    int sn = shmem_team_n_pes(SHMEM_TEAM_SHARED), sme = shmem_team_my_pe(SHMEM_TEAM_SHARED);
    ST_CHECK(sn >= 1 && sme >= 0 && sme < sn);
    ST_EQ(shmem_team_translate_pe(SHMEM_TEAM_SHARED, sme, SHMEM_TEAM_WORLD), me);
    for (int i = 0; i < sn; i++) {
        int pe = shmem_team_translate_pe(SHMEM_TEAM_SHARED, i, SHMEM_TEAM_WORLD);
        ST_CHECK(pe >= 0 && pe < npes);
        ST_CHECK(shmem_ptr(bank, pe) != NULL);
    }
    team_colls(SHMEM_TEAM_SHARED, a, b);
    shmem_barrier_all();
    ST_OK("shared team: this host's PEs");

    /* evens and odds */
    shmem_team_t ev = SHMEM_TEAM_INVALID, od = SHMEM_TEAM_INVALID;
    shmem_team_config_t cfg = {.num_contexts = 3}, got = {0};
    ST_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, &cfg,
                                   SHMEM_TEAM_NUM_CONTEXTS, &ev), 0);
    if (npes > 1)
        ST_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 2, npes / 2, NULL, 0, &od), 0);
    shmem_team_t mine = me % 2 ? od : ev, other = me % 2 ? ev : od;
    ST_CHECK(mine != SHMEM_TEAM_INVALID);
    ST_CHECK(other == SHMEM_TEAM_INVALID);
    ST_EQ(shmem_team_my_pe(mine), me / 2);
    ST_EQ(shmem_team_n_pes(mine), me % 2 ? npes / 2 : (npes + 1) / 2);
    ST_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me ^ 1, mine), -1);
    ST_EQ(shmem_team_get_config(mine, SHMEM_TEAM_NUM_CONTEXTS, &got), 0);
    ST_EQ(got.num_contexts, me % 2 ? 0 : 3);
    team_colls(mine, a, b);
    sync_rounds(mine, bank, 200);
    shmem_barrier_all();
    ST_OK("split_strided: evens and odds, collectives and syncs on each");

    /* a team of a team: every other member of the evens (world stride 4) */
    if (me % 2 == 0) {
        shmem_team_t q = SHMEM_TEAM_INVALID;
        int en = shmem_team_n_pes(ev);
        ST_EQ(shmem_team_split_strided(ev, 0, 2, (en + 1) / 2, NULL, 0, &q), 0);
        ST_EQ(q != SHMEM_TEAM_INVALID, me % 4 == 0);
        if (q != SHMEM_TEAM_INVALID) {
            ST_EQ(shmem_team_my_pe(q), me / 4);
            team_colls(q, a, b);
            shmem_team_destroy(q);
        }
    }
    shmem_barrier_all();
    ST_OK("split of a split (world stride 4)");

    /* 2-D: rows of 2 consecutive PEs, columns of every other PE */
    shmem_team_t x = SHMEM_TEAM_INVALID, y = SHMEM_TEAM_INVALID;
    ST_EQ(shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &x, NULL, 0, &y), 0);
    ST_CHECK(x != SHMEM_TEAM_INVALID && y != SHMEM_TEAM_INVALID);
    ST_EQ(shmem_team_my_pe(x), me % 2);
    ST_EQ(shmem_team_n_pes(x), (me / 2) * 2 + 1 < npes ? 2 : 1);
    ST_EQ(shmem_team_my_pe(y), me / 2);
    ST_EQ(shmem_team_n_pes(y), me % 2 ? npes / 2 : (npes + 1) / 2);
    team_colls(x, a, b);
    team_colls(y, a, b);
    sync_rounds(x, bank, 50);
    sync_rounds(y, bank, 50);
    shmem_team_destroy(x);
    shmem_team_destroy(y);
    shmem_barrier_all();
    ST_OK("split_2d");

    /* destroy and create again, more times than there are slots: a new
     * team in a used slot starts from clean signals */
    for (int k = 0; k < 80; k++) {
        shmem_team_t t = SHMEM_TEAM_INVALID;
        ST_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, npes, NULL, 0, &t), 0);
        ST_CHECK(t != SHMEM_TEAM_INVALID);
        sync_rounds(t, bank, 3 + k % 5);
        shmem_team_destroy(t);
    }
    ST_OK("80 teams created and destroyed, slots reused");

    /* running out of slots: the same answer on every PE, then recovery */
    shmem_team_t many[80];
    int made = 0;
    for (; made < 80; made++) {
        many[made] = SHMEM_TEAM_INVALID;
        if (shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, npes, NULL, 0, &many[made]))
            break;
        ST_CHECK(many[made] != SHMEM_TEAM_INVALID);
    }
    ST_CHECK(made < 80);
    ST_CHECK(many[made] == SHMEM_TEAM_INVALID);
    a[0] = made;
    ST_EQ(shmem_long_max_reduce(SHMEM_TEAM_WORLD, b, a, 1), 0);
    ST_EQ(b[0], made);
    for (int k = 0; k < made; k++)
        shmem_team_destroy(many[k]);
    shmem_team_t t2 = SHMEM_TEAM_INVALID;
    ST_EQ(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, npes, NULL, 0, &t2), 0);
    team_colls(t2, a, b);
    shmem_team_destroy(t2);
    ST_OK("out of team slots: refused alike on every PE, then recovered");

    /* bad arguments: non-zero and SHMEM_TEAM_INVALID, on every PE alike */
    shmem_team_t bad = SHMEM_TEAM_WORLD;
    ST_CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 0, 2, NULL, 0, &bad) != 0);
    ST_CHECK(bad == SHMEM_TEAM_INVALID);
    bad = SHMEM_TEAM_WORLD;
    ST_CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, npes, 1, 1, NULL, 0, &bad) != 0);
    ST_CHECK(bad == SHMEM_TEAM_INVALID);
    bad = SHMEM_TEAM_WORLD;
    ST_CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, npes + 1, NULL, 0, &bad) != 0);
    ST_CHECK(bad == SHMEM_TEAM_INVALID);
    bad = SHMEM_TEAM_WORLD;
    ST_CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, 0, NULL, 0, &bad) != 0);
    ST_CHECK(bad == SHMEM_TEAM_INVALID);
    bad = SHMEM_TEAM_WORLD;
    ST_CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, -1, 1, 1, NULL, 0, &bad) != 0);
    ST_CHECK(bad == SHMEM_TEAM_INVALID);
    bad = SHMEM_TEAM_WORLD;
    ST_CHECK(shmem_team_split_strided(SHMEM_TEAM_INVALID, 0, 1, 1, NULL, 0, &bad) != 0);
    ST_CHECK(bad == SHMEM_TEAM_INVALID);
    ST_CHECK(shmem_team_split_2d(SHMEM_TEAM_WORLD, 0, NULL, 0, &bad, NULL, 0, &bad) != 0);
    ST_EQ(shmem_team_my_pe(SHMEM_TEAM_INVALID), -1);
    ST_EQ(shmem_team_n_pes(SHMEM_TEAM_INVALID), -1);
    ST_EQ(shmem_team_translate_pe(SHMEM_TEAM_WORLD, npes, SHMEM_TEAM_WORLD), -1);
    ST_EQ(shmem_team_translate_pe(SHMEM_TEAM_INVALID, 0, SHMEM_TEAM_WORLD), -1);
    ST_CHECK(shmem_team_sync(SHMEM_TEAM_INVALID) != 0);
    ST_CHECK(shmem_long_broadcast(SHMEM_TEAM_INVALID, b, a, 1, 0) != 0);
    ST_CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, b, a, 1, npes) != 0);
    ST_CHECK(shmem_long_sum_reduce(SHMEM_TEAM_INVALID, b, a, 1) != 0);
    ST_CHECK(shmem_team_get_config(SHMEM_TEAM_INVALID, SHMEM_TEAM_NUM_CONTEXTS, &got) != 0);
    shmem_barrier_all();
    ST_OK("bad arguments: non-zero and SHMEM_TEAM_INVALID");

    if (od != SHMEM_TEAM_INVALID)
        shmem_team_destroy(od);
    if (ev != SHMEM_TEAM_INVALID)
        shmem_team_destroy(ev);
    shmem_free(b);
    shmem_free(a);
    shmem_free(bank);
    shmem_finalize();
    return 0;
}
