#!/usr/bin/env bash
# The H100 session for the bundled kernels (issue 4/7/8): run from the repo root on the device.
#   DEADLINE=<epoch s> bash tests/device/h100_kernels.sh STEP...
# steps: env validate bench ceilings demo-rmsnorm demo-adaln (a demo ends 60 s before DEADLINE)
#        resume-<kernel>: go on with that demo's run (a device call lasts at most 10 minutes, the
#        workspace stays on the machine while it is warm); each demo/resume step ends with the
#        report, the status, the bench phases and the final tree's production CSV
#        phases: what one bench process costs (torch import, cold and warm Triton cache)
#        bg-<kernel>: start that demo detached (setsid: it outlives this device call while the
#        machine stays warm); watch-<kernel>: follow it until it ends or DEADLINE, then collect
#        validate-<kernel>: the contract, eager, torch.compile and copy for that demo's best tree
# Results go to $R (default /tmp/res); the caller tars it into $OUT.
set -u
R=${R:-/tmp/res}; mkdir -p "$R"
export PYTHONUNBUFFERED=1 KOPT_ROOT=${KOPT_ROOT:-/tmp/kws}
PY=python3
kopt() { $PY -m kopt_supervisor.kopt_tui.cli "$@"; }
t0=$(date +%s)
stamp() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - t0 ))s] $*"; }
demo_running() { pgrep -f "demo --headless --kernel" >/dev/null; }
# steps that must not overlap a running demo, or must not run twice across device calls
once() { [ -f "$R/.done_$1" ] && { stamp "skip $1: done before"; return 1; }; return 0; }
idle() { demo_running && { stamp "skip $1: a demo is running"; return 1; }; return 0; }
left_s() { echo $(( ${DEADLINE:-$(( $(date +%s) + 600 ))} - $(date +%s) )); }
room() { [ $(left_s) -ge $2 ] || { stamp "skip $1: $(left_s) s left, needs $2"; return 1; }; }
for step in "$@"; do
  case "$step" in
  env)
    { date -u; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit --format=csv;
      $PY -c "import torch,triton;print('torch',torch.__version__,'cuda',torch.version.cuda,'triton',triton.__version__)"; } > "$R/env.txt" 2>&1
    ;;
  validate)
    stamp validate
    timeout 300 $PY -m kopt_supervisor.kernels.validate_gpu --out "$R/validate.json" --sweep --budget-s ${VALIDATE_BUDGET:-220} \
      > "$R/validate.md" 2> "$R/validate.err"; echo "validate rc=$?" >> "$R/steps.txt"
    ;;
  bench)
    for k in rmsnorm adaln; do
      d=/tmp/t_$k; rm -rf $d; mkdir -p $d
      $PY -c "import sys;sys.path.insert(0,'.');from kopt_supervisor.kernels import catalog;from pathlib import Path;catalog.materialize('$k',Path('$d'),naive=True)"
      for args in "" "--dtypes bfloat16"; do
        s=$(date +%s%N); (cd $d && timeout 120 $PY bench.py $args > "$R/bench_${k}_$(echo $args | tr -c 'a-z0-9' _).csv" 2>>"$R/bench.err")
        echo "$k bench.py $args: rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms" >> "$R/steps.txt"
      done
    done
    ;;
  phases)
    stamp phases
    secs() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; echo "$(( ($(date +%s%N) - s) / 1000000 )) ms: ${*: -1}"; }
    { secs $PY -c "import torch"; secs $PY -c "import torch"; secs $PY -c "import torch, triton"
      secs $PY -c "import torch, triton; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"; } >> "$R/phases.txt" 2>&1
    for k in rmsnorm adaln; do
      d=/tmp/p_$k; rm -rf $d; mkdir -p $d
      $PY -c "import sys;sys.path.insert(0,'.');from kopt_supervisor.kernels import catalog;from pathlib import Path;catalog.materialize('$k',Path('$d'),naive=True)"
      for run in cold warm warm2; do
        s=$(date +%s%N); (cd $d && timeout 200 $PY bench.py --dtypes bfloat16 > "$R/phases_${k}_$run.csv" 2> "$R/phases_${k}_$run.err")
        echo "$k $run: rc=$? wall $(( ($(date +%s%N) - s) / 1000000 )) ms; $(grep 'bench phases' $R/phases_${k}_$run.err)" >> "$R/phases.txt"
      done
    done
    ;;
  validate-*)
    k=${step#validate-}; once "$step" && idle "$step" && room "$step" 250 && [ -d $KOPT_ROOT/h100-$k/best ] || continue
    stamp "$step"; timeout $(( $(left_s) - 20 )) $PY -m kopt_supervisor.kernels.validate_gpu --tree $KOPT_ROOT/h100-$k/best --kernels $k --out "$R/validate_$k.json" \
      --budget-s ${VALIDATE_BUDGET:-200} > "$R/validate_$k.md" 2> "$R/validate_$k.err"; echo "validate $k rc=$?" >> "$R/steps.txt"
    touch "$R/.done_$step"
    ;;
  bg-*)
    k=${step#bg-}; once "$step" && idle "$step" || continue; stamp "$step"; touch "$R/.done_$step"
    setsid nohup $PY -m kopt_supervisor.kopt_tui.cli demo --headless --kernel $k --tag h100-$k --max-iters ${DEMO_ITERS:-30} \
      $(eval echo \${DEMO_FLAGS_$k:-}) > "/tmp/demo_$k.txt" 2>&1 < /dev/null &
    sleep 5
    ;;
  watch-*)
    k=${step#watch-}; once "$step" && [ -f "$R/.done_bg-$k" ] || continue; stamp "$step"
    until ! pgrep -f "demo --headless --kernel $k" >/dev/null; do
      [ $(date +%s) -ge $(( ${DEADLINE:-$(( $(date +%s) + 300 ))} - 45 )) ] && break
      sleep 10
    done
    cp /tmp/demo_$k.txt "$R/demo_$k.txt"
    W=$KOPT_ROOT/h100-$k
    kopt status h100-$k --json > "$R/status_$k.json" 2>&1
    grep -h "bench phases" $W/logs/v*/*.err > "$R/phases_$k.txt" 2>/dev/null
    if ! pgrep -f "demo --headless --kernel $k" >/dev/null; then
      touch "$R/.done_$step"
      kopt report h100-$k >> "$R/demo_$k.txt" 2>&1
      tar czf "$R/ws_$k.tgz" -C $KOPT_ROOT --exclude=best --exclude=cand h100-$k 2>/dev/null
      (cd $W/best && timeout 120 $PY bench.py --shapes production > "$R/final_$k.csv" 2>>"$R/bench.err")
    fi
    ;;
  ceilings)
    stamp ceilings; timeout 120 $PY -m kopt_supervisor.kopt_tui.cli ceilings > "$R/ceilings.txt" 2>&1; echo "ceilings rc=$?" >> "$R/steps.txt"
    ;;
  demo-*|resume-*)
    k=${step#*-}; stamp "$step"
    left=$(( ${DEADLINE:-$(( $(date +%s) + 360 ))} - $(date +%s) - 60 )); [ $left -gt ${DEMO_S:-100000} ] && left=$DEMO_S
    if [ "${step%%-*}" = demo ]; then
      timeout $left $PY -m kopt_supervisor.kopt_tui.cli demo --headless --kernel $k --tag h100-$k --max-iters ${DEMO_ITERS:-30} $(eval echo \${DEMO_FLAGS_$k:-}) \
        > "$R/demo_$k.txt" 2>&1; echo "demo $k rc=$?" >> "$R/steps.txt"
    else
      done_n=$(kopt status h100-$k --json | $PY -c "import json,sys; print(json.load(sys.stdin)['candidates'])")
      timeout $left $PY -m kopt_supervisor.kopt_tui.cli run h100-$k --foreground --max-iters $(( ${DEMO_ITERS:-30} - done_n )) \
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
