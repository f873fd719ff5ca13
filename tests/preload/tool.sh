#!/bin/sh
# `vmmc preload` itself: finding the library, LD_PRELOAD, -v, errors.
#   tool.sh VMMC
set -u
VMMC=$1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

lib=$("$VMMC" preload --print) || bad "--print failed"
[ -f "$lib" ] || bad "--print gave '$lib', not a file"
case "$lib" in */libvmmc-preload.so) ;; *) bad "--print gave '$lib'" ;; esac

out=$(LD_PRELOAD= "$VMMC" preload -- printenv LD_PRELOAD)
[ "$out" = "$lib" ] || bad "LD_PRELOAD is '$out', expected '$lib'"
out=$(LD_PRELOAD="$lib" "$VMMC" preload -- printenv LD_PRELOAD)
[ "$out" = "$lib" ] || bad "the library twice: '$out'"
other=$(dirname "$lib")/libvmmc.so
out=$(LD_PRELOAD="$other" "$VMMC" preload -- printenv LD_PRELOAD)
[ "$out" = "$lib:$other" ] || bad "prepended: '$out'"
out=$("$VMMC" preload -v -- printenv VMMC_SOCK_DEBUG)
[ "$out" = y ] || bad "-v: VMMC_SOCK_DEBUG='$out'"
out=$(VMMC_SOCK_DEBUG= "$VMMC" preload -- printenv VMMC_SOCK_DEBUG)
[ "$out" = "" ] || bad "without -v: VMMC_SOCK_DEBUG='$out'"
"$VMMC" preload -- sh -c 'exit 7'
[ $? -eq 7 ] || bad "the command's exit status"

"$VMMC" preload >/dev/null 2>&1
[ $? -eq 2 ] || bad "no command: status 2"
"$VMMC" preload --bogus -- true >/dev/null 2>&1
[ $? -eq 2 ] || bad "unknown option: status 2"
err=$("$VMMC" preload -- /nonexistent/cmd 2>&1)
[ $? -eq 127 ] || bad "missing command: status 127"
echo "$err" | grep -q "cannot run '/nonexistent/cmd'" || bad "missing command: '$err'"
"$VMMC" preload --help | grep -qi 'set-uid' || bad "--help mentions set-uid"

# the library missing: a copy of the tool alone in a directory
dir=$(mktemp -d /tmp/pltool.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bin"
cp "$VMMC" "$dir/bin/vmmc"
err=$(LD_LIBRARY_PATH=$(dirname "$lib") "$dir/bin/vmmc" preload -- true 2>&1)
[ $? -eq 1 ] || bad "library missing: status 1"
echo "$err" | grep -q "libvmmc-preload.so not found" || bad "library missing: '$err'"
# and found in <prefix>/<libdir> as installed
libdir=${2:-lib}
mkdir -p "$dir/$libdir"
cp "$lib" "$dir/$libdir/"
out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$dir/bin/vmmc" preload --print)
[ "$out" = "$(cd "$dir/$libdir" && pwd -P)/libvmmc-preload.so" ] || bad "installed layout: '$out'"

# a set-uid command gets a warning
cp /bin/true "$dir/suid-true" && chmod u+s "$dir/suid-true"
err=$("$VMMC" preload -- "$dir/suid-true" 2>&1)
echo "$err" | grep -q "set-uid" || bad "no set-uid warning: '$err'"

[ $fail -eq 0 ] && echo "ok: vmmc preload"
exit $fail
