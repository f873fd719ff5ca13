# vshmem_add_test(name [SOURCES src...] [NP n] [TIMEOUT s] [ARGS ...] [ENV VAR=value...] [NO_UDP])
# builds one OpenSHMEM program (linked with libvmmc-shmem, as oshcc links)
# and registers it twice:
#   name        NP PEs on this host (shm), started by `vmmc run`;
#   name_udp    NP PEs on 2 network-namespace hosts (udp across, shm
#               inside a host), started by tests/multihost/netns_job.sh;
#               skips (77) with the reason where namespaces cannot be made.
# Test programs print "ok <what>" lines and exit non-zero on the first
# wrong value (tests/shmem/shmem_test.h).
set(VSHMEM_NETNS ${CMAKE_SOURCE_DIR}/tests/multihost/netns_job.sh)
function(vshmem_add_test name)
  cmake_parse_arguments(T "NO_UDP" "NP;TIMEOUT" "SOURCES;ARGS;LABELS;ENV" ${ARGN})
  if(NOT T_SOURCES)
    set(T_SOURCES ${name}.c)
  endif()
  if(NOT T_NP)
    set(T_NP 2)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/shmem)
  target_link_libraries(${name} PRIVATE vmmc_shmem m)
  add_test(NAME ${name} COMMAND $<TARGET_FILE:vmmc_tool> run -n ${T_NP} -- $<TARGET_FILE:${name}> ${T_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
                       LABELS "shmem;${T_LABELS}")
  if(T_ENV)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
  if(NOT T_NO_UDP)
    add_test(NAME ${name}_udp COMMAND ${VSHMEM_NETNS} -n ${T_NP} -H 2 -t ${T_TIMEOUT}
             -- $<TARGET_FILE:${name}> ${T_ARGS})
    set_tests_properties(${name}_udp PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
                         LABELS "shmem;multihost;nosan;${T_LABELS}")
    if(T_ENV)
      set_tests_properties(${name}_udp PROPERTIES ENVIRONMENT "${T_ENV}")
    endif()
  endif()
endfunction()
