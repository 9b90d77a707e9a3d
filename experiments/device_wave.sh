# What every device wave's script shares (sourced by experiments/h100_wave2.sh and h100_wave3.sh):
#
#   wave_main NAME VAR MODULE "PARTS" "$@"
#
# NAME: the log prefix (wave3); VAR: the prefix of the wave's environment knobs (WAVE3:
# WAVE3_BUDGET_S, and the WAVE3_COMMAND / WAVE3_SETUP it exports to the Python side); MODULE:
# the wave's entry point (experiments.h100_wave3.run); PARTS: the part names it accepts.
# `$1` is the part (or parts joined by commas, for a module that runs several in one call),
# `--smoke` after it runs here without a GPU (OUT defaults to /tmp/h100_NAME_smoke). The
# output goes to $OUT/<part>/ (parts joined by _; run.log is this output).
#
# On the device (OUT set by the tool): setup_device installs kopt and the carried wheels into
# the device's python3 (no index there: --no-index --no-deps); on a machine still warm from an
# earlier call with the same sources and wheels it skips that (a stamp in /var/tmp). A wave may
# set WAVE_SKIP_WHEELS (glob patterns, space separated) before calling wave_main.

setup_device() {
  local name=$1
  local pip=(python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir
             --disable-pip-version-check)
  local wheels=() w pat skip
  for w in .whl/*.whl; do
    [ -f "$w" ] || continue
    skip=0
    for pat in ${WAVE_SKIP_WHEELS:-}; do
      # shellcheck disable=SC2053 - a glob pattern on purpose
      [[ $(basename "$w") == $pat ]] && skip=1
    done
    [ $skip = 1 ] || wheels+=("$w")
  done
  local stamp_file=/var/tmp/kopt-device-wave.stamp
  local stamp
  stamp=$( (find src -name '*.py' -type f -print0 | sort -z | xargs -0 sha256sum;
            sha256sum pyproject.toml; ls -l "${wheels[@]}" 2>/dev/null) | sha256sum | cut -c1-16)
  if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] \
     && python3 -c 'import kopt_supervisor.engine' 2>/dev/null; then
    echo "[$name] setup: this machine already has these sources and wheels installed (stamp $stamp)"
  else
    if [ ${#wheels[@]} -gt 0 ]; then
      "${pip[@]}" "${wheels[@]}" || { echo "[$name] SETUP FAILED: the carried wheels did not install"; return 1; }
    else
      echo "[$name] no .whl/*.whl carried (experiments/h100_wave2/fetch_wheels.sh fetches them)"
    fi
    "${pip[@]}" . || { echo "[$name] pip install . failed; trying an editable install"; "${pip[@]}" -e . ; } \
      || { echo "[$name] SETUP FAILED: kopt did not install"; return 1; }
    echo "$stamp" > "$stamp_file"
  fi
  if ! command -v bwrap >/dev/null; then
    for d in .whl/debs/bubblewrap_*.deb; do
      [ -f "$d" ] || continue
      dpkg -x "$d" /opt/wave-bwrap && export PATH="/opt/wave-bwrap/usr/bin:$PATH" \
        && echo "[$name] bubblewrap unpacked from $d"
    done
  fi
  command -v ncu >/dev/null || for d in /usr/local/cuda/bin /opt/nvidia/nsight-compute/*; do
    [ -x "$d/ncu" ] && export PATH="$d:$PATH" && break
  done
  return 0
}

wave_main() {
  local name=$1 var=$2 module=$3 parts=$4
  shift 4
  set -u -o pipefail
  local part=${1:-} smoke=0 p known=1
  [ "${2:-}" = "--smoke" ] && smoke=1
  # several parts joined by commas run in one call (one setup); their folder joins them with _
  [[ -z $part || $part == ,* || $part == *, || $part == *,,* ]] && known=0
  for p in ${part//,/ }; do
    case " $parts " in *" $p "*) ;; *) known=0 ;; esac
  done
  local script="experiments/$(basename "$0")"  # the wave's own script (h100_wave3.sh, wild_gpu.sh, ...)
  [ $known = 1 ] || { echo "usage: bash $script ${parts// /|}[,...] [--smoke]"; return 2; }
  local t0 budget_var="${var}_BUDGET_S"
  t0=$(date +%s)
  local budget=${!budget_var:-480}
  if [ $smoke = 1 ]; then
    OUT=${OUT:-/tmp/h100_${name}_smoke}
    PY=${PY:-$PWD/.venv/bin/python}
    budget=${!budget_var:-1800}
  else
    [ -n "${OUT:-}" ] || { echo "OUT is not set (the device tool sets it; elsewhere use --smoke)"; return 2; }
    PY=python3
  fi
  local r="$OUT/${part//,/_}"
  mkdir -p "$r"
  exec > >(tee -a "$r/run.log") 2>&1
  export PYTHONUNBUFFERED=1
  export "${var}_COMMAND=bash $script $*"
  local cmd_var="${var}_COMMAND"
  echo "[$name] $(date -u +%FT%TZ) ${!cmd_var} (budget ${budget} s, out $r)"
  if [ $smoke = 0 ]; then
    local s0 setup_rc
    s0=$(date +%s)
    if setup_device "$name"; then setup_rc=0; else setup_rc=1; fi
    export "${var}_SETUP=rc=$setup_rc in $(( $(date +%s) - s0 )) s; kopt $(python3 -c 'from importlib import metadata as m; print(m.version("kopt-supervisor"))' 2>&1 | tail -1); bwrap $(command -v bwrap || echo none); ncu $(command -v ncu || echo none)"
    local setup_var="${var}_SETUP"
    echo "[$name] setup: ${!setup_var}"
  fi
  local left=$(( budget - ($(date +%s) - t0) ))
  local rc
  # shellcheck disable=SC2046 - --smoke or nothing
  "$PY" -m "$module" "$part" --out "$r" --budget-s "$left" $([ $smoke = 1 ] && echo --smoke)
  rc=$?
  echo "[$name] $part finished: exit $rc after $(( $(date +%s) - t0 )) s; see $r/summary.md"
  sleep 0.5  # let tee write the last lines into run.log
  return $rc
}
