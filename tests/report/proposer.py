"""A scripted proposer for the report tests (run by kopt as a `command` proposer).

FAKE_SCRIPT names a JSON list; item N-1 is the action of iteration vN:
  gain5            every class 5% faster (global)
  loss5            every class 5% slower (global)
  gain_small       class cls=small 5% faster, the plan targets that class (a dispatch keep)
  gain5_artifacts  gain5, plus a new source file, and the kinds of files a run leaves in a
                   tree that are not source: scratch notes, a build object, a pyc, a log, a
                   profiler report, and a file the baseline's .gitignore ignores (the
                   proposer also drops that rule from .gitignore)
  nochange         change nothing (a failed proposal)

Like an agent CLI it prints a transcript line and reports what it cost through the file
named by $KOPT_USAGE (docs/agents.md): per iteration N, $0.1·N, 1000·N input tokens (500·N of
them from a prompt cache) and 100·N output tokens; `nochange` reports its tokens but no cost.
"""

import json
import os
from pathlib import Path

n = int(os.environ["KOPT_ITERATION"])
script = json.load(open(os.environ["FAKE_SCRIPT"]))
action = script[(n - 1) % len(script)]
k = json.load(open("kernel.json"))
speed = k["speed"]
plan = f"{action}: hypothesis of v{n}\nscope: global\n"

if action in ("gain5", "gain5_artifacts"):
    speed["small"] *= 0.95
    speed["large"] *= 0.95
elif action == "loss5":
    speed["small"] *= 1.05
    speed["large"] *= 1.05
elif action == "gain_small":
    speed["small"] *= 0.95
    plan = f"gain_small: a specialised small-shape path (v{n})\ntarget_class: cls=small\n"

if action == "gain5_artifacts":
    Path("fast_path.py").write_text("def fast(x):\n    return x\n")
    for name, data in {
        "scratch/notes.txt": "tried unrolling by 4\n",
        "build/kernel.o": "\x7fELF",
        "__pycache__/fast_path.cpython-311.pyc": "pyc",
        "tune.log": "log line\n",
        "prof/v4.ncu-rep": "report",
        "data/table.dat": "ignored by the baseline's .gitignore\n",
    }.items():
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(data)
    Path(".gitignore").write_text("# the proposer dropped the *.dat rule\n")

if action != "nochange":
    json.dump(k, open("kernel.json", "w"))
Path(os.environ["KOPT_PLAN"]).write_text(plan)
usage = {"input_tokens": 1000 * n, "cache_read_tokens": 500 * n, "output_tokens": 100 * n, "session_id": f"report-v{n}"}
if action != "nochange":
    usage["cost_usd"] = round(0.1 * n, 2)
Path(os.environ["KOPT_USAGE"]).write_text(json.dumps(usage))
print(json.dumps({"type": "result", "result": f"{action} done"}))
