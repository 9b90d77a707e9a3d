"""A scripted `command` proposer for tests: iteration by iteration, one scripted edit.

Usage (kopt.toml): command = "python /path/proposer.py" with FAKE_SCRIPT=/path/script.json,
a JSON list whose item N-1 is the action for iteration vN. Actions:
  gain30 | gain5 | gain1 | gain05 | loss5 | timer:F (the bench's numbers times F, the GPU's work,
  kernel.json's ncu_speed for the stand-in ncu, unchanged) | nochange | wrong | wrong_fixed_on_repair | nan | protected | split |
  hang_bench | hang_proposer | fail | commit | gain1 | noplan |
  knob:NAME[=JSON] (set a bench fault knob of kernel.json) | do:STATEMENT (any Python, in cand/)
FAKE_LINGER=s leaves a `sleep s` child in the proposer's process group, as the bench does.
"""

import json
import os
import sys

# subprocess and time imported where used: the proposer runs once an iteration, on a fresh
# bytecode cache (kopt's sandbox gives every new tree one), where subprocess alone costs
# ~150 ms of CPU

if os.environ.get("FAKE_LINGER"):  # an orphan if the engine dies while the proposer runs
    os.posix_spawnp("sleep", ["sleep", os.environ["FAKE_LINGER"]], os.environ)  # subprocess: 60 ms more CPU
n = int(os.environ["KOPT_ITERATION"])
repair = int(os.environ.get("KOPT_REPAIR", "0"))
script = json.load(open(os.environ["FAKE_SCRIPT"]))
action = script[(n - 1) % len(script)] if script else "nochange"
plan_path = os.environ["KOPT_PLAN"]
assert os.path.exists(os.environ["KOPT_PROMPT"]), "kopt must write the prompt first"
k = json.load(open("kernel.json"))
speed = k["speed"]
plan = f"{action}: scripted hypothesis for v{n}\nscope: global\n"

if action == "gain30":  # a gain the OS's clocks show on a served CPU target (5% is under their noise)
    speed["small"] *= 0.7
    speed["large"] *= 0.7
elif action == "gain5":
    speed["small"] *= 0.95
    speed["large"] *= 0.95
elif action == "gain05":
    speed["small"] *= 0.995
    speed["large"] *= 0.995
elif action == "gain1":
    speed["small"] *= 0.99
    speed["large"] *= 0.99
elif action.startswith("timer:"):
    k.setdefault("ncu_speed", dict(speed))
    speed["small"] *= float(action[6:])
    speed["large"] *= float(action[6:])
elif action == "loss5":
    speed["small"] *= 1.05
    speed["large"] *= 1.05
elif action == "wrong":
    k["wrong"] = True
elif action == "wrong_fixed_on_repair":
    if repair == 0:
        k["wrong"] = True
    else:
        k.pop("wrong", None)
        speed["small"] *= 0.95
        speed["large"] *= 0.95
elif action == "nan":
    k["nan"] = True
elif action == "protected":
    with open("bench.py", "a") as f:
        f.write("\n# tampered\n")
    speed["small"] *= 0.9
elif action == "split":
    speed["small"] *= 0.95
    speed["large"] *= 1.05
    plan = "split: faster small rows, slower large\ntarget_class: cls=small\n"
elif action == "hang_bench":
    k["hang"] = True
elif action == "hang_proposer":
    import time

    time.sleep(3600)
elif action == "fail":
    sys.exit(4)
elif action == "commit":
    speed["small"] *= 0.95
    json.dump(k, open("kernel.json", "w"))
    import subprocess

    subprocess.run(
        ["git", "commit", "-qam", "agent commit"],
        check=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@b",
            "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@b",
        },
    )
elif action == "noplan":
    speed["small"] *= 0.95
    plan = None
elif action.startswith("knob:"):  # knob:name or knob:name=<JSON value>: a bench fault
    name, _, value = action[5:].partition("=")
    k[name] = json.loads(value) if value else True
elif action.startswith("do:"):  # do:<python statement>, run in cand/ (hostile proposers)
    import subprocess
    import time

    exec(action[3:])  # json, os, subprocess, sys, time and k at hand

if action != "nochange" and not action.startswith("do:"):
    json.dump(k, open("kernel.json", "w"))
if plan is not None:
    with open(plan_path, "w") as f:
        f.write(plan)
