# atomics: every operation on every type against plain C, 2 and 4 PEs
vshmem_add_test(t_amo NP 2 TIMEOUT 240)
vshmem_add_test(t_amo4 SOURCES t_amo.c NP 4 TIMEOUT 300)
foreach(t t_amo t_amo4)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
endforeach()
# atomics from every PE on the same words: exact totals, one winner
vshmem_add_test(t_amo_race NP 2)
vshmem_add_test(t_amo_race4 SOURCES t_amo_race.c NP 4 TIMEOUT 180)
# an _nbi fetch into NULL ends the job with a clear line
add_test(NAME t_amo_nullfetch COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/t_errors.sh 1
         "shmem: shmem_long_atomic_fetch_add_nbi: fetch is NULL" --
         $<TARGET_FILE:vmmc_tool> run -n 2 -- $<TARGET_FILE:t_amo> nullfetch)
set_tests_properties(t_amo_nullfetch PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS shmem)
# the C11 generic names reach the atomics and waits of the right type
vshmem_add_test(t_amo_generic NP 2)
