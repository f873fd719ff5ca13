# The upgrade's parts (src/sock/sock_ctx.c, sock_rec.c, sock_probe.c,
# sock_hello.c): the process context, the records on the TCP stream, the
# probes, and the decision of each connection.
vmmc_add_test(t_sock_ctx SOURCES t_sock_ctx.c TIMEOUT 120 LABELS sock)
vmmc_add_test(t_sock_hello_rec SOURCES t_sock_hello_rec.c TIMEOUT 120 LABELS sock
              ENV "VMMC_SOCK_HELLO_TIMEOUT=100ms;VMMC_SOCK_REVERT_TIMEOUT=100ms")
vmmc_add_test(t_sock_probe SOURCES t_sock_probe.c TIMEOUT 120 LABELS sock
              ENV "VMMC_SOCK_PROBE_SLOTS=16;VMMC_SOCK_HELLO_TIMEOUT=100ms")
