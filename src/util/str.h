/* Small string checks shared by the layers that parse addresses. */
#ifndef VMMC_UTIL_STR_H
#define VMMC_UTIL_STR_H

#include <stddef.h>
#include <string.h>

#define VMMC_HEX_DIGITS "0123456789abcdef"
#define VMMC_DEC_DIGITS "0123456789"

/* Is every one of the @n bytes at @v in @set? */
static inline int vmmc_all_of(const char *v, size_t n, const char *set)
{
    for (size_t i = 0; i < n; i++)
        if (!v[i] || !strchr(set, v[i]))
            return 0;
    return 1;
}

#endif
