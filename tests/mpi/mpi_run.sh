#!/usr/bin/env bash
# Run an MPI test program under Open MPI's mpirun, one of three ways:
#   vader     Open MPI's own shared-memory path (pml ob1, btl self,vader):
#             the reference that shows the program itself is right;
#   vmmc      through the libfabric provider vmmc (`vmmc mpirun`: pml cm,
#             mtl ofi restricted to provider vmmc, so there is no fallback),
#             over vmmc's default transports (shm on this host);
#   vmmc_udp  the same with VMMC_TRANSPORT=udp;
#   tcp       Open MPI over TCP (pml ob1, btl self,vader,tcp): the reference
#             across hosts (netns_mpi.sh).
# MPI_RUN_EXTRA: more mpirun options (netns_mpi.sh: hostfile, rsh agent).
# For vmmc and vmmc_udp the run must also show that the provider carried it:
# every rank reports the ofi MTL on provider "vmmc" (mtl_base_verbose), has
# libvmmc-fi.so mapped (MPIT_EXPECT_LIB, checked by the program), and each
# rank's vmmc endpoint writes its counters when it closes (VMMC_STATS): over
# udp, every endpoint sent udp data datagrams.
#
# usage: mpi_run.sh MODE NP VMMC_TOOL FI_DIR PROG [ARGS...]
# Exit 77 (skip) with the reason when Open MPI, libfabric or the provider is
# absent, or when libfabric does not list the provider.
set -u
[ $# -ge 5 ] || { echo "usage: $0 vader|vmmc|vmmc_udp|tcp NP VMMC_TOOL FI_DIR PROG [ARGS...]" >&2; exit 2; }
mode=$1 np=$2 tool=$3 fidir=$4
shift 4
mpirun=$(command -v mpirun.openmpi || command -v mpirun) ||
    { echo "SKIP: Open MPI's mpirun is not installed (apt-get install -y openmpi-bin)"; exit 77; }
limit=${MPI_RUN_LIMIT:-150}
# Open MPI busy-polls: more ranks than cores must yield, and no binding.
common=(--oversubscribe -np "$np" --bind-to none --mca mpi_yield_when_idle 1 ${MPI_RUN_EXTRA:-})
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)

case $mode in
vader)
    exec timeout -k 10 "$limit" "$mpirun" "${root[@]}" "${common[@]}" \
        --mca pml ob1 --mca btl self,vader "$@"
    ;;
tcp)
    exec timeout -k 10 "$limit" "$mpirun" "${root[@]}" "${common[@]}" \
        --mca pml ob1 --mca btl self,vader,tcp "$@"
    ;;
vmmc | vmmc_udp) ;;
*) echo "mpi_run.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac

[ -e "$fidir/libvmmc-fi.so" ] ||
    { echo "SKIP: the provider $fidir/libvmmc-fi.so is not built (needs libfabric-dev at build time)"; exit 77; }
command -v fi_info >/dev/null ||
    { echo "SKIP: fi_info is not installed (apt-get install -y libfabric-bin)"; exit 77; }
if ! FI_PROVIDER_PATH=$fidir timeout 30 fi_info -p vmmc >/dev/null 2>&1; then
    echo "SKIP: libfabric does not list provider vmmc (FI_PROVIDER_PATH=$fidir fi_info -p vmmc fails)"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export MPIT_EXPECT_LIB=libvmmc-fi.so
export VMMC_STATS="$tmp/stats.%p"
if [ "$mode" = vmmc_udp ]; then
    export VMMC_TRANSPORT=udp
else
    unset VMMC_TRANSPORT
fi
timeout -k 10 "$limit" "$tool" mpirun "${common[@]}" --mca mtl_base_verbose 100 \
    -x MPIT_EXPECT_LIB "$@" \
    >"$tmp/out" 2>&1
st=$?
# the program's own lines, and Open MPI's, without the selection chatter
grep -v -e 'mca: base:' -e 'mca:base:' -e 'select:' "$tmp/out"
if [ $st != 0 ]; then
    [ $st = 124 ] && echo "FAIL: the job did not finish in $limit s" || echo "FAIL: status $st"
    exit 1
fi
n=$(grep -c 'mtl:ofi:provider: vmmc' "$tmp/out")
if [ "$n" -lt "$np" ]; then
    echo "FAIL: $n of $np ranks report the ofi MTL on provider vmmc:"
    grep -e 'mtl:ofi' -e 'select:' "$tmp/out" | head -20
    exit 1
fi
eps=$(ls "$tmp" | grep -c '^stats\.')
if [ "$eps" -lt "$np" ]; then
    echo "FAIL: $eps vmmc endpoints wrote their counters at close (VMMC_STATS), expected >= $np"
    exit 1
fi
if [ "$mode" = vmmc_udp ]; then
    for f in "$tmp"/stats.*; do
        tx=$(sed -n 's/.* udp\.tx_data=\([0-9]*\)$/\1/p' "$f" | head -1)
        if [ -z "$tx" ] || [ "$tx" = 0 ]; then
            echo "FAIL: with VMMC_TRANSPORT=udp an endpoint sent no udp data (udp.tx_data=${tx:-absent}):"
            cat "$f"
            exit 1
        fi
    done
fi
echo "mpi_run: $mode, $np ranks: passed through provider vmmc ($eps endpoints)"
