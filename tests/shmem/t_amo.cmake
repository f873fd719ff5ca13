# atomics: every operation on every type against plain C, 2 and 4 PEs
vshmem_add_test(t_amo NP 2 TIMEOUT 240)
vshmem_add_test(t_amo4 SOURCES t_amo.c NP 4 TIMEOUT 300)
foreach(t t_amo t_amo4)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
endforeach()
# atomics from every PE on the same words: exact totals, one winner
vshmem_add_test(t_amo_race NP 2)
vshmem_add_test(t_amo_race4 SOURCES t_amo_race.c NP 4 TIMEOUT 180)
