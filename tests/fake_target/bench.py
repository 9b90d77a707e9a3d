"""The fake CPU target's benchmark: prints kopt's CSV with controllable speed per class.

kernel.json (the "kernel" a proposer edits) sets a speed factor per config class and can
make the result wrong, NaN, hang or crash. Noise is real (unseeded): FAKE_NOISE (relative
sigma, default 0.002) per run, so paired statistics have something to do. FAKE_LINGER=s
leaves a `sleep s` child in the bench's process group (an orphan if the engine dies).
"""

import json
import math
import os
import random
import subprocess
import sys
import time

if os.environ.get("FAKE_LINGER"):  # a child that outlives the bench in its process group
    subprocess.Popen(["sleep", os.environ["FAKE_LINGER"]])
k = json.load(open("kernel.json"))
if k.get("crash"):
    sys.exit(3)
if k.get("hang"):
    time.sleep(3600)
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
noise = float(os.environ.get("FAKE_NOISE", "0.002"))
rng = random.Random()
CONFIGS = [("small", 128, 10.0), ("small", 256, 14.0), ("large", 4096, 120.0), ("large", 8192, 230.0)]
out = ["shape,cls,n,us,err"]
for i, (cls, n, base) in enumerate(CONFIGS):
    us = base * float(k["speed"][cls]) * (1.0 + rng.gauss(0.0, noise))
    if k.get("nan") and cls in k.get("nan_classes", ["small", "large"]):
        us = math.nan
    err = 1 if k.get("wrong") else 0
    out.append(f"s{i},{cls},{n},{us:.6f},{err}")
csv = os.environ.get("FAKE_CSV_TO")
if csv:
    os.makedirs(os.path.dirname(csv) or ".", exist_ok=True)
    with open(csv, "w") as f:
        f.write("\n".join(out) + "\n")
else:
    print("fake bench starting")
    print("\n".join(out))
    print("done")
