"""The hostile tests' scripted `command` proposer: iteration vN runs item N-1 of the JSON
list named by HOSTILE_SCRIPT, in cand/, and exits.

Each item is an object:
  write: {path: text}   files written in cand/ (relative paths)
  exec:  "python code"  run with exec() in cand/ (the attack: any Python, with a shell)
  plan:  "text"         the plan (default: "<name>: hypothesis for vN" and "scope: global")
  name:  "short name"
  exit:  int            the proposer's exit status (default 0)
The code sees KOPT_* in os.environ like any agent, and the names ITERATION and REPAIR.
"""

import json
import os
import sys

ITERATION = int(os.environ["KOPT_ITERATION"])
REPAIR = int(os.environ.get("KOPT_REPAIR", "0"))
script = json.load(open(os.environ["HOSTILE_SCRIPT"]))
action = script[(ITERATION - 1) % len(script)] if script else {}
for path, text in (action.get("write") or {}).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
if action.get("exec"):
    exec(
        compile(action["exec"], f"<attack v{ITERATION}>", "exec"),
        {"__name__": "__attack__", "ITERATION": ITERATION, "REPAIR": REPAIR},
    )
plan = action.get("plan") or f"{action.get('name', 'attack')}: hypothesis for v{ITERATION}\nscope: global\n"
with open(os.environ["KOPT_PLAN"], "w") as f:
    f.write(plan)
sys.exit(int(action.get("exit", 0)))
