/* Receive side of the upcall table (tl_up.c) for transports that deliver
 * data themselves (udp): a progress thread that received a write, a read
 * request or an atomic for one of this endpoint's exports hands it to the
 * core here. The core resolves the export
 * (id + generation), checks the capability token and the bounds, honours
 * transfer redirection, and queues notifications after the data. Each
 * returns a vmmc status; nothing is written on error. */
#ifndef VMMC_CORE_DELIVER_H
#define VMMC_CORE_DELIVER_H

#include <stddef.h>
#include <stdint.h>

struct vmmc_ep;

/* @head_last: the sender asked for VMMC_SEND_HEAD_LAST (all but the first 16
 * bytes, then word 0, then word 1 with release; ignored where it cannot
 * hold: fewer than 16 bytes, an unaligned place, a redirectable export). */
int vmmc_deliver_write(struct vmmc_ep *ep, uint32_t export_id, uint32_t gen, const uint64_t token[2],
                       uint64_t off, const void *src, size_t len, int head_last);
int vmmc_deliver_read(struct vmmc_ep *ep, uint32_t export_id, uint32_t gen, const uint64_t token[2],
                      uint64_t off, void *dst, size_t len);
/* Execute a remote atomic for @sender (vmmc_atomic_op_t @op on the word
 * at @off; @size its width or'ed with its type, as in vmmc_atomic), checked
 * like a write plus operation and type, the importer list, the word's
 * alignment in memory and, with @fetch, VMMC_EXPORT_READ; *@old gets the
 * value before (0 without @fetch). */
int vmmc_deliver_atomic(struct vmmc_ep *ep, int sender, uint32_t export_id, uint32_t gen,
                        const uint64_t token[2], uint64_t off, int op, int size, int fetch,
                        uint64_t operand, uint64_t compare, uint64_t *old);
#endif
