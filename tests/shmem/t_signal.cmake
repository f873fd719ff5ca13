# put_signal/put_signal_nbi ordering (data before signal, checked by the
# receiver over many rounds), SET and ADD, signal_fetch; 2 and 4 PEs.
vshmem_add_test(t_signal NP 2 TIMEOUT 300)
vshmem_add_test(t_signal_np4 SOURCES t_signal.c NP 4 TIMEOUT 300)
