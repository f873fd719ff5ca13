#!/usr/bin/env bash
# iperf3 over vmmc: server and client under `vmmc preload`; the client sends
# a file of random bytes (-F, a fixed byte count), the server writes what it
# receives to a file (-F), JSON output on both sides. Checked: the client
# sent exactly the file; the server's file is byte for byte a prefix of it and
# as long as the server's own count; both ends report their connections
# upgraded. Then in reverse (-R: the server sends), and with only the client
# preloaded: the connection stays on the kernel's TCP (fallback).
#
# iperf3 (3.12) stops reading the data connection when the client's
# TEST_END arrives on the control connection, so bytes still in flight then
# are never counted, on the kernel's TCP as well (a few runs in ten end short
# on loopback): the server's count may be below the client's, never above,
# and what it got must be the exact start of what was sent.
#   iperf3.sh <vmmc tool> <libvmmc-preload.so|none>
. "$(dirname "$0")/apps_lib.sh"
need iperf3 jq cmp
MIB=${APPS_IPERF_MIB:-32}
head -c "$((MIB << 20))" /dev/urandom >"$APPS_DIR/src.bin" || fail "cannot write the source file"

# run CASE SERVER_PRELOADED CLIENT_PRELOADED [-R]
run() {
    local name=$1 spre=$2 cpre=$3 rev=${4:-} port s=() c=()
    [ "$spre" = y ] && s=("${PRE[@]}")
    [ "$cpre" = y ] && c=("${PRE[@]}")
    local sfile=$APPS_DIR/$name-dst.bin cfile=$APPS_DIR/src.bin
    if [ -n "$rev" ]; then   # the server sends the file, the client receives
        sfile=$APPS_DIR/src.bin cfile=$APPS_DIR/$name-dst.bin
    fi
    start_server "$name-server" port t 60 "${s[@]}" iperf3 -s -1 -J -B 127.0.0.1 -p @PORT@ -F "$sfile"
    local spid=$BG_PID
    t 60 "${c[@]}" iperf3 -c 127.0.0.1 -p "$port" -F "$cfile" $rev -J \
        >"$APPS_DIR/$name-client.json" 2>"$APPS_DIR/$name-client.log" ||
        fail "$name: the iperf3 client failed: $(jq -r '.error // empty' "$APPS_DIR/$name-client.json" 2>/dev/null)"
    wait "$spid" || fail "$name: the iperf3 server exited with $?"
    # The server's JSON is on its stdout, the layer's debug lines on stderr.
    sed -n '/^{/,/^}/p' "$APPS_DIR/$name-server.log" >"$APPS_DIR/$name-server.json"
    local sj=$APPS_DIR/$name-server.json cj=$APPS_DIR/$name-client.json
    local snd=$cj rcv=$sj
    [ -n "$rev" ] && snd=$sj rcv=$cj
    local sent recv got
    sent=$(jq -r '.end.sum_sent.bytes' "$snd") || fail "$name: the sender's JSON does not parse"
    recv=$(jq -r '.end.sum_received.bytes' "$rcv") || fail "$name: the receiver's JSON does not parse"
    got=$(stat -c %s "$APPS_DIR/$name-dst.bin") || fail "$name: nothing received"
    [ "$sent" = "$((MIB << 20))" ] || fail "$name: the sender sent $sent bytes of $((MIB << 20))"
    [ "$recv" = "$got" ] || fail "$name: the receiver counted $recv bytes but wrote $got"
    [ "$got" -gt 0 ] && [ "$got" -le "$sent" ] || fail "$name: $got bytes received of $sent sent"
    cmp -n "$got" "$APPS_DIR/src.bin" "$APPS_DIR/$name-dst.bin" ||
        fail "$name: the bytes received differ from the bytes sent"
    note "$name: $sent bytes sent, the first $got received intact"
}

run both y y
expect_upgraded "$APPS_DIR/both-server.log" server 2   # control and data connections
expect_upgraded "$APPS_DIR/both-client.log" client 2
run reverse y y -R
expect_upgraded "$APPS_DIR/reverse-server.log" server 2
expect_upgraded "$APPS_DIR/reverse-client.log" client 2
run fallback n y
expect_not_upgraded "$APPS_DIR/fallback-client.log"
echo "PASS"
