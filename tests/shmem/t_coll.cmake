# broadcast, collect, fcollect, alltoall(s) on the world team, 2, 3 and 4 PEs.
vshmem_add_test(t_coll SOURCES t_coll.c NP 2 TIMEOUT 300)
vshmem_add_test(t_coll_3 SOURCES t_coll.c NP 3 TIMEOUT 300)
vshmem_add_test(t_coll_4 SOURCES t_coll.c NP 4 TIMEOUT 300)
