/* What the loop test transport (loop.c) saw, for t_tl_loop.c. */
#ifndef VMMC_TESTS_TL_LOOP_H
#define VMMC_TESTS_TL_LOOP_H

#include <stdatomic.h>

#include "vmmc/vmmc.h"

extern _Atomic int vmmc_loop_opened, vmmc_loop_closed, vmmc_loop_connects;
extern char vmmc_loop_last_card[VMMC_ADDR_MAX];

#endif
