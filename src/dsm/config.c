/* Settings of libvmmc-dsm (VMMC_DSM_*), registered with vmmc's registry at
 * load time so `vmmc info -c` lists them and mistyped names are warned
 * about. */
#include <stdio.h>

#include "dsm/dsm_int.h"
#include "vmmc/config.h"

dsm_cfg_t dsm_cfg = {.size = 64u << 20, .views = 32, .onehop = 1, .yield = 1,
                     .yield_window = 50000, .wait_poll = 50000, .fault_poll = 1};

static const vmmc_config_entry_t dsm_entries[] = {
    {"DSM_SIZE", "64M",
     "bytes of the shared area of vmmc_dsm_init() (whole pages; the same in every rank)",
     VMMC_CONFIG_SIZE, &dsm_cfg.size, DSM_PAGE, 1ull << 40},
    {"DSM_VIEWS", "32",
     "application views of the shared area: the most minipages one page holds (minipage mode)",
     VMMC_CONFIG_INT, &dsm_cfg.views, 1, DSM_MAX_VIEWS},
    {"DSM_PAGE", "n",
     "page mode: the unit of sharing is the 4 KiB page, through one view (for comparison)",
     VMMC_CONFIG_BOOL, &dsm_cfg.page},
    {"DSM_ONEHOP", "y",
     "a read fault asks the owner it knows straight away (one hop) rather than the manager",
     VMMC_CONFIG_BOOL, &dsm_cfg.onehop},
    {"DSM_SERVICE_SLICE", "0",
     "time slice the service thread asks the scheduler for (Linux 6.12+; shorter: a request "
     "preempts a computing thread sooner); 0: the kernel's default",
     VMMC_CONFIG_TIME, &dsm_cfg.service_slice, 0, 100000000ull},
    {"DSM_SERVICE_NICE", "0",
     "nice value of the service thread (below the process's needs CAP_SYS_NICE or RLIMIT_NICE); "
     "0: as the process",
     VMMC_CONFIG_INT, &dsm_cfg.service_nice, 0, 0}, /* the kernel clamps to -20..19 */
    {"DSM_SERVICE_SPIN", "waiting",
     "when the service thread spins after a message (VMMC_SPIN) instead of sleeping: waiting "
     "(only while an application thread of the rank waits in the DSM, so a computing one never "
     "has it spinning on its processor) or always (as vmmc's service thread does)",
     VMMC_CONFIG_STRING, &dsm_cfg.service_spin},
    {"DSM_YIELD", "y",
     "the service thread yields its core once after waking an application thread of the rank",
     VMMC_CONFIG_BOOL, &dsm_cfg.yield},
    {"DSM_SPIN_YIELD", "auto",
     "while an application thread waits in the DSM, vmmc's spin in this rank yields the core "
     "at every pass of its first VMMC_DSM_YIELD_WINDOW, so that a rank sharing it answers "
     "first: auto (when the affinity mask of another rank on this kernel meets this rank's), "
     "y (always) or n",
     VMMC_CONFIG_STRING, &dsm_cfg.spin_yield},
    {"DSM_YIELD_WINDOW", "50us",
     "how long into a wait vmmc's spin yields (VMMC_DSM_SPIN_YIELD); later it spins on (and "
     "then sleeps) as vmmc does, so that a long wait does not leave the rank behind other work",
     VMMC_CONFIG_TIME, &dsm_cfg.yield_window, 0, 1000000000ull},
    {"DSM_WAIT_POLL", "50us",
     "how long an application thread that waits in the DSM (a fault, a lock, the barrier) "
     "handles the rank's messages itself while the service thread sleeps, before it sleeps "
     "until the service thread wakes it; 0: it sleeps at once",
     VMMC_CONFIG_TIME, &dsm_cfg.wait_poll, 0, 1000000000ull},
    {"DSM_FAULT_POLL", "y",
     "a faulting thread, too, handles the answer itself (VMMC_DSM_WAIT_POLL) inside its "
     "SIGSEGV handler; n: it sleeps until the service thread has opened the minipage",
     VMMC_CONFIG_BOOL, &dsm_cfg.fault_poll},
    {"DSM_THREADS", "multiple",
     "which threads of the application read and write the shared area: multiple (any) or "
     "funneled (only the one that called vmmc_dsm_init(), as MPI_THREAD_FUNNELED; another "
     "one's fault ends the process); funneled lets a fault that handles its answer itself "
     "(VMMC_DSM_FAULT_POLL, ranks on one host) open the faulting page while its request "
     "travels, so that its mprotect is off the fault's path",
     VMMC_CONFIG_STRING, &dsm_cfg.threads},
    {"DSM_MANAGERS", "all",
     "who manages the minipages: all (each page's minipages have a home rank, page mod "
     "ranks, that keeps their directory) or 1 (rank 0 manages every minipage)",
     VMMC_CONFIG_STRING, &dsm_cfg.managers},
    {"DSM_DEBUG", "n", "print every malformed or unexpected DSM message that is dropped",
     VMMC_CONFIG_BOOL, &dsm_cfg.debug},
};
static const vmmc_config_table_t dsm_table = {sizeof(vmmc_config_entry_t), "dsm", "DSM_",
                                              dsm_entries,
                                              sizeof dsm_entries / sizeof *dsm_entries};

static char cfg_error[512];

__attribute__((constructor)) static void dsm_cfg_init(void)
{
    int st = vmmc_config_register(&dsm_table);
    if (st != VMMC_OK && st != VMMC_ERR_EXISTS)
        snprintf(cfg_error, sizeof cfg_error, "%s", vmmc_last_error());
}

__attribute__((destructor)) static void dsm_cfg_fini(void)
{
    (void)vmmc_config_unregister("dsm");
}

const char *dsm_cfg_error(void)
{
    return cfg_error[0] ? cfg_error : NULL;
}
