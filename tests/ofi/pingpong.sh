#!/bin/sh
# libfabric's own fi_pingpong (libfabric-bin) against the provider: a server
# and a client on this host over an RDM endpoint, data checked (-c).
#   pingpong.sh <fi_pingpong> <fi_info> msg|tagged <iterations> [size]
# Exits 77 when fi_pingpong or the provider is missing. The side channel is
# TCP on 127.0.0.1, on a port picked at random (retried if taken).
pp=$1 info=$2 mode=$3 iters=$4 size=${5:-all}
prov=${OFI_TEST_PROV:-vmmc}
command -v "$pp" >/dev/null 2>&1 || { echo "SKIP: no fi_pingpong"; exit 77; }
if ! "$info" -p "$prov" >/dev/null 2>&1; then
    echo "SKIP: fi_info -p $prov finds nothing (FI_PROVIDER_PATH=$FI_PROVIDER_PATH)"
    exit 77
fi
dir=$(mktemp -d) || exit 1
trap 'kill $srv 2>/dev/null; rm -rf "$dir"' EXIT
for attempt in 1 2 3 4 5; do
    port=$(( 30000 + ($$ * 7 + attempt * 7919) % 30000 ))
    timeout 100 "$pp" -p "$prov" -e rdm -m "$mode" -I "$iters" -S "$size" -c -B "$port" \
        >"$dir/srv" 2>&1 &
    srv=$!
    ok=0
    for try in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.3
        kill -0 $srv 2>/dev/null || break          # server gone (port taken?)
        if timeout 100 "$pp" -p "$prov" -e rdm -m "$mode" -I "$iters" -S "$size" -c \
            -P "$port" 127.0.0.1 >"$dir/cli" 2>&1; then
            ok=1
            break
        fi
        grep -q "refused" "$dir/cli" || break      # a real failure, not "not yet"
    done
    if [ $ok = 1 ]; then
        wait $srv
        rc=$?
        cat "$dir/cli"
        [ $rc = 0 ] && exit 0
        echo "FAIL: the server exited with $rc"; cat "$dir/srv"; exit 1
    fi
    if kill -0 $srv 2>/dev/null || ! grep -qi "in use" "$dir/srv"; then
        echo "FAIL: fi_pingpong -p $prov -e rdm -m $mode"
        echo "--- client:"; cat "$dir/cli" 2>/dev/null
        kill $srv 2>/dev/null; wait $srv 2>/dev/null
        echo "--- server:"; cat "$dir/srv"
        exit 1
    fi
done
echo "FAIL: no free port after 5 tries"
exit 1
