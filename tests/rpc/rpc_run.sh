#!/bin/sh
# Runs a vtest server and clients against it, and checks how their
# connections moved bytes.
#
#   rpc_run.sh VMMC SWRAP SERVER CWRAP CLIENT EXPECT "MODE;MODE..."
#
# VMMC: the vmmc tool. SWRAP/CWRAP: "plain" or "preload" (`vmmc preload --`).
# EXPECT: "up" (both ends say, with VMMC_SOCK_DEBUG, that their connection
# upgraded to shm), "kernel" (neither end upgraded), "any" (no check).
# The server listens on a port the kernel picks; each MODE is one client run
# (vtest_client's arguments after HOST PORT), in order. Exit 77 (skip) when
# `vmmc preload` is wanted and not there.
set -u
VMMC=$1 SWRAP=$2 SERVER=$3 CWRAP=$4 CLIENT=$5 EXPECT=$6 MODES=$7
tmp=$(mktemp -d /tmp/vmmc-rpc-test.XXXXXX) || exit 1
spid=
cleanup() {
    if [ -n "$spid" ]; then kill "$spid" 2>/dev/null; sleep 0.2; kill -9 "$spid" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
export VMMC_SOCK_DEBUG=1

wrap() {
    if [ "$1" = preload ]; then echo "$VMMC preload --"; fi
}
if [ "$SWRAP" = preload ] || [ "$CWRAP" = preload ]; then
    if ! "$VMMC" preload -- true >"$tmp/pre.out" 2>&1; then
        echo "SKIP: \`vmmc preload\` does not run here: $(tail -n 3 "$tmp/pre.out")"
        exit 77
    fi
fi

: >"$tmp/srv.out"
$(wrap "$SWRAP") "$SERVER" 0 >"$tmp/srv.out" 2>"$tmp/srv.err" &
spid=$!
port=
i=0
while [ $i -lt 300 ]; do
    port=$(sed -n 's/^port \([0-9][0-9]*\)$/\1/p' "$tmp/srv.out")
    [ -n "$port" ] && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
done
if [ -z "$port" ]; then
    echo "FAIL: the server did not start"; cat "$tmp/srv.err"; exit 1
fi
echo "server $SERVER ($SWRAP) on port $port"

rc=0
n=0
IFS=';'
for mode in $MODES; do
    IFS=' '
    n=$((n + 1))
    # shellcheck disable=SC2086
    timeout 300 $(wrap "$CWRAP") "$CLIENT" 127.0.0.1 "$port" $mode >"$tmp/cl$n.out" 2>"$tmp/cl$n.err"
    st=$?
    cat "$tmp/cl$n.out"
    if [ $st -ne 0 ]; then
        echo "FAIL: client ($CWRAP) $mode: exit $st"; cat "$tmp/cl$n.err"; rc=1
    fi
    IFS=';'
done
IFS=' '

cat "$tmp"/cl*.err > "$tmp/cl.err"
up_c=$(grep -c 'vmmc-sock\[[0-9]*\]: fd [0-9]* upgraded (shm, client)' "$tmp/cl.err")
up_s=$(grep -c 'vmmc-sock\[[0-9]*\]: fd [0-9]* upgraded (shm, server)' "$tmp/srv.err")
any_c=$(grep -c 'upgraded (' "$tmp/cl.err")
any_s=$(grep -c 'upgraded (' "$tmp/srv.err")
echo "upgraded connections: client side $up_c, server side $up_s"
case $EXPECT in
up)
    if [ "$up_c" -eq 0 ] || [ "$up_s" -eq 0 ]; then
        echo "FAIL: expected the connections to upgrade to shm on both ends"; rc=1
    fi ;;
kernel)
    if [ "$any_c" -ne 0 ] || [ "$any_s" -ne 0 ]; then
        echo "FAIL: expected every connection to stay on the kernel"; rc=1
    fi ;;
esac
if [ $rc -ne 0 ]; then
    echo "--- server stderr"; tail -n 40 "$tmp/srv.err"
    echo "--- client stderr"; tail -n 40 "$tmp/cl.err"
fi
exit $rc
