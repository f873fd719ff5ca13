/* Shared by t_ofi_addr.c (the compact address) and t_ofi_av.c (address
 * vectors): the packed layout of ofi_addr.c, as a hostile writer sees it. */
#ifndef VMMC_TESTS_T_OFI_ADDR_H
#define VMMC_TESTS_T_OFI_ADDR_H

#include <stdarg.h>

#include "ofi/ofi.h"
#include "vtest.h"

#define PK 63 /* bytes of a packed name */
enum { O_LEN = 0, O_VER = 1, O_FLAGS = 2, O_HOST = 3, O_PID = 11, O_SHM = 15, O_UDP = 23,
       O_PORT = 39, O_UTOK = 41, O_UID = 57, O_SUM = 61 };
enum { F_SHM = 1, F_UDP4 = 2, F_UDP6 = 4, F_UTOK = 8, F_UID = 16, F_ULO = 32 };

/* Make the checksum of @p p right again (after changing a field). */
void reseal(uint8_t *p);
/* AVs through fi_av_*: @p pa, @p pb packed names of two endpoints. */
void test_av(const uint8_t *pa, const uint8_t *pb, const char *own);

#endif
