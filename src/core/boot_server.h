/* The bootstrap rendezvous server: its interface is public (vmmc/launch.h),
 * so that launchers link the library instead of compiling its sources. The
 * TCP bootstrap (boot.c) runs the same server in rank 0's thread. */
#ifndef VMMC_CORE_BOOT_SERVER_H
#define VMMC_CORE_BOOT_SERVER_H

#include "vmmc/launch.h"

#endif
