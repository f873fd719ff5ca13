#!/usr/bin/env bash
# usage: t_errors.sh STATUS TEXT -- command...
# Runs the command (a whole job) and passes if it exits with STATUS and its
# stderr contains TEXT (empty: anything). 77 (skip) passes through.
set -u
want=$1 text=$2
shift 3
err=$(mktemp)
"$@" 2>"$err"
st=$?
cat "$err" >&2
found=1
[ -z "$text" ] || grep -qF -- "$text" "$err" || found=0
rm -f "$err"
[ $st -eq 77 ] && exit 77
if [ $st -ne "$want" ]; then
    echo "t_errors: the job exited with status $st, expected $want" >&2
    exit 1
fi
if [ $found -ne 1 ]; then
    echo "t_errors: stderr does not contain: $text" >&2
    exit 1
fi
echo "ok   status $st and \"$text\""
