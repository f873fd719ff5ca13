# Deprecated active-set collectives, 2, 3 and 4 PEs; a malformed set ends
# the job with a message naming the call.
vshmem_add_test(t_active SOURCES t_active.c NP 2)
vshmem_add_test(t_active_3 SOURCES t_active.c NP 3)
vshmem_add_test(t_active_4 SOURCES t_active.c NP 4)
add_test(NAME t_active_bad COMMAND $<TARGET_FILE:vmmc_tool> run -n 2 -- $<TARGET_FILE:t_active> bad)
set_tests_properties(t_active_bad PROPERTIES TIMEOUT 60 LABELS shmem WILL_FAIL TRUE)
add_test(NAME t_active_bad_msg COMMAND $<TARGET_FILE:vmmc_tool> run -n 2 -- $<TARGET_FILE:t_active> bad)
set_tests_properties(t_active_bad_msg PROPERTIES TIMEOUT 60 LABELS shmem
  PASS_REGULAR_EXPRESSION "shmem: shmem_barrier: active set \\(PE_start 1, logPE_stride 1")
