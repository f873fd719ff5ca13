/* A listener's probe table: which accepted connections a vmmc client has
 * probed (PROBED, with the token its HELLO must bring), which the acceptor
 * already decided plain (PLAIN: a late probe is answered NO), which one an
 * acceptor took (CLAIMED).
 *
 * MAP_SHARED anonymous memory made at listen(), so the children that
 * inherit the listener through fork() and accept from it see what the
 * responder (the listening process's sock thread) wrote. No lock: every
 * slot has one state word, changed by CAS, and a connection (its client's
 * address and port) has exactly one slot, chosen by a keyed hash. So the
 * responder and an acceptor that race on one connection meet on one word:
 * whoever changes it first decides, and the other sees it. An acceptor that
 * finds the slot taken by another connection marks it "blocked" before it
 * looks again, and the responder looks at the mark after it wrote PROBED
 * (each writes, then reads the other's word: one of them sees the other),
 * so a probe can never be answered YES for a connection its acceptor
 * already decided plain.
 *
 * Entries expire (twice VMMC_SOCK_HELLO_TIMEOUT plus VMMC_SOCK_PROBE_TIMEOUT), so
 * a flood of forged probes fills the table only while it lasts; a full
 * table, or a slot held by another connection, answers NO: the connection
 * stays on the kernel, which is always correct. The state word holds the
 * state, a generation and a time stamp; a reader copies a slot's key
 * between two reads of the word and believes it only if the word did not
 * change (a slot reused meanwhile has a new generation). */
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "sock/sock_probe.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/siphash.h"

enum { ST_FREE = 0, ST_WRITING = 1, ST_PROBED = 2, ST_PLAIN = 3, ST_CLAIMED = 4 };

#define W_STATE(w) ((unsigned)((w) & 0xf))
#define W_GEN(w) (((w) >> 4) & 0xfffff)
#define W_MS(w) ((w) >> 24)
#define W_MAKE(st, gen, ms) ((uint64_t)(st) | ((uint64_t)((gen) & 0xfffff) << 4) | ((uint64_t)(ms) << 24))

typedef struct slot {
    _Atomic uint64_t word;
    _Atomic uint64_t block_ms;  /* no YES on this slot before this time */
    uint64_t token;
    uint8_t key[SOCK_KEY_LEN];
    uint8_t pad[6];
} slot_t;

struct sock_tab {
    uint64_t secret[2];
    uint64_t nslots;
    uint64_t ttl_ms;
    sock_tab_stats_t st;        /* atomics, shared with the children */
    slot_t slot[];
};

static uint64_t now_ms(void)
{
    return vmmc_now_ns() / 1000000u + 1; /* never 0 */
}

sock_tab_t *sock_tab_new(uint64_t nslots, uint64_t ttl_ms)
{
    size_t sz = sizeof(sock_tab_t) + nslots * sizeof(slot_t);
    void *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        vmmc_error_sys("sock: cannot map a probe table of %llu slots", (unsigned long long)nslots);
        return NULL;
    }
    sock_tab_t *t = m;
    if (getrandom(t->secret, sizeof t->secret, 0) != (ssize_t)sizeof t->secret) {
        vmmc_error_sys("sock: getrandom for the probe table");
        munmap(m, sz);
        return NULL;
    }
    t->nslots = nslots;
    t->ttl_ms = ttl_ms;
    return t;
}

void sock_tab_free(sock_tab_t *t)
{
    if (t)
        munmap(t, sizeof(sock_tab_t) + t->nslots * sizeof(slot_t));
}

sock_tab_stats_t *sock_tab_stats(sock_tab_t *t)
{
    return &t->st;
}

static slot_t *slot_of(sock_tab_t *t, const uint8_t *key)
{
    return &t->slot[vmmc_siphash(t->secret, key, SOCK_KEY_LEN) % t->nslots];
}

static int live(sock_tab_t *t, uint64_t w, uint64_t now)
{
    return W_STATE(w) != ST_FREE && W_MS(w) + t->ttl_ms > now;
}

/* Copy the slot's key and token as of word @p w: 1 if consistent. */
static int snap(slot_t *s, uint64_t w, uint8_t *key, uint64_t *token)
{
    memcpy(key, s->key, SOCK_KEY_LEN);
    *token = s->token;
    atomic_thread_fence(memory_order_acquire);
    return atomic_load(&s->word) == w;
}

/* Take a free or expired slot (word @p w) for @p key in state @p st. */
static int take(slot_t *s, uint64_t w, const uint8_t *key, int st, uint64_t token, uint64_t now)
{
    uint64_t gen = W_GEN(w) + 1;
    if (!atomic_compare_exchange_strong(&s->word, &w, W_MAKE(ST_WRITING, gen, now)))
        return 0;
    memcpy(s->key, key, SOCK_KEY_LEN);
    s->token = token;
    atomic_store(&s->word, W_MAKE(st, gen, now)); /* seq_cst: before reading block_ms */
    return 1;
}

int sock_tab_probe(sock_tab_t *t, const uint8_t *key, uint64_t *token)
{
    slot_t *s = slot_of(t, key);
    for (int spins = 0; spins < 1000; spins++) {
        uint64_t now = now_ms();
        uint64_t w = atomic_load(&s->word);
        uint8_t k[SOCK_KEY_LEN];
        uint64_t tok;
        if (!live(t, w, now)) {
            uint64_t fresh;
            if (getrandom(&fresh, sizeof fresh, GRND_NONBLOCK) != sizeof fresh || fresh == 0)
                return SOCK_TAB_NO;
            if (!take(s, w, key, ST_PROBED, fresh, now))
                continue;
            if (atomic_load(&s->block_ms) > now) {
                /* An acceptor decided plain for a connection of this slot
                 * that had no room in it: maybe this one. */
                uint64_t mine = W_MAKE(ST_PROBED, W_GEN(w) + 1, now);
                atomic_compare_exchange_strong(&s->word, &mine, W_MAKE(ST_FREE, W_GEN(w) + 2, 0));
                atomic_fetch_add(&t->st.blocked, 1);
                return SOCK_TAB_NO;
            }
            *token = fresh;
            return SOCK_TAB_YES;
        }
        if (W_STATE(w) == ST_WRITING) {
            sched_yield();
            continue;
        }
        if (!snap(s, w, k, &tok))
            continue;
        if (memcmp(k, key, SOCK_KEY_LEN) != 0) {
            atomic_fetch_add(&t->st.full, 1);
            return SOCK_TAB_NO; /* the slot is another connection's */
        }
        if (W_STATE(w) == ST_PLAIN)
            return SOCK_TAB_NO;
        *token = tok; /* a probe sent again: the same answer */
        return SOCK_TAB_YES;
    }
    return SOCK_TAB_NO;
}

int sock_tab_claim(sock_tab_t *t, const uint8_t *key, uint64_t *token)
{
    slot_t *s = slot_of(t, key);
    for (int spins = 0; spins < 1000; spins++) {
        uint64_t now = now_ms();
        uint64_t w = atomic_load(&s->word);
        uint8_t k[SOCK_KEY_LEN];
        uint64_t tok;
        if (!live(t, w, now))
            return SOCK_TAB_NONE;
        if (W_STATE(w) == ST_WRITING) {
            sched_yield();
            continue;
        }
        if (!snap(s, w, k, &tok))
            continue;
        if (memcmp(k, key, SOCK_KEY_LEN) != 0)
            return SOCK_TAB_NONE;
        if (W_STATE(w) == ST_PLAIN)
            return SOCK_TAB_PLAIN;
        if (W_STATE(w) == ST_CLAIMED) {
            *token = tok;
            return SOCK_TAB_CLAIMED;
        }
        if (!atomic_compare_exchange_strong(&s->word, &w,
                                            W_MAKE(ST_CLAIMED, W_GEN(w), W_MS(w))))
            continue;
        *token = tok;
        return SOCK_TAB_CLAIMED;
    }
    return SOCK_TAB_NONE;
}

int sock_tab_plain(sock_tab_t *t, const uint8_t *key, uint64_t *token)
{
    slot_t *s = slot_of(t, key);
    for (int spins = 0; spins < 1000; spins++) {
        uint64_t now = now_ms();
        uint64_t w = atomic_load(&s->word);
        uint8_t k[SOCK_KEY_LEN];
        uint64_t tok;
        if (!live(t, w, now)) {
            if (take(s, w, key, ST_PLAIN, 0, now))
                return SOCK_TAB_PLAIN;
            continue;
        }
        if (W_STATE(w) != ST_WRITING) {
            if (!snap(s, w, k, &tok))
                continue;
            if (memcmp(k, key, SOCK_KEY_LEN) == 0) {
                if (W_STATE(w) == ST_PLAIN)
                    return SOCK_TAB_PLAIN;
                /* A probe got here first: it is to be upgraded. */
                return sock_tab_claim(t, key, token);
            }
        }
        /* Another connection's slot: no room to say "plain", so no YES on
         * this slot for a while; then look again for a probe of ours that
         * came meanwhile. */
        uint64_t until = now + t->ttl_ms, cur = atomic_load(&s->block_ms);
        while (cur < until && !atomic_compare_exchange_weak(&s->block_ms, &cur, until))
            ;
        w = atomic_load(&s->word);
        if (live(t, w, now) && W_STATE(w) == ST_PROBED && snap(s, w, k, &tok) &&
            memcmp(k, key, SOCK_KEY_LEN) == 0)
            return sock_tab_claim(t, key, token);
        if (W_STATE(w) == ST_WRITING) {
            sched_yield();
            continue;
        }
        return SOCK_TAB_PLAIN;
    }
    return SOCK_TAB_PLAIN;
}

int sock_tab_has(sock_tab_t *t, const uint8_t *key)
{
    slot_t *s = slot_of(t, key);
    for (int spins = 0; spins < 1000; spins++) {
        uint64_t w = atomic_load(&s->word);
        uint8_t k[SOCK_KEY_LEN];
        uint64_t tok;
        if (!live(t, w, now_ms()))
            return 0;
        if (W_STATE(w) == ST_WRITING) {
            sched_yield();
            continue;
        }
        if (snap(s, w, k, &tok))
            return memcmp(k, key, SOCK_KEY_LEN) == 0;
    }
    return 0;
}

void sock_tab_release(sock_tab_t *t, const uint8_t *key)
{
    slot_t *s = slot_of(t, key);
    uint64_t w = atomic_load(&s->word);
    uint8_t k[SOCK_KEY_LEN];
    uint64_t tok;
    if (W_STATE(w) == ST_CLAIMED && snap(s, w, k, &tok) && memcmp(k, key, SOCK_KEY_LEN) == 0)
        atomic_compare_exchange_strong(&s->word, &w, W_MAKE(ST_FREE, W_GEN(w) + 1, 0));
}
