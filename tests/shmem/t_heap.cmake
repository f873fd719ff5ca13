# the symmetric heap allocator: symmetry, reuse, merging, exhaustion
vshmem_add_test(t_heap NP 2)
vshmem_add_test(t_heap4 SOURCES t_heap.c NP 4)
foreach(t t_heap t_heap4)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
endforeach()
