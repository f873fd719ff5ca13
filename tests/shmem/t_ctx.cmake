# contexts, including one per thread under SHMEM_THREAD_MULTIPLE
vshmem_add_test(t_ctx NP 2)
vshmem_add_test(t_ctx4 SOURCES t_ctx.c NP 4)
foreach(t t_ctx t_ctx4)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${t} PRIVATE Threads::Threads)
endforeach()
