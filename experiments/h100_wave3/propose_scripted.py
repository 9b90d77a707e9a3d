"""The wave's scripted `command` proposer: kopt runs it in cand/ (reset to BEST) and it applies
the change its PLAN file lists for this iteration (KOPT_ITERATION), else the plan's "default",
then writes the plan file kopt reads (hypothesis; target_class or scope). No repairs.

    python propose_scripted.py PLAN.json        (KOPT_ITERATION, KOPT_PLAN, KOPT_REPAIR from kopt)

PLAN.json: {"<iteration>": change, ..., "default": change}; a change is one of
  {"kind": "append", "path": P, "text": T, "hypothesis": H}      T appended to P ({n}: the iteration)
  {"kind": "params", "path": P, "class": C, "set": {...}, "hypothesis": H, "target_class": C,
   "wait_if_same_s": S}                                          P's JSON entry C updated with set
  {"kind": "replace", "path": P, "old": O, "new": N, "hypothesis": H}   O (found exactly once in P) -> N
A params change that BEST already holds is no change: with wait_if_same_s the proposer waits that
long (the wave's driver restarts the run from v0 meanwhile, which ends this proposal) and fails.
Standard library only: it runs under whatever interpreter kopt's proposer command names.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def apply(tree: Path, change: dict[str, Any], n: str) -> bool:
    """Apply `change` in `tree`; False when it changes nothing."""
    path = tree / str(change["path"])
    kind = change["kind"]
    if kind == "append":
        path.write_text(path.read_text(encoding="utf-8") + str(change["text"]).replace("{n}", n), encoding="utf-8")
        return True
    if kind == "params":
        params = json.loads(path.read_text(encoding="utf-8"))
        entry = {**params.get(change["class"], {}), **change["set"]}
        if params.get(change["class"]) == entry:
            return False
        params[change["class"]] = entry
        path.write_text(json.dumps(params, indent=2) + "\n", encoding="utf-8")
        return True
    if kind == "replace":
        text = path.read_text(encoding="utf-8")
        old, new = str(change["old"]), str(change["new"])
        if text.count(old) != 1:
            raise SystemExit(f"plan: {change['path']} holds {text.count(old)} copies of {old!r}, not one")
        path.write_text(text.replace(old, new), encoding="utf-8")
        return True
    raise SystemExit(f"plan: unknown change kind {kind!r}")


def plan_text(change: dict[str, Any], n: str) -> str:
    lines = [str(change["hypothesis"]).replace("{n}", n)]
    lines.append(f"target_class: {change['target_class']}" if change.get("target_class") else "scope: global")
    return "\n".join(lines) + "\n"


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    if os.environ.get("KOPT_REPAIR", "0") != "0":
        print("no repair: the wave's candidates are fixed", file=sys.stderr)
        return 1
    n = os.environ["KOPT_ITERATION"]
    change = plan.get(n) or plan.get("default")
    if change is None:
        print(f"no change listed for iteration {n}", file=sys.stderr)
        return 1
    if not apply(Path.cwd(), change, n):
        wait = float(change.get("wait_if_same_s") or 0)
        print(f"iteration {n}: BEST already holds this change; waiting {wait:.0f} s for the restart", flush=True)
        time.sleep(wait)
        return 3
    Path(os.environ["KOPT_PLAN"]).write_text(plan_text(change, n), encoding="utf-8")
    print(f"iteration {n}: {plan_text(change, n).splitlines()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
