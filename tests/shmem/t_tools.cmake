# oshcc and oshrun as users call them: the build tree's (<build>/bin) and the
# installed ones (`cmake --install` into a fresh prefix, then moved). Built
# programs link without the sanitizers, so these stay out of ASan runs.
add_test(NAME shmem_tools COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_tools.sh build
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/tools_work)
add_test(NAME shmem_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check_tools.sh install
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/install_work)
set_tests_properties(shmem_tools shmem_install PROPERTIES TIMEOUT 300 LABELS "shmem;nosan")
# `vmmc bench shmem` at tiny sizes: rows of vmmc and of Open MPI's OSHMEM
# side by side (or a note saying why not); the shape, never a speed.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME shmem_bench COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_bench.py
           $<TARGET_FILE:vmmc_tool> ${CMAKE_SOURCE_DIR}/tests/bench)
  set_tests_properties(shmem_bench PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                       LABELS "shmem;bench;nosan" RUN_SERIAL TRUE)
endif()
