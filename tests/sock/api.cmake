# The descriptor table, the public calls, readiness (sock_fd.c, sock_api.c,
# sock_io.c, sock_poll.c) and the layer end to end.
vmmc_add_test(t_sock_api_table SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_api_table.c
              TIMEOUT 120 LABELS sock)
# The public calls on sockets that stay on the kernel answer as the kernel.
vmmc_add_test(t_sock_api_kernel SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_api_kernel.c
              TIMEOUT 120 LABELS sock ENV "VMMC_SOCK_UPGRADE=n")
