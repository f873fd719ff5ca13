#!/usr/bin/env bash
# Run a vmmc job across network namespaces that act as separate hosts.
#
# usage: netns_job.sh [-n RANKS] [-H HOSTS] [-t SECONDS] [-e VAR=VALUE]... -- prog [args...]
#
# Creates HOSTS namespaces joined by a bridge in a private "switch"
# namespace, addresses 192.0.2.10+i/24 (TEST-NET-1: traffic never leaves
# these namespaces), starts rank r in host r % HOSTS with the TCP bootstrap
# (VMMC_BOOTSTRAP, served by rank 0), waits for all ranks (at most SECONDS),
# and removes everything on exit. Exit status: the first non-zero status of a
# rank (128+signal if killed), 124 on timeout, 77 if namespaces cannot be
# created here (with the reason on stderr).
set -u
ranks=2 hosts=2 limit=120
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
    -n) ranks=$2; shift 2 ;;
    -H) hosts=$2; shift 2 ;;
    -t) limit=$2; shift 2 ;;
    -e) extra+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [-n RANKS] [-H HOSTS] [-t SECONDS] [-e VAR=VALUE]... -- prog [args...]" >&2; exit 2; }

tag="v$$"
sw="${tag}sw"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    for ((h = 0; h < hosts; h++)); do ip netns del "${tag}h$h" 2>/dev/null; done
    ip netns del "$sw" 2>/dev/null
}
trap cleanup EXIT INT TERM

if ! command -v ip >/dev/null; then echo "SKIP: iproute2 (ip) is not installed" >&2; exit 77; fi
if ! ip netns add "$sw" 2>/tmp/netns_err.$$; then
    echo "SKIP: cannot create network namespaces here: $(cat /tmp/netns_err.$$)" >&2
    rm -f /tmp/netns_err.$$
    exit 77
fi
rm -f /tmp/netns_err.$$
ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || { echo "SKIP: cannot create a bridge" >&2; exit 77; }
for ((h = 0; h < hosts; h++)); do
    ns="${tag}h$h"
    ip netns add "$ns" || exit 77
    ip link add "e$h$tag" type veth peer name "p$h$tag" || { echo "SKIP: cannot create veth pairs" >&2; exit 77; }
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
done
# Each eth0 has its carrier before the ranks start (up to 5 s): until then
# a provider that lists only running interfaces (libfabric's udp) offers a
# rank loopback addresses alone, which its peers cannot reach.
for ((h = 0; h < hosts; h++)); do
    for ((w = 0; w < 50; w++)); do
        ip -n "${tag}h$h" link show eth0 | grep -q NO-CARRIER || break
        sleep 0.1
    done
done

port=$((20000 + RANDOM % 20000))
start=$(date +%s)
for ((r = 0; r < ranks; r++)); do
    h=$((r % hosts))
    ip netns exec "${tag}h$h" env VMMC_RANK=$r VMMC_SIZE=$ranks \
        VMMC_BOOTSTRAP="192.0.2.10:$port" "${extra[@]}" "$@" &
    pids+=($!)
done

status=0
for i in "${!pids[@]}"; do
    p=${pids[$i]}
    while kill -0 "$p" 2>/dev/null; do
        if [ $(( $(date +%s) - start )) -ge "$limit" ]; then
            echo "netns_job: timed out after $limit s; killing the job" >&2
            exit 124
        fi
        sleep 0.1
    done
    wait "$p"
    s=$?
    if [ $s -ne 0 ] && [ $status -eq 0 ]; then
        echo "netns_job: rank $i exited with status $s" >&2
        status=$s
    fi
done
exit $status
