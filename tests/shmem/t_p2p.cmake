# point-to-point synchronisation: wait_until/test families on every type
vshmem_add_test(t_p2p NP 2 TIMEOUT 180)
vshmem_add_test(t_p2p4 SOURCES t_p2p.c NP 4 TIMEOUT 240)
# a bad comparison and a non-symmetric ivar end the job with a clear line
set(T_P2P_ERR_SH ${CMAKE_CURRENT_SOURCE_DIR}/t_errors.sh)
foreach(c "badcmp|shmem: shmem_int_wait_until: unknown comparison (17)"
          "nonsym|shmem: shmem_long_wait_until: ivars is not symmetric memory")
  string(REPLACE "|" ";" c "${c}")
  list(GET c 0 mode)
  list(GET c 1 text)
  add_test(NAME t_p2p_${mode} COMMAND ${T_P2P_ERR_SH} 1 "${text}" --
           $<TARGET_FILE:vmmc_tool> run -n 2 -- $<TARGET_FILE:t_p2p> ${mode})
  set_tests_properties(t_p2p_${mode} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS shmem)
endforeach()
# waits released by puts, atomics and barrier flags with no spinning and 1 s sleeps
vshmem_add_test(t_wait_wake NP 2 TIMEOUT 120
                ENV VMMC_SHMEM_SPIN=0 VMMC_SPIN=0 VMMC_SHMEM_SLEEP=1s)
# a waiter that a peer's atomics or gets keep busy keeps spinning (and answers them)
vshmem_add_test(t_wait_serve_amo SOURCES t_wait_serve.c NP 2 TIMEOUT 120 ARGS amo
                ENV VMMC_SPIN=0 VMMC_SHMEM_SPIN=100ms VMMC_SHMEM_SLEEP=1s)
vshmem_add_test(t_wait_serve_get SOURCES t_wait_serve.c NP 2 TIMEOUT 120 ARGS get
                ENV VMMC_SPIN=0 VMMC_SHMEM_SPIN=100ms VMMC_SHMEM_SLEEP=1ms)
