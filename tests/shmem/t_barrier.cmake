# Barriers and syncs order puts (world, teams, active sets), 2, 3 and 4 PEs.
vshmem_add_test(t_barrier SOURCES t_barrier.c NP 2)
vshmem_add_test(t_barrier_3 SOURCES t_barrier.c NP 3)
vshmem_add_test(t_barrier_4 SOURCES t_barrier.c NP 4)
