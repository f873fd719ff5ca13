# OpenSHMEM tools (included by CMakeLists.txt when libvmmc-shmem is built):
# the compiler and launcher wrappers oshcc and oshrun, from one template
# each, in two flavours:
#   <build>/bin/oshcc, oshrun    the build tree's: <shmem.h> from the source
#                                tree, the libraries and `vmmc` from the build
#   <prefix>/bin/oshcc, oshrun   installed: everything found from the
#                                script's own place, so `cmake --install
#                                --prefix DIR` anywhere gives working tools
# and `vmmc bench shmem`'s program (bench/shmem_bench.c), embedded in the
# tool and compiled at bench time with each oshcc.
set(_osh_src ${CMAKE_SOURCE_DIR}/tools/shmem)
set(_osh_gen ${CMAKE_BINARY_DIR}/generated/shmem)

function(vmmc_osh_configure flavour outdir)
  foreach(tool oshcc oshrun)
    configure_file(${_osh_src}/${tool}.in ${_osh_gen}/${flavour}/${tool} @ONLY)
    file(COPY ${_osh_gen}/${flavour}/${tool} DESTINATION ${outdir}
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                          WORLD_READ WORLD_EXECUTE)
  endforeach()
endfunction()

set(OSH_CC ${CMAKE_C_COMPILER})
# Build tree: the library's directory is the build directory (no
# LIBRARY_OUTPUT_DIRECTORY is set for vmmc and vmmc_shmem).
set(OSH_FLAVOUR build)
set(OSH_INCDIR ${CMAKE_SOURCE_DIR}/include)
set(OSH_LIBDIR ${CMAKE_BINARY_DIR})
set(OSH_VMMC ${CMAKE_BINARY_DIR}/vmmc)
vmmc_osh_configure(build ${CMAKE_BINARY_DIR}/bin)
# Installed: relative to <prefix>.
set(OSH_FLAVOUR install)
set(OSH_INCDIR ${CMAKE_INSTALL_INCLUDEDIR})
set(OSH_LIBDIR ${CMAKE_INSTALL_LIBDIR})
set(OSH_VMMC "")
vmmc_osh_configure(install ${_osh_gen}/install-bin)
install(PROGRAMS ${_osh_gen}/install-bin/oshcc ${_osh_gen}/install-bin/oshrun
        DESTINATION ${CMAKE_INSTALL_BINDIR})
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${_osh_src}/oshcc.in ${_osh_src}/oshrun.in)

# `vmmc bench shmem` compiles bench/shmem_bench.c with our oshcc and Open
# MPI's: embed it in the tool.
set_property(SOURCE ${CMAKE_SOURCE_DIR}/tools/vmmc/bench_shmem.c APPEND PROPERTY
             COMPILE_DEFINITIONS VMMC_BENCH_SHMEM_SRC="${CMAKE_SOURCE_DIR}/bench/shmem_bench.c")
set_property(SOURCE ${CMAKE_SOURCE_DIR}/tools/vmmc/bench_shmem.c APPEND PROPERTY
             OBJECT_DEPENDS ${CMAKE_SOURCE_DIR}/bench/shmem_bench.c)

# An installed program's rpath (oshcc's -Wl,-rpath, a DT_RUNPATH) serves its
# own dependencies only: libvmmc-shmem finds libvmmc beside itself.
set_target_properties(vmmc_shmem PROPERTIES INSTALL_RPATH "$ORIGIN")
