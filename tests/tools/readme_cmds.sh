#!/usr/bin/env bash
# The README's commands, as a newcomer types them in a fresh clone: every
# line of its ```sh blocks that is cheap (not `make ...`: those build, test or
# install the whole tree) runs verbatim, in order, in a directory laid out
# like a clone after `make demo` (build/ is this build tree); each must exit
# 0, and "# prints: TEXT" must appear in its output. The README's C example
# is built against the build tree with pkg-config and run as a 3-rank job.
# usage: readme_cmds.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
command -v pkg-config >/dev/null && command -v cc >/dev/null ||
    { echo "SKIP: needs cc and pkg-config"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$src"/*; do ln -s "$f" "$tmp/$(basename "$f")"; done
rm -f "$tmp/build"
ln -s "$build" "$tmp/build"
cd "$tmp"

fails=0 ran=0
# The ```sh blocks, one command per line.
awk '/^```sh$/ {on = 1; next} /^```/ {on = 0} on' "$src/README.md" >cmds.txt
while IFS= read -r line; do
    cmd=${line%%#*}
    cmd="${cmd%"${cmd##*[![:space:]]}"}"
    want=""
    case "$line" in *"# prints: "*) want=${line#*# prints: } ;; esac
    [ -z "$cmd" ] && continue
    case "$cmd" in make\ *|make) echo "not run here (builds/tests/installs the tree): $cmd"; continue ;; esac
    ran=$((ran + 1))
    out=$(timeout 120 bash -c "$cmd" 2>&1 </dev/null)
    st=$?
    if [ $st != 0 ]; then
        echo "FAIL (status $st): $cmd"; echo "$out" | tail -20; fails=$((fails + 1))
    elif [ -n "$want" ] && ! grep -qF -- "$want" <<<"$out"; then
        echo "FAIL (no '$want' in the output): $cmd"; echo "$out" | tail -20; fails=$((fails + 1))
    else
        echo "ok: $cmd"
    fi
done <cmds.txt
[ $ran -ge 3 ] || { echo "FAIL: only $ran commands found in the README"; fails=$((fails + 1)); }

# The C example: builds against the build tree and works for any job size.
awk '/^```c$/ {on = 1; next} /^```/ {on = 0} on' "$src/README.md" >readme_example.c
if ! cc -Wall -Werror -o readme_example readme_example.c \
        $(PKG_CONFIG_PATH=build pkg-config --cflags --libs vmmc) 2>cc.err; then
    echo "FAIL: the README's example does not build:"; cat cc.err; fails=$((fails + 1))
else
    out=$(timeout 60 build/vmmc run -n 3 -- ./readme_example 2>&1)
    st=$?
    if [ $st != 0 ] || ! grep -q "rank 1 got 'hello, vmmc' from rank 0" <<<"$out" ||
       ! grep -q "rank 2 got 'hello, vmmc' from rank 0" <<<"$out"; then
        echo "FAIL: the README's example, 3 ranks (status $st):"; echo "$out"; fails=$((fails + 1))
    else
        echo "ok: the README's example, 3 ranks"
    fi
fi
[ $fails = 0 ] && echo "readme_cmds: ok ($ran commands and the example)"
exit $((fails > 0))
