/* C11 type-generic OpenSHMEM interfaces: included by shmem.h. */
#ifndef VMMC_SHMEM_GENERIC_H
#define VMMC_SHMEM_GENERIC_H
#endif
