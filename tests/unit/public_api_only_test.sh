#!/usr/bin/env sh
# service/ and tools/ sit on the library's public API (docs/architecture.md): no file there
# includes a header of src/. Their CMake targets do not link floodgate_internal either, but one
# that still does (service/envoy's) would let such an include compile: this catches it anyway.
# Usage: public_api_only_test.sh SOURCE_DIR
set -eu
root=$1
found=0
for f in $(find "$root/service" "$root/tools" -name '*.cpp' -o -name '*.hpp'); do
  for header in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
    if [ -f "$root/src/$header" ]; then
      echo "${f#"$root"/}: includes src/$header (use the public API, include/floodgate/)"
      found=1
    fi
  done
done
exit $found
