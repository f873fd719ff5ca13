# Teams: world, shared, split_strided, split_2d, translate, slots, errors; 2, 3 and 4 PEs.
vshmem_add_test(t_team SOURCES t_team.c NP 2 TIMEOUT 300)
vshmem_add_test(t_team_3 SOURCES t_team.c NP 3 TIMEOUT 300)
vshmem_add_test(t_team_4 SOURCES t_team.c NP 4 TIMEOUT 300)
# SHMEM_TEAM_SHARED from host layouts no job can make (not strided): the
# library's function on its own.
add_executable(t_team_shared t_team_shared.c)
target_include_directories(t_team_shared PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(t_team_shared PRIVATE vmmc_shmem)
add_test(NAME t_team_shared COMMAND t_team_shared)
set_tests_properties(t_team_shared PROPERTIES TIMEOUT 30 LABELS shmem)
