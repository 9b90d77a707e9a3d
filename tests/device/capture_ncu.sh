#!/usr/bin/env bash
# Capture a small real ncu CSV for the parser tests. Run once on the H100, from the repo root:
#
#   OUT=${OUT:-/tmp/ncu_capture} bash tests/device/capture_ncu.sh
#
# It profiles tests/device/ncu_workload.py (two Triton kernels: kopt_capture_add_kernel
# launched 7 times, kopt_capture_scale_kernel 14 times) through kopt's own ncu command
# (engine.profile.ncu.NcuProfiler.command, so the flags are exactly the adapter's), once with
# the raw page and once with the details page, and writes to $OUT:
#   ncu_h100_raw.csv, ncu_h100_raw.expect.json, ncu_h100_details.csv,
#   ncu_h100_details.expect.json, ncu_h100_command.txt
# Commit those five files under tests/data/: tests/profile/test_profile_parsers.py parses
# every tests/data/ncu_*.csv against its .expect.json.
set -euo pipefail
OUT=${OUT:-/tmp/ncu_capture}
mkdir -p "$OUT"
exec "${PYTHON:-python3}" tests/device/capture_ncu.py "$OUT"
