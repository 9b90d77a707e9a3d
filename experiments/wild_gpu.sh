#!/usr/bin/env bash
# Issue 28's device figures on two public benches used unchanged (experiments/wild/upstream):
# Triton's layer-norm tutorial and Liger-Kernel's RMSNorm bench, each onboarded with one
# `kopt init --bench CMD --yes`, then >= 10 comment-only candidates and one real launch change
# (experiments/wild_gpu.py says what is measured).
#
# On the device machine (from the repository root, as the `run` tool starts it; carry .whl):
#   bash experiments/wild_gpu.sh all            # both kernels, one call (WILD_BUDGET_S, default 540)
#   bash experiments/wild_gpu.sh layernorm      # or one of them
# Here, without a GPU (the CPU stand-ins of tests/, Triton's interpreter), the dry run:
#   WILD_DRY=1 bash experiments/wild_gpu.sh all   (or `all --smoke`; OUT defaults to /tmp/h100_wild_smoke)
#
# Output in $OUT/<part>/: summary.json, summary.md (rewritten after every step), run.log and
# wild_<part>.tgz (raw logs, run.db copies, records). Knobs: see experiments/wild_gpu.py.
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
WAVE_SKIP_WHEELS="ray-*"
export WILD_BUDGET_S=${WILD_BUDGET_S:-540}
part=${1:-all}
if [ "${WILD_DRY:-0}" = 1 ] || [ "${2:-}" = "--smoke" ]; then
  [ "${WILD_BUDGET_S}" = 540 ] && export WILD_BUDGET_S=1800
  wave_main wild WILD experiments.wild_gpu "all layernorm liger" "$part" --smoke
else
  wave_main wild WILD experiments.wild_gpu "all layernorm liger" "$part"
fi
