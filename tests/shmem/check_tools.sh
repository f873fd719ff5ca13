#!/usr/bin/env bash
# oshcc and oshrun as users call them, in the build tree or installed.
# usage: check_tools.sh build BUILD_DIR SOURCE_DIR WORK_DIR
#        check_tools.sh install BUILD_DIR SOURCE_DIR WORK_DIR
# install: `cmake --install` into WORK_DIR/prefix, move the prefix elsewhere
# (the installed tools find everything from their own place), then the same
# checks with <prefix>/bin/oshcc and oshrun. Every wait is bounded.
set -uo pipefail
mode=$1 build=$2 src=$3 work=$4
hello=$src/tests/shmem/tools_hello.c
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

if [ "$mode" = install ]; then
    cmake --install "$build" --prefix "$work/p0" >"$work/install.log" 2>&1 ||
        { cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }
    mv "$work/p0" "$work/moved prefix" # a space: every path must stay one word
    bin=$work/moved\ prefix/bin
    for f in include/shmem.h include/shmem_generic.h bin/oshcc bin/oshrun bin/vmmc; do
        [ -e "$work/moved prefix/$f" ] || fail "the install lacks $f"
    done
    ls "$work/moved prefix"/lib*/libvmmc-shmem.so >/dev/null 2>&1 || fail "the install lacks libvmmc-shmem.so"
else
    bin=$build/bin
fi
oshcc=$bin/oshcc oshrun=$bin/oshrun
out=$work/out

# Compile and link in one step; the program runs without LD_LIBRARY_PATH.
if "$oshcc" -O2 -Wall -Werror -o "$work/hello" "$hello" >"$out" 2>&1; then
    ok "oshcc -o hello hello.c"
else
    cat "$out"; fail "oshcc -o hello hello.c"
fi
run_hello() { # np prog launcher-args...
    local np=$1 prog=$2
    shift 2
    env -u LD_LIBRARY_PATH timeout 120 "$oshrun" "$@" "$prog" >"$out" 2>&1
    local st=$?
    local good=$st
    for ((i = 0; i < np; i++)); do grep -q "PE $i of $np ok" "$out" || good=1; done
    if [ $good = 0 ]; then ok "oshrun $* $(basename "$prog")"; else cat "$out"; fail "oshrun $* $(basename "$prog") (status $st)"; fi
}
run_hello 2 "$work/hello" -n 2
run_hello 4 "$work/hello" -np 4
run_hello 3 "$work/hello" --np 3 --tag-output

# Under mpirun (PMIx) the program is started by it directly, without oshrun.
if [ "$mode" = build ] && command -v mpirun.openmpi >/dev/null &&
   grep -q "VMMC_HAVE_PMIX 1" "$build/generated/vmmc_build_config.h" 2>/dev/null; then
    root=()
    [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
    env -u LD_LIBRARY_PATH timeout 120 mpirun.openmpi "${root[@]}" --oversubscribe -np 2 \
        "$work/hello" >"$out" 2>&1
    st=$?
    if [ $st = 0 ] && grep -q "PE 0 of 2 ok" "$out" && grep -q "PE 1 of 2 ok" "$out"; then
        ok "mpirun -np 2 hello (PMIx)"
    else
        cat "$out"; fail "mpirun -np 2 hello (PMIx, status $st)"
    fi
else
    echo "not run: mpirun -np 2 hello (needs Open MPI's mpirun and vmmc built with PMIx)"
fi

# Compile, then link, in two steps.
if "$oshcc" -c -o "$work/hello.o" "$hello" && "$oshcc" -o "$work/hello2" "$work/hello.o"; then
    run_hello 2 "$work/hello2" -n 2
else
    fail "oshcc -c, then oshcc hello.o"
fi

# --showme prints the command and runs nothing.
s=$("$oshcc" --showme -o "$work/never" "$hello")
case "$s" in *-lvmmc-shmem*"-o $work/never $hello"*|*"-o $work/never $hello"*-lvmmc-shmem*) ok "oshcc --showme: $s" ;; *) fail "oshcc --showme printed: $s" ;; esac
[ ! -e "$work/never" ] || fail "oshcc --showme compiled"
inc=$("$oshcc" --showme:compile)
[ -f "${inc#-I}/shmem.h" ] && ok "oshcc --showme:compile: $inc" || fail "oshcc --showme:compile: $inc has no shmem.h"
lnk=$("$oshcc" --showme:link)
case "$lnk" in *-lvmmc-shmem*-lvmmc*rpath*|*rpath*-lvmmc-shmem*-lvmmc*) ok "oshcc --showme:link: $lnk" ;; *) fail "oshcc --showme:link: $lnk" ;; esac
"$oshcc" --showme:bogus >/dev/null 2>&1 && fail "oshcc --showme:bogus was accepted"

# The compiler is $SHMEM_CC, else $CC; -c compiles without the link flags.
s=$(SHMEM_CC=echo CC=false "$oshcc" -c x.c)
case "$s" in *-lvmmc*) fail "oshcc -c links: $s" ;; *"-c x.c"*) ok "SHMEM_CC: $s" ;; *) fail "SHMEM_CC: $s" ;; esac
s=$(env -u SHMEM_CC CC=echo "$oshcc" x.c -o x)
case "$s" in *"x.c -o x"*-lvmmc-shmem*) ok "CC: $s" ;; *) fail "CC: $s" ;; esac
"$oshcc" >/dev/null 2>&1 && fail "oshcc without arguments succeeded"

# oshrun: a PE's exit status is the job's; bad command lines are refused.
env -u LD_LIBRARY_PATH timeout 120 "$oshrun" -n 2 "$work/hello" fail 3 >"$out" 2>&1
st=$?
[ $st = 3 ] && ok "a PE's exit status 3 is oshrun's" || { cat "$out"; fail "oshrun returned $st for a PE's exit 3"; }
refuse() { # message args...
    local want=$1
    shift
    timeout 60 "$oshrun" "$@" >"$out" 2>&1
    local st=$?
    if [ $st = 2 ] && grep -q -- "$want" "$out"; then ok "oshrun $* refused: $(head -1 "$out")"; else cat "$out"; fail "oshrun $* (status $st, wanted 2 and '$want')"; fi
}
refuse "number of PEs is missing" "$work/hello"
refuse "is not a number of PEs" -n two "$work/hello"
refuse "is not a number of PEs" -n 0 "$work/hello"
refuse "no program to run" -n 2
refuse "unknown option" -n 2 --bogus "$work/hello"
s=$("$oshrun" --showme -np 3 prog "a b")
case "$s" in *"vmmc run -n 3 -- prog a b") ok "oshrun --showme: $s" ;; *) fail "oshrun --showme: $s" ;; esac

[ $fails = 0 ] && echo "check_tools ($mode): ok"
exit $((fails > 0))
