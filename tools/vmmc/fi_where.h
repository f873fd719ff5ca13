/* Where the libfabric provider libvmmc-fi.so is, found relative to this
 * program: <dir of vmmc>/fi in the build tree, <prefix>/<libdir>/libfabric
 * once installed (the places CMake puts it). Shared by `vmmc info` and
 * `vmmc mpirun`. */
#ifndef VMMC_TOOLS_FI_WHERE_H
#define VMMC_TOOLS_FI_WHERE_H

#include <stddef.h>

#define VMMC_FI_LIB "libvmmc-fi.so"

/* 0: @dir (size @n) is the directory holding libvmmc-fi.so; -1: not found,
 * and @dir lists the places looked at ("a, b"). */
int vmmc_fi_dir(char *dir, size_t n);

#endif
