# Tests of an upgraded connection's data path (src/sock/sock_ring.c,
# sock_conn*.c, sock_revert.c, sock_wait.c).
vmmc_add_test(t_sock_ring SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_ring.c TIMEOUT 180 LABELS sock)
vmmc_add_test(t_sock_ring_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_ring.c TIMEOUT 180
              LABELS sock ENV VMMC_TRANSPORT=udp)
vmmc_add_test(t_sock_conn SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn.c TIMEOUT 240 LABELS sock)
vmmc_add_test(t_sock_conn_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn.c TIMEOUT 240
              LABELS sock ENV VMMC_TRANSPORT=udp)
# A 4K ring: every transfer wraps it many times.
vmmc_add_test(t_sock_conn_small SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn.c TIMEOUT 240
              LABELS sock ENV VMMC_SOCK_RING=4K)
vmmc_add_test(t_sock_conn_dead SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_dead.c TIMEOUT 240
              LABELS sock)
vmmc_add_test(t_sock_conn_dead_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_dead.c
              TIMEOUT 240 LABELS sock ENV VMMC_TRANSPORT=udp)
vmmc_add_test(t_sock_revert SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_revert.c TIMEOUT 240
              LABELS sock ENV VMMC_SOCK_DEBUG=y)
vmmc_add_test(t_sock_revert_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_revert.c TIMEOUT 240
              LABELS sock ENV VMMC_TRANSPORT=udp)
vmmc_add_test(t_sock_conn_detached SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_detached.c
              TIMEOUT 120 LABELS sock)
vmmc_add_test(t_sock_conn_detached_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_detached.c
              TIMEOUT 120 LABELS sock ENV VMMC_TRANSPORT=udp)
vmmc_add_test(t_sock_conn_threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_threads.c
              TIMEOUT 240 LABELS sock)
vmmc_add_test(t_sock_conn_threads_small SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_threads.c
              TIMEOUT 240 LABELS sock ENV VMMC_SOCK_RING=4K)
vmmc_add_test(t_sock_conn_threads_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_threads.c
              TIMEOUT 240 LABELS sock ENV VMMC_TRANSPORT=udp)
vmmc_add_test(t_sock_conn_fin SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_fin.c TIMEOUT 120
              LABELS sock)
vmmc_add_test(t_sock_conn_fin_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_conn_fin.c
              TIMEOUT 120 LABELS sock ENV VMMC_TRANSPORT=udp)
# Posted receives: large reads placed directly by the writer (src/sock/sock_zcopy.c).
vmmc_add_test(t_sock_zcopy SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_zcopy.c TIMEOUT 240
              LABELS sock ENV VMMC_SOCK_ZCOPY=256K)
vmmc_add_test(t_sock_zcopy_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_zcopy.c TIMEOUT 240
              LABELS sock ENV VMMC_TRANSPORT=udp VMMC_SOCK_ZCOPY=256K)
# It forks a writer per case after the sock thread started (and forks once in
# the middle of a stream): GCC 12's libasan does not survive that (see the
# e2e cases); the release suite runs it.
set_tests_properties(t_sock_zcopy t_sock_zcopy_udp PROPERTIES LABELS "sock;nosan")
