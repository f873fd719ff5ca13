# The upgrade's parts (src/sock/sock_ctx.c, sock_rec.c, sock_probe.c,
# sock_hello.c): the process context, the records on the TCP stream, the
# probes, and the decision of each connection. Tests that expect an upgrade
# give the probe 2 s: on a loaded machine the 50 ms default may pass before
# the listener's thread runs (the connection then rightly stays on TCP).
vmmc_add_test(t_sock_ctx SOURCES t_sock_ctx.c TIMEOUT 120 LABELS sock)
vmmc_add_test(t_sock_hello_rec SOURCES t_sock_hello_rec.c TIMEOUT 120 LABELS sock
              ENV "VMMC_SOCK_HELLO_TIMEOUT=100ms;VMMC_SOCK_REVERT_TIMEOUT=100ms")
vmmc_add_test(t_sock_probe SOURCES t_sock_probe.c TIMEOUT 120 LABELS sock
              ENV "VMMC_SOCK_PROBE_SLOTS=16;VMMC_SOCK_HELLO_TIMEOUT=100ms;VMMC_SOCK_PROBE_TIMEOUT=2s")
# The upgrade end to end at the layer's internal calls, on shm and over udp.
vmmc_add_test(t_sock_hello SOURCES t_sock_hello.c TIMEOUT 300 LABELS sock ARGS shm
              ENV "VMMC_SOCK_DEBUG=y;VMMC_SOCK_HELLO_TIMEOUT=200ms;VMMC_SOCK_PROBE_TIMEOUT=2s")
vmmc_add_test(t_sock_hello_udp SOURCES t_sock_hello.c TIMEOUT 300 LABELS sock ARGS udp
              ENV "VMMC_SOCK_DEBUG=y;VMMC_TRANSPORT=udp;VMMC_SOCK_HELLO_TIMEOUT=200ms;VMMC_SOCK_PROBE_TIMEOUT=2s")
# Two hosts (network namespaces): the upgrade crosses the link, over udp.
add_test(NAME sock_up_netns COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/sock_netns.sh $<TARGET_FILE:t_sock_hello>)
set_tests_properties(sock_up_netns PROPERTIES LABELS "sock;multihost;nosan" TIMEOUT 180
                     SKIP_RETURN_CODE 77)
# VMMC_SOCK_UPGRADE=n: no probe is ever sent, no listener answers, every byte on TCP.
vmmc_add_test(t_sock_hello_off SOURCES t_sock_hello.c TIMEOUT 300 LABELS sock ARGS off
              ENV "VMMC_SOCK_DEBUG=y;VMMC_SOCK_UPGRADE=n;VMMC_SOCK_PROBE_TIMEOUT=2s")
# fork with an upgraded connection, through the public calls: reverted before
# the fork, a fresh context in the child, the parent's goes on.
vmmc_add_test(t_sock_ctx_fork SOURCES t_sock_ctx_fork.c TIMEOUT 120 LABELS sock ARGS shm
              ENV VMMC_SOCK_PROBE_TIMEOUT=2s)
vmmc_add_test(t_sock_ctx_fork_udp SOURCES t_sock_ctx_fork.c TIMEOUT 120 LABELS sock ARGS udp
              ENV "VMMC_TRANSPORT=udp;VMMC_SOCK_PROBE_TIMEOUT=2s")
# Its pre-forked-listener and fork cases fork after the sock thread started:
# the sanitizer's allocator (GCC 12's libasan) does not survive fork() in a
# multi-threaded process (a child's malloc can wait for good on a lock
# another thread held at the fork), so these run in the release suite only.
set_tests_properties(t_sock_hello t_sock_hello_udp PROPERTIES LABELS "sock;nosan")
