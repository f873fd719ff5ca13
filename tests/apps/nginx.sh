#!/usr/bin/env bash
# nginx + wrk over vmmc: nginx (a master and two workers, all under
# `vmmc preload`) with its configuration, logs and temp paths in a temp dir,
# serving a 1 MiB random file and a small one on a free port of 127.0.0.1.
# wrk (16 connections, 2 s, under the preload) must make requests with no
# socket error and no non-2xx answer, on both files; curl (under the
# preload) fetches the 1 MiB file 8 times over one connection, each with the
# right sha256. Both ends must say their connections upgraded.
#   nginx.sh <vmmc tool> <libvmmc-preload.so|none>
. "$(dirname "$0")/apps_lib.sh"
need nginx wrk curl sha256sum
D=$APPS_DIR
mkdir -p "$D/www" "$D/tmp"
head -c 1048576 /dev/urandom >"$D/www/big.bin" || fail "cannot write big.bin"
printf 'hello from nginx over vmmc\n' >"$D/www/small.txt"
user=
[ "$(id -u)" = 0 ] && user="user root;"   # workers must read the temp dir
cat >"$D/nginx.conf.in" <<CONF
$user
daemon off;
master_process on;
worker_processes 2;
pid $D/nginx.pid;
error_log $D/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $D/tmp/body;
    proxy_temp_path $D/tmp/proxy;
    fastcgi_temp_path $D/tmp/fastcgi;
    uwsgi_temp_path $D/tmp/uwsgi;
    scgi_temp_path $D/tmp/scgi;
    sendfile ${APPS_NGINX_SENDFILE:-on};
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:__PORT__;
        root $D/www;
    }
}
CONF
# nginx reads the port from its configuration: write it once the port is known
start_server server port t 300 bash -c 'sed "s/__PORT__/$1/" "$2.in" >"$2"; shift 2; exec "$@"' \
    _ @PORT@ "$D/nginx.conf" "${PRE[@]}" nginx -p "$D" -e "$D/error.log" -c "$D/nginx.conf"
srv=$BG_PID

for f in small.txt big.bin; do
    log=$D/wrk-$f.log
    t 60 "${PRE[@]}" wrk -t 2 -c 16 -d 2s "http://127.0.0.1:$port/$f" >"$log" 2>&1 ||
        fail "wrk $f exited with $?"
    reqs=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$log")
    [ -n "$reqs" ] && [ "$reqs" -gt 0 ] || fail "wrk $f: no request completed"
    grep -q "Socket errors" "$log" && fail "wrk $f: $(grep 'Socket errors' "$log")"
    grep -q "Non-2xx" "$log" && fail "wrk $f: $(grep 'Non-2xx' "$log")"
    note "wrk $f: $reqs requests, $(grep Requests/sec "$log" | tr -s ' ')"
    expect_upgraded "$log" client 16
done

want=$(sha256sum <"$D/www/big.bin" | cut -d' ' -f1)
urls=()
for i in 1 2 3 4 5 6 7 8; do urls+=("http://127.0.0.1:$port/big.bin" -o "$D/got$i"); done
t 60 "${PRE[@]}" curl -sS --fail "${urls[@]}" 2>"$D/curl.log" || fail "curl exited with $?"
for i in 1 2 3 4 5 6 7 8; do
    got=$(sha256sum <"$D/got$i" | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "fetch $i of big.bin: sha256 $got, expected $want"
done
note "curl: big.bin fetched 8 times, sha256 right"
expect_upgraded "$D/curl.log" client
kill -0 "$srv" 2>/dev/null || fail "nginx died"
grep -E "\[(alert|emerg|crit)\]" "$D/error.log" && fail "nginx logged errors"
# nginx sends its workers' stderr to its error log
cat "$D/server.log" "$D/error.log" >"$D/server-all.out"
# Both wrk runs' 16 connections and curl's; a connection wrk closes before
# nginx reads it is never decided, and the layer may keep a few on TCP
# (said on the server side: "stays on tcp (...)"), bytes intact: at least 30.
grep -h "stays on tcp" "$D/server-all.out" | sort -u
expect_upgraded "$D/server-all.out" server 30
echo "PASS"
