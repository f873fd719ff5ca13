#!/usr/bin/env bash
# The echo example between two unrelated processes: a server that prints its
# address and a client started with it (no launcher, no bootstrap).
#
# usage: echo_pair.sh [--netns] EXAMPLE REQUESTS [CLIENTS]
#   default: both on this host (shm; VMMC_TRANSPORT=udp in the environment
#            makes it udp);
#   --netns: server and client in two network namespaces joined by a veth
#            pair (two "hosts": 192.0.2.1 and 192.0.2.2), so they talk udp.
#            Exit 77 with the reason when namespaces cannot be made here.
# CLIENTS clients run one after the other against one server, which answers
# REQUESTS * CLIENTS requests. Exit 0 only if every reply checked out.
set -u
netns=0
if [ "${1:-}" = "--netns" ]; then netns=1; shift; fi
prog=$1 requests=$2 clients=${3:-1}
out=$(mktemp) tag="vo$$"
srv=""
cleanup() {
    [ -n "$srv" ] && kill -9 "$srv" 2>/dev/null
    if [ $netns = 1 ]; then ip netns del "${tag}a" 2>/dev/null; ip netns del "${tag}b" 2>/dev/null; fi
    rm -f "$out"
}
trap cleanup EXIT INT TERM
run_a=() run_b=()
if [ $netns = 1 ]; then
    command -v ip >/dev/null || { echo "SKIP: iproute2 (ip) is not installed" >&2; exit 77; }
    if ! err=$(ip netns add "${tag}a" 2>&1); then
        echo "SKIP: cannot create network namespaces here: $err" >&2
        exit 77
    fi
    ip netns add "${tag}b" || exit 77
    ip link add "a$tag" type veth peer name "b$tag" || { echo "SKIP: cannot create a veth pair" >&2; exit 77; }
    ip link set "a$tag" netns "${tag}a" && ip link set "b$tag" netns "${tag}b" || exit 77
    ip -n "${tag}a" addr add 192.0.2.1/24 dev "a$tag" && ip -n "${tag}b" addr add 192.0.2.2/24 dev "b$tag"
    for n in a b; do ip -n "$tag$n" link set "$n$tag" up; ip -n "$tag$n" link set lo up; done
    run_a=(ip netns exec "${tag}a") run_b=(ip netns exec "${tag}b")
fi
"${run_a[@]}" "$prog" server $((requests * clients)) >"$out" 2>&1 &
srv=$!
addr=""
for _ in $(seq 1 600); do # up to 30 s: a loaded machine opens libfabric slowly
    addr=$(sed -n 's/^address: //p' "$out")
    [ -n "$addr" ] && break
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.05
done
if [ -z "$addr" ]; then echo "echo_pair: the server printed no address:" >&2; cat "$out" >&2; exit 1; fi
echo "server address: $addr"
case "$addr" in *udp=192.0.2.1:*) ;; *) [ $netns = 1 ] && { echo "echo_pair: the server's address names no udp on 192.0.2.1" >&2; exit 1; } ;; esac
for ((c = 0; c < clients; c++)); do
    if ! timeout 60 "${run_b[@]}" "$prog" client "$addr" "$requests"; then
        echo "echo_pair: client $c failed; the server said:" >&2
        cat "$out" >&2
        exit 1
    fi
done
for _ in $(seq 1 1200); do kill -0 "$srv" 2>/dev/null || break; sleep 0.05; done # 60 s
if kill -0 "$srv" 2>/dev/null; then echo "echo_pair: the server did not finish" >&2; cat "$out" >&2; exit 1; fi
wait "$srv"
st=$?
srv=""
cat "$out"
[ $st = 0 ] || { echo "echo_pair: the server exited with $st" >&2; exit 1; }
grep -q "answered $((requests * clients)) requests" "$out" || exit 1
n=$(grep -c "connected" "$out")
[ "$n" = "$clients" ] || { echo "echo_pair: the server accepted $n peers, not $clients" >&2; exit 1; }
echo "echo_pair: ok"
