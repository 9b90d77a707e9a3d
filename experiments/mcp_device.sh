#!/usr/bin/env bash
# The real MCP session on the softmax example, in one device call (docs/agents.md, "kopt as an
# MCP judge"): setup, experiments/mcp_session.py under a hard budget, results into $OUT.
#
#   cd .snap && bash experiments/mcp_device.sh            # the device (OUT set; .whl carried)
#   bash experiments/mcp_device.sh --smoke                # here, no GPU: the CPU interpreter
#
# Before the device call, here: `bash experiments/mcp_device/fetch_wheels.sh` (the MCP SDK and
# what the image lacks of its dependencies, into .whl/), then carry .whl.
#
# The whole script ends within MCP_TOTAL_S (default 570 s; the device call's limit is 600):
# setup_device (experiments/device_wave.sh: the carried wheels and kopt into python3), a
# preflight (the SDK imports, the GPU), then the session with what is left, at most
# MCP_BUDGET_S (default 480 s), under a `timeout` 30 s longer than its own budget (the script
# stops the engine and writes its JSON before its budget ends; the timeout is the backstop).
# What comes back ($OUT, one folder, at most 8 files): run.log (this output), session.json,
# run.db (the run's records, copied through sqlite's backup), kopt.toml (the proposed config
# as frozen by the run), workspace.tar.gz (logs/, memory/, plans/, performance.md, the init
# draft), preflight.txt.
set -u -o pipefail
smoke=0
[ "${1:-}" = "--smoke" ] && smoke=1
t0=$(date +%s)
total=${MCP_TOTAL_S:-570}
if [ $smoke = 1 ]; then
  OUT=${OUT:-/tmp/mcp_device_smoke}
  PY=${PY:-$PWD/.venv/bin/python}
  CPU=--cpu
else
  [ -n "${OUT:-}" ] || { echo "OUT is not set (the device tool sets it; elsewhere use --smoke)"; exit 2; }
  PY=python3
  CPU=
fi
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export PYTHONUNBUFFERED=1
echo "[mcp] $(date -u +%FT%TZ) bash experiments/mcp_device.sh $* (total ${total} s, out $OUT, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"

if [ $smoke = 0 ]; then
  # the wheels travel as .whl in the repo root; a snapshot folder inside it (.snap) finds them above
  if ! compgen -G ".whl/*.whl" >/dev/null && compgen -G "../.whl/*.whl" >/dev/null; then
    rm -rf .whl && ln -s ../.whl .whl && echo "[mcp] wheels: ../.whl"
  fi
  # shellcheck source=experiments/device_wave.sh
  source experiments/device_wave.sh
  s0=$(date +%s)
  if setup_device mcp; then echo "[mcp] setup: ok in $(( $(date +%s) - s0 )) s"; else echo "[mcp] setup FAILED"; fi
fi

{
  echo "python: $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>&1)"
  "$PY" - <<'EOF' 2>&1
import importlib
from importlib import metadata
for mod in ("mcp", "mcp.client.stdio", "mcp.server.mcpserver", "jwt", "cryptography", "uvicorn",
            "kopt_supervisor.engine.mcp.server", "torch", "triton"):
    try:
        importlib.import_module(mod)
        print("import ok:", mod)
    except Exception as e:  # noqa: BLE001 - the preflight reports every failure
        print("IMPORT FAILED:", mod, type(e).__name__, e)
for dist in ("mcp", "kopt-supervisor", "torch", "triton", "anyio", "pydantic"):
    try:
        print("version:", dist, metadata.version(dist))
    except metadata.PackageNotFoundError:
        print("version:", dist, "not installed")
import torch
print("cuda:", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")
EOF
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used --format=csv,noheader
  command -v nvidia-smi >/dev/null && nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  echo "bwrap: $(command -v bwrap || echo none)"
} > "$OUT/preflight.txt" 2>&1
cat "$OUT/preflight.txt"
if grep -q "IMPORT FAILED: mcp\|IMPORT FAILED: kopt" "$OUT/preflight.txt"; then
  echo "[mcp] the MCP SDK or kopt does not import: no session (see preflight.txt)"
  exit 1
fi

work=/tmp/mcp-softmax
left=$(( total - ($(date +%s) - t0) - 40 ))  # 40 s for the backstop and the copies
budget=$(( left < ${MCP_BUDGET_S:-480} ? left : ${MCP_BUDGET_S:-480} ))
echo "[mcp] session: budget ${budget} s ($(( $(date +%s) - t0 )) s spent on setup)"
# shellcheck disable=SC2086 - CPU is --cpu or nothing
timeout -k 5 $(( budget + 30 )) "$PY" experiments/mcp_session.py $CPU --work "$work" \
  --out "$OUT/session.json" --budget-s "$budget"
rc=$?
echo "[mcp] session exit $rc after $(( $(date +%s) - t0 )) s"

ws="$work/workspaces/mcp-softmax"
if [ -d "$ws" ]; then
  "$PY" - "$ws/run.db" "$OUT/run.db" <<'EOF' || cp "$ws/run.db" "$OUT/run.db"
import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
src.backup(dst)
dst.close()
src.close()
EOF
  cp "$ws/kopt.toml" "$OUT/kopt.toml" 2>/dev/null
  tar -czf "$OUT/workspace.tar.gz" -C "$work/workspaces" \
    --exclude='mcp-softmax/best' --exclude='mcp-softmax/cand' --exclude='mcp-softmax/cache' \
    --exclude='mcp-softmax/looks' --exclude='*.lock' --exclude='.secret' --exclude='mcp.token' \
    mcp-softmax .init 2>/dev/null
  ls -la "$OUT"
fi
echo "[mcp] done: exit $rc after $(( $(date +%s) - t0 )) s"
sleep 0.5  # let tee write the last lines into run.log
exit $rc
