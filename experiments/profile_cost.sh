#!/usr/bin/env bash
# On the device (carry .whl): bash experiments/profile_cost.sh  (experiments/profile_cost.py says what it measures)
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
WAVE_SKIP_WHEELS="ray-*"
setup_device profile_cost || exit 1
OUT=${OUT:-/tmp/profile_cost}
W=${PROFILE_COST_WORK:-$HOME/kopt-profile-cost}
rm -rf "$W" && mkdir -p "$W"
t0=$(date +%s)
python3 -m kopt_supervisor.kopt_tui.cli --root "$W" demo --headless --kernel rmsnorm --max-iters 0 --tag p 2>&1 | tail -5
echo "== the demo's baseline: $(( $(date +%s) - t0 )) s"
python3 experiments/profile_cost.py "$W/.repos/p" "$W/out" 2>&1 | tee "$OUT/profile_cost.log"
