#!/bin/sh
# Run one preload scenario: the server and the client of pltest, each
# under `vmmc preload` or plain, both bounded by timeouts.
#   run.sh VMMC PLTEST SCENARIO SERVER CLIENT [FAMILY]
# SERVER, CLIENT: preload | plain. FAMILY: 4 (default) or 6.
# With both preloaded the connection must upgrade (PL_EXPECT=vmmc); with
# one side plain, the preloaded side must stay on the kernel's TCP.
set -u
VMMC=$1 PLTEST=$2 SCEN=$3 SRV=$4 CLI=$5 FAM=${6:-4}
T=${PL_TIMEOUT:-90}
dir=$(mktemp -d /tmp/pltest.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
export PL_FAMILY=$FAM
# The machine may be loaded: give the listener's answer to the upgrade probe
# time (a connection whose probe goes unanswered stays on TCP, and the test
# checks that both preloaded ends upgraded).
export VMMC_SOCK_PROBE_TIMEOUT=${VMMC_SOCK_PROBE_TIMEOUT:-2s}

if [ "$FAM" = 6 ] && ! python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    echo "no IPv6 loopback here: skipped"
    exit 77
fi

expect=kernel
[ "$SRV" = preload ] && [ "$CLI" = preload ] && expect=vmmc
# a listener closed right after accept may be gone before the client's probe
# reaches it: then both ends stay on TCP, which is right too (bytes checked)
[ "$SCEN" = lclose ] && expect=
wrap() { # side: preload|plain
    if [ "$1" = preload ]; then echo "$VMMC preload --"; fi
}

PL_EXPECT=$expect timeout -s KILL $T $(wrap "$SRV") "$PLTEST" server "$SCEN" "$dir/port" \
    >"$dir/server.out" 2>&1 &
spid=$!
i=0
while [ ! -s "$dir/port" ]; do
    if ! kill -0 $spid 2>/dev/null; then
        echo "server exited before listening:"; cat "$dir/server.out"; exit 1
    fi
    i=$((i + 1))
    if [ $i -gt 600 ]; then echo "server did not listen in 60 s"; kill -9 $spid; exit 1; fi
    sleep 0.1
done
port=$(cat "$dir/port")
PL_EXPECT=$expect timeout -s KILL $T $(wrap "$CLI") "$PLTEST" client "$SCEN" "$port" \
    >"$dir/client.out" 2>&1
crc=$?
wait $spid
src=$?
cat "$dir/server.out" "$dir/client.out"
# the killed scenario's server dies of SIGKILL on purpose
[ "$SCEN" = killed ] && [ $src -eq 137 ] && src=0
if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
    echo "FAIL: $SCEN server($SRV)=$src client($CLI)=$crc"
    exit 1
fi
echo "ok: $SCEN server($SRV) client($CLI) IPv$FAM (${expect:-either})"
