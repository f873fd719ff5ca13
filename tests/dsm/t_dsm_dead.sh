#!/bin/sh
# usage: t_dsm_dead.sh VMMC T_DSM_DEAD [NETNS_JOB]
# A rank dies; rank 0 must end with the DSM's own error, in the fault case
# and in the barrier case (see t_dsm_dead.c). With NETNS_JOB (the path of
# tests/multihost/netns_job.sh) the two ranks run on two namespace hosts
# over udp; otherwise under `vmmc run` on this host, with a long grace
# period so that the launcher does not end rank 0 first.
vmmc=$1 prog=$2 netns=$3
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }
job() {
    if [ -n "$netns" ]; then
        "$netns" -n 2 -H 2 -t 100 -- "$prog" "$1" >"$out" 2>&1
        rc=$?
        [ $rc -eq 77 ] && { cat "$out"; exit 77; }
    else
        VMMC_RUN_GRACE=60s "$vmmc" run -n 2 -- "$prog" "$1" >"$out" 2>&1
        rc=$?
    fi
    grep -q "killed by signal\|killed by SIG\|timed out" "$out" && fail "$1 case: a rank was killed"
}

job fault
[ $rc -ne 0 ] || fail "fault case: the job exited 0"
grep -q "vmmc dsm: rank 0: an access to .* cannot be served: .*rank 1" "$out" ||
    fail "fault case: rank 0 did not report the dead rank"
echo "ok fault on a dead rank's minipage: $(grep 'vmmc dsm: rank 0' "$out")"

job barrier
grep -q "^ok barrier: .*rank 1" "$out" || fail "barrier case: no error naming rank 1"
echo "ok barrier with a dead rank"
exit 0
