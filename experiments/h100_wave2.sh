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
# returns 8. Each part plans for 8 minutes, setup included (WAVE2_BUDGET_S, default 480).
#
# The device's python3 (which holds torch and triton) gets kopt with pip --no-deps, and the
# wheels carried in .whl/ (experiments/h100_wave2/fetch_wheels.sh fetches them: textual and
# its few missing dependencies; ray, slimmed, only for part3; bubblewrap's .deb in .whl/debs/).
# Knobs: WAVE2_SANDBOX=auto|on|off (auto: bubblewrap when it works there), WAVE2_DIRECTION=
# slower|faster|any (part2's ~3% change), WAVE2_P2_MODES (served,session,process,gate: part2's runs), WAVE2_DEMOS (rmsnorm,adaln), WAVE2_P1_CAPTURE=0 (skip the ncu range capture), WAVE2_DEMO_ITERS, WAVE2_DEMO_S
# (a demo's soft deadline), WAVE2_P3_ITERS, WAVE2_WORK
# (scratch, outside /tmp; default ~/kopt-wave2), WAVE2_COMMIT (the commit sent, for the record).
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 2
part=${1:-}
smoke=0
[ "${2:-}" = "--smoke" ] && smoke=1
case "$part" in part1|part2|part3|part4) ;; *) echo "usage: bash experiments/h100_wave2.sh part1|part2|part3|part4 [--smoke]"; exit 2;; esac
T0=$(date +%s)
BUDGET=${WAVE2_BUDGET_S:-480}
if [ $smoke = 1 ]; then
  OUT=${OUT:-/tmp/h100_wave2_smoke}
  PY=${PY:-$PWD/.venv/bin/python}
  BUDGET=${WAVE2_BUDGET_S:-1800}
else
  [ -n "${OUT:-}" ] || { echo "OUT is not set (the device tool sets it; elsewhere use --smoke)"; exit 2; }
  PY=python3
fi
R="$OUT/$part"
mkdir -p "$R"
exec > >(tee -a "$R/run.log") 2>&1
export PYTHONUNBUFFERED=1
export WAVE2_COMMAND="bash experiments/h100_wave2.sh $*"
echo "[wave2] $(date -u +%FT%TZ) $WAVE2_COMMAND (budget ${BUDGET} s, out $R)"

setup_device() {
  # kopt and the carried wheels into the device's python3 (no index there: --no-index --no-deps)
  local pip=(python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir
             --disable-pip-version-check)
  local wheels=() w
  for w in .whl/*.whl; do
    [ -f "$w" ] || continue
    case "$(basename "$w")" in ray-*) [ "$part" = part3 ] || continue;; esac
    wheels+=("$w")
  done
  if [ ${#wheels[@]} -gt 0 ]; then
    "${pip[@]}" "${wheels[@]}" || { echo "[wave2] SETUP FAILED: the carried wheels did not install"; return 1; }
  else
    echo "[wave2] no .whl/*.whl carried: textual$([ "$part" = part3 ] && echo ' and ray') not installed"
  fi
  "${pip[@]}" . || { echo "[wave2] pip install . failed; trying an editable install"; "${pip[@]}" -e . ; } \
    || { echo "[wave2] SETUP FAILED: kopt did not install"; return 1; }
  if ! command -v bwrap >/dev/null; then
    for d in .whl/debs/bubblewrap_*.deb; do
      [ -f "$d" ] || continue
      dpkg -x "$d" /opt/wave2-bwrap && export PATH="/opt/wave2-bwrap/usr/bin:$PATH" \
        && echo "[wave2] bubblewrap unpacked from $d"
    done
  fi
  command -v ncu >/dev/null || for d in /usr/local/cuda/bin /opt/nvidia/nsight-compute/*; do
    [ -x "$d/ncu" ] && export PATH="$d:$PATH" && break
  done
  return 0
}

if [ $smoke = 0 ]; then
  s0=$(date +%s)
  if setup_device; then setup_rc=0; else setup_rc=1; fi
  export WAVE2_SETUP="rc=$setup_rc in $(( $(date +%s) - s0 )) s; kopt $(python3 -c 'from importlib import metadata as m; print(m.version("kopt-supervisor"))' 2>&1 | tail -1); bwrap $(command -v bwrap || echo none); ncu $(command -v ncu || echo none)"
  echo "[wave2] setup: $WAVE2_SETUP"
fi
left=$(( BUDGET - ($(date +%s) - T0) ))
"$PY" -m experiments.h100_wave2.run "$part" --out "$R" --budget-s "$left" $([ $smoke = 1 ] && echo --smoke)
rc=$?
echo "[wave2] $part finished: exit $rc after $(( $(date +%s) - T0 )) s; see $R/summary.md"
sleep 0.5  # let tee write the last lines into run.log
exit $rc
