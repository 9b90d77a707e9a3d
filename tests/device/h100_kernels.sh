#!/usr/bin/env bash
# The H100 session for the bundled kernels (issue 4/7/8): run from the repo root on the device.
#   DEADLINE=<epoch s> bash tests/device/h100_kernels.sh STEP...
# steps: env validate bench ceilings demo-rmsnorm demo-adaln (a demo ends 60 s before DEADLINE)
#        resume-<kernel>: go on with that demo's run (a device call lasts at most 10 minutes, the
#        workspace stays on the machine while it is warm); each demo/resume step ends with the
#        report, the status, the bench phases and the final tree's production CSV
# Results go to $R (default /tmp/res); the caller tars it into $OUT.
set -u
R=${R:-/tmp/res}; mkdir -p "$R"
export PYTHONUNBUFFERED=1 KOPT_ROOT=${KOPT_ROOT:-/tmp/kws}
PY=python3
kopt() { $PY -m kopt_tui.cli "$@"; }
t0=$(date +%s)
stamp() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - t0 ))s] $*"; }
for step in "$@"; do
  case "$step" in
  env)
    { date -u; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv;
      $PY -c "import torch,triton;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__)"; } > "$R/env.txt" 2>&1
    ;;
  validate)
    stamp validate
    timeout 300 $PY kernels/validate_gpu.py --out "$R/validate.json" --sweep --budget-s ${VALIDATE_BUDGET:-220} \
      > "$R/validate.md" 2> "$R/validate.err"; echo "validate rc=$?" >> "$R/steps.txt"
    ;;
  bench)
    for k in rmsnorm adaln; do
      d=/tmp/t_$k; rm -rf $d; mkdir -p $d
      $PY -c "import sys;sys.path.insert(0,'.');from kernels import catalog;from pathlib import Path;catalog.materialize('$k',Path('$d'),naive=True)"
      for args in "" "--dtypes bfloat16" "--ab . . --dtypes bfloat16"; do
        s=$(date +%s%N); (cd $d && timeout 120 $PY bench.py $args > "$R/bench_${k}_$(echo $args | tr -c 'a-z0-9' _).csv" 2>>"$R/bench.err")
        echo "$k bench.py $args: rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$R/steps.txt"
      done
    done
    ;;
  ceilings)
    stamp ceilings; timeout 120 $PY -m kopt_tui.cli ceilings > "$R/ceilings.txt" 2>&1; echo "ceilings rc=$?" >> "$R/steps.txt"
    ;;
  demo-*|resume-*)
    k=${step#*-}; stamp "$step"
    left=$(( ${DEADLINE:-$(( $(date +%s) + 360 ))} - $(date +%s) - 60 )); [ $left -gt ${DEMO_S:-100000} ] && left=$DEMO_S
    if [ "${step%%-*}" = demo ]; then
      timeout $left $PY -m kopt_tui.cli demo --headless --kernel $k --tag h100-$k --max-iters ${DEMO_ITERS:-30} $(eval echo \${DEMO_FLAGS_$k:-}) \
        > "$R/demo_$k.txt" 2>&1; echo "demo $k rc=$?" >> "$R/steps.txt"
    else
      done_n=$(kopt status h100-$k --json | $PY -c "import json,sys; print(json.load(sys.stdin)['candidates'])")
      timeout $left $PY -m kopt_tui.cli run h100-$k --foreground --max-iters $(( ${DEMO_ITERS:-30} - done_n )) \
        >> "$R/demo_$k.txt" 2>&1; echo "resume $k after $done_n rc=$?" >> "$R/steps.txt"
    fi
    kopt stop h100-$k >/dev/null 2>&1; sleep 1
    kopt report h100-$k >> "$R/demo_$k.txt" 2>&1
    kopt status h100-$k --json > "$R/status_$k.json" 2>&1
    W=$KOPT_ROOT/h100-$k
    # where a round's seconds go: each bench process logs its phases (kernels/harness/bench.py)
    grep -h "bench phases" $W/logs/v*/*.err > "$R/phases_$k.txt" 2>/dev/null
    tar czf "$R/ws_$k.tgz" -C $KOPT_ROOT --exclude=best --exclude=cand h100-$k 2>/dev/null
    (cd $W/best && timeout 120 $PY bench.py --shapes production > "$R/final_$k.csv" 2>>"$R/bench.err")
    ;;
  esac
  stamp "done $step"
done
