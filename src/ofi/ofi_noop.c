/* The operations an object does not offer, shared by every ops table
 * (as libfabric's fi_no_* are for its built-in providers). */
#include "ofi/ofi.h"

int vofi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                     void *context)
{
    return -FI_ENOSYS; /* no provider-specific extensions */
}

int vofi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    return -FI_ENOSYS; /* nothing binds to this object */
}
