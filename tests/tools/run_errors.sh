#!/usr/bin/env bash
# What a user sees when a job goes wrong: the hello example for any job size,
# an example whose exporter never appears (non-zero exit, the reason, the
# launcher's summary naming the rank and its message), a refused setting
# (reported once, by the launcher, before any rank starts), a rank whose own
# vmmc_init() fails (its message passes through and is in the summary), and
# warnings printed once per job.
# usage: run_errors.sh VMMC_TOOL EXAMPLE_HELLO QUIET_RANK
set -uo pipefail
vmmc=$1 hello=$2 quiet=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"; cat "$tmp/err"; fails=$((fails + 1)); }
run() { timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"; echo $?; }
count() { grep -c -- "$1" "$tmp/$2" || true; }

# Any job size from 2 up works; 1 fails with the reason.
for n in 2 3 4; do
    st=$(run "$vmmc" run -n $n -- "$hello")
    [ "$st" = 0 ] || fail "hello -n $n: status $st"
    for ((r = 1; r < n; r++)); do
        grep -q "rank $r got 'hello, vmmc' from rank 0" "$tmp/out" || fail "hello -n $n: rank $r"
    done
done
st=$(run "$vmmc" run -n 1 -- "$hello")
[ "$st" != 0 ] && grep -q "needs at least 2 ranks" "$tmp/err" || fail "hello -n 1: status $st"

# Rank 1 never exports: rank 0's import times out, the example says so and
# exits non-zero, and the launcher's summary names rank 0 and its message.
cat >"$tmp/mix.sh" <<SH
#!/bin/sh
if [ "\$VMMC_RANK" = 0 ]; then exec "$hello"; else exec "$quiet" noexport; fi
SH
chmod +x "$tmp/mix.sh"
st=$(run "$vmmc" run -n 2 -- "$tmp/mix.sh")
[ "$st" = 1 ] || fail "no exporter: status $st, want 1"
grep -q "example_hello: rank 0: vmmc_import: timed out" "$tmp/err" || fail "no exporter: reason"
grep -q "vmmc run: rank 0 (pid [0-9]*) exited with status 1; its last message: \"example_hello: rank 0: vmmc_import: timed out" "$tmp/err" ||
    fail "no exporter: launcher summary"

# A refused setting: the launcher says why, once, and starts no rank.
st=$(VMMC_SPIN=50 run "$vmmc" run -n 3 -- "$hello")
[ "$st" = 1 ] || fail "VMMC_SPIN=50: status $st, want 1"
[ "$(count 'VMMC_SPIN=50: give a unit: ns, us, ms, s' err)" = 1 ] || fail "VMMC_SPIN=50: message once"
grep -q "got 'hello" "$tmp/out" && fail "VMMC_SPIN=50: ranks ran"

# A rank's own vmmc_init() fails (a setting only it has): its message passes
# through, and the summary names the rank and the library's message.
cat >"$tmp/bad1.sh" <<SH
#!/bin/sh
if [ "\$VMMC_RANK" = 1 ]; then VMMC_UDP_WINDOW=0 exec "$hello"; else exec "$hello"; fi
SH
chmod +x "$tmp/bad1.sh"
st=$(run "$vmmc" run -n 2 -- "$tmp/bad1.sh")
[ "$st" = 1 ] || fail "rank 1 bad setting: status $st, want 1"
grep -q "vmmc run: rank 1 (pid [0-9]*) exited with status 1; its last message: \".*vmmc_init: invalid argument (bad setting: VMMC_UDP_WINDOW=0: out of range: valid values are 2 .. 1024" "$tmp/err" ||
    fail "rank 1 bad setting: summary"

# Warnings once per job, not once per rank plus the launcher.
st=$(VMMC_NO_SUCH_SETTING=1 run "$vmmc" run -n 3 -- "$hello")
[ "$st" = 0 ] || fail "unknown setting: status $st"
[ "$(count 'unknown setting VMMC_NO_SUCH_SETTING' err)" = 1 ] || fail "unknown setting: warned $(count 'unknown setting' err) times"

[ $fails = 0 ] && echo "run_errors: ok"
exit $((fails > 0))
