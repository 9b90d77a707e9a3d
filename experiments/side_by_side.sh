#!/usr/bin/env bash
# Two device parts at once on a machine of two GPUs (the device tool's nvidia-h200-x2): one call,
# twice the measurements for the same device time.
#
#   bash experiments/side_by_side.sh 'A COMMAND' 'B COMMAND'      # from the repository root
#   e.g. bash experiments/side_by_side.sh 'bash experiments/h100_wave3.sh part1' \
#                                         'WAVE3_P4_TRIES=10 bash experiments/h100_wave3.sh part4'
#
# The wheels and kopt are installed once first (experiments/device_wave.sh setup_device; each
# part's own setup then finds the stamp and skips it). A runs with OUT=$OUT/a, its scratch in
# ~/kopt-side-a (WAVE3_WORK: outside /tmp and /var/tmp, which the sandbox hides) and CUDA_VISIBLE_DEVICES=0 for whatever it runs outside kopt (the
# serve protocol probe); B the same with b and GPU 1, started SIDE_STAGGER_S (default 40) later,
# so that A's gate has claimed its GPU by then. Inside each, kopt's gate picks the GPU: its
# host-wide claims (docs/gpu-gate.md) keep two runs off one GPU, and a GPU the other run holds is
# not idle. Each part bounds itself by its own budget knob (WAVE3_BUDGET_S, LANES_BUDGET_S, ...);
# SIDE_TOTAL_S (default 575) kills what is left after that many seconds. Files back: each part's
# own (at most 8 together: a wave3 part writes 4), under $OUT/a/ and $OUT/b/.
cd "$(dirname "$0")/.." || exit 2
[ $# = 2 ] || { echo "usage: bash experiments/side_by_side.sh 'A COMMAND' 'B COMMAND'"; exit 2; }
[ -n "${OUT:-}" ] || { echo "OUT is not set (the device tool sets it)"; exit 2; }
# shellcheck source=experiments/device_wave.sh
source experiments/device_wave.sh
t0=$(date +%s)
setup_device side || exit 1
echo "[side] setup in $(( $(date +%s) - t0 )) s; GPUs: $(nvidia-smi -L 2>/dev/null | tr '\n' ';')"
total=${SIDE_TOTAL_S:-575}
run_side() {  # name gpu command
  mkdir -p "$OUT/$1"
  OUT="$OUT/$1" WAVE3_WORK="$HOME/kopt-side-$1" CUDA_VISIBLE_DEVICES=$2 \
    setsid bash -c "$3" > "/var/tmp/side-$1.log" 2>&1 &
  echo "[side] $(date -u +%T) $1 started (pid $!): $3"
}
run_side a 0 "$1"
pid_a=$!
sleep "${SIDE_STAGGER_S:-40}"
run_side b 1 "$2"
pid_b=$!
left=$(( total - ($(date +%s) - t0) ))
( sleep "$left"; kill -- -"$pid_a" -"$pid_b" 2>/dev/null ) &
killer=$!
wait "$pid_a"; rc_a=$?
echo "[side] $(date -u +%T) a ended: exit $rc_a"
wait "$pid_b"; rc_b=$?
echo "[side] $(date -u +%T) b ended: exit $rc_b"
kill "$killer" 2>/dev/null
for s in a b; do echo "=== $s (the last lines of /var/tmp/side-$s.log)"; tail -25 "/var/tmp/side-$s.log"; done
[ "$rc_a" = 0 ] && [ "$rc_b" = 0 ]
