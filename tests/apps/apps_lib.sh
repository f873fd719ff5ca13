# Shared part of the tests/apps scripts: real servers and clients run
# through `vmmc preload`. Sourced (bash) with:
#   $1  the vmmc tool
#   $2  libvmmc-preload.so, or "none" when this build has no preload library
# APPS_MODE=plain runs every program on the kernel without the preload (to
# check the harness itself); the default, "preload", runs them under
# `vmmc preload` with VMMC_SOCK_DEBUG=y and checks that connections upgraded.
# Every server listens on 127.0.0.1 on a free port, works in a temp dir and is
# killed when the script ends, whatever way it ends.
set -u
VMMC=${1:?usage: $0 <vmmc tool> <libvmmc-preload.so|none>}
PRELOAD_LIB=${2:-none}
APPS_MODE=${APPS_MODE:-preload}
APPS_PIDS=()
APPS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/vmmc-apps.XXXXXX") || exit 1

apps_cleanup() {
    local p
    for p in "${APPS_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "${APPS_PIDS[@]}"; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    [ -n "${APPS_KEEP:-}" ] && echo "kept $APPS_DIR" || rm -rf "$APPS_DIR"
}
trap apps_cleanup EXIT
trap 'exit 1' INT TERM HUP

skip() { echo "SKIP: $*"; exit 77; }
fail() {
    echo "FAIL: $*"
    local f
    for f in "$APPS_DIR"/*.log; do
        [ -f "$f" ] || continue
        echo "--- $(basename "$f") (last 40 lines)"
        tail -n 40 "$f"
    done
    exit 1
}
note() { echo "$*"; }

# need PROG... : skip unless every program is installed.
need() {
    local p
    for p in "$@"; do
        command -v "$p" >/dev/null 2>&1 || skip "$p is not installed (see .ci/run)"
    done
}

case $APPS_MODE in
plain) ;;
preload)
    [ "$PRELOAD_LIB" != none ] && [ -f "$PRELOAD_LIB" ] ||
        skip "this build has no libvmmc-preload.so (src/preload/ not built)"
    "$VMMC" preload --help >/dev/null 2>&1 || skip "'$VMMC preload' is not available in this build"
    ;;
*) echo "APPS_MODE must be plain or preload"; exit 2 ;;
esac

# "${PRE[@]}" CMD ARGS...: run CMD under `vmmc preload` (nothing in plain
# mode); VMMC_SOCK_DEBUG=y makes the layer say which connections upgraded.
PRE=()
if [ "$APPS_MODE" = preload ]; then
    PRE=("$VMMC" preload --)
    export VMMC_SOCK_DEBUG=y
    # On a loaded machine the listener's answer to the upgrade probe can take
    # longer than the default 50 ms, and the connection then rightly stays on
    # TCP: these tests check that connections upgrade, not how fast the probe
    # is answered.
    export VMMC_SOCK_PROBE_TIMEOUT=${VMMC_SOCK_PROBE_TIMEOUT:-2s}
    "${PRE[@]}" true 2>"$APPS_DIR/preload-true.log" ||
        fail "a program does not even start under '$VMMC preload': $(head -3 "$APPS_DIR/preload-true.log")"
fi

# A TCP port on which nothing listens or is bound (TCP or UDP, v4 or v6):
# the upgrade probe uses the same port number over UDP.
free_port() {
    local port hex
    for _ in $(seq 1 200); do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        hex=$(printf ':%04X ' "$port")
        if ! cat /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 2>/dev/null |
            awk '{print $2}' | grep -q -i "${hex% }\$"; then
            echo "$port"
            return 0
        fi
    done
    echo "no free port" >&2
    return 1
}

# listening PORT: is some socket listening on TCP PORT?
listening() {
    local hex
    hex=$(printf '%04X' "$1")
    awk -v h=":$hex" 'toupper($2) ~ h"$" && $4 == "0A" {f=1} END {exit !f}' /proc/net/tcp /proc/net/tcp6
}

# start_bg NAME CMD ARGS...: start a server in the background, output to
# $APPS_DIR/NAME.log; its pid in $BG_PID (killed at exit).
start_bg() {
    local name=$1
    shift
    "$@" >"$APPS_DIR/$name.log" 2>&1 &
    BG_PID=$!
    APPS_PIDS+=("$BG_PID")
}

# wait_listen PID PORT [SECONDS]: until PORT listens; 1 if PID died first.
wait_listen() {
    local pid=$1 port=$2 n=$(( ${3:-20} * 10 ))
    for _ in $(seq 1 "$n"); do
        listening "$port" && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# start_server NAME PORTVAR CMD... : CMD may use the literal word @PORT@,
# replaced by a free port; retried on a new port if the server could not
# listen (the port was taken meanwhile). Sets PORTVAR and $BG_PID.
start_server() {
    local _ss_name=$1 _ss_var=$2 _ss_port _ss_a _ss_try
    shift 2
    for _ss_try in 1 2 3 4 5; do
        _ss_port=$(free_port) || fail "no free port"
        local _ss_args=()
        for _ss_a in "$@"; do _ss_args+=("${_ss_a//@PORT@/$_ss_port}"); done
        start_bg "$_ss_name" "${_ss_args[@]}"
        if wait_listen "$BG_PID" "$_ss_port" 30; then
            printf -v "$_ss_var" '%s' "$_ss_port"
            return 0
        fi
        kill -KILL "$BG_PID" 2>/dev/null
        wait "$BG_PID" 2>/dev/null
        grep -qi "in use" "$APPS_DIR/$_ss_name.log" || fail "$_ss_name did not start listening on port $_ss_port"
    done
    fail "$_ss_name: no free port after 5 tries"
}

UPGRADE_RE='vmmc-sock\[[0-9]+\]: fd [0-9]+ upgraded \((shm|udp), (client|server)\)'

# upgraded FILE ROLE: how many connections FILE reports upgraded as ROLE.
upgraded() {
    grep -E -c "vmmc-sock\[[0-9]+\]: fd [0-9]+ upgraded \((shm|udp), $2\)" "$1"
}

# expect_upgraded FILE ROLE [MIN [quiet]]: in preload mode, at least MIN (1)
# connections of ROLE upgraded in FILE (said unless quiet).
expect_upgraded() {
    [ "$APPS_MODE" = preload ] || return 0
    local n
    n=$(upgraded "$1" "$2")
    [ "$n" -ge "${3:-1}" ] ||
        fail "$(basename "$1"): $n connection(s) upgraded as $2, expected at least ${3:-1}"
    [ -n "${4:-}" ] || note "$(basename "$1"): $n connection(s) upgraded as $2"
}

# expect_not_upgraded FILE: no connection upgraded (fallback to TCP).
expect_not_upgraded() {
    if grep -E -q "$UPGRADE_RE" "$1"; then
        fail "$(basename "$1"): a connection upgraded although the peer does not run vmmc"
    fi
}

# t SECONDS CMD...: a client bounded in time (killed after SECONDS, then
# 5 s later with SIGKILL).
t() {
    local s=$1
    shift
    timeout -k 5 "$s" "$@"
}
