#!/usr/bin/env bash
# The Debian packages scripts/package builds, checked without installing them (no dpkg -i):
# names and metadata (Depends computed from the programs' libraries, conffiles), contents,
# lintian with no errors, the maintainer scripts, the unit as installed (systemd-analyze verify;
# the hardening of examples/floodgated.service kept), the man pages, and the extracted programs
# run from the extracted tree: floodgated answers /healthz, the dev package builds a consumer.
#   package_test.sh SOURCE_DIR BUILD_DIR VERSION
set -euo pipefail
src=$1 build=$2 version=$3
if ! command -v dpkg-deb >/dev/null || ! command -v dpkg >/dev/null; then
  echo "######## SKIPPED: no dpkg here, so the Debian packages are NOT tested ########" >&2
  exit 77
fi
source "$src/tests/support/unit_run.sh"
step_start=$SECONDS
step() {  # what was just checked, and how long it took
  echo "ok ($((SECONDS - step_start)) s): $*"
  step_start=$SECONDS
}

# 1. scripts/package: the paths on stdout, the floodgate package's last.
FLOODGATE_BUILD=$build "$src/scripts/package" --output "$work/out" \
  > "$work/paths" 2> "$work/package.log" ||
  { cat "$work/package.log" >&2; fail "scripts/package failed"; }
arch=$(dpkg --print-architecture)
deb=$work/out/floodgate_${version}_${arch}.deb
dev=$work/out/floodgate-dev_${version}_${arch}.deb
last=$(tail -1 "$work/paths")
[ "$last" = "$deb" ] || fail "the last line of scripts/package is '$last', not $deb"
grep -qxF "$dev" "$work/paths" || fail "scripts/package did not print $dev"
[ -f "$deb" ] && [ -f "$dev" ] || fail "no $deb or $dev"
step "scripts/package built $(basename "$deb") and $(basename "$dev")"

# 2. Metadata.
field() { dpkg-deb --field "$1" "$2"; }
[ "$(field "$deb" Package)" = floodgate ] && [ "$(field "$dev" Package)" = floodgate-dev ] ||
  fail "package names"
for p in "$deb" "$dev"; do
  [ "$(field "$p" Version)" = "$version" ] || fail "$p: Version $(field "$p" Version)"
  [ "$(field "$p" Architecture)" = "$arch" ] || fail "$p: Architecture"
  [ -n "$(field "$p" Maintainer)" ] && [ -n "$(field "$p" Description)" ] ||
    fail "$p: no Maintainer or Description"
done
depends=$(field "$deb" Depends)
echo "Depends: $depends"
# Every library a program links directly is in Depends, as the package that holds it on this
# machine (what dpkg-shlibdeps computed, not a list kept by hand), plus adduser for postinst.
mkdir "$work/root" "$work/dev-root"
dpkg-deb -x "$deb" "$work/root"
dpkg-deb -x "$dev" "$work/dev-root"
x=$work/root
owner() {  # PATH: the package holding it (merged /usr: dpkg may know it under /lib)
  local p=$1
  dpkg -S "$p" 2>/dev/null || dpkg -S "${p#/usr}" 2>/dev/null || dpkg -S "/usr$p" 2>/dev/null
}
declare -A checked  # each library once (dpkg -S takes ~0.2 s)
for prog in floodgated floodgate floodgate-bench; do
  ldd "$x/usr/bin/$prog" > "$work/ldd"
  while read -r lib; do
    [ -n "${checked[$lib]:-}" ] && continue
    checked[$lib]=1
    path=$(awk -v l="$lib" '
      $1 == l { print $3 }
      substr($1, length($1) - length(l)) == "/" l { print $1 }  # the dynamic loader' "$work/ldd")
    [ -n "$path" ] || fail "$prog: $lib not found by ldd"
    pkg=$(owner "$(readlink -f "$path")" || owner "$path") || fail "no package holds $path"
    pkg=${pkg%%:*}
    # The package, or a name it provides (libspdlog1.10 provides libspdlog1.10-fmt9, the name
    # its shlibs file gives).
    names=("$pkg")
    mapfile -t -O 1 names < <(dpkg-query -W -f='${Provides}' "$pkg" | tr ',' '\n' |
                              awk 'NF { print $1 }')
    found=
    for n in "${names[@]}"; do
      [[ ", $depends," == *", $n "* || ", $depends," == *", $n,"* ]] && found=$n
    done
    [ -n "$found" ] || fail "$prog needs $lib from $pkg (${names[*]}), which Depends lacks"
  done < <(objdump -p "$x/usr/bin/$prog" | awk '$1 == "NEEDED" { print $2 }')
done
[[ ", $depends," == *", adduser,"* ]] || fail "Depends lacks adduser (postinst runs it)"
[[ "$(field "$dev" Depends)" == *libhiredis-dev* && "$(field "$dev" Depends)" == *libssl-dev* ]] ||
  fail "floodgate-dev's Depends lacks what floodgate.pc requires: $(field "$dev" Depends)"
# The changelog's latest entry is this version (a new version needs its entry).
zcat "$x/usr/share/doc/floodgate/changelog.gz" | head -1 | grep -q "^floodgate ($version) " ||
  fail "changelog.gz's latest entry is not $version"
step "metadata; Depends has each library the programs link and adduser"

# 3. Contents: the files, owned by root, the programs executable and stripped.
dpkg-deb --contents "$deb" > "$work/contents"
for f in ./usr/bin/floodgated ./usr/bin/floodgate ./usr/bin/floodgate-bench; do
  grep -qE "^-rwxr-xr-x root/root .* $f\$" "$work/contents" || fail "no executable $f"
  file "$x/${f#./}" | grep -q ', stripped' || fail "$f is not stripped"
done
files=(./lib/systemd/system/floodgated.service ./etc/floodgate/rules.yaml ./etc/default/floodgated
       ./usr/share/man/man8/floodgated.8.gz ./usr/share/man/man1/floodgate.1.gz
       ./usr/share/man/man1/floodgate-bench.1.gz ./usr/share/doc/floodgate/copyright
       ./usr/share/doc/floodgate/changelog.gz ./usr/share/doc/floodgate/operations.md)
for f in "${files[@]}"; do
  grep -qE "^-rw-r--r-- root/root .* $f\$" "$work/contents" || fail "no $f (0644 root)"
done
if awk '{ print $2 }' "$work/contents" | grep -v '^root/root$'; then fail "not owned by root"; fi
if grep -E ' \./usr/local|\.a$|/include/' "$work/contents"; then fail "floodgate holds the above"; fi
cmp -s "$x/etc/floodgate/rules.yaml" "$src/examples/rules.yaml" ||
  fail "rules.yaml is not examples/rules.yaml"
dpkg-deb --contents "$dev" > "$work/dev-contents"
files=(./usr/lib/libfloodgate.a ./usr/include/floodgate/floodgate.hpp ./usr/include/floodgate/asio.hpp
       ./usr/lib/cmake/floodgate/floodgate-config.cmake ./usr/lib/pkgconfig/floodgate.pc
       ./usr/lib/pkgconfig/floodgate-asio.pc ./usr/share/doc/floodgate-dev/copyright)
for f in "${files[@]}"; do
  grep -qE " $f\$" "$work/dev-contents" || fail "floodgate-dev has no $f"
done
if grep -E '/bin/|/etc/|/systemd/' "$work/dev-contents"; then
  fail "floodgate-dev holds the above"
fi
step "contents of both packages"

# 4. Maintainer scripts: conffiles, and postinst makes the system user the unit names. Run with
# stand-ins for the tools that would change this machine (adduser, deb-systemd-helper, ...),
# which record their arguments: a first configure creates the user, a second (the user exists,
# as getent then says) does not.
mkdir "$work/control"
dpkg-deb --control "$deb" "$work/control"
conffiles=$(printf '/etc/default/floodgated\n/etc/floodgate/rules.yaml')
[ "$(cat "$work/control/conffiles")" = "$conffiles" ] ||
  fail "conffiles: $(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do
  [ -x "$work/control/$s" ] || fail "no executable $s"
  sh -n "$work/control/$s" || fail "$s: syntax"
done
mkdir "$work/stubs"
for tool in adduser deb-systemd-helper deb-systemd-invoke systemctl; do
  printf '#!/bin/sh\necho "%s $*" >> "%s"\n[ "$1 $2" != "--quiet was-enabled" ]\n' \
    "$tool" "$work/calls" > "$work/stubs/$tool"
done
printf '#!/bin/sh\n[ -f "%s" ]\n' "$work/user-exists" > "$work/stubs/getent"
chmod +x "$work/stubs"/*
PATH=$work/stubs:$PATH "$work/control/postinst" configure || fail "postinst configure failed"
user_added='adduser --system --group --quiet --no-create-home --home /nonexistent'
user_added+=' --gecos floodgate rate-limit service floodgate'
grep -qxF "$user_added" "$work/calls" ||
  fail "postinst did not add the system user floodgate: $(cat "$work/calls")"
grep -qx "deb-systemd-helper update-state floodgated.service" "$work/calls" ||
  fail "postinst did not record floodgated.service's state: $(cat "$work/calls")"
: > "$work/calls"
touch "$work/user-exists"
PATH=$work/stubs:$PATH "$work/control/postinst" configure 0.1.0 || fail "second postinst failed"
if grep adduser "$work/calls"; then fail "postinst added the user again"; fi
step "conffiles; maintainer scripts; postinst adds the user floodgate once"

# 5. lintian: no errors; its warnings are printed.
lintian --tag-display-limit 0 --fail-on error "$deb" "$dev" > "$work/lintian" 2>&1 ||
  { cat "$work/lintian" >&2; fail "lintian found errors (above)"; }
grep -v 'root privileges' "$work/lintian" || true
step "lintian: no errors"

# 6. The unit as installed: examples/floodgated.service with only the package's changes (so
# every hardening option is the tested example's), then systemd-analyze verify, with the paths
# it names pointing into the extracted tree and man finding its man page there.
unit=$x/lib/systemd/system/floodgated.service
diff --unchanged-line-format= --old-line-format='-%L' --new-line-format='+%L' \
  <(sed -n '/^\[Unit\]/,$p' "$src/examples/floodgated.service") <(sed -n '/^\[Unit\]/,$p' "$unit") \
  > "$work/unit.diff" || true
cat > "$work/unit.expected" <<'EOF'
-Documentation=file:///usr/local/share/doc/floodgate/operations.md
+Documentation=man:floodgated(8) file:///usr/share/doc/floodgate/operations.md
-ExecStart=/usr/local/bin/floodgated --config /etc/floodgate/rules.yaml $FLOODGATED_ARGS
+ExecStart=/usr/bin/floodgated --config /etc/floodgate/rules.yaml $FLOODGATED_ARGS
-ExecReload=/usr/local/bin/floodgate check-config /etc/floodgate/rules.yaml
+ExecReload=/usr/bin/floodgate check-config /etc/floodgate/rules.yaml
-DynamicUser=yes
+User=floodgate
+Group=floodgate
+RemoveIPC=yes
EOF
diff "$work/unit.expected" "$work/unit.diff" >&2 ||
  fail "the installed unit differs from examples/floodgated.service other than as expected (above)"
[ -f "$x/usr/share/doc/floodgate/operations.md" ] ||
  fail "the unit's Documentation file is not installed"
sed "s#/usr/bin/#$x/usr/bin/#g" "$unit" > "$work/floodgated.service"
if ! out=$(MANPATH=$x/usr/share/man systemd-analyze verify "$work/floodgated.service" 2>&1) ||
  [ -n "$out" ]; then
  fail "systemd-analyze verify:
$out"
fi
step "the installed unit is the example's but for paths and user; systemd-analyze verify"

# 7. Man pages: each has a synopsis and its program's options, and man renders it without a
# warning.
for page in man8/floodgated.8:--config man1/floodgate.1:check-config \
            man1/floodgate-bench.1:--redis; do
  file=$x/usr/share/man/${page%%:*}.gz
  zcat "$file" | grep -q '^\.SH SYNOPSIS' || fail "$file: no SYNOPSIS"
  text=$(MANWIDTH=100 man --warnings -l "$file" 2>"$work/man.err") || fail "man -l $file"
  [ ! -s "$work/man.err" ] || fail "$file: $(cat "$work/man.err")"
  grep -qF -- "${page#*:}" <<<"$text" || fail "$file does not mention ${page#*:}"
done
step "man pages"

# 8. The extracted floodgated, run with the installed unit's ExecStart (its default
# FLOODGATED_ARGS: /etc/default/floodgated sets none) from the extracted tree, answers /healthz;
# the unit's ExecReload check passes on the packaged rules; SIGTERM stops it with 0.
if grep -v '^#' "$x/etc/default/floodgated" | grep -q .; then
  fail "/etc/default/floodgated sets something"
fi
unit_command "$unit" /usr/bin/ "$x/usr/bin/" /etc/floodgate/ "$x/etc/floodgate/"
start_unit
wait_log 'msg="listening"'
port=$(listening_port)
[ -n "$port" ] || fail "the 'listening' line names no port"
code=$(curl -s -o "$work/healthz" -w '%{http_code}' --max-time 5 \
  "http://127.0.0.1:$port/healthz") || true
[ "$code" = 200 ] || fail "/healthz answered '$code': $(cat "$work/healthz" 2>/dev/null)"
reload=$(sed -n 's/^ExecReload=\/usr\/bin\/floodgate //p' "$unit")
reload=${reload//\/etc\/floodgate\//$x/etc/floodgate/}
# shellcheck disable=SC2086
"$x/usr/bin/floodgate" $reload || fail "ExecReload's check failed on the packaged rules"
stop_unit
"$x/usr/bin/floodgate-bench" --help > /dev/null || fail "floodgate-bench --help"
step "the extracted floodgated answered /healthz on port $port and stopped with 0"

# 9. floodgate-dev: the README's consumer builds against the extracted tree with pkg-config
# (floodgate.pc finds its prefix from its own place) and runs.
export PKG_CONFIG_PATH=$work/dev-root/usr/lib/pkgconfig
# shellcheck disable=SC2046
c++ "$src/tests/install/consumer/main.cpp" -o "$work/consumer" \
  $(pkg-config --cflags --libs --static floodgate) || fail "the consumer does not build"
"$work/consumer" || fail "the consumer failed"
step "a consumer built with floodgate-dev's pkg-config file runs"
echo "package test: ok"
