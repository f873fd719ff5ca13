#!/usr/bin/env bash
# iperf3 over vmmc: server and client under `vmmc preload`, a fixed byte
# count (-n), JSON output on both sides, both ends must report their
# connections upgraded.
#  - reverse (-R: the server sends, the client receives): the bytes the
#    receiver counted equal the bytes the sender sent, exactly;
#  - forward (the client sends): the sender sent the count (iperf3 may go
#    one block past it: a non-blocking write that took part of a block still
#    counts, and the next block goes whole), and the server's count is what
#    it told the client, at most what was sent;
#  - fallback: only the client preloaded, reverse: the connection stays on
#    the kernel's TCP and the counts are equal.
# Why not equal counts forward: the iperf3 server stops reading the data
# connection when the client's TEST_END arrives on the control connection,
# so bytes still in flight then are never counted, on the kernel's TCP as
# well (on loopback, runs end 0 to 18 % short). Its -F (a file sent and
# written) does not give the file back byte for byte even on the kernel, so
# the bytes themselves are compared by the other scripts of tests/apps.
#   iperf3.sh <vmmc tool> <libvmmc-preload.so|none>
. "$(dirname "$0")/apps_lib.sh"
need iperf3 jq
BYTES=$((${APPS_IPERF_MIB:-32} << 20))

# run CASE SERVER_PRELOADED CLIENT_PRELOADED [-R]
run() {
    local name=$1 spre=$2 cpre=$3 rev=${4:-} port s=() c=()
    [ "$spre" = y ] && s=("${PRE[@]}")
    [ "$cpre" = y ] && c=("${PRE[@]}")
    start_server "$name-server" port t 60 "${s[@]}" iperf3 -s -1 -J -B 127.0.0.1 -p @PORT@
    local spid=$BG_PID
    t 60 "${c[@]}" iperf3 -c 127.0.0.1 -p "$port" -n "$BYTES" $rev -J \
        >"$APPS_DIR/$name-client.json" 2>"$APPS_DIR/$name-client.log" ||
        fail "$name: the iperf3 client failed: $(jq -r '.error // empty' "$APPS_DIR/$name-client.json" 2>/dev/null)"
    wait "$spid" || fail "$name: the iperf3 server exited with $?"
    # The server's JSON is on its stdout, the layer's debug lines on stderr.
    sed -n '/^{/,/^}/p' "$APPS_DIR/$name-server.log" >"$APPS_DIR/$name-server.json"
    local sj=$APPS_DIR/$name-server.json cj=$APPS_DIR/$name-client.json
    local sent recv told
    if [ -z "$rev" ]; then  # the client sends; the server tells it its count
        sent=$(jq -r '.end.sum_sent.bytes' "$cj") && recv=$(jq -r '.end.sum_received.bytes' "$sj") &&
            told=$(jq -r '.end.sum_received.bytes' "$cj") || fail "$name: a JSON output does not parse"
        [ "$recv" = "$told" ] || fail "$name: the server counted $recv bytes but told the client $told"
    else                    # the server sends and tells the client its count
        sent=$(jq -r '.end.sum_sent.bytes' "$sj") && recv=$(jq -r '.end.sum_received.bytes' "$cj") &&
            told=$(jq -r '.end.sum_sent.bytes' "$cj") || fail "$name: a JSON output does not parse"
        [ "$sent" = "$told" ] || fail "$name: the server sent $sent bytes but told the client $told"
    fi
    [ "$sent" -ge "$BYTES" ] && [ "$sent" -le $((BYTES + 128 * 1024)) ] ||
        fail "$name: the sender sent $sent bytes of $BYTES (at most one 128 KiB block more)"
    [ -z "$rev" ] || [ "$recv" = "$sent" ] || fail "$name: $sent bytes sent, $recv received"
    [ "$recv" -gt 0 ] && [ "$recv" -le "$sent" ] || fail "$name: $recv bytes received of $sent sent"
    note "$name: $sent bytes sent, $recv counted by the receiver ($((recv * 100 / sent)) %)"
}

run both y y
expect_upgraded "$APPS_DIR/both-server.log" server 2   # control and data connections
expect_upgraded "$APPS_DIR/both-client.log" client 2
run reverse y y -R
expect_upgraded "$APPS_DIR/reverse-server.log" server 2
expect_upgraded "$APPS_DIR/reverse-client.log" client 2
run fallback n y -R
expect_not_upgraded "$APPS_DIR/fallback-client.log"
echo "PASS"
