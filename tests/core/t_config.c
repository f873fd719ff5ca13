/* Unit tests of the settings parsers and the settings registry: units are
 * required for times, overflowing and out-of-range values are refused with
 * the valid range (vmmc_init fails and says why), every layer's table is
 * known in a program that uses only the core, and the job's variables are
 * listed. */
#include <string.h>

#include "util/config.h"
#include "vtest.h"

static const char *value_of(const char *want)
{
    const char *name, *value;
    for (int i = 0; vmmc_config_get(i, &name, &value, NULL, NULL) == VMMC_OK; i++)
        if (!strcmp(name, want))
            return value;
    return NULL;
}

int main(void)
{
    uint64_t v;
    int b;
    VT_CHECK(vmmc_cfg_parse_size("64K", &v) == 0 && v == 65536);
    VT_CHECK(vmmc_cfg_parse_size("1M", &v) == 0 && v == 1048576);
    VT_CHECK(vmmc_cfg_parse_size("2GiB", &v) == 0 && v == 2ull << 30);
    VT_CHECK(vmmc_cfg_parse_size("100", &v) == 0 && v == 100);
    VT_CHECK(vmmc_cfg_parse_size("1.5K", &v) == 0 && v == 1536);
    VT_CHECK(vmmc_cfg_parse_size("", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_size("12Q", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_size("-1", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_size("inf", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_size("nan", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_size("16777216T", &v) == -3); /* 2^64 */
    VT_CHECK(vmmc_cfg_parse_size("99999999999999999999", &v) == -3);
    VT_CHECK(vmmc_cfg_parse_time("50us", &v) == 0 && v == 50000);
    VT_CHECK(vmmc_cfg_parse_time("2s", &v) == 0 && v == 2000000000ull);
    VT_CHECK(vmmc_cfg_parse_time("10ms", &v) == 0 && v == 10000000ull);
    VT_CHECK(vmmc_cfg_parse_time("7ns", &v) == 0 && v == 7);
    VT_CHECK(vmmc_cfg_parse_time("0", &v) == 0 && v == 0);
    VT_CHECK(vmmc_cfg_parse_time("7", &v) == -2); /* a unit is required */
    VT_CHECK(vmmc_cfg_parse_time("7 parsecs", &v) == -1);
    VT_CHECK(vmmc_cfg_parse_time("999999999999s", &v) == -3);
    VT_CHECK(vmmc_cfg_parse_bool("yes", &b) == 0 && b == 1);
    VT_CHECK(vmmc_cfg_parse_bool("OFF", &b) == 0 && b == 0);
    VT_CHECK(vmmc_cfg_parse_bool("maybe", &b) != 0);

    /* Refused values: no unit, out of range, too large. Set before the
     * settings are first read (once per process). */
    setenv("VMMC_SPIN", "50", 1);
    setenv("VMMC_UDP_WINDOW", "5000", 1);
    setenv("VMMC_ASYNC_INLINE", "99999999999T", 1);
    setenv("VMMC_LOG_LEVEL", "2", 1);           /* a good value is taken */
    setenv("VMMC_FM_RING", "64K", 1);           /* FM's: this program uses no FM */
    vmmc_ep_t *ep = NULL;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_init(NULL, &ep));
    const char *msg = vmmc_last_error();
    VT_CHECK(strstr(msg, "VMMC_SPIN=50") && strstr(msg, "give a unit: ns, us, ms, s"));
    VT_CHECK(strstr(msg, "VMMC_UDP_WINDOW=5000") && strstr(msg, "2 .. 1024"));
    VT_CHECK(strstr(msg, "VMMC_ASYNC_INLINE=99999999999T") && strstr(msg, "too large"));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_config_check()); /* reported again, every time */
    VT_CHECK(strstr(vmmc_last_error(), "VMMC_SPIN=50"));

    /* A refused value shows what is used: the default, never the value
     * given or a clamped one. */
    const char *name, *value, *deflt, *help;
    for (int i = 0; vmmc_config_get(i, &name, &value, &deflt, &help) == VMMC_OK; i++) {
        VT_CHECK(name && value && deflt && help && help[0]);
        if (!strcmp(name, "VMMC_SPIN") || !strcmp(name, "VMMC_UDP_WINDOW") ||
            !strcmp(name, "VMMC_ASYNC_INLINE"))
            VT_CHECK(strcmp(value, deflt) == 0);
        if (!strcmp(name, "VMMC_UDP_WINDOW"))
            VT_CHECK(strstr(help, "[integer, 2 .. 1024]"));
        if (!strcmp(name, "VMMC_SPIN"))
            VT_CHECK(strstr(help, "unit required"));
    }
    VT_CHECK(value_of("VMMC_LOG_LEVEL") && !strcmp(value_of("VMMC_LOG_LEVEL"), "2"));
    /* Every layer's table, in a program that only uses the core. */
    VT_CHECK(value_of("VMMC_FM_RING") && !strcmp(value_of("VMMC_FM_RING"), "64K"));
    VT_CHECK(value_of("VMMC_UDP_PEER_TIMEOUT") && value_of("VMMC_IMPORT_TIMEOUT"));
    /* The job's variables are listed too. */
    VT_CHECK(value_of("VMMC_RANK") && value_of("VMMC_SIZE") && value_of("VMMC_BOOTSTRAP"));
    VT_STATUS(VMMC_ERR_NOT_FOUND, vmmc_config_get(-1, &name, &value, &deflt, &help));
    for (int s = -50; s <= 2; s++)
        VT_CHECK(vmmc_strerror(s) != NULL);
    printf("t_config: ok\n");
    return 0;
}
