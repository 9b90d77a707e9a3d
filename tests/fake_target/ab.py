"""The fake target's ab_command: best and candidate "timed" interleaved in one process.

Reads kernel.json from both trees and prints rows per (shape, side, block), alternating
which side goes first block by block.
"""

import json
import random
import sys
from pathlib import Path

best, cand = Path(sys.argv[1]), Path(sys.argv[2])
speed = {s: json.loads((p / "kernel.json").read_text()) for s, p in (("best", best), ("cand", cand))}
CONFIGS = [("small", 128, 10.0), ("small", 256, 14.0), ("large", 4096, 120.0), ("large", 8192, 230.0)]
rng = random.Random()
print("shape,cls,n,side,block,us,err")
for block in range(4):
    order = ("best", "cand") if block % 2 == 0 else ("cand", "best")
    for side in order:
        k = speed[side]
        for i, (cls, n, base) in enumerate(CONFIGS):
            us = base * k["speed"][cls] * (1 + rng.gauss(0, 0.002))
            print(f"s{i},{cls},{n},{side},{block},{us:.6f},{1 if k.get('wrong') else 0}")
