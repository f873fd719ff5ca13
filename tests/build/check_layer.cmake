# Compile one probe file against a layer's include directories and check
# that it builds (EXPECT=pass) or does not (EXPECT=fail), so the layering of
# the build is a test: an upward #include must not compile.
# usage: cmake -DCC=cc -DINCS="a|b" -DSRC=file.c -DEXPECT=pass|fail -P check_layer.cmake
string(REPLACE "|" ";" incs "${INCS}")
set(flags -fsyntax-only -std=gnu11 -D_GNU_SOURCE)
foreach(i ${incs})
  if(i)
    list(APPEND flags -I${i})
  endif()
endforeach()
execute_process(COMMAND ${CC} ${flags} ${SRC} RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(EXPECT STREQUAL "pass" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "${SRC} should build against ${INCS}:\n${err}")
elseif(EXPECT STREQUAL "fail" AND rc EQUAL 0)
  message(FATAL_ERROR "${SRC} builds against ${INCS}, but reaches a layer it must not see")
elseif(EXPECT STREQUAL "fail" AND NOT err MATCHES "No such file")
  message(FATAL_ERROR "${SRC} fails for another reason than a missing header:\n${err}")
endif()
message(STATUS "${SRC}: ${EXPECT} as expected")
