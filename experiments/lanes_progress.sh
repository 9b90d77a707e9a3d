#!/usr/bin/env bash
# Lanes that multiply progress (issue 27): the RMSNorm (and adaLN) demo from its naive start with
# 1 lane and with 4, and the A/A of comment-only candidates; figures for docs/results-multi-gpu.md.
#
# On a 4-GPU device machine (from the repository root, as the `run` tool starts it; carry .whl):
#   bash experiments/lanes_progress.sh rms1     # RMSNorm, 1 lane, until 3.4x or 540 s
#   bash experiments/lanes_progress.sh rms4     # RMSNorm, 4 lanes, the same
#   bash experiments/lanes_progress.sh adaln1   # adaLN, 1 lane (LANES_TARGET: its speedup to time)
#   bash experiments/lanes_progress.sh adaln4   # adaLN, 4 lanes
#   bash experiments/lanes_progress.sh aa4      # A/A: 4 lanes, 40 comment-only candidates (kept: 0?)
#   bash experiments/lanes_progress.sh aa1      # A/A: 1 lane alone on the host (the look spread to compare)
#   bash experiments/lanes_progress.sh ray4     # rms4 through Ray: a head and two workers made on this
#                                               # host, two GPUs each; a lane worker killed mid-look
#                                               # (needs Ray's wheel in .whl: fetch_wheels.sh without WITHOUT_RAY)
#   rms2, adaln2, aa2, ray2: the same with 2 lanes, for a host of two GPUs (nvidia-h200-x2)
# Here, without a GPU (Triton's interpreter, small shapes; OUT defaults to /tmp/lanes_progress_smoke):
#   bash experiments/lanes_progress.sh rms4 --smoke
#
# Each part writes $OUT/<part>.json (rewritten at every poll: a part cut short keeps what it
# measured), <part>.engine.log and <part>.run.db; LANES_BUDGET_S (default 540) bounds the part,
# setup included, under the device tool's 600 s.
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
set -u -o pipefail
part=${1:-}
case "$part" in rms[124]|adaln[124]|aa[124]|ray[24]) ;; *) echo "usage: bash experiments/lanes_progress.sh rms1|rms2|rms4|adaln1|adaln2|adaln4|aa1|aa2|aa4|ray2|ray4 [--smoke]"; exit 2 ;; esac
t0=$(date +%s)
budget=${LANES_BUDGET_S:-540}
if [ "${2:-}" = "--smoke" ]; then
  OUT=${OUT:-/tmp/lanes_progress_smoke}
  PY=${PY:-$PWD/.venv/bin/python}
  smoke=--smoke
else
  [ -n "${OUT:-}" ] || { echo "OUT is not set (the device tool sets it; elsewhere use --smoke)"; exit 2; }
  case "$part" in ray*) ;; *) WAVE_SKIP_WHEELS="ray-*" ;; esac  # Ray's wheel only where it is used
  setup_device lanes || exit 1
  PY=python3
  smoke=
fi
mkdir -p "$OUT"
left=$(( budget - ($(date +%s) - t0) ))
# shellcheck disable=SC2086 - --smoke or nothing
"$PY" -m experiments.lanes_progress "$part" --out "$OUT" --budget-s "$left" $smoke
