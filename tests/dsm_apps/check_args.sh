#!/bin/sh
# usage: check_args.sh PROGRAM...
# Every DSM application refuses bad arguments before joining a job: exit
# status 2 and a message naming the option and the accepted range (or the
# usage); -h prints the usage and exits 0.
fail() { echo "FAIL: $*"; exit 1; }
for prog in "$@"; do
    for args in "-n 0" "-n -5" "-n 12abc" "-n 99999999999" "-i 0" "-i x" "-q" "extra"; do
        # shellcheck disable=SC2086
        out=$("$prog" $args 2>&1 </dev/null)
        rc=$?
        [ $rc -eq 2 ] || fail "$prog $args: exit status $rc, expected 2 (output: $out)"
        case "$out" in
        *"expected an integer from"* | *usage:*) ;;
        *) fail "$prog $args: no message saying what is accepted: $out" ;;
        esac
    done
    out=$("$prog" -h 2>&1) || fail "$prog -h: exit status $?"
    case "$out" in *usage:*) ;; *) fail "$prog -h: no usage: $out" ;; esac
    echo "ok $prog"
done
