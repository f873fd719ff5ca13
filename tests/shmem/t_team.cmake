# Teams: world, shared, split_strided, split_2d, translate, slots, errors; 2, 3 and 4 PEs.
vshmem_add_test(t_team SOURCES t_team.c NP 2 TIMEOUT 300)
vshmem_add_test(t_team_3 SOURCES t_team.c NP 3 TIMEOUT 300)
vshmem_add_test(t_team_4 SOURCES t_team.c NP 4 TIMEOUT 300)
