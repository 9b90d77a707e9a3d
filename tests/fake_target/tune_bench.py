"""A fake bench for the tune proposer: latency per class is a function of params.json.

Each class has its own best point (narrow: 1 warp, 4 rows per program; wide: 8 warps,
1 row); every step of log2 away from it costs 8% per parameter. The class's values are
`{**p["*"], **p.get(key, {})}`, as the bundled kernels read them. Noise: FAKE_NOISE
(relative sigma, default 0.002), unseeded, so the paired statistics have work to do.
"""

import json
import math
import os
import random

p = json.load(open("params.json"))
noise = float(os.environ.get("FAKE_NOISE", "0.002"))
rng = random.Random()
BEST = {"narrow": {"num_warps": 1, "ROWS_PER_PROG": 4}, "wide": {"num_warps": 8, "ROWS_PER_PROG": 1}}
CONFIGS = [("narrow", 256, 10.0), ("narrow", 512, 16.0), ("wide", 4096, 120.0), ("wide", 8192, 230.0)]
print("shape,dclass,D,us,err")
for i, (cls, d, base) in enumerate(CONFIGS):
    values = {**p["*"], **p.get(f"dclass={cls}", {})}
    cost = 1.0
    for name, best in BEST[cls].items():
        cost *= 1.0 + 0.08 * abs(math.log2(values[name]) - math.log2(best))
    us = base * cost * (1.0 + rng.gauss(0.0, noise))
    print(f"s{i},{cls},{d},{us:.6f},0")
