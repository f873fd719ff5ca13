# Tests of an upgraded connection's data path (src/sock/sock_ring.c,
# sock_conn*.c, sock_revert.c, sock_wait.c).
vmmc_add_test(t_sock_ring SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_ring.c TIMEOUT 180 LABELS sock)
vmmc_add_test(t_sock_ring_udp SOURCES ${CMAKE_CURRENT_LIST_DIR}/t_sock_ring.c TIMEOUT 180
              LABELS sock ENV VMMC_TRANSPORT=udp)
