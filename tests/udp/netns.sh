#!/bin/sh
# Run two link endpoints in two network namespaces joined by a veth pair,
# with TEST-NET-2 addresses (198.51.100.0/24, RFC 5737) that exist only on the
# veth: traffic never leaves the namespaces. Everything is removed on exit.
# Usage: netns.sh PATH/TO/udp_peer [MIB]   Exit 77 (skip) if namespaces
# cannot be created here (not root, no CAP_NET_ADMIN, no iproute2).
PEER=$1
MIB=${2:-64}
NA=vmmc_udp_a_$$
NB=vmmc_udp_b_$$

skip() { echo "SKIP: $*"; exit 77; }
command -v ip >/dev/null 2>&1 || skip "iproute2 (ip) is not installed"
[ -x "$PEER" ] || { echo "FAIL: $PEER is not executable"; exit 1; }

cleanup() {
    ip netns del "$NA" 2>/dev/null
    ip netns del "$NB" 2>/dev/null
}
trap cleanup EXIT INT TERM

ip netns add "$NA" 2>/dev/null || skip "cannot create network namespaces (need root / CAP_NET_ADMIN)"
ip netns add "$NB" || exit 1
set -e
ip link add veth_a netns "$NA" type veth peer name veth_b netns "$NB" 2>/dev/null ||
    skip "cannot create a veth pair"
ip -n "$NA" addr add 198.51.100.1/24 dev veth_a
ip -n "$NB" addr add 198.51.100.2/24 dev veth_b
ip -n "$NA" link set lo up
ip -n "$NB" link set lo up
ip -n "$NA" link set veth_a up
ip -n "$NB" link set veth_b up
set +e

# The default datagram (63 KiB) is fragmented by IP over the veth's
# 1500-byte MTU; run once like that, once with MTU-sized datagrams.
for dgram in 63K 1472; do
    echo "== VMMC_UDP_DGRAM_SIZE=$dgram, $MIB MiB each way"
    VMMC_UDP_DGRAM_SIZE=$dgram ip netns exec "$NA" "$PEER" 0 198.51.100.1 47001 198.51.100.2 47002 "$MIB" &
    A=$!
    VMMC_UDP_DGRAM_SIZE=$dgram ip netns exec "$NB" "$PEER" 1 198.51.100.2 47002 198.51.100.1 47001 "$MIB"
    RB=$?
    wait $A
    RA=$?
    if [ $RA -ne 0 ] || [ $RB -ne 0 ]; then
        echo "FAIL: endpoint exit codes $RA $RB"
        exit 1
    fi
done
echo PASS
