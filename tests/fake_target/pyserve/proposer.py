"""The pyserve target's hostile `command` proposer: iteration vN writes the files of case
N-1 of PYSERVE_CASES (comma-separated names of hostile.py's CASES) into cand/ (its working
directory), and a plan naming it. Run by kopt like any agent, in its sandbox."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile  # noqa: E402

names = [n for n in os.environ["PYSERVE_CASES"].split(",") if n]
case = hostile.BY_NAME[names[(int(os.environ["KOPT_ITERATION"]) - 1) % len(names)]]
for path, content in case.build(Path.cwd()).items():
    data = content.encode() if isinstance(content, str) else content
    Path(path).write_bytes(data)
with open(os.environ["KOPT_PLAN"], "w") as f:
    f.write(f"{case.name}: {case.what}\nscope: global\n")
