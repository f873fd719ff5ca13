# setup, queries, shmem_ptr, finalize: 2 and 4 PEs
vshmem_add_test(t_init NP 2)
vshmem_add_test(t_init4 SOURCES t_init.c NP 4)
foreach(t t_init t_init4)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
endforeach()
