#!/usr/bin/env bash
# `vmmc bench sock --quick` (one repetition): every row is there with a
# positive figure, each vmmc row with its ratio to the kernel's TCP row of
# the same run; with the preload library built and sockperf and redis
# installed, the preload_* rows too. No speed is asserted.
#   bench_sock.sh <vmmc tool> <libvmmc-preload.so|none>
APPS_MODE=plain # the suite runs vmmc_sock_* itself; it finds the preload on its own
. "$(dirname "$0")/apps_lib.sh"
need jq
out=$APPS_DIR/bench.json
t 250 "$VMMC" bench sock --quick --reps 1 --timeout 240 --format json >"$out" 2>"$APPS_DIR/bench.log" ||
    fail "vmmc bench sock exited with $?"
jq -e . "$out" >/dev/null || fail "the JSON output does not parse"
# row METRIC SIZE [REF]: present, positive, with the ratio to REF
row() {
    local r
    r=$(jq -c --arg m "$1" --argjson s "$2" '.rows[] | select(.suite == "sock" and .metric == $m and .size == $s)' "$out")
    [ -n "$r" ] || fail "no row $1 at $2 B; notes: $(jq -r '.notes[]?' "$out" | tr '\n' ' ')"
    jq -e '.value > 0' <<<"$r" >/dev/null || fail "row $1 at $2 B: $r"
    if [ -n "${3:-}" ]; then
        jq -e --arg ref "$3@$2" '.ratio > 0 and .ratio_to == $ref' <<<"$r" >/dev/null ||
            fail "row $1 at $2 B has no ratio to $3: $r"
    fi
}
for s in 1 64 1024 16384; do row tcp_lat $s; row vmmc_lat $s sock/tcp_lat; done
for s in 65536 1048576; do row tcp_bw $s; row vmmc_bw $s sock/tcp_bw; done
for n in 16 64; do row tcp_rr_c$n 64; row vmmc_rr_c$n 64 sock/tcp_rr_c$n; done
if [ "$PRELOAD_LIB" != none ] && [ -f "$PRELOAD_LIB" ]; then
    if command -v sockperf >/dev/null; then
        row sockperf_tcp_lat 64; row preload_sockperf_lat 64 sock/sockperf_tcp_lat
    fi
    if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
        row redis_tcp_get 64; row preload_redis_get 64 sock/redis_tcp_get
    fi
fi
jq -r '.rows[] | select(.suite == "sock") | "\(.metric) \(.size) B: \(.value) \(.unit)" +
       (if .ratio then " (\(.ratio)x \(.ratio_to))" else "" end)' "$out"
echo "PASS"
