/* A listener's probe table: which accepted connections a vmmc client has
 * probed (PROBED, with the token its HELLO must bring), which the acceptor
 * already decided plain (PLAIN: a late probe is answered NO), which one an
 * acceptor took (CLAIMED).
 *
 * MAP_SHARED anonymous memory made at listen(), so the children that
 * inherit the listener through fork() and accept from it see what the
 * responder (the listening process's sock thread) wrote. No lock: every
 * slot has one state word, changed by CAS. A connection (its client's
 * address and port) may use any slot of a window of SOCK_TAB_WINDOW slots
 * from the one its keyed hash names, so a burst of connections does not
 * collide on single slots (with one slot per connection, 24 connections
 * in 1024 slots collide one time in four, and a collision kept one of them
 * on the kernel). The responder and an acceptor that race on one
 * connection each write their entry (PROBED, PLAIN) in the window, then
 * scan it again: one of them sees the other, and they meet on the PROBED
 * entry's word, where the responder's retract and the acceptor's claim are
 * CASes: whoever changes it first decides. An acceptor that finds the
 * window full of other connections marks it "blocked" before it looks
 * again, and the responder looks at the mark after it wrote PROBED, so a
 * probe can never be answered YES for a connection its acceptor already
 * decided plain.
 *
 * Entries expire (twice VMMC_SOCK_HELLO_TIMEOUT plus VMMC_SOCK_PROBE_TIMEOUT), so
 * a flood of forged probes fills the table only while it lasts; a full
 * table, or a window held by other connections, answers NO: the connection
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

/* The slots a key may use: SOCK_TAB_WINDOW consecutive slots from the one
 * its keyed hash names (fewer if the table is smaller). */
#define SOCK_TAB_WINDOW 8

static uint64_t home_of(sock_tab_t *t, const uint8_t *key)
{
    return vmmc_siphash(t->secret, key, SOCK_KEY_LEN) % t->nslots;
}

static uint64_t window_of(sock_tab_t *t)
{
    return t->nslots < SOCK_TAB_WINDOW ? t->nslots : SOCK_TAB_WINDOW;
}

/* What a key's window holds: its PROBED or CLAIMED entry, its PLAIN entry
 * (both at once only while the responder and the acceptor race, below),
 * and a slot free to take. */
typedef struct scan {
    slot_t *live;             /* PROBED or CLAIMED for the key, or NULL */
    uint64_t live_w, live_tok;
    slot_t *plain;            /* PLAIN for the key, or NULL */
    uint64_t plain_w;
    slot_t *free;             /* a free or expired slot, or NULL */
    uint64_t free_w;
} scan_t;

/* A consistent look at @p key's window: 0, or -1 when slots kept changing
 * under it (the caller then answers the safe way). */
static int scan(sock_tab_t *t, const uint8_t *key, uint64_t now, scan_t *sc)
{
    uint64_t home = home_of(t, key), n = window_of(t);
    for (int spins = 0; spins < 1000; spins++) {
        memset(sc, 0, sizeof *sc);
        int again = 0;
        for (uint64_t i = 0; i < n && !again; i++) {
            slot_t *s = &t->slot[(home + i) % t->nslots];
            uint64_t w = atomic_load(&s->word), tok;
            uint8_t k[SOCK_KEY_LEN];
            if (!live(t, w, now)) {
                if (!sc->free) {
                    sc->free = s;
                    sc->free_w = w;
                }
                continue;
            }
            if (W_STATE(w) == ST_WRITING || !snap(s, w, k, &tok)) {
                again = 1; /* its key is being written: look again */
                continue;
            }
            if (memcmp(k, key, SOCK_KEY_LEN) != 0)
                continue;
            if (W_STATE(w) == ST_PLAIN) {
                sc->plain = s;
                sc->plain_w = w;
            } else if (!sc->live) {
                sc->live = s;
                sc->live_w = w;
                sc->live_tok = tok;
            }
        }
        if (!again)
            return 0;
        sched_yield();
    }
    return -1;
}

/* The responder takes back its PROBED entry (word @p mine): SOCK_TAB_NO, or
 * SOCK_TAB_YES if the acceptor claimed it first (it upgrades). */
static int retract(slot_t *s, uint64_t mine)
{
    uint64_t w = mine;
    if (atomic_compare_exchange_strong(&s->word, &w, W_MAKE(ST_FREE, W_GEN(mine) + 1, 0)))
        return SOCK_TAB_NO;
    return W_STATE(w) == ST_CLAIMED && W_GEN(w) == W_GEN(mine) ? SOCK_TAB_YES : SOCK_TAB_NO;
}

/* The acceptor takes a PROBED entry: 1, or 0 if the responder took it back. */
static int claim_slot(slot_t *s, uint64_t w)
{
    if (W_STATE(w) == ST_CLAIMED)
        return 1;
    return atomic_compare_exchange_strong(&s->word, &w, W_MAKE(ST_CLAIMED, W_GEN(w), W_MS(w)));
}

/* The responder and the acceptor of one connection may race, each writing
 * its own slot of the window (PROBED, PLAIN): each writes, then scans the
 * window again (seq_cst), so at least one of them sees the other's entry.
 * Then they meet on the PROBED entry's word: the responder's retract
 * (PROBED -> FREE, answer NO) and the acceptor's claim (PROBED -> CLAIMED,
 * upgrade) are CASes on it, and exactly one wins. */
int sock_tab_probe(sock_tab_t *t, const uint8_t *key, uint64_t *token)
{
    uint64_t home = home_of(t, key);
    for (int spins = 0; spins < 1000; spins++) {
        uint64_t now = now_ms();
        scan_t sc;
        if (scan(t, key, now, &sc) != 0)
            return SOCK_TAB_NO;
        if (sc.plain)
            return SOCK_TAB_NO; /* decided plain */
        if (sc.live) {
            *token = sc.live_tok; /* a probe sent again: the same answer */
            return SOCK_TAB_YES;
        }
        if (!sc.free) {
            atomic_fetch_add(&t->st.full, 1);
            return SOCK_TAB_NO; /* the window is other connections' */
        }
        uint64_t fresh;
        if (getrandom(&fresh, sizeof fresh, GRND_NONBLOCK) != sizeof fresh || fresh == 0)
            return SOCK_TAB_NO;
        slot_t *ms = sc.free;
        if (!take(ms, sc.free_w, key, ST_PROBED, fresh, now))
            continue;
        uint64_t mine = W_MAKE(ST_PROBED, W_GEN(sc.free_w) + 1, now);
        if (atomic_load(&t->slot[home].block_ms) > now) {
            /* An acceptor decided plain for a connection of this window
             * that had no room in it: maybe this one. */
            atomic_fetch_add(&t->st.blocked, 1);
            if (retract(ms, mine) == SOCK_TAB_NO)
                return SOCK_TAB_NO;
        } else if (scan(t, key, now, &sc) != 0 || sc.plain) {
            if (retract(ms, mine) == SOCK_TAB_NO)
                return SOCK_TAB_NO; /* the acceptor decided plain meanwhile */
        }
        *token = fresh;
        return SOCK_TAB_YES;
    }
    return SOCK_TAB_NO;
}

int sock_tab_claim(sock_tab_t *t, const uint8_t *key, uint64_t *token)
{
    for (int spins = 0; spins < 1000; spins++) {
        scan_t sc;
        if (scan(t, key, now_ms(), &sc) != 0)
            return SOCK_TAB_NONE;
        if (sc.plain)
            return SOCK_TAB_PLAIN;
        if (!sc.live)
            return SOCK_TAB_NONE;
        if (!claim_slot(sc.live, sc.live_w))
            continue;
        *token = sc.live_tok;
        return SOCK_TAB_CLAIMED;
    }
    return SOCK_TAB_NONE;
}

int sock_tab_plain(sock_tab_t *t, const uint8_t *key, uint64_t *token)
{
    uint64_t home = home_of(t, key);
    for (int spins = 0; spins < 1000; spins++) {
        uint64_t now = now_ms();
        scan_t sc;
        if (scan(t, key, now, &sc) != 0)
            return SOCK_TAB_PLAIN;
        if (sc.plain)
            return SOCK_TAB_PLAIN;
        if (sc.live) {
            /* A probe got here first: it is to be upgraded. */
            if (!claim_slot(sc.live, sc.live_w))
                continue;
            *token = sc.live_tok;
            return SOCK_TAB_CLAIMED;
        }
        if (sc.free) {
            slot_t *ms = sc.free;
            if (!take(ms, sc.free_w, key, ST_PLAIN, 0, now))
                continue;
            uint64_t mine = W_MAKE(ST_PLAIN, W_GEN(sc.free_w) + 1, now);
            /* A probe that wrote its entry meanwhile: whoever of the two
             * changes its word first decides (see sock_tab_probe). */
            if (scan(t, key, now, &sc) == 0 && sc.live && W_STATE(sc.live_w) == ST_PROBED &&
                claim_slot(sc.live, sc.live_w)) {
                atomic_compare_exchange_strong(&ms->word, &mine,
                                               W_MAKE(ST_FREE, W_GEN(mine) + 1, 0));
                *token = sc.live_tok;
                return SOCK_TAB_CLAIMED;
            }
            return SOCK_TAB_PLAIN;
        }
        /* The window is other connections': no room to say "plain", so no
         * YES in this window for a while; then look again for a probe of
         * ours that came meanwhile. */
        _Atomic uint64_t *b = &t->slot[home].block_ms;
        uint64_t until = now + t->ttl_ms, cur = atomic_load(b);
        while (cur < until && !atomic_compare_exchange_weak(b, &cur, until))
            ;
        if (scan(t, key, now, &sc) == 0 && sc.live && W_STATE(sc.live_w) == ST_PROBED &&
            claim_slot(sc.live, sc.live_w)) {
            *token = sc.live_tok;
            return SOCK_TAB_CLAIMED;
        }
        return SOCK_TAB_PLAIN;
    }
    return SOCK_TAB_PLAIN;
}

int sock_tab_has(sock_tab_t *t, const uint8_t *key)
{
    scan_t sc;
    return scan(t, key, now_ms(), &sc) == 0 && (sc.live || sc.plain);
}

void sock_tab_release(sock_tab_t *t, const uint8_t *key)
{
    scan_t sc;
    uint64_t w;
    if (scan(t, key, now_ms(), &sc) == 0 && sc.live && W_STATE(w = sc.live_w) == ST_CLAIMED)
        atomic_compare_exchange_strong(&sc.live->word, &w, W_MAKE(ST_FREE, W_GEN(w) + 1, 0));
}
