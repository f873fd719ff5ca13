#!/usr/bin/env bash
# Redis over vmmc: redis-server under `vmmc preload`; redis-benchmark
# (SET/GET, 20 connections, then pipelined 16 deep) under the preload must
# complete every request; redis-cli stores a 1 MiB random value, reads it
# back and it must match byte for byte; a pipe of 2000 commands
# (redis-cli --pipe) must all be answered without error and read back.
# Both ends must say their connections upgraded.
#   redis.sh <vmmc tool> <libvmmc-preload.so|none>
. "$(dirname "$0")/apps_lib.sh"
need redis-server redis-benchmark redis-cli cmp
D=$APPS_DIR
start_server server port t 300 "${PRE[@]}" redis-server --bind 127.0.0.1 --port @PORT@ \
    --save "" --appendonly no --dir "$D" --daemonize no --protected-mode no --loglevel warning
cli() { t 60 "${PRE[@]}" redis-cli -h 127.0.0.1 -p "$port" "$@"; }

for pipe in 1 16; do
    log=$D/bench-P$pipe.log
    t 120 "${PRE[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n 2000 -c 20 -P $pipe -q \
        >"$log" 2>&1 || fail "redis-benchmark -P $pipe exited with $?"
    tr '\r' '\n' <"$log" | grep -E "^(SET|GET): [0-9.]+ requests per second" >"$D/rps-P$pipe" || true
    [ "$(wc -l <"$D/rps-P$pipe")" = 2 ] || fail "redis-benchmark -P $pipe did not report both SET and GET"
    grep -qi "error" "$log" && fail "redis-benchmark -P $pipe reports errors"
    note "redis-benchmark -P $pipe: $(tr '\n' ' ' <"$D/rps-P$pipe")"
    expect_upgraded "$log" client 20
done

# a 1 MiB random value, binary, through SET and GET
head -c 1048576 /dev/urandom >"$D/value" || fail "cannot write the value"
[ "$(cli -x SET big <"$D/value" 2>"$D/cli-set.log")" = OK ] || fail "redis-cli SET of 1 MiB failed"
cli --raw GET big >"$D/got" 2>"$D/cli-get.log" || fail "redis-cli GET failed"
# --raw ends the value with one newline
[ "$(stat -c %s "$D/got")" = 1048577 ] || fail "GET returned $(stat -c %s "$D/got") bytes, 1048577 expected"
head -c 1048576 "$D/got" | cmp - "$D/value" || fail "the 1 MiB value read back differs"
note "1 MiB value read back intact"
expect_upgraded "$D/cli-get.log" client

# pipelined: 2000 SETs in one stream, then every value read back
for i in $(seq 1 2000); do
    printf '*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$%d\r\nv%d\r\n' $((${#i} + 1)) "$i" $((${#i} + 1)) "$i"
done >"$D/cmds"
[ "$(cli FLUSHALL)" = OK ] || fail "FLUSHALL failed"
cli --pipe <"$D/cmds" >"$D/pipe.out" 2>&1 || fail "redis-cli --pipe failed: $(tail -2 "$D/pipe.out")"
grep -q "errors: 0, replies: 2000" "$D/pipe.out" || fail "redis-cli --pipe: $(tail -1 "$D/pipe.out")"
n=$(cli DBSIZE) || fail "DBSIZE failed"
[ "$n" = 2000 ] || fail "DBSIZE is $n after 2000 pipelined SETs"
for i in 1 999 2000; do
    [ "$(cli GET "k$i")" = "v$i" ] || fail "k$i does not hold v$i after the pipe"
done
note "2000 pipelined SETs answered and stored"
kill -0 "$BG_PID" 2>/dev/null || fail "redis-server died"
expect_upgraded "$D/server.log" server 40
echo "PASS"
