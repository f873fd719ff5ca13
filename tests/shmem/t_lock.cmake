# distributed locks: mutual exclusion with 2 and 4 PEs, test_lock
vshmem_add_test(t_lock NP 2 TIMEOUT 180)
vshmem_add_test(t_lock4 SOURCES t_lock.c NP 4 TIMEOUT 240)
# clearing a lock one does not hold, or setting it twice, is an error, not a deadlock
set(T_LOCK_ERR_SH ${CMAKE_CURRENT_SOURCE_DIR}/t_errors.sh)
foreach(c "clear_unheld|shmem: shmem_clear_lock: this PE does not hold the lock"
          "set_twice|shmem: shmem_set_lock: this PE holds the lock already")
  string(REPLACE "|" ";" c "${c}")
  list(GET c 0 mode)
  list(GET c 1 text)
  add_test(NAME t_lock_${mode} COMMAND ${T_LOCK_ERR_SH} 1 "${text}" --
           $<TARGET_FILE:vmmc_tool> run -n 2 -- $<TARGET_FILE:t_lock> ${mode})
  set_tests_properties(t_lock_${mode} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS shmem)
endforeach()
