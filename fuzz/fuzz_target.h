/* The libFuzzer entry points a target defines (LLVMFuzzerInitialize is
 * optional); fuzz_replay.c calls them without libFuzzer. */
#ifndef VMMC_FUZZ_TARGET_H
#define VMMC_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#endif
