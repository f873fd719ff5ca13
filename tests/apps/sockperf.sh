#!/usr/bin/env bash
# sockperf over vmmc: `sockperf sr --tcp` (once with blocking reads, once
# with its epoll loop) and `sockperf pp --tcp` (64 B and 16 KiB) and
# `sockperf tp --tcp` under `vmmc preload`. The tool's own checks must pass
# (exit 0; no dropped, duplicated or out-of-order messages; as many replies
# as requests), it must report its results, and both ends must say their
# connections upgraded.
#   sockperf.sh <vmmc tool> <libvmmc-preload.so|none>
. "$(dirname "$0")/apps_lib.sh"
need sockperf

# pp NAME PORT SIZE: one ping-pong run, its checks.
pp() {
    local name=$1 port=$2 size=$3 log=$APPS_DIR/$1.log
    # paced at 1 M messages/s at most: unpaced, vmmc's rate overflows
    # sockperf's own table of sequence numbers ("_seqN > m_maxSequenceNo")
    t 60 "${PRE[@]}" sockperf pp --tcp -i 127.0.0.1 -p "$port" -t 1 --mps 1000000 -m "$size" \
        >"$log" 2>&1 ||
        fail "$name: sockperf pp exited with $?"
    grep -q "# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0" "$log" ||
        fail "$name: sockperf reports lost, repeated or reordered messages"
    local v sent recv
    v=$(grep "\[Valid Duration\]" "$log") || fail "$name: no [Valid Duration] line"
    sent=$(sed -n 's/.*SentMessages=\([0-9]*\).*/\1/p' <<<"$v")
    recv=$(sed -n 's/.*ReceivedMessages=\([0-9]*\).*/\1/p' <<<"$v")
    [ -n "$sent" ] && [ "$sent" -gt 0 ] && [ "$sent" = "$recv" ] ||
        fail "$name: $sent requests, $recv replies"
    grep -q "Summary: Latency is" "$log" || fail "$name: no latency reported"
    note "$name: $recv round trips, $(grep -o 'Latency is [0-9.]* usec' "$log")"
    expect_upgraded "$log" client
}

for mode in recvfrom epoll; do
    if [ $mode = recvfrom ]; then
        start_server "sr-$mode" port t 120 "${PRE[@]}" sockperf sr --tcp -i 127.0.0.1 -p @PORT@
    else
        # its epoll loop serves the addresses of a feed file
        feed=$APPS_DIR/feed-$mode
        start_server "sr-$mode" port t 120 bash -c 'echo "T:127.0.0.1:$1" >"$2"; shift 2; exec "$@"' \
            _ @PORT@ "$feed" "${PRE[@]}" sockperf sr -f "$feed" -F e
    fi
    srv=$BG_PID
    pp "pp64-$mode" "$port" 64
    pp "pp16k-$mode" "$port" 16384
    log=$APPS_DIR/tp-$mode.log
    t 60 "${PRE[@]}" sockperf tp --tcp -i 127.0.0.1 -p "$port" -t 1 -m 1024 >"$log" 2>&1 ||
        fail "tp-$mode: sockperf tp exited with $?"
    rate=$(sed -n 's/.*Summary: Message Rate is \([0-9]*\).*/\1/p' "$log")
    [ -n "$rate" ] && [ "$rate" -gt 0 ] || fail "tp-$mode: no message rate reported"
    note "tp-$mode: $rate msg/s"
    expect_upgraded "$log" client
    kill -0 "$srv" 2>/dev/null || fail "sr-$mode: the server died"
    expect_upgraded "$APPS_DIR/sr-$mode.log" server 3
    kill -TERM "$srv"
    wait "$srv" 2>/dev/null
done
echo "PASS"
