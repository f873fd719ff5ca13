#!/usr/bin/env bash
# One TCP connection between two "hosts" (two network namespaces joined by a
# veth pair, 192.0.2.1 and 192.0.2.2): the listener's probe responder, the
# client's probe and the HELLO cross the link, and both ends must upgrade
# over udp (the context's endpoint publishes the namespace's address).
# usage: sock_netns.sh T_SOCK_HELLO. Exit 77 when namespaces cannot be made.
set -u
prog=$1 tag="vs$$" out=$(mktemp) srv=""
cleanup() {
    [ -n "$srv" ] && kill -9 "$srv" 2>/dev/null
    ip netns del "${tag}a" 2>/dev/null; ip netns del "${tag}b" 2>/dev/null
    rm -f "$out"
}
trap cleanup EXIT INT TERM
command -v ip >/dev/null || { echo "SKIP: iproute2 (ip) is not installed"; exit 77; }
if ! err=$(ip netns add "${tag}a" 2>&1); then echo "SKIP: no network namespaces here: $err"; exit 77; fi
ip netns add "${tag}b" || exit 77
ip link add "a$tag" type veth peer name "b$tag" || { echo "SKIP: cannot create a veth pair"; exit 77; }
ip link set "a$tag" netns "${tag}a" && ip link set "b$tag" netns "${tag}b" || exit 77
ip -n "${tag}a" addr add 192.0.2.1/24 dev "a$tag" && ip -n "${tag}b" addr add 192.0.2.2/24 dev "b$tag"
for n in a b; do ip -n "$tag$n" link set "$n$tag" up; ip -n "$tag$n" link set lo up; done
port=$((20000 + $$ % 20000))
VMMC_SOCK_PROBE_TIMEOUT=2s VMMC_SOCK_DEBUG=y ip netns exec "${tag}a" "$prog" serve 192.0.2.1 $port >"$out" 2>&1 &
srv=$!
for _ in $(seq 1 200); do
    grep -q listening "$out" && break
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.05
done
grep -q listening "$out" || { echo "sock_netns: the server did not listen:"; cat "$out"; exit 1; }
VMMC_SOCK_PROBE_TIMEOUT=2s VMMC_SOCK_DEBUG=y timeout 120 ip netns exec "${tag}b" "$prog" dial 192.0.2.1 $port
cst=$?
wait "$srv"
sst=$?
srv=""
cat "$out"
[ $cst = 0 ] && [ $sst = 0 ] || { echo "sock_netns: client $cst, server $sst"; exit 1; }
grep -q "upgraded (udp, server)" "$out" || exit 1
echo "sock_netns: ok"
