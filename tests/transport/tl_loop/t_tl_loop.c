/* A third transport, added by a folder: this program is linked with the
 * library's objects, the shm and udp transports and the loop transport of
 * tl_loop/loop.c, listed by the same cmake/tl_list.cmake that lists the
 * library's own. The core is not rebuilt for it.
 *   auto: `vmmc info` facts list it; its ep_open runs on every endpoint and
 *         its key is in the address, checked by its own rule; a peer whose
 *         address has its key is given to it (the highest reach), so the
 *         first operation fails with its error; its counter follows the
 *         core's and udp's; every endpoint that opened it closes it.
 *   shm:  VMMC_TRANSPORT=shm: it is opened but chosen for nobody; an import
 *         and a send between two endpoints of this process go over shm.
 *   bad:  VMMC_TRANSPORT=<unknown>: the endpoint is refused, with the
 *         registered names (loop among them) in the message. */
#include <string.h>

#include "tl_loop.h"
#include "vtest.h"

static int has_fact(const char *key)
{
    const char *k, *v;
    for (int i = 0; vmmc_info_get(i, &k, &v) == VMMC_OK; i++)
        if (!strcmp(k, key))
            return 1;
    return 0;
}

static int counter(vmmc_ep_t *ep, const char *name, uint64_t *out)
{
    const char *k;
    uint64_t v;
    for (int i = 0; vmmc_counter_get(ep, i, &k, &v) == VMMC_OK; i++)
        if (!strcmp(k, name)) {
            *out = v;
            return 1;
        }
    return 0;
}

static size_t addr_of(vmmc_ep_t *ep, char *buf)
{
    size_t len = VMMC_ADDR_MAX;
    VT_OK(vmmc_ep_addr(ep, buf, &len));
    buf[len] = 0;
    return len;
}

/* @a with the field @key's value replaced by @val (or the field removed). */
static size_t edit(const char *a, const char *key, const char *val, char *out)
{
    out[0] = 0;
    for (const char *p = a; *p;) {
        const char *e = strchr(p, ';');
        size_t kl = strlen(key);
        if (!strncmp(p, key, kl) && p[kl] == '=') {
            if (val)
                sprintf(out + strlen(out), "%s=%s;", key, val);
        } else {
            strncat(out, p, (size_t)(e - p) + 1);
        }
        p = e + 1;
    }
    return strlen(out);
}

static void mode_auto(void)
{
    VT_CHECK(has_fact("transport.loop") && has_fact("transport.shm") && has_fact("transport.udp"));
    vmmc_ep_t *a, *b;
    VT_OK(vmmc_ep_open(NULL, &a));
    VT_OK(vmmc_ep_open(NULL, &b));
    VT_CHECK(atomic_load(&vmmc_loop_opened) == 2);
    char aa[VMMC_ADDR_MAX], ba[VMMC_ADDR_MAX], bad[VMMC_ADDR_MAX], bin[VMMC_ADDR_MAX];
    addr_of(a, aa);
    size_t bl = addr_of(b, ba);
    VT_CHECK(strstr(aa, "loop=") && strstr(aa, "shm=") && strstr(aa, "udp="));

    /* the loop key is checked by loop's rule */
    size_t n, l = edit(aa, "loop", "x1", bad);
    int h = -1;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_connect(a, bad, l, &h));
    VT_CHECK(strstr(vmmc_last_error(), "loop must be"));
    n = sizeof bin;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_addr_parse(bad, bin, &n));
    l = edit(aa, "loop", "12345678", bad);
    n = sizeof bin;
    VT_OK(vmmc_addr_parse(bad, bin, &n));
    /* twice is refused like any key */
    strcat(bad, "loop=1;");
    n = sizeof bin;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_addr_parse(bad, bin, &n));
    VT_CHECK(strstr(vmmc_last_error(), "twice"));
    /* only the core's keys: no transport */
    l = edit(aa, "loop", NULL, bad);
    l = edit(bad, "shm", NULL, bin);
    l = edit(bin, "udp", NULL, bad);
    l = edit(bad, "utok", NULL, bin);
    l = edit(bin, "uid", NULL, bad);
    l = edit(bad, "ulo", NULL, bin);
    VT_STATUS(VMMC_ERR_INVALID, vmmc_connect(a, bin, l, &h));
    VT_CHECK(strstr(vmmc_last_error(), "no transport"));

    /* b's address has loop's key, which outranks shm and udp */
    VT_OK(vmmc_connect(a, ba, bl, &h));
    VT_CHECK(atomic_load(&vmmc_loop_connects) == 0); /* connecting is lazy */
    vmmc_proxy_t *px = NULL;
    VT_STATUS(VMMC_ERR_PEER_UNREACHABLE, vmmc_import(a, h, "x", 5000, &px));
    VT_CHECK(strstr(vmmc_last_error(), "loop:"));
    VT_CHECK(atomic_load(&vmmc_loop_connects) >= 1);
    VT_CHECK(!strcmp(vmmc_loop_last_card, ba));

    /* its counter comes after the core's and udp's */
    uint64_t v = 0;
    VT_CHECK(counter(a, "udp.ctl_malformed", &v));
    VT_CHECK(counter(a, "loop.connects", &v) && v == (uint64_t)atomic_load(&vmmc_loop_connects));

    VT_OK(vmmc_ep_close(a));
    VT_OK(vmmc_ep_close(b));
    VT_CHECK(atomic_load(&vmmc_loop_closed) == 2);
}

static void mode_shm(void)
{
    vmmc_ep_t *a, *b;
    VT_OK(vmmc_ep_open(NULL, &a));
    VT_OK(vmmc_ep_open(NULL, &b));
    VT_OK(vmmc_listen(b, NULL, NULL));
    char *buf;
    VT_OK(vmmc_mem_alloc(b, 4096, (void **)&buf));
    memset(buf, 0, 4096);
    vmmc_export_params_t p = {.name = "x", .addr = buf, .length = 4096};
    vmmc_export_t *ex;
    VT_OK(vmmc_export(b, &p, &ex));
    char ba[VMMC_ADDR_MAX];
    size_t bl = addr_of(b, ba);
    VT_CHECK(strstr(ba, "loop="));
    int h = -1;
    VT_OK(vmmc_connect(a, ba, bl, &h));
    vmmc_proxy_t *px = NULL;
    VT_OK(vmmc_import(a, h, "x", 10000, &px));
    VT_OK(vmmc_send(px, 100, "over shm", 9, 0));
    VT_CHECK(!strcmp(buf + 100, "over shm"));
    VT_CHECK(atomic_load(&vmmc_loop_connects) == 0);
    VT_OK(vmmc_unimport(px));
    VT_OK(vmmc_unexport(ex));
    VT_OK(vmmc_ep_close(a));
    VT_OK(vmmc_ep_close(b));
    VT_CHECK(atomic_load(&vmmc_loop_closed) == 2);
}

static void mode_bad(void)
{
    vmmc_ep_t *a = NULL;
    VT_STATUS(VMMC_ERR_INVALID, vmmc_ep_open(NULL, &a));
    VT_CHECK(strstr(vmmc_last_error(), "loop") && strstr(vmmc_last_error(), "shm"));
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "auto";
    if (!strcmp(m, "auto"))
        mode_auto();
    else if (!strcmp(m, "shm"))
        mode_shm();
    else if (!strcmp(m, "bad"))
        mode_bad();
    else
        VT_FAIL("unknown mode %s", m);
    printf("t_tl_loop %s: OK\n", m);
    return 0;
}
