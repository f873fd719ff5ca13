# MILLIPAGE-style DSM (src/dsm/): libvmmc-dsm.so and <vmmc/dsm.h>, a client
# of the public vmmc API (included by CMakeLists.txt when src/dsm/ exists).
file(GLOB VMMC_DSM_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/dsm/*.c)
add_library(vmmc_dsm SHARED ${VMMC_DSM_SOURCES})
set_target_properties(vmmc_dsm PROPERTIES OUTPUT_NAME vmmc-dsm
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  INSTALL_RPATH "$ORIGIN")
target_include_directories(vmmc_dsm PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
                                    PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_compile_options(vmmc_dsm PRIVATE -Wno-missing-field-initializers)
target_link_libraries(vmmc_dsm PUBLIC vmmc Threads::Threads)
install(TARGETS vmmc_dsm LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# <vmmc/dsm.h> is installed with the rest of include/vmmc.
set(VMMC_HAVE_DSM 1)
