# Puts, put_signal, fetch-add, compare-swap and waits from every PE to the
# others at once; every PE then checks every PE's final memory exactly.
# 4 PEs (more than the cores: waits must block), and 2.
vshmem_add_test(shmem_mixed SOURCES t_mixed.c NP 4 TIMEOUT 240)
vshmem_add_test(shmem_mixed_np2 SOURCES t_mixed.c NP 2 TIMEOUT 180)
