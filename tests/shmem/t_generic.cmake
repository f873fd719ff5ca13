# C11 generic interfaces (include/shmem_generic.h): dispatch checked at
# compile time and at run time, and a call on a type that has no routine
# must not compile.
vshmem_add_test(t_generic NP 2)
vshmem_add_test(t_generic_np4 SOURCES t_generic.c NP 4)
vshmem_add_test(t_generic_amo NP 2)
vshmem_add_test(t_generic_amo_np4 SOURCES t_generic_amo.c NP 4)
vshmem_add_test(t_generic_coll NP 2)
vshmem_add_test(t_generic_coll_np3 SOURCES t_generic_coll.c NP 3)
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  add_test(NAME t_generic_nomatch
           COMMAND ${CMAKE_C_COMPILER} -std=c11 -I${CMAKE_SOURCE_DIR}/include -c
                   ${CMAKE_CURRENT_SOURCE_DIR}/t_generic_nomatch.c -o t_generic_nomatch.o)
  set_tests_properties(t_generic_nomatch PROPERTIES TIMEOUT 60 LABELS "shmem"
    PASS_REGULAR_EXPRESSION "no OpenSHMEM routine for these argument types")
endif()
