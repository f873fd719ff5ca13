# Reductions on the world team, every operation, 2, 3 and 4 PEs.
vshmem_add_test(t_reduce SOURCES t_reduce.c NP 2 TIMEOUT 300)
vshmem_add_test(t_reduce_3 SOURCES t_reduce.c NP 3 TIMEOUT 300)
vshmem_add_test(t_reduce_4 SOURCES t_reduce.c NP 4 TIMEOUT 300)
