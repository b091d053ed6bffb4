# Shared by scripts/run and scripts/test: install what is missing, then build in build/.
# Sourced, not run.

FLOODGATE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FLOODGATE_BUILD=${FLOODGATE_BUILD:-$FLOODGATE_ROOT/build}

# Every Debian package the project builds, tests or benchmarks with.
FLOODGATE_PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  libboost1.81-dev libboost-json1.81-dev libhiredis-dev libyaml-cpp-dev libspdlog-dev libssl-dev
  openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  libprotobuf-dev protobuf-compiler libnghttp2-dev nghttp2-client
  redis-server redis-tools nginx
  gnuplot-nox curl chromium
  prometheus systemd procps
  dpkg-dev file help2man lintian
)
# Node.js with npm, for the Envoy tests' gRPC client (grpc-js) and bench/compare's peer:
# Debian's, unless node and npm are already there (NodeSource's nodejs carries its own npm,
# which Debian's npm package conflicts with).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  FLOODGATE_PACKAGES+=(nodejs npm)
fi
# What scripts/fuzz adds: clang with libFuzzer and its sanitizer runtimes.
FLOODGATE_FUZZ_PACKAGES=(clang-14 libclang-rt-14-dev)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Installs only what is missing, so a second run touches nothing (and needs no network).
# Arguments: the packages (default: FLOODGATE_PACKAGES).
ensure_packages() {
  local wanted=("$@") missing=()
  [ $# -eq 0 ] && wanted=("${FLOODGATE_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
  # prometheus is here for promtool, systemd for systemd-analyze, procps for the unit's
  # /bin/kill (tests/deploy), dpkg-dev (dpkg-shlibdeps), file, help2man and lintian for
  # scripts/package and tests/package; on a machine running systemd the prometheus package
  # also starts a server on :9090, which the tests do not want.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ] &&
    systemctl is-active --quiet prometheus 2>/dev/null; then
    "${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
}

# Configures once, then builds incrementally. Extra arguments go to cmake's configure step;
# FLOODGATE_BUILD_TARGETS (space-separated) builds only those targets.
build_project() {
  local gen=()
  command -v ninja >/dev/null && [ ! -f "$FLOODGATE_BUILD/Makefile" ] && gen=(-G Ninja)
  if [ ! -f "$FLOODGATE_BUILD/CMakeCache.txt" ]; then
    log "configuring in $FLOODGATE_BUILD"
    cmake -S "$FLOODGATE_ROOT" -B "$FLOODGATE_BUILD" "${gen[@]}" "$@" >/dev/null
  elif [ $# -gt 0 ]; then
    cmake "$FLOODGATE_BUILD" "$@" >/dev/null
  fi
  log "building"
  local targets=()
  for t in ${FLOODGATE_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$FLOODGATE_BUILD" -j "$(nproc)" "${targets[@]}"
}
