"""The wave's scripted `command` proposer for the softmax example: kopt runs it in cand/ (reset
to BEST) and it applies the change its CHANGES file lists for this iteration, then writes the
plan. No repairs: the wave's candidates are fixed.

    python propose_softmax.py CHANGES.json       (KOPT_ITERATION, KOPT_PLAN from kopt)

CHANGES.json: {"<iteration>": {"kind": ..., "hypothesis": ...}, ...} with kind
  "comment"  a comment line appended to softmax/kernel.py (an A/A candidate: the same code)
  "set"      `name = value` at the top of softmax/kernel.py (e.g. NUM_WARPS = 8)
  "delay"    torch.cuda._sleep(cycles) after the kernel's launch (an injected delay)
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

KERNEL = Path("softmax/kernel.py")
RETURN = "    return out.reshape(shape)"


def apply(text: str, change: dict[str, object]) -> str:
    kind = change["kind"]
    if kind == "comment":
        return text.rstrip("\n") + f"\n\n# {change.get('text', 'a comment-only change')}\n"
    if kind == "set":
        name, value = str(change["name"]), change["value"]
        m = re.search(rf"^{re.escape(name)} = (\S+)$", text, re.M)
        if m is None:
            raise SystemExit(f"no `{name} = ...` line in {KERNEL}")
        return text[: m.start()] + f"{name} = {value!r}" + text[m.end() :]
    if kind == "delay":
        if RETURN not in text:
            raise SystemExit(f"no `{RETURN.strip()}` in {KERNEL}")
        head, tail = text.rsplit(RETURN, 1)
        return head + f"    if x.is_cuda:\n        torch.cuda._sleep({int(str(change['cycles']))})\n" + RETURN + tail
    raise SystemExit(f"unknown change kind {kind!r}")


def main() -> int:
    changes = json.loads(Path(sys.argv[1]).read_text())
    if os.environ.get("KOPT_REPAIR", "0") != "0":
        print("no repair: the wave's candidates are fixed", file=sys.stderr)
        return 1
    n = os.environ["KOPT_ITERATION"]
    change = changes.get(n)
    if change is None:
        print(f"no change listed for iteration {n}", file=sys.stderr)
        return 1
    KERNEL.write_text(apply(KERNEL.read_text(), change))
    Path(os.environ["KOPT_PLAN"]).write_text(f"{change['hypothesis']}\nscope: global\n")
    print(f"iteration {n}: {change['hypothesis']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
