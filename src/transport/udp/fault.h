/* Socket bindings of the UDP link, and the fault injector (a test facility).
 *
 * The link never calls sendmmsg/recvmmsg directly: it goes through a
 * vmmc_udp_bindings_t, so a test can put a layer between the link and the
 * socket that drops, duplicates, reorders and delays datagrams, seeded and
 * reproducible (the idea of Aeron's loss generators).
 *
 * The fault layer acts on received datagrams, in the link's progress thread
 * only (so it needs no lock): each datagram that the kernel hands up is
 *   dropped with probability drop, else
 *   duplicated with probability dup (the copy comes up again later), and
 *   held back with probability reorder (released 50 us .. 1 ms later, after
 *   datagrams that arrived behind it), and
 *   delayed by a uniform random time in [0, delay] if delay is set.
 * At most VMMC_UDP_FAULT_HELD datagrams are held at once; past that, datagrams
 * pass through untouched. Spec syntax (VMMC_UDP_FAULT):
 *   "drop=0.05,dup=0.01,reorder=0.02,delay=200us,seed=7"   (any subset) */
#ifndef VMMC_UDP_FAULT_H
#define VMMC_UDP_FAULT_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before any include (struct mmsghdr)"
#endif
#include <stdint.h>
#include <sys/socket.h>

typedef struct vmmc_udp_bindings {
    /* As sendmmsg(2); returns datagrams sent or -1 with errno. */
    int (*sendmmsg)(void *ctx, int fd, struct mmsghdr *v, unsigned n);
    /* As recvmmsg(2) with MSG_DONTWAIT; 0 or -1/EAGAIN when nothing is ready.
     * Callers must set every entry's msg_name/msg_namelen/msg_iov before
     * each call (the layer may swap entries). */
    int (*recvmmsg)(void *ctx, int fd, struct mmsghdr *v, unsigned n);
    /* Monotonic time (ns) at which held datagrams become due; UINT64_MAX if
     * none. The link's progress thread wakes then and calls recvmmsg. */
    uint64_t (*next_due)(void *ctx);
    void (*destroy)(void *ctx);
    void *ctx;
} vmmc_udp_bindings_t;

typedef struct vmmc_udp_fault_spec {
    double drop, dup, reorder;
    uint64_t delay_ns;
    uint64_t seed;
} vmmc_udp_fault_spec_t;

#define VMMC_UDP_FAULT_HELD 512

/* The plain bindings: the system calls. */
void vmmc_udp_bindings_plain(vmmc_udp_bindings_t *b);

/* Parse a spec string; VMMC_OK or VMMC_ERR_INVALID with a message. */
int vmmc_udp_fault_parse(const char *s, vmmc_udp_fault_spec_t *spec);

/* Bindings that inject faults as @spec says; @max_dgram bounds held copies. */
int vmmc_udp_bindings_fault(vmmc_udp_bindings_t *b, const vmmc_udp_fault_spec_t *spec,
                            unsigned max_dgram);

/* Counters of what the injector did (for tests). */
typedef struct vmmc_udp_fault_stats {
    uint64_t seen, dropped, duplicated, reordered, delayed;
} vmmc_udp_fault_stats_t;
void vmmc_udp_fault_stats(const vmmc_udp_bindings_t *b, vmmc_udp_fault_stats_t *st);

/* Monotonic clock in nanoseconds. */
uint64_t vmmc_udp_now(void);

#endif
