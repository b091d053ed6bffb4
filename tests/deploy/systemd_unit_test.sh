#!/usr/bin/env bash
# examples/floodgated.service: `systemd-analyze verify` has nothing to say about it (any
# warning fails), with its binaries pointed at the ones just built; then floodgated is run
# with the unit's own ExecStart arguments and receives what the unit sends it: ExecReload
# (floodgate check-config, then SIGHUP: "config reloaded") and the stop signal (SIGTERM: exit 0).
#   systemd_unit_test.sh SOURCE_DIR BIN_DIR     (BIN_DIR holds floodgated and floodgate)
set -euo pipefail
src=$1 bin=$2
unit=$src/examples/floodgated.service
source "$src/tests/support/unit_run.sh"

# 1. systemd-analyze verify on a copy naming the built binaries.
sed "s#/usr/local/bin/#$bin/#g" "$unit" > "$work/floodgated.service"
if ! out=$(systemd-analyze verify "$work/floodgated.service" 2>&1) || [ -n "$out" ]; then
  fail "systemd-analyze verify:
$out"
fi
echo "systemd-analyze verify: no warnings"

# 2. The unit's command line, as systemd would run it without /etc/default/floodgated: the
# default FLOODGATED_ARGS expanded, the rules file an example's, the port a free one (0).
rules=$work/rules.yaml
cp "$src/examples/rules.yaml" "$rules"
unit_command "$unit" /usr/local/bin/ "$bin/" /etc/floodgate/rules.yaml "$rules"
start_unit
wait_log 'msg="listening"'

# 3. ExecReload, each command as the unit has it, $MAINPID being floodgated's pid.
while IFS= read -r reload; do
  reload=${reload//\$MAINPID/$pid}
  reload=${reload//\/usr\/local\/bin\//$bin/}
  reload=${reload//\/etc\/floodgate\/rules.yaml/$rules}
  echo "ExecReload: $reload"
  $reload || fail "ExecReload failed: $reload"
done < <(sed -n 's/^ExecReload=//p' "$unit")
wait_log 'msg="config reloaded"'
# A broken file makes the reload fail before floodgated is signalled.
echo "rules: [{name: x, algorithm: gcra, limit: 0, window: 1s}]" > "$rules"
first_reload=$(sed -n 's/^ExecReload=//p' "$unit" | head -1)
first_reload=${first_reload//\/usr\/local\/bin\//$bin/}
first_reload=${first_reload//\/etc\/floodgate\/rules.yaml/$rules}
if $first_reload 2>/dev/null; then fail "check-config accepted a limit of 0"; fi

# 4. Stop: systemd sends SIGTERM (KillSignal's default) and waits TimeoutStopSec.
stop_unit
echo "ok"
