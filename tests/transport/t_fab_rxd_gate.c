/* udp;ofi_rxd and libfabric's version (src/transport/fabric/fab_prov.c):
 * before 2.4 the udp provider writes past a full completion queue, and rxd
 * over it loses completions under load. So, on such a libfabric:
 *   - an endpoint asked for udp;ofi_rxd by name does not open: the error is
 *     VMMC_ERR_UNSUPPORTED and says why and what to use instead;
 *   - with VMMC_FABRIC_RXD_ANYWAY=yes it opens on udp;ofi_rxd;
 *   - with no provider named, the transport never picks udp;ofi_rxd: with
 *     FI_PROVIDER=udp (nothing else fits) it does not open, with the same
 *     error.
 * On libfabric 2.4 and later, udp;ofi_rxd opens without the setting.
 * Each case runs in a child process of its own (settings are read once).
 * Skips (77) where libfabric or its udp provider is missing. */
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "transport/fabric/fab_int.h"
#include "vtest.h"

extern char **environ;

/* The provider the open endpoint uses, from its address (fabp=). */
static void provider_of(vmmc_ep_t *ep, char *out, size_t cap)
{
    char card[VMMC_ADDR_MAX + 1];
    vt_ep_addr(ep, card);
    VT_CHECK(vmmc_card_get(card, "fabp", out, cap));
}

/* Child: open an endpoint and report. 0: opened on udp;ofi_rxd; 10: opened
 * on another provider; 20: refused as the gate refuses; 77: no fabric. */
static int child(void)
{
    vmmc_ep_t *ep;
    int rc = vmmc_ep_open(NULL, &ep);
    if (rc == VMMC_ERR_UNSUPPORTED && strstr(vmmc_last_error(), "udp;ofi_rxd is not used") &&
        strstr(vmmc_last_error(), "fixed in libfabric 2.4") &&
        strstr(vmmc_last_error(), "VMMC_FABRIC_RXD_ANYWAY=yes")) {
        printf("  refused: %s\n", vmmc_last_error());
        return 20;
    }
    if (rc != VMMC_OK) {
        printf("  no fabric endpoint: %s\n", vmmc_last_error());
        return 77;
    }
    char prov[64];
    provider_of(ep, prov, sizeof prov);
    printf("  opened on %s\n", prov);
    VT_OK(vmmc_ep_close(ep));
    return !strcmp(prov, "udp+ofi_rxd") ? 0 : 10;
}

/* Run the child with @env (NULL-terminated "K=V" strings) added. */
static int run(const char *self, const char *what, const char *const *env)
{
    char *envp[256];
    int n = 0;
    for (char **e = environ; *e && n < 200; e++)
        if (strncmp(*e, "VMMC_FABRIC_", 12) && strncmp(*e, "FI_PROVIDER=", 12))
            envp[n++] = *e;
    for (int i = 0; env[i]; i++)
        envp[n++] = (char *)env[i];
    envp[n] = NULL;
    printf("%s:\n", what);
    fflush(stdout);
    pid_t pid;
    char *argv[] = {(char *)self, "child", NULL};
    VT_CHECK(posix_spawn(&pid, self, NULL, NULL, argv, envp) == 0);
    int st;
    VT_CHECK(waitpid(pid, &st, 0) == pid);
    VT_CHECK(WIFEXITED(st));
    return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "child"))
        return child();
    if (vmmc_fab__dl_load() != VMMC_OK)
        VT_SKIP("%s", vmmc_last_error());
    uint32_t v = fi_version();
    int old = FI_VERSION_LT(v, FI_VERSION(2, 4));
    printf("libfabric %u.%u: udp;ofi_rxd %s\n", FI_MAJOR(v), FI_MINOR(v),
           old ? "overruns its completion queue (before 2.4)" : "is fixed (2.4 or later)");

    static const char *const named[] = {"VMMC_TRANSPORT=fabric",
                                        "VMMC_FABRIC_PROVIDER=udp+ofi_rxd", NULL};
    int rc = run(argv[0], "udp;ofi_rxd named", named);
    if (rc == 77)
        VT_SKIP("the fabric transport does not open here");
    VT_CHECK(rc == (old ? 20 : 0));

    static const char *const anyway[] = {"VMMC_TRANSPORT=fabric",
                                         "VMMC_FABRIC_PROVIDER=udp+ofi_rxd",
                                         "VMMC_FABRIC_RXD_ANYWAY=yes", NULL};
    rc = run(argv[0], "udp;ofi_rxd named, VMMC_FABRIC_RXD_ANYWAY=yes", anyway);
    if (rc == 77)
        VT_SKIP("libfabric has no udp;ofi_rxd here");
    VT_CHECK(rc == 0);

    /* none named, FI_PROVIDER=udp: udp;ofi_rxd is the only one that fits,
     * and the choice passes over it on an old libfabric (the same error) */
    static const char *const choice[] = {"VMMC_TRANSPORT=fabric", "FI_PROVIDER=udp", NULL};
    rc = run(argv[0], "no provider named, FI_PROVIDER=udp", choice);
    VT_CHECK(rc == (old ? 20 : 0));
    static const char *const choice2[] = {"VMMC_TRANSPORT=fabric", "FI_PROVIDER=udp,tcp", NULL};
    rc = run(argv[0], "no provider named, FI_PROVIDER=udp,tcp", choice2);
    VT_CHECK(rc == 0 || rc == 10);
    printf("t_fab_rxd_gate: ok\n");
    return 0;
}
