/* Unit tests of the settings parsers and the settings table. */
#include <string.h>

#include "util/config.h"
#include "vtest.h"

int main(void)
{
    uint64_t v;
    int b;
    VT_CHECK(vmmc_cfg_parse_size("64K", &v) == 0 && v == 65536);
    VT_CHECK(vmmc_cfg_parse_size("1M", &v) == 0 && v == 1048576);
    VT_CHECK(vmmc_cfg_parse_size("2GiB", &v) == 0 && v == 2ull << 30);
    VT_CHECK(vmmc_cfg_parse_size("100", &v) == 0 && v == 100);
    VT_CHECK(vmmc_cfg_parse_size("", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_size("12Q", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_size("-1", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_time("50us", &v) == 0 && v == 50000);
    VT_CHECK(vmmc_cfg_parse_time("2s", &v) == 0 && v == 2000000000ull);
    VT_CHECK(vmmc_cfg_parse_time("10ms", &v) == 0 && v == 10000000ull);
    VT_CHECK(vmmc_cfg_parse_time("7", &v) == 0 && v == 7);
    VT_CHECK(vmmc_cfg_parse_time("7 parsecs", &v) != 0);
    VT_CHECK(vmmc_cfg_parse_bool("yes", &b) == 0 && b == 1);
    VT_CHECK(vmmc_cfg_parse_bool("OFF", &b) == 0 && b == 0);
    VT_CHECK(vmmc_cfg_parse_bool("maybe", &b) != 0);
    /* Link the core (its settings table comes with it in a static link). */
    const char *k, *val;
    VT_OK(vmmc_info_get(0, &k, &val));
    /* A bad value falls back to the default with a warning. */
    setenv("VMMC_SPIN", "fast", 1);
    const char *name, *value, *deflt, *help;
    int found = 0;
    for (int i = 0; vmmc_config_get(i, &name, &value, &deflt, &help) == VMMC_OK; i++) {
        VT_CHECK(name && value && deflt && help && help[0]);
        if (!strcmp(name, "VMMC_SPIN")) {
            found = 1;
            VT_CHECK(strcmp(value, deflt) == 0);
        }
    }
    VT_CHECK(found);
    VT_STATUS(VMMC_ERR_NOT_FOUND, vmmc_config_get(-1, &name, &value, &deflt, &help));
    for (int s = -50; s <= 2; s++)
        VT_CHECK(vmmc_strerror(s) != NULL);
    printf("t_config: ok\n");
    return 0;
}
