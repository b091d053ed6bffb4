#!/usr/bin/env bash
# Installs floodgate into a scratch prefix, then builds and runs two consumers against it (the
# sync API, and the coroutine API of floodgate/asio.hpp) twice: with find_package(floodgate)
# and with pkg-config (floodgate, floodgate-asio).
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
"$tmp/cmake/consumer"
"$tmp/cmake/coroutine_consumer"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
c++ "$src/consumer/main.cpp" -o "$tmp/pc-consumer" $(pkg-config --cflags --libs --static floodgate)
"$tmp/pc-consumer"
c++ "$src/consumer/coroutine.cpp" -o "$tmp/pc-coroutine-consumer" \
  $(pkg-config --cflags --libs --static floodgate-asio)
"$tmp/pc-coroutine-consumer"
echo "install test: find_package and pkg-config consumers (sync and coroutine) all work"
