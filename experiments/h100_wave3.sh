#!/usr/bin/env bash
# The third H100 wave: the "done when" figures of the measurement redesign (per-tree served
# processes, kopt's own output audit, a keep's confirmation in fresh servers, the profiler on
# every GPU keep, the OS's accounting on the CPU).
#
# On the device machine (from the repository root, as the `run` tool starts it; carry .whl):
#   bash experiments/h100_wave3.sh part1   # the RMSNorm demo for 5 minutes (then adaLN if time is left)
#   bash experiments/h100_wave3.sh part2   # >= 30 comment-only candidates (0 kept?), softmax's first decision
#   bash experiments/h100_wave3.sh part3   # hostile: a hidden timer patch (profiler), stolen outputs (audit)
#   bash experiments/h100_wave3.sh part4   # a real ~3% change tried 20 times from v0 (kept >= 19?)
#   bash experiments/h100_wave3.sh probe   # the serve protocol probe alone (part1's first step)
#   bash experiments/h100_wave3.sh part1,part3   # parts joined by commas: one call, one setup, one
#                                                # summary in $OUT/part1_part3/ (each leaves the
#                                                # later ones what they plan for: run.py NEEDS_S)
# Here, without a GPU (Triton's interpreter, tiny runs, no ncu), before spending device time:
#   bash experiments/h100_wave3.sh part1 --smoke      (OUT defaults to /tmp/h100_wave3_smoke)
#
# Each part writes $OUT/<part>/: summary.json and summary.md (rewritten after every step: a part
# cut short keeps what it measured; the command, the commit, the GPU, the date, the redesign's
# pieces this checkout holds), run.log (this output) and <part>.tgz (raw logs, run.db copies,
# every record as JSON). 4 files: the device returns 8. WAVE3_BUDGET_S (default 480) is the
# call's wall budget, setup included; a call of part1,part3 or of part4 wants 570 (the device
# tool's limit is 600).
#
# Knobs: WAVE3_COMMIT (the commit sent, for the record: the device's copy has no .git),
# WAVE3_SANDBOX=auto|on|off, WAVE3_WORK (scratch outside /tmp; default ~/kopt-wave3),
# part1: WAVE3_DEMOS (rmsnorm,adaln), WAVE3_DEMO_S (300: the first demo's wall time),
# WAVE3_DEMO_ITERS; part2: WAVE3_AA_N (30), WAVE3_SOFTMAX=0 (skip softmax); part4:
# WAVE3_P4_TRIES (20), WAVE3_P4_PROFILE=1 (the profiler on every keep: ~1 min each),
# WAVE3_P4_PROCESS=1 (the process-level bench instead of the served one),
# WAVE3_P4_STEP=class:param:tuned:slow (skip the prescan, e.g. dclass=narrow:num_warps:2:4),
# WAVE3_PRESCAN_S (60), WAVE3_P4_TARGET_PCT (3; smoke 25); the scripted runs (parts 2-4):
# WAVE3_POOLED=0 ([decide].pooled_noise off, on by default: docs/decision.md, "The run's spread").
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
WAVE_SKIP_WHEELS="ray-*"   # no part uses Ray
wave_main wave3 WAVE3 experiments.h100_wave3.run "part1 part2 part3 part4 probe" "$@"
