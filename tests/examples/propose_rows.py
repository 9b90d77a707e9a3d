"""A scripted `command` proposer for the softmax example (examples/softmax): it steps the
kernel's ROWS_PER_PROGRAM (1 -> 2 -> 4 -> 1) in softmax/kernel.py of the candidate tree and
writes the plan kopt asks for. On Triton's interpreter fewer programs per call is a real
change of speed, so the loop has something to decide."""

import os
import re
import sys
from pathlib import Path

kernel = Path("softmax/kernel.py")
text = kernel.read_text()
m = re.search(r"^ROWS_PER_PROGRAM = (\d+)$", text, re.M)
if m is None:
    sys.exit("no ROWS_PER_PROGRAM line in softmax/kernel.py")
old = int(m.group(1))
new = {1: 2, 2: 4, 4: 1}.get(old, 1)
kernel.write_text(text.replace(m.group(0), f"ROWS_PER_PROGRAM = {new}"))
Path(os.environ["KOPT_PLAN"]).write_text(
    f"ROWS_PER_PROGRAM {old} -> {new}: fewer, longer programs per call\nscope: global\n"
)
