#!/bin/sh
# rpcbind registration and lookup with vRPC: the native server registers
# (svc_vmmc_tp_create) and libtirpc's clnt_create finds it; rpcgen's server
# registers (svc_tp_create) and clnt_vmmc_create finds it.
#
#   rpc_rpcbind.sh SERVER SERVER_NATIVE CLIENT CLIENT_NATIVE
#
# Starts its own rpcbind (-f: in the foreground) and stops it; skips (77)
# with the reason unless rpcbind is installed, we are root and nothing
# listens on port 111.
set -u
SERVER=$1 SERVER_NATIVE=$2 CLIENT=$3 CLIENT_NATIVE=$4
RPCBIND=$(command -v rpcbind || ls /usr/sbin/rpcbind /sbin/rpcbind 2>/dev/null | head -n 1)
if [ -z "$RPCBIND" ]; then echo "SKIP: rpcbind is not installed (apt-get install rpcbind)"; exit 77; fi
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: starting rpcbind needs root"; exit 77; fi
if (exec 3<>/dev/tcp/127.0.0.1/111) 2>/dev/null || \
   { command -v ss >/dev/null && ss -ltn 2>/dev/null | grep -q ':111 '; }; then
    echo "SKIP: something already listens on port 111 (an rpcbind we must not disturb)"; exit 77
fi
tmp=$(mktemp -d /tmp/vmmc-rpcbind.XXXXXX) || exit 1
bpid= spid=
cleanup() {
    [ -n "$spid" ] && kill "$spid" 2>/dev/null
    [ -n "$bpid" ] && kill "$bpid" 2>/dev/null
    sleep 0.2
    [ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
    [ -n "$bpid" ] && kill -9 "$bpid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
"$RPCBIND" -f >"$tmp/rpcbind.log" 2>&1 &
bpid=$!
i=0
until rpcinfo -p 127.0.0.1 >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$bpid" 2>/dev/null; then
        echo "SKIP: rpcbind did not start: $(cat "$tmp/rpcbind.log")"; exit 77
    fi
    sleep 0.1
done
rc=0
run() { # server client
    "$1" rpcbind >"$tmp/srv.out" 2>"$tmp/srv.err" &
    spid=$!
    i=0
    until grep -q '^port' "$tmp/srv.out"; do
        i=$((i + 1))
        if [ $i -gt 200 ] || ! kill -0 "$spid" 2>/dev/null; then
            echo "FAIL: $1 did not register"; cat "$tmp/srv.err"; rc=1; return
        fi
        sleep 0.1
    done
    # vtest's program number 0x20076d63, registered for tcp
    if ! rpcinfo -p 127.0.0.1 | grep -E '^ *537357667 +1 +tcp '; then
        echo "FAIL: $1 is not registered with rpcbind"; rpcinfo -p 127.0.0.1; rc=1
    fi
    if ! timeout 120 "$2" 127.0.0.1 rpcbind basic; then
        echo "FAIL: $2 through rpcbind to $1"; rc=1
    fi
    kill "$spid"; wait "$spid" 2>/dev/null; spid=
}
run "$SERVER_NATIVE" "$CLIENT"
run "$SERVER" "$CLIENT_NATIVE"
run "$SERVER_NATIVE" "$CLIENT_NATIVE"
exit $rc
