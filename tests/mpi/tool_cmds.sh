#!/usr/bin/env bash
# `vmmc mpirun` and the provider section of `vmmc info`: the provider is
# found next to the tool (build tree) and under <prefix>/<libdir>/libfabric
# (an installed layout, made here with a copy of the tool), the mpirun line
# leaves Open MPI no path but provider vmmc and passes VMMC_* settings on,
# bad use is refused with a reason, and `vmmc info` says whether libfabric
# lists the provider (and, when it does, shows its VMMC_OFI_* settings).
# usage: tool_cmds.sh VMMC_TOOL FI_DIR LIBDIR
set -u
tool=$1 fidir=$2 libdir=$3
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$tool" mpirun --help 2>&1) || fail "vmmc mpirun --help: status $?"
grep -q "FI_PROVIDER_PATH" <<<"$out" || fail "--help does not say what it sets: $out"
"$tool" mpirun >"$tmp/o" 2>&1; st=$?
[ $st = 2 ] && grep -q "no program" "$tmp/o" || fail "no program: status $st, $(cat "$tmp/o")"
"$tool" help | grep -q "mpirun" || fail "vmmc help does not list mpirun"

have_mpirun=0
command -v mpirun.openmpi >/dev/null || command -v mpirun >/dev/null && have_mpirun=1

if [ -e "$fidir/libvmmc-fi.so" ]; then
    real=$(cd "$fidir" && pwd -P)
    if [ $have_mpirun = 1 ]; then
        out=$(VMMC_TRANSPORT=udp FI_LOG_LEVEL=warn "$tool" mpirun --print -np 2 ./prog "a b" 2>&1) ||
            fail "--print: status $?: $out"
        for want in "FI_PROVIDER_PATH=$real " "--mca pml cm" "--mca mtl ofi" \
                    "--mca mtl_ofi_provider_include vmmc" "--mca btl self,ofi" \
                    "--mca btl_ofi_provider_include vmmc" \
                    "-x VMMC_TRANSPORT" "-x FI_LOG_LEVEL" "-x FI_PROVIDER_PATH" \
                    "-np 2 ./prog 'a b'"; do
            grep -qF -- "$want" <<<"$out" || fail "--print lacks '$want': $out"
        done
        # Open MPI refuses a parameter twice: the user's --mca replaces ours
        out=$("$tool" mpirun --print --mca btl self,vader -np 2 ./prog)
        [ "$(grep -o -- "--mca btl " <<<"$out" | wc -l)" = 1 ] && grep -qF -- "--mca btl self,vader" <<<"$out" ||
            fail "the user's --mca btl does not replace ours: $out"
        # a FI_PROVIDER_PATH already set is kept, after ours
        out=$(FI_PROVIDER_PATH=/elsewhere "$tool" mpirun --print ./prog)
        grep -qF "FI_PROVIDER_PATH=$real:/elsewhere " <<<"$out" || fail "FI_PROVIDER_PATH not kept: $out"
    fi
    out=$("$tool" info 2>&1)
    grep -qF "library    $real/libvmmc-fi.so" <<<"$out" || fail "vmmc info does not name the provider: $out"
    # The tool's own answer, then fi_info's where they might disagree (fi_info
    # cannot load a provider built with the sanitizers: only "it lists it,
    # the tool does not" is wrong).
    if grep -q "listed     yes: vmmc" <<<"$out"; then
        "$tool" info -c | grep -q "VMMC_OFI_" || fail "vmmc info -c does not show the VMMC_OFI_* settings"
    elif ! grep -q "listed     no: " <<<"$out"; then
        fail "vmmc info says neither yes nor no for provider vmmc: $out"
    elif command -v fi_info >/dev/null &&
         FI_PROVIDER_PATH=$fidir timeout 30 fi_info -p vmmc >/dev/null 2>&1; then
        fail "fi_info lists vmmc, vmmc info does not: $out"
    fi
else
    out=$("$tool" mpirun ./prog 2>&1); st=$?
    [ $st = 1 ] && grep -q "not built or installed" <<<"$out" || fail "no provider: status $st, $out"
    "$tool" info | grep -q -e "not built" || fail "vmmc info does not say the provider is not built"
fi

# An installed layout: <prefix>/bin/vmmc and <prefix>/<libdir>/libfabric/.
mkdir -p "$tmp/p/bin" "$tmp/p/$libdir/libfabric"
cp "$tool" "$tmp/p/bin/vmmc"
: >"$tmp/p/$libdir/libfabric/libvmmc-fi.so"
if [ $have_mpirun = 1 ]; then
    out=$("$tmp/p/bin/vmmc" mpirun --print ./prog 2>&1) || fail "installed layout: status $?: $out"
    grep -qF "FI_PROVIDER_PATH=$(cd "$tmp/p/$libdir/libfabric" && pwd -P) " <<<"$out" ||
        fail "installed layout: the provider directory is not found: $out"
fi
"$tmp/p/bin/vmmc" info | grep -qF "library    $(cd "$tmp/p/$libdir/libfabric" && pwd -P)/libvmmc-fi.so" ||
    fail "installed layout: vmmc info does not find the provider"
# neither place: a clear refusal
rm "$tmp/p/$libdir/libfabric/libvmmc-fi.so"
out=$("$tmp/p/bin/vmmc" mpirun ./prog 2>&1); st=$?
[ $st = 1 ] && grep -q "looked in" <<<"$out" || fail "no provider anywhere: status $st, $out"

[ $fails = 0 ] && echo "tool_cmds: ok"
exit $((fails > 0))
