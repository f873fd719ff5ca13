/* Settings of a layer loaded later: a library opened with dlopen registers
 * its table (vmmc/config.h) and gets the same checks as libvmmc's own; its
 * settings appear in vmmc_config_get() while it is loaded; a process that has
 * not loaded a layer does not warn about that layer's settings, and the
 * layer warns about the names under its prefix it does not declare.
 * Public API only, against the shared libvmmc (as the layer itself). */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "vmmc/config.h"
#include "vtest.h"

static char errpath[] = "/tmp/vmmc-t_config_layer-XXXXXX";

/* Everything written to stderr so far. */
static const char *stderr_text(void)
{
    static char buf[16384];
    fflush(stderr);
    int fd = open(errpath, O_RDONLY);
    VT_CHECK(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static const char *value_of(const char *want, const char **help)
{
    const char *name, *value, *h;
    for (int i = 0; vmmc_config_get(i, &name, &value, NULL, &h) == VMMC_OK; i++) {
        if (!strcmp(name, want)) {
            if (help)
                *help = h;
            return value;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    VT_CHECK(argc == 2); /* the layer library */
    setenv("VMMC_EXT_CFGTEST_WINDOW", "128K", 1);
    setenv("VMMC_EXT_CFGTEST_FLAG", "on", 1);
    setenv("VMMC_EXT_CFGTEST_TYPO", "1", 1);       /* under the layer's prefix: its own check */
    setenv("VMMC_SHMEM_SYMMETRIC_SIZE", "1G", 1);  /* a layer this process never loads */
    setenv("VMMC_NO_SUCH_THING", "1", 1);          /* nobody's: warned about at once */
    setenv("VMMC_EXT_DIRECT_SPIN", "50", 1);       /* refused: no unit */
    setenv("VMMC_EXT_DIRECT_BUF", "2G", 1);        /* refused: out of range */
    unsetenv("VMMC_SETTINGS_CHECKED");
    int efd = mkstemp(errpath);
    VT_CHECK(efd >= 0 && dup2(efd, 2) == 2);
    close(efd);

    VT_STATUS(VMMC_OK, vmmc_config_check());
    const char *err = stderr_text();
    VT_CHECK(strstr(err, "unknown setting VMMC_NO_SUCH_THING"));
    VT_CHECK(!strstr(err, "SHMEM_SYMMETRIC_SIZE") && !strstr(err, "EXT_"));
    VT_CHECK(!value_of("VMMC_EXT_CFGTEST_WINDOW", NULL));

    /* Loading the layer registers its table. */
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        VT_FAIL("dlopen %s: %s", argv[1], dlerror());
    int (*get)(uint64_t *, uint64_t *, int64_t *, int *, const char **) =
        (int (*)(uint64_t *, uint64_t *, int64_t *, int *, const char **))dlsym(lib, "cfgtest_get");
    VT_CHECK(get);
    uint64_t w, p;
    int64_t d;
    int f;
    const char *l;
    VT_STATUS(VMMC_OK, get(&w, &p, &d, &f, &l));
    VT_CHECK(w == 131072 && p == 10000000 && d == 8 && f == 1 && !strcmp(l, "none"));
    err = stderr_text();
    VT_CHECK(strstr(err, "unknown setting VMMC_EXT_CFGTEST_TYPO ignored (cfgtest declares"));
    VT_CHECK(!strstr(err, "EXT_CFGTEST_WINDOW") && !strstr(err, "EXT_DIRECT"));
    const char *help;
    VT_CHECK(value_of("VMMC_EXT_CFGTEST_WINDOW", &help) &&
             !strcmp(value_of("VMMC_EXT_CFGTEST_WINDOW", NULL), "128K"));
    VT_CHECK(strstr(help, "bytes in flight [size in bytes, K/M/G suffixes, 4K .. 1G]"));
    VT_CHECK(value_of("VMMC_EXT_CFGTEST_LABEL", NULL) && value_of("VMMC_SPIN", NULL));
    VT_STATUS(VMMC_OK, vmmc_config_check());

    /* The same refusals as libvmmc's own settings: the entry keeps its
     * default, the registration and every later check say why. */
    static uint64_t spin = 7, buf = 7;
    static const vmmc_config_entry_t direct[] = {
        {"EXT_DIRECT_SPIN", "20us", "spin", VMMC_CONFIG_TIME, &spin, 0, 0},
        {"EXT_DIRECT_BUF", "4K", "buffer", VMMC_CONFIG_SIZE, &buf, 0, 1u << 20},
    };
    vmmc_config_table_t dt = {sizeof(vmmc_config_entry_t), "direct", "EXT_DIRECT_", direct, 2};
    VT_STATUS(VMMC_ERR_INVALID, vmmc_config_register(&dt));
    const char *msg = vmmc_last_error();
    VT_CHECK(strstr(msg, "VMMC_EXT_DIRECT_SPIN=50: give a unit: ns, us, ms, s"));
    VT_CHECK(strstr(msg, "VMMC_EXT_DIRECT_BUF=2G: out of range: valid values are 0 .. 1M"));
    VT_CHECK(spin == 20000 && buf == 4096);
    VT_CHECK(!strcmp(value_of("VMMC_EXT_DIRECT_BUF", NULL), "4K"));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_config_check());
    VT_CHECK(strstr(vmmc_last_error(), "VMMC_EXT_DIRECT_SPIN=50"));
    VT_STATUS(VMMC_OK, vmmc_config_unregister("direct"));
    VT_STATUS(VMMC_OK, vmmc_config_check());
    VT_CHECK(!value_of("VMMC_EXT_DIRECT_BUF", NULL));

    /* Malformed tables are refused whole. */
    static const vmmc_config_entry_t outside[] = {
        {"SPIN2", "1us", "x", VMMC_CONFIG_TIME, &spin, 0, 0}};
    vmmc_config_table_t bad = {sizeof(vmmc_config_entry_t), "bad", "EXT_BAD_", outside, 1};
    VT_STATUS(VMMC_ERR_INVALID, vmmc_config_register(&bad));
    VT_CHECK(strstr(vmmc_last_error(), "start with the prefix EXT_BAD_"));
    VT_CHECK(!value_of("VMMC_SPIN2", NULL));
    bad.entry_size = sizeof(vmmc_config_entry_t) + 8;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_config_register(&bad));
    VT_CHECK(strstr(vmmc_last_error(), "entry_size"));
    VT_STATUS(VMMC_ERR_INVALID, vmmc_config_register(NULL));
    static const vmmc_config_entry_t clash[] = {
        {"EXT_CFGTEST_WINDOW", "1K", "x", VMMC_CONFIG_SIZE, &buf, 0, 0}};
    vmmc_config_table_t dup = {sizeof(vmmc_config_entry_t), "cfgtest", "EXT_CFGTEST_", clash, 1};
    VT_STATUS(VMMC_ERR_EXISTS, vmmc_config_register(&dup)); /* component */
    dup.component = "other";
    VT_STATUS(VMMC_ERR_EXISTS, vmmc_config_register(&dup)); /* name */
    dup.component = "util";
    VT_STATUS(VMMC_ERR_EXISTS, vmmc_config_register(&dup)); /* built into libvmmc */
    dup.component = "Bad Name";
    VT_STATUS(VMMC_ERR_INVALID, vmmc_config_register(&dup));
    VT_CHECK(buf == 4096);

    /* Unloading the layer withdraws its table. */
    VT_CHECK(dlclose(lib) == 0);
    VT_CHECK(!value_of("VMMC_EXT_CFGTEST_WINDOW", NULL) && value_of("VMMC_SPIN", NULL));
    VT_STATUS(VMMC_ERR_NOT_FOUND, vmmc_config_unregister("cfgtest"));
    unlink(errpath);
    printf("t_config_layer: ok\n");
    return 0;
}
