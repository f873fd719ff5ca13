#!/bin/sh
# usage: run_app.sh APP -- COMMAND...
# Runs a DSM application's job; passes when the job exits 0 and rank 0
# printed "APP: result matches sequential" exactly once. Exit status 77
# (a skip, e.g. no network namespaces) is passed through.
app=$1
shift
[ "$1" = "--" ] && shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 77 ] && exit 77
if [ $rc -ne 0 ]; then
    echo "FAIL: $app: the job exited with status $rc"
    exit 1
fi
n=$(printf '%s\n' "$out" | grep -c "^$app: result matches sequential (")
if [ "${VMMC_DSM_PAGE:-0}" = 1 ] && ! printf '%s\n' "$out" | grep -q "^$app: .*, page mode;"; then
    echo "FAIL: $app: VMMC_DSM_PAGE=1 but the run does not say it was in page mode"
    exit 1
fi
if [ "$n" -ne 1 ]; then
    echo "FAIL: $app: expected one line '$app: result matches sequential (...)', found $n"
    exit 1
fi
exit 0
