#!/usr/bin/env bash
# usage: check_install.sh BUILD_DIR SOURCE_DIR PREFIX
set -euo pipefail
build=$1 src=$2 prefix=$3
rm -rf "$prefix" "$prefix.work"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/vmmc/vmmc.h include/vmmc/config.h include/vmmc/launch.h bin/vmmc; do test -e "$prefix/$f" || { echo "missing $f"; exit 1; }; done
libdir=$(dirname "$(find "$prefix" -name 'libvmmc.so' | head -1)")
test -f "$libdir/libvmmc.a" && test -f "$libdir/pkgconfig/vmmc.pc" && test -f "$libdir/cmake/vmmc/vmmcConfig.cmake"
mkdir -p "$prefix.work"
# pkg-config
PKG_CONFIG_PATH="$libdir/pkgconfig" cc -o "$prefix.work/hello_pc" "$src/examples/hello.c" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs vmmc) -Wl,-rpath,"$libdir"
# CMake package
cat > "$prefix.work/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(user C)
find_package(vmmc REQUIRED)
add_executable(hello_cmake $src/examples/hello.c)
target_link_libraries(hello_cmake vmmc::vmmc)
CM
cmake -S "$prefix.work" -B "$prefix.work/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix.work/b" >/dev/null
for prog in "$prefix.work/hello_pc" "$prefix.work/b/hello_cmake"; do
    out=$(LD_LIBRARY_PATH="$libdir" "$prefix/bin/vmmc" run -n 2 -- "$prog")
    echo "$out"
    grep -q "rank 1 got 'hello, vmmc' from rank 0" <<<"$out"
done
"$prefix/bin/vmmc" info >/dev/null
rm -rf "$prefix" "$prefix.work"
echo "install_tree: ok"
