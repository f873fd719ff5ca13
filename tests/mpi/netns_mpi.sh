#!/usr/bin/env bash
# An MPI job across two "hosts" (network namespaces joined by a bridge, as
# tests/multihost/netns_job.sh makes them) under one Open MPI mpirun:
# mpirun runs in host 0, and starts its daemon in host 1 through an rsh agent
# that turns "ssh HOST CMD" into "ip netns exec NS CMD" (with a hostname of
# its own, so that Open MPI sees two nodes). Ranks are split evenly between
# the hosts. The run itself and its checks are mpi_run.sh's.
#
# usage: netns_mpi.sh MODE NP VMMC_TOOL FI_DIR PROG [ARGS...]
# Exit 77 (skip) where namespaces cannot be made here.
set -u
[ $# -ge 5 ] || { echo "usage: $0 MODE NP VMMC_TOOL FI_DIR PROG [ARGS...]" >&2; exit 2; }
mode=$1 np=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v ip >/dev/null || { echo "SKIP: iproute2 (ip) is not installed"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: unshare (util-linux) is not installed"; exit 77; }
command -v mpirun.openmpi >/dev/null || command -v mpirun >/dev/null ||
    { echo "SKIP: Open MPI's mpirun is not installed (apt-get install -y openmpi-bin)"; exit 77; }

tag="m$$"
sw="${tag}sw"
tmp=$(mktemp -d)
cleanup() {
    for h in 0 1; do ip netns pids "${tag}h$h" 2>/dev/null | xargs -r kill -9 2>/dev/null; done
    for h in 0 1; do ip netns del "${tag}h$h" 2>/dev/null; done
    ip netns del "$sw" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
if ! ip netns add "$sw" 2>"$tmp/err"; then
    echo "SKIP: cannot create network namespaces here: $(cat "$tmp/err")"
    exit 77
fi
ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up ||
    { echo "SKIP: cannot create a bridge"; exit 77; }
for h in 0 1; do
    ns="${tag}h$h"
    ip netns add "$ns" || exit 77
    ip link add "e$h$tag" type veth peer name "p$h$tag" || { echo "SKIP: cannot create veth pairs"; exit 77; }
    ip link set "e$h$tag" netns "$ns"
    ip link set "p$h$tag" netns "$sw"
    ip -n "$ns" link set "e$h$tag" name eth0
    ip -n "$ns" addr add "192.0.2.$((10 + h))/24" dev eth0
    ip -n "$ns" link set eth0 mtu 65000 2>/dev/null || true
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$sw" link set "p$h$tag" mtu 65000 2>/dev/null || true
    ip -n "$sw" link set "p$h$tag" master br0
    ip -n "$sw" link set "p$h$tag" up
    echo "192.0.2.$((10 + h)) $ns" >>"$tmp/hostmap"
    echo "192.0.2.$((10 + h)) slots=$(((np + 1) / 2))" >>"$tmp/hostfile"
done
# The rsh agent: Open MPI calls it as "agent [ssh options] HOST COMMAND...".
cat >"$tmp/agent" <<AGENT
#!/usr/bin/env bash
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
ns=\$(awk -v h="\$host" '\$1 == h {print \$2}' "$tmp/hostmap")
[ -n "\$ns" ] || { echo "netns agent: unknown host \$host" >&2; exit 1; }
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0"; exec sh -c "\$1"' "\$host" "\$*"
AGENT
chmod +x "$tmp/agent"

# a run takes seconds; a hang is cut short so the failure is seen in time
export MPI_RUN_LIMIT=${MPI_RUN_LIMIT:-90}
export MPI_RUN_EXTRA="--hostfile $tmp/hostfile --mca plm_rsh_agent $tmp/agent
 --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0"
ip netns exec "${tag}h0" unshare --uts sh -c 'hostname 192.0.2.10; exec "$@"' sh \
    "$here/mpi_run.sh" "$@"
