"""The fake target's ab_command: best and candidate "timed" interleaved in one process.

    python ab.py BEST CAND            one look: CSV on stdout
    python ab.py BEST CAND --serve    kopt's serve protocol: `look N PATH` -> CSV in PATH, `done N`

Reads kernel.json from both trees and writes rows per (shape, side, block), alternating
which side goes first block by block. Serve-mode knobs (environment): FAKE_SERVE_LOOKS=k
answers `done N last` and leaves after k looks; FAKE_SERVE_DIE_AT=n exits without answering
look n; FAKE_SERVE_FAIL_AT=n answers look n with `fail`; FAKE_SERVE_HANG_AT=n never answers
look n; FAKE_SERVE_LOG=path appends one line per process start (to count processes);
FAKE_SERVE_NO_RELOAD=1 answers `reload` with `fail reload`. A candidate whose kernel.json
holds "slow_best": f makes best's rows f times slower: candidate code that reaches into the
shared process (a patched function of best's), which the re-verification in fresh processes
of the process-level bench exposes.
"""

import json
import os
import random
import sys
import time
from pathlib import Path

best, cand = Path(sys.argv[1]), Path(sys.argv[2])


def load() -> dict:
    return {s: json.loads((p / "kernel.json").read_text()) for s, p in (("best", best), ("cand", cand))}


speed = load()
CONFIGS = [("small", 128, 10.0), ("small", 256, 14.0), ("large", 4096, 120.0), ("large", 8192, 230.0)]
rng = random.Random()


def look() -> str:
    rows = ["shape,cls,n,side,block,us,err"]
    for block in range(4):
        order = ("best", "cand") if block % 2 == 0 else ("cand", "best")
        for side in order:
            k = speed[side]
            # candidate code in the shared process slowing best's calls (kernel.json's
            # "slow_best": the factor): what only a fresh, separate process can expose
            slowed = float(speed["cand"].get("slow_best", 1.0)) if side == "best" else 1.0
            for i, (cls, n, base) in enumerate(CONFIGS):
                us = base * k["speed"][cls] * slowed * (1 + rng.gauss(0, 0.002))
                rows.append(f"s{i},{cls},{n},{side},{block},{us:.6f},{1 if k.get('wrong') else 0}")
    return "\n".join(rows) + "\n"


def serve() -> None:
    env = os.environ
    if env.get("FAKE_SERVE_LOG"):
        with open(env["FAKE_SERVE_LOG"], "a") as f:
            f.write(f"start {os.getpid()}\n")
    global speed
    served = 0
    for line in sys.stdin:
        if line.strip() == "reload":  # a new decision: both trees may have changed
            if env.get("FAKE_SERVE_NO_RELOAD"):
                print("fail reload not supported", flush=True)
                continue
            speed = load()
            print("reloaded", flush=True)
            continue
        words = line.split(maxsplit=2)
        if len(words) != 3 or words[0] != "look":
            continue
        n, path = words[1], words[2].strip()
        print(f"measuring look {n}", flush=True)  # a log line the protocol ignores
        if env.get("FAKE_SERVE_DIE_AT") == n:
            sys.exit(7)
        if env.get("FAKE_SERVE_HANG_AT") == n:
            time.sleep(3600)
        if env.get("FAKE_SERVE_FAIL_AT") == n:
            print(f"fail {n} the harness broke", flush=True)
            continue
        Path(path).write_text(look())
        served += 1
        last = served >= int(env.get("FAKE_SERVE_LOOKS") or 10**9)
        print(f"done {n}{' last' if last else ''}", flush=True)
        if last:
            return


if "--serve" in sys.argv[3:]:
    serve()
else:
    sys.stdout.write(look())
