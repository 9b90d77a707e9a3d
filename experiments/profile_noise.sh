#!/usr/bin/env bash
# On the device (carry .whl): bash experiments/profile_noise.sh  (experiments/profile_noise.py says what it measures)
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
WAVE_SKIP_WHEELS="ray-*"
setup_device profile_noise || exit 1
OUT=${OUT:-/tmp/profile_noise}
W=${PROFILE_NOISE_WORK:-$HOME/kopt-profile-noise}
rm -rf "$W" && mkdir -p "$W"
t0=$(date +%s)
python3 -m kopt_supervisor.kopt_tui.cli --root "$W" demo --headless --kernel rmsnorm --max-iters 0 --tag p 2>&1 | tail -5
echo "== the demo's baseline: $(( $(date +%s) - t0 )) s"
python3 experiments/profile_noise.py "$W/.repos/p" "$W/out" 2>&1 | tee "$OUT/profile_noise.log"
cp "$W/out/profile_noise.json" "$OUT/" 2>/dev/null || true
