/* Minimal test helpers: every failure names the file, line, expression and
 * the library's last error, then exits non-zero. Exit 77 means "skipped". */
#ifndef VMMC_TESTS_VTEST_H
#define VMMC_TESTS_VTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmmc/vmmc.h"

#define VT_FAIL(...)                                                                  \
    do {                                                                              \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                         \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fprintf(stderr, " [last error: %s]\n", vmmc_last_error());                   \
        fflush(stderr);                                                               \
        exit(1);                                                                      \
    } while (0)

#define VT_CHECK(cond)                                                                \
    do {                                                                              \
        if (!(cond))                                                                  \
            VT_FAIL("check failed: %s", #cond);                                       \
    } while (0)

/* Expect a status: VT_STATUS(VMMC_OK, vmmc_send(...)). */
#define VT_STATUS(expect, expr)                                                       \
    do {                                                                              \
        int vt_s_ = (expr);                                                           \
        if (vt_s_ != (expect))                                                        \
            VT_FAIL("%s returned %d (%s), expected %d (%s)", #expr, vt_s_,           \
                    vmmc_strerror(vt_s_), (int)(expect), vmmc_strerror(expect));      \
    } while (0)

#define VT_OK(expr) VT_STATUS(VMMC_OK, expr)

#define VT_SKIP(...)                                                                  \
    do {                                                                              \
        printf("SKIP: ");                                                             \
        printf(__VA_ARGS__);                                                          \
        printf("\n");                                                                 \
        fflush(stdout);                                                               \
        exit(77);                                                                     \
    } while (0)

static inline double vt_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Is the peer reached through the udp transport (forced, or on another
 * host)? Then regions cannot be mapped and sends are carried by datagrams. */
static inline int vt_remote(void)
{
    const char *t = getenv("VMMC_TRANSPORT");
    return (t && !strcmp(t, "udp")) || getenv("VMMC_BOOTSTRAP") != NULL;
}

/* Skip (exit 77) a remote run when this build has no udp transport. */
static inline void vt_require_transport(void)
{
    if (!vt_remote())
        return;
    const char *k, *v;
    for (int i = 0; vmmc_info_get(i, &k, &v) == VMMC_OK; i++)
        if (!strcmp(k, "transport.udp") && strncmp(v, "yes", 3) != 0)
            VT_SKIP("this run needs the udp transport, which is not built (%s)", v);
}

/* Deterministic per-test pseudo-random numbers (xorshift64*). */
static inline unsigned long long vt_rand(unsigned long long *s)
{
    unsigned long long x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* The value of @p ep's counter @p name (vmmc_counter_get); fails the test
 * if the endpoint has no such counter. */
static inline uint64_t vt_counter(vmmc_ep_t *ep, const char *name)
{
    const char *k;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &k, &v) == VMMC_OK; i++)
        if (!strcmp(k, name))
            return v;
    VT_FAIL("no counter %s", name);
}

/* @p ep's address into @p buf (VMMC_ADDR_MAX + 1 bytes), NUL-terminated: its length. */
static inline size_t vt_ep_addr(vmmc_ep_t *ep, char *buf)
{
    size_t len = VMMC_ADDR_MAX;
    VT_OK(vmmc_ep_addr(ep, buf, &len));
    buf[len] = 0;
    return len;
}

/* Connect @p ep to the endpoint whose printed address is @p text: the peer handle. */
static inline int vt_connect_text(vmmc_ep_t *ep, const char *text)
{
    char addr[VMMC_ADDR_MAX];
    size_t len = sizeof addr;
    int peer;
    VT_OK(vmmc_addr_parse(text, addr, &len));
    VT_OK(vmmc_connect(ep, addr, len, &peer));
    return peer;
}

#endif
