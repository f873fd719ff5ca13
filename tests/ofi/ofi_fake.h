/* Fakes of what the provider's CQs and counters use from the rest of the
 * provider (src/ofi/ofi_cq.c, ofi_cntr.c, ofi_bound.c are tested alone): a
 * domain, endpoints whose progress and wait fd the test drives, and the
 * provider's settings and log. */
#ifndef VMMC_TESTS_OFI_FAKE_H
#define VMMC_TESTS_OFI_FAKE_H

#include "ofi/ofi.h"

/* A fake endpoint: its wait fd is an eventfd the test writes (fd -1: none
 * yet, as before it is enabled); its progress drains that fd and completes
 * `pending` successes into `cq` (op_context: the fake) and `cntr`. */
#define NEP 4
struct fake_ep {
    vofi_ep_t ep;
    int fd;
    int evfd; /* made by fake_setup(); fd is set to it */
    _Atomic int progressed;
    _Atomic int pending;
    vofi_cq_t *cq;
    vofi_cntr_t *cntr;
};
extern struct fake_ep feps[NEP];
extern vofi_fabric_t fab; /* api_version: what the "application" asked for */
extern vofi_domain_t dom; /* fi_cq_open / fi_cntr_open work on it */
extern char last_warn[256];
extern struct fi_ops_domain dom_ops; /* opens our CQs and counters */

void fake_setup(void);
/* Work arrives at a fake endpoint: its fd becomes readable. */
void ep_arrive(struct fake_ep *f, int n);
/* Is @p fd readable now? */
int readable(int fd);

#endif /* VMMC_TESTS_OFI_FAKE_H */
