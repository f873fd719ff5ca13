# Detected errors end the job with status 1 and one line naming the call;
# shmem_global_exit(3) from one PE ends every PE with 3 (on one host and
# across hosts). Each case is a job checked by t_errors.sh.
add_executable(t_errors t_errors.c)
target_include_directories(t_errors PRIVATE ${CMAKE_SOURCE_DIR}/tests/shmem ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(t_errors PRIVATE vmmc_shmem)
set(T_ERR_SH ${CMAKE_CURRENT_SOURCE_DIR}/t_errors.sh)
function(t_errors_case name mode np status text)
  add_test(NAME t_errors_${name} COMMAND ${T_ERR_SH} ${status} "${text}" --
           $<TARGET_FILE:vmmc_tool> run -n ${np} -- $<TARGET_FILE:t_errors> ${mode})
  set_tests_properties(t_errors_${name} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS shmem)
  add_test(NAME t_errors_${name}_udp COMMAND ${T_ERR_SH} ${status} "${text}" --
           ${VSHMEM_NETNS} -n ${np} -H 2 -t 60 -- $<TARGET_FILE:t_errors> ${mode})
  set_tests_properties(t_errors_${name}_udp PROPERTIES TIMEOUT 90 SKIP_RETURN_CODE 77
                       LABELS "shmem;multihost;nosan")
endfunction()
t_errors_case(before_init before_init 2 1 "shmem: shmem_my_pe: called before shmem_init")
t_errors_case(badpe badpe 2 1 "shmem: shmem_ptr: PE out of range 0..1 (7)")
t_errors_case(nonsym nonsym 2 1 "shmem: shmem_long_put: address not symmetric")
t_errors_case(straddle straddle 2 1 "shmem: shmem_getmem: address not symmetric")
t_errors_case(disagree disagree 4 1 "shmem: shmem_malloc: PEs disagree")
t_errors_case(badfree badfree 2 1 "shmem: shmem_free: not the start of a block")
t_errors_case(heapsize heapsize 2 1 "give every PE the same SHMEM_SYMMETRIC_SIZE")
t_errors_case(badsize badsize 2 1 "shmem: shmem_init: bad SHMEM_SYMMETRIC_SIZE=12Q")
t_errors_case(gexit gexit 2 3 "")
t_errors_case(gexit4 gexit 4 3 "")
t_errors_case(nofinalize nofinalize 4 0 "")
t_errors_case(afterfinalize afterfinalize 2 1 "shmem: shmem_n_pes: called after shmem_finalize")
