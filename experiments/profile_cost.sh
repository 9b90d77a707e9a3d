#!/usr/bin/env bash
# On the device (carry .whl): bash experiments/profile_cost.sh [profile_cost|profile_noise|profile_after_go]
# (experiments/<name>.py says what it measures; both run on the RMSNorm demo's target repo,
# made here by `kopt demo --max-iters 0`)
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
WAVE_SKIP_WHEELS="ray-*"
NAME=${1:-profile_cost}
case $NAME in profile_cost|profile_noise|profile_after_go) ;; *) echo "profile_cost.sh: no experiment $NAME" >&2; exit 2 ;; esac
setup_device "$NAME" || exit 1
OUT=${OUT:-/tmp/$NAME}
W=${PROFILE_COST_WORK:-$HOME/kopt-$NAME}
rm -rf "$W" && mkdir -p "$W"
t0=$(date +%s)
python3 -m kopt_supervisor.kopt_tui.cli --root "$W" demo --headless --kernel rmsnorm --max-iters 0 --tag p 2>&1 | tail -5
echo "== the demo's baseline: $(( $(date +%s) - t0 )) s"
python3 "experiments/$NAME.py" "$W/.repos/p" "$W/out" 2>&1 | tee "$OUT/$NAME.log"
cp "$W/out/$NAME.json" "$OUT/" 2>/dev/null || true
