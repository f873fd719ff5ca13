#!/usr/bin/env bash
# memcached over vmmc: memcached under `vmmc preload`; libmemcached's
# memccp/memccat/memcstat under the preload too. 16 values of random bytes
# (1 B to 1 MiB) are stored by 16 clients at once (16 connections, text
# protocol), read back by 16 clients at once and compared byte for byte;
# then all stored again through one binary-protocol, non-blocking client and
# read back. memcstat must count the connections and sets, and both ends
# must say their connections upgraded.
#   memcached.sh <vmmc tool> <libvmmc-preload.so|none>
. "$(dirname "$0")/apps_lib.sh"
need memcached memccp memccat memcstat cmp
D=$APPS_DIR
user=()
[ "$(id -u)" = 0 ] && user=(-u root)   # memcached refuses root without -u
start_server server port t 300 "${PRE[@]}" memcached "${user[@]}" -l 127.0.0.1 -p @PORT@ -U 0 \
    -m 128 -I 2m -t 2 -c 1024
srv=$BG_PID
S=--servers=127.0.0.1:$port
N=16
mkdir -p "$D/v" "$D/got"
sizes=(1 7 100 1000 4095 4096 4097 65535 65536 100000 262144 500000 1000000 1048000 777 31)
for i in $(seq 0 $((N - 1))); do
    head -c "${sizes[$i]}" /dev/urandom >"$D/v/val$i" || fail "cannot write val$i"
done

# check_back ROUND: read every value back, N clients at once, and compare
check_back() {
    local r=$1 i pids=()
    for i in $(seq 0 $((N - 1))); do
        t 60 "${PRE[@]}" memccat "$S" "val$i" >"$D/got/$r-val$i" 2>"$D/$r-cat$i.log" &
        pids+=($!)
    done
    for i in $(seq 0 $((N - 1))); do
        wait "${pids[$i]}" || fail "$r: memccat val$i exited with $?"
    done
    for i in $(seq 0 $((N - 1))); do
        local want=${sizes[$i]} got
        got=$(stat -c %s "$D/got/$r-val$i")
        # memccat ends each value with a newline
        [ "$got" = $((want + 1)) ] || fail "$r: val$i came back with $got bytes, $((want + 1)) expected"
        head -c "$want" "$D/got/$r-val$i" | cmp - "$D/v/val$i" || fail "$r: val$i differs"
    done
    note "$r: $N values read back intact by $N clients at once"
}

pids=()
for i in $(seq 0 $((N - 1))); do
    t 60 "${PRE[@]}" memccp "$S" "$D/v/val$i" >"$D/cp$i.log" 2>&1 &
    pids+=($!)
done
for i in $(seq 0 $((N - 1))); do
    wait "${pids[$i]}" || fail "memccp val$i exited with $?"
done
check_back text
# Every client connection should upgrade; on a loaded machine the layer may
# decide a few on TCP (said: "stays on tcp (...)"), bytes intact: at least
# 3 in 4 of the 2N, and the others shown.
cat "$D"/cp[0-9]*.log "$D"/text-cat*.log >"$D/clients.out"
grep -h "stays on tcp" "$D/clients.out" "$D/server.log" | sort -u
expect_upgraded "$D/clients.out" client $((2 * N * 3 / 4))

# again through one client, binary protocol, non-blocking (one connection)
t 60 "${PRE[@]}" memccp "$S" -b -n "$D"/v/val* >"$D/cp-binary.log" 2>&1 || fail "memccp -b -n exited with $?"
expect_upgraded "$D/cp-binary.log" client
check_back binary

t 60 "${PRE[@]}" memcstat "$S" >"$D/stat.out" 2>"$D/stat.log" || fail "memcstat exited with $?"
stat_of() { sed -n "s/^[[:space:]]*$1: \([0-9]*\).*/\1/p" "$D/stat.out"; }
conns=$(stat_of total_connections) sets=$(stat_of cmd_set)
[ -n "$conns" ] && [ "$conns" -gt $((3 * N)) ] || fail "memcstat: total_connections is '$conns'"
[ -n "$sets" ] && [ "$sets" -ge $((2 * N)) ] || fail "memcstat: cmd_set is '$sets', $((2 * N)) expected"
note "memcstat: $conns connections, $sets sets"
kill -0 "$srv" 2>/dev/null || fail "memcached died"
expect_upgraded "$D/server.log" server $((3 * N * 3 / 4))
echo "PASS"
