# Contiguous, strided and single-element RMA (t_rma, t_rma_strided) on 2
# and 4 PEs, and the bad calls that must end the job with a clear message.
vshmem_add_test(t_rma NP 2 TIMEOUT 240)
vshmem_add_test(t_rma_np4 SOURCES t_rma.c NP 4 TIMEOUT 300)
vshmem_add_test(t_rma_strided NP 2)
vshmem_add_test(t_rma_strided_np4 SOURCES t_rma_strided.c NP 4)

add_executable(t_rma_fatal t_rma_fatal.c)
target_include_directories(t_rma_fatal PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(t_rma_fatal PRIVATE vmmc_shmem)
# A case of t_rma_fatal and the extended regular expression that its one
# line on stderr must match.
function(vshmem_rma_fatal name re)
  add_test(NAME t_rma_fatal_${name}
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/t_rma_fatal.sh $<TARGET_FILE:vmmc_tool>
                   $<TARGET_FILE:t_rma_fatal> ${name} "${re}")
  set_tests_properties(t_rma_fatal_${name} PROPERTIES TIMEOUT 60 LABELS "shmem")
endfunction()
vshmem_rma_fatal(noinit "shmem: shmem_putmem: .*init")
vshmem_rma_fatal(sigop "shmem: shmem_putmem_signal: sig_op .*\\(7\\)")
vshmem_rma_fatal(sigop_nbi "shmem: shmem_ctx_long_put_signal_nbi: sig_op .*\\(-1\\)")
vshmem_rma_fatal(sigalign "shmem: shmem_long_put_signal: sig_addr is not aligned")
vshmem_rma_fatal(sigfetch "shmem: shmem_signal_fetch: sig_addr is not an aligned symmetric word")
vshmem_rma_fatal(pe "shmem: shmem_putmem: .*\\(2\\)")
vshmem_rma_fatal(pe_neg "shmem: shmem_int_g: .*\\(-1\\)")
vshmem_rma_fatal(nonsym "shmem: shmem_long_put: .*symmetric")
vshmem_rma_fatal(overflow "shmem: shmem_long_put: nelems too large")
vshmem_rma_fatal(past_heap "shmem: shmem_getmem: ")
vshmem_rma_fatal(stride0 "shmem: shmem_long_iput: strides must be positive")
vshmem_rma_fatal(sig_pe "shmem: shmem_putmem_signal_nbi: .*\\(-3\\)")
