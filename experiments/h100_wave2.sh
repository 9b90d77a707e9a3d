#!/usr/bin/env bash
# The second H100 wave: verification (part1), your own kernel (part2), lanes over Ray (part3).
#
# On the device machine (from the repository root, as the `run` tool starts it; carry .whl):
#   bash experiments/h100_wave2.sh part1      # ncu range capture + both demos with the profiler
#   bash experiments/h100_wave2.sh part2      # examples/softmax: A/A and a ~3% change, served vs process
#   bash experiments/h100_wave2.sh part3      # one lane through Ray (a local head) vs the same run locally
# Here, without a GPU (Triton's interpreter, tiny runs, no ncu), before spending device time:
#   bash experiments/h100_wave2.sh part1 --smoke      (OUT defaults to /tmp/h100_wave2_smoke)
#
# Each part writes $OUT/<part>/: summary.json and summary.md (rewritten after every step: a part
# cut short keeps what it measured), run.log (this output) and <part>.tgz (raw logs, run.db
# copies, every record as JSON); part1 also ncu_h100_ranges.tgz. At most 5 files: the device
# returns 8. Each part plans for 8 minutes, setup included (WAVE2_BUDGET_S, default 480). The
# shell part (arguments, OUT, the setup) is experiments/device_wave.sh's.
#
# The device's python3 (which holds torch and triton) gets kopt with pip --no-deps, and the
# wheels carried in .whl/ (experiments/h100_wave2/fetch_wheels.sh fetches them: textual and
# its few missing dependencies; ray, slimmed, only for part3; bubblewrap's .deb in .whl/debs/).
# Knobs: WAVE2_SANDBOX=auto|on|off (auto: bubblewrap when it works there), WAVE2_DIRECTION=
# slower|faster|any (part2's ~3% change), WAVE2_P2_MODES (served,session,process,gate: part2's runs), WAVE2_DEMOS (rmsnorm,adaln), WAVE2_P1_CAPTURE=0 (skip the ncu range capture), WAVE2_DEMO_ITERS, WAVE2_DEMO_S
# (a demo's soft deadline), WAVE2_P3_ITERS, WAVE2_WORK
# (scratch, outside /tmp; default ~/kopt-wave2), WAVE2_COMMIT (the commit sent, for the record).
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
[ "${1:-}" = part3 ] || WAVE_SKIP_WHEELS="ray-*"   # ray only for part3
wave_main wave2 WAVE2 experiments.h100_wave2.run "part1 part2 part3 part4" "$@"
