# setup, queries, shmem_ptr, finalize: 2 and 4 PEs
vshmem_add_test(t_init NP 2)
vshmem_add_test(t_init4 SOURCES t_init.c NP 4)
# static data left private: reached with process_vm_writev/readv
vshmem_add_test(t_init_nomap SOURCES t_init.c NP 3 NO_UDP ENV VMMC_SHMEM_MAP_DATA=n)
foreach(t t_init t_init4 t_init_nomap)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
endforeach()
