/* A job whose ranks all share this host talks among itself over shm, yet
 * its endpoints keep their udp address: rank 0 listens, and an endpoint of
 * no job that reaches it over udp only (rank 0's address without its shm
 * key) connects, imports and writes; rank 0 answers it over udp, the way it
 * came. Before, such a job closed its udp socket (the import waited for
 * nothing), and an accepted peer was answered over shm, which it had not
 * used. */
#include <string.h>

#include "vtest.h"

static int accepted = -1;

static void on_accept(vmmc_ep_t *ep, int peer, void *arg)
{
    (void)ep;
    (void)arg;
    __atomic_store_n(&accepted, peer, __ATOMIC_RELEASE);
}

/* @a (NUL-terminated, @len bytes) without its "shm=...;" field. */
static size_t drop_shm(char *a, size_t len)
{
    char *s = strstr(a, "shm=");
    VT_CHECK(s && (s == a || s[-1] == ';'));
    char *e = strchr(s, ';');
    VT_CHECK(e != NULL);
    e++;
    memmove(s, e, (size_t)(a + len - e) + 1);
    return len - (size_t)(e - s);
}

int main(void)
{
    vmmc_ep_t *ep;
    VT_OK(vmmc_init(NULL, &ep));
    VT_CHECK(vmmc_size(ep) == 2);
    int me = vmmc_rank(ep);
    static char region[64];
    if (me == 0) {
        vmmc_export_params_t p = {0};
        vmmc_export_t *ex;
        p.name = "x", p.addr = region, p.length = sizeof region;
        VT_OK(vmmc_export(ep, &p, &ex));
        VT_OK(vmmc_listen(ep, on_accept, NULL));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 1) {
        char a[VMMC_ADDR_MAX + 1];
        size_t len = VMMC_ADDR_MAX;
        VT_OK(vmmc_peer_addr(ep, 0, a, &len));
        a[len] = 0;
        len = drop_shm(a, len);
        vmmc_ep_t *e2;
        VT_OK(vmmc_ep_open(NULL, &e2));
        int h;
        VT_OK(vmmc_connect(e2, a, len, &h));
        vmmc_proxy_t *px;
        VT_OK(vmmc_import(e2, h, "x", 20000, &px));
        VT_OK(vmmc_send(px, 0, "over udp", 9, 0));
        VT_OK(vmmc_fence(e2, h));
        VT_OK(vmmc_unimport(px));
        VT_OK(vmmc_ep_close(e2));
    }
    VT_OK(vmmc_barrier(ep));
    if (me == 0) {
        VT_CHECK(__atomic_load_n(&accepted, __ATOMIC_ACQUIRE) == 2);
        VT_CHECK(!strcmp(region, "over udp"));
        printf("t_job_udp: a job on one host accepted an endpoint over udp\n");
    }
    VT_OK(vmmc_finalize(ep));
    return 0;
}
