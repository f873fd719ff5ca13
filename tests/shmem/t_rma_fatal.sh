#!/bin/sh
# usage: t_rma_fatal.sh VMMC PROG CASE REGEX
# Runs `VMMC run -n 2 -- PROG CASE` and passes when the job ends with a
# non-zero status that is not a signal's and its stderr has a line
# matching the extended regular expression REGEX.
vmmc=$1 prog=$2 case=$3 re=$4
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
"$vmmc" run -n 2 -- "$prog" "$case" 2>"$err" >/dev/null
rc=$?
cat "$err" >&2
if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    echo "FAIL: case $case: exit status $rc, expected a clean non-zero exit" >&2
    exit 1
fi
if ! grep -Eq "$re" "$err"; then
    echo "FAIL: case $case: no line matches /$re/" >&2
    exit 1
fi
echo "ok   case $case: status $rc, message matches"
