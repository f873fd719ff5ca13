/* The procedures of the vRPC test program (vtest.x), shared by its servers.
 *
 * VTEST_ECHO answers with the argument's own bytes (no copy; the arguments
 * are freed after the reply is sent, so the result must not be freed too).
 * Two payloads make the server misbehave, for the client's error tests:
 *   "vtest:die"    the server kills itself with SIGKILL mid-call (no reply);
 *   "vtest:sleep"  the server sleeps 3 s before it answers. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "vtest.h"

bool_t vtest_null_1_svc(void *arg, void *res, struct svc_req *rq)
{
    (void)arg, (void)res, (void)rq;
    return TRUE;
}

static int is(const vbytes *v, const char *s)
{
    size_t n = strlen(s);
    return v->vbytes_len == n && memcmp(v->vbytes_val, s, n) == 0;
}

bool_t vtest_echo_1_svc(vbytes *arg, vbytes *res, struct svc_req *rq)
{
    (void)rq;
    if (is(arg, "vtest:die"))
        kill(getpid(), SIGKILL);
    if (is(arg, "vtest:sleep"))
        sleep(3);
    *res = *arg;
    return TRUE;
}

bool_t vtest_add_1_svc(vpair *arg, int *res, struct svc_req *rq)
{
    (void)rq;
    *res = (int)((unsigned)arg->a + (unsigned)arg->b);
    return TRUE;
}

int vtest_prog_1_freeresult(SVCXPRT *x, xdrproc_t f, caddr_t res)
{
    (void)x;
    if (f == (xdrproc_t)xdr_vbytes)
        return 1; /* the echo's bytes belong to the arguments */
    xdr_free(f, res);
    return 1;
}
