"""The fake target's bench with knobs on the shape of its output (tests/engine/test_output_shape.py).

Runs bench.py (this interpreter, this tree, its own knobs as they are) and rewrites the CSV
it prints by kernel.json's "shape":
  {"dup": ["s0"]}: row s0 printed a second time, that copy `dup_fast` times faster (default
  10: a duplicate that pulls a median over the config's rows down);
  {"drop": ["s3"]}: row s3 left out;
  {"extra": ["s9,small,64,1.0,0"]}: these rows appended.
A file `rows.csv` in the tree appends its lines too: a data file the bench reads, which no
rule protects (the hostile candidate's way to add rows without a knob).
FAKE_MEAN=1 adds a `us_mean` column (the mean over the timed calls beside the median `us`):
by default `us` itself; kernel.json's "mean_factor" {"<cls>": f} makes it f x `us` in that
class (calls mostly cheap with a few expensive ones: the median falls, the mean does not).
"""

import json
import os
import subprocess
import sys

res = subprocess.run([sys.executable, "bench.py"], capture_output=True, text=True)
sys.stderr.write(res.stderr)
if res.returncode != 0:
    sys.stdout.write(res.stdout)
    sys.exit(res.returncode)
k = json.load(open("kernel.json"))
shape = k.get("shape", {})
mean_factor = k.get("mean_factor", {})
with_mean = os.environ.get("FAKE_MEAN") == "1"
out = []
for line in res.stdout.splitlines():
    cells = line.split(",")
    if line.startswith("shape,") and with_mean:
        line += ",us_mean"
    elif len(cells) >= 5 and cells[0].startswith("s") and cells[0][1:].isdigit():
        name, cls, us = cells[0], cells[1], float(cells[3])
        if name in shape.get("drop", []):
            continue
        if with_mean:
            line += f",{us * float(mean_factor.get(cls, 1.0)):.6f}"
        out.append(line)
        if name in shape.get("dup", []):
            fast = [name, cls, cells[2], f"{us / float(shape.get('dup_fast', 10.0)):.6f}", *cells[4:]]
            out.append(",".join(fast) + (f",{us:.6f}" if with_mean else ""))
        continue
    if line == "done":
        out += shape.get("extra", [])
        if os.path.exists("rows.csv"):
            out += [r for r in open("rows.csv").read().splitlines() if r.strip()]
    out.append(line)
print("\n".join(out))
