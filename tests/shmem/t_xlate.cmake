# the core's data movement, atomics and waits on heap and static data
vshmem_add_test(t_xlate NP 2)
vshmem_add_test(t_xlate4 SOURCES t_xlate.c NP 4)
foreach(t t_xlate t_xlate4)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
endforeach()
