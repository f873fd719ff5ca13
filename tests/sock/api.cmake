# The descriptor table, the public calls, readiness (sock_fd.c, sock_api.c,
# sock_io.c, sock_poll.c) and the layer end to end.
vmmc_add_test(t_sock_api_table SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_api_table.c
              TIMEOUT 120 LABELS sock)
# The public calls on sockets that stay on the kernel answer as the kernel.
vmmc_add_test(t_sock_api_kernel SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_api_kernel.c
              TIMEOUT 120 LABELS sock ENV "VMMC_SOCK_UPGRADE=n")
# End to end between two processes over the native API, one test a case
# (one program).
# Every case expects its connections to upgrade: the bounds of the upgrade
# are raised so that a loaded machine (or the sanitizer build) does not make
# them fall back to TCP, which would be right but is not what is tested.
set(sock_e2e_env "VMMC_SOCK_PROBE_TIMEOUT=5s;VMMC_SOCK_HELLO_TIMEOUT=30s")
vmmc_add_test(t_sock_e2e_echo SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_e2e.c ARGS echo
              TIMEOUT 180 LABELS sock ENV "${sock_e2e_env}")
foreach(c many halfclose killed fork eintr exec oneshot)
  add_test(NAME t_sock_e2e_${c} COMMAND $<TARGET_FILE:t_sock_e2e_echo> ${c})
  set_tests_properties(t_sock_e2e_${c} PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS sock
                       ENVIRONMENT "${sock_e2e_env}")
endforeach()
# The sanitizer installs signal handlers without SA_RESTART, and a blocked
# call on an upgraded socket goes by the handlers installed (sock_wait.c):
# the SA_RESTART half of the EINTR case cannot hold under it.
set_tests_properties(t_sock_e2e_eintr PROPERTIES LABELS "sock;nosan")
# Each case forks its client after the listener started the sock thread. The
# sanitizer's allocator (GCC 12's libasan) does not survive fork() in a
# multi-threaded process: a child's malloc can wait for good on a lock that
# another thread of the parent held at the fork (seen: the child's threads
# all in __sanitizer::Mutex::Lock). glibc's malloc does; so these run in the
# release suite only.
foreach(c echo many halfclose killed fork exec oneshot)
  set_tests_properties(t_sock_e2e_${c} PROPERTIES LABELS "sock;nosan")
endforeach()
