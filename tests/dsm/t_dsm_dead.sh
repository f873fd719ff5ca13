#!/bin/sh
# usage: t_dsm_dead.sh VMMC T_DSM_DEAD
# A rank dies; rank 0 must end with the DSM's own error (not be killed by
# the launcher: the grace period is long), in the fault case and in the
# barrier case. See t_dsm_dead.c.
vmmc=$1 prog=$2
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

VMMC_RUN_GRACE=60s "$vmmc" run -n 2 -- "$prog" fault >"$out" 2>&1
rc=$?
[ $rc -ne 0 ] || fail "fault case: vmmc run exited 0"
grep -q "vmmc dsm: rank 0: an access to .* cannot be served: .*rank 1" "$out" ||
    fail "fault case: rank 0 did not report the dead rank"
grep -q "killed by signal" "$out" && fail "fault case: a rank was killed"
echo "ok fault on a dead rank's minipage: $(grep 'vmmc dsm: rank 0' "$out")"

VMMC_RUN_GRACE=60s "$vmmc" run -n 2 -- "$prog" barrier >"$out" 2>&1
grep -q "^ok barrier: .*rank 1" "$out" || fail "barrier case: no error naming rank 1"
grep -q "killed by signal" "$out" && fail "barrier case: a rank was killed"
echo "ok barrier with a dead rank"
exit 0
