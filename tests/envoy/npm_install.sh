#!/usr/bin/env bash
# Installs the Node gRPC client's packages (package.json beside this script) into DIR, once:
# a second run with the same package.json touches nothing and needs no network.
#   tests/envoy/npm_install.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: npm_install.sh DIR}
command -v node >/dev/null || { echo "npm_install.sh: node is not installed" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm_install.sh: npm is not installed" >&2; exit 1; }
mkdir -p "$dir"
if cmp -s "$here/package.json" "$dir/package.json" && [ -d "$dir/node_modules/@grpc/grpc-js" ] &&
   [ -d "$dir/node_modules/@grpc/proto-loader" ]; then
  exit 0
fi
cp "$here/package.json" "$dir/package.json"
(cd "$dir" && npm install --no-audit --no-fund --no-package-lock --silent >/dev/null)
rm -f "$dir/node_modules/.package-lock.json"  # it records download addresses
echo "installed @grpc/grpc-js and @grpc/proto-loader in $dir"
