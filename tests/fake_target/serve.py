"""The fake target's per-tree server: kopt's per-tree serve protocol (docs/files.md) on the
CPU, without torch.

    python serve.py            one look with a random seed: CSV on stdout (the process-level bench)
    python serve.py --serve    `look N SEED PATH` -> `done N`, `audit N SEED PATH` -> `audited N`,
                               `prepare N SEED` -> `prepared N` (logged; the look still does
                               everything), `load` -> `loaded`; EOF: it leaves

Reads kernel.json of its tree (the working directory; re-read at `load`). Per config (shape,
cls, n): the inputs of S = 3 timed buffer sets and of the contract check's own set are drawn
from SEED, the outputs follow a deterministic pure-Python rule (y = x + x*x/2), and the
timed calls REALLY burn CPU: base latency x kernel.json's "speed" of the class (x "speed_n"
of the config, x `<cls>.speed` files as bench.py reads them) x `calls`, busy on the CPU, and
the row's latency is the CPU time it burned per call. The outputs of the timed calls are kept
until the next look, and every set's summary is committed to with the look (`PATH.sets.json`);
`audit` summarises the set and positions the audit seed picks (the rule both kopt and the
harness implement).

Hostile knobs in kernel.json (the candidate's code doing what a kernel must not):
  "timer_patch": f    the rows say f x the time really burned (a patched timer)
  "wrong": true       every output off by 1%, the row's own check silenced (err 0)
  "nan": true         a NaN in every output (err 0)
  "steal_reference"   the check's outputs right, the timed sets' outputs the check's (a cached result)
  "half_rows": true   computes half of each output (the rest zeros) and burns half the time
  "duplicate_rows"    a CSV row twice
  "late_outputs": true  commits to zero outputs with the look (as if computed only when the audit
                      seed is known), then rewrites the commitment with the real ones and audits
                      those; "no_commitment": true writes none
  "inflate_calls": f  the rows claim f x the timed calls really made (hiding a claimed saving
                      from the OS's accounting behind a larger count)
  "die_at": n, "hang_at": n, "fail_at": n   exits / never answers / answers `fail` at look n
  "flaky_start": true  the tree's first process exits at start (exit 5) before any answer; later
                      ones serve (a mark in the tree's cache)
  "looks": k          answers `done N last` after k looks (it leaves after that look's audit)
  "no_prepare": true  answers `prepare N SEED` with `fail ? ...`, as a bench that does not know it
  "die_at_prepare": n, "hang_at_prepare": n, "fail_at_prepare": n   the same at `prepare n SEED`
  "audit_fail": true  answers every audit with `fail`
  "hog": true         a thread left busy on the CPU for the process's whole life (logs `hog TIME`)
  "linger": true      ignores SIGTERM and stays after its stdin ends (with "hog": still busy)
  "reach": true       tries to write its own tree, best's tree and best's output folder, and
                      to list the latter (logs `reach WHAT ok|denied`)
Environment: FAKE_SERVE_LOG=path appends `start PID CWD PYCACHE-PREFIX` for each process
started, `look|audit N SEED PID CWD TIME` for each request and `done N SEED PID CWD TIME` for
each look answered (tests count processes per tree, compare seeds, see when a look ran); FAKE_NOISE (relative sigma of the burned time, default 0.002); FAKE_CALLS
(timed calls per config, default 100); FAKE_PREPARE_S (the CPU seconds a `prepare` burns, default 0.05).
"""

import json
import math
import os
import random
import signal
import sys
import threading
import time

CONFIGS = [
    ("s0", "small", 128, 10.0),
    ("s1", "small", 256, 14.0),
    ("s2", "large", 4096, 120.0),
    ("s3", "large", 8192, 230.0),
]
COLUMNS = ("shape", "cls", "n")
SETS = 3
ATOL = RTOL = 1e-3
CALLS = int(os.environ.get("FAKE_CALLS", "100"))
NOISE = float(os.environ.get("FAKE_NOISE", "0.002"))
noise = random.Random()


def kernel():
    with open("kernel.json") as f:
        return json.load(f)


def key_of(shape, cls, n):
    return f"shape={shape},cls={cls},n={n}"


def inputs(seed, key, which, n):
    rng = random.Random(f"{seed}/{key}/{which}")
    return [rng.uniform(-1.0, 1.0) for _ in range(n)]


def rule(xs, k):
    ys = [x + x * x / 2 for x in xs]
    if k.get("wrong"):
        ys = [y + 0.01 * (1 + abs(y)) for y in ys]
    if k.get("nan"):
        ys[len(ys) // 2] = math.nan
    return ys


def burn(seconds):
    """Busy on the CPU for `seconds` of this process's CPU time; the CPU time it took."""
    start = time.process_time()
    end = start + max(0.0, seconds)
    while time.process_time() < end:
        pass
    return time.process_time() - start


def speed(k, cls, n):
    extra = float(open(f"{cls}.speed").read()) if os.path.exists(f"{cls}.speed") else 1.0
    return float(k["speed"][cls]) * extra * float(k.get("speed_n", {}).get(str(n), 1.0))


def look(seed, k):
    """One look: the CSV text and, per config, the outputs of each timed set's last call."""
    rows = ["shape,cls,n,us,err,calls"]
    kept = {}
    for shape, cls, n, base in CONFIGS:
        key = key_of(shape, cls, n)
        check = rule(inputs(seed, key, "check", n), k)
        reference = [x + x * x / 2 for x in inputs(seed, key, "check", n)]
        err = (
            0
            if k.get("wrong") or k.get("nan")
            else int(any(abs(a - b) > ATOL + RTOL * abs(b) for a, b in zip(check, reference, strict=True)))
        )
        outs = []
        for s in range(SETS):
            if k.get("steal_reference"):
                ys = list(reference)
            else:
                ys = rule(inputs(seed, key, f"set{s}", n), k)
            if k.get("half_rows"):
                ys = ys[: n // 2] + [0.0] * (n - n // 2)
            outs.append(ys)
        work = base * 1e-6 * speed(k, cls, n) * CALLS * (1 + noise.gauss(0.0, NOISE))
        spent = burn(work / 2 if k.get("half_rows") else work)
        us = spent / CALLS * 1e6 * float(k.get("timer_patch", 1.0))
        rows.append(f"{shape},{cls},{n},{us:.6f},{err},{round(CALLS * float(k.get('inflate_calls', 1)))}")
        if k.get("duplicate_rows") and shape == "s1":
            rows.append(rows[-1])
        kept[key] = ({"shape": shape, "cls": cls, "n": n}, outs)
    return "\n".join(rows) + "\n", kept


def summary(ys, positions):
    return {
        "numel": len(ys),
        "nan": sum(1 for y in ys if math.isnan(y)),
        "inf": sum(1 for y in ys if math.isinf(y)),
        "sum": math.fsum(y for y in ys if math.isfinite(y)),
        "abs_sum": math.fsum(abs(y) for y in ys if math.isfinite(y)),
        "samples": [[i, ys[i]] for i in positions],
    }


def commitment(kept):
    """Every timed set's output summaries, written with the look (before any audit seed)."""
    return json.dumps(
        {
            "version": 1,
            "configs": [
                {"config": config, "sets": [[summary(ys, [])] for ys in outs]} for config, outs in kept.values()
            ],
        }
    )


def audit(seed, kept):
    configs = []
    for key, (config, outs) in kept.items():
        rng = random.Random(f"{seed}/{key}")
        chosen = rng.randrange(len(outs))
        ys = outs[chosen]
        positions = sorted(rng.randrange(len(ys)) for _ in range(min(64, len(ys))))
        configs.append(
            {
                "config": config,
                "sets": len(outs),
                "set": chosen,
                "atol": ATOL,
                "rtol": RTOL,
                "outputs": [summary(ys, positions)],
            }
        )
    return json.dumps({"version": 1, "configs": configs})


def log(line):
    if os.environ.get("FAKE_SERVE_LOG"):
        with open(os.environ["FAKE_SERVE_LOG"], "a") as f:
            f.write(f"{line}\n")


def reach(path):
    """The "reach" knob: what a candidate's process tries beyond its own output folder
    (logged `reach WHAT ok|denied`)."""
    here = os.getcwd()
    other = os.path.join(os.path.dirname(os.path.dirname(path)), "best")
    tries = {
        "own-tree": lambda: open(os.path.join(here, "planted.txt"), "w").write("x"),
        "best-tree": lambda: open(os.path.join(os.path.dirname(here), "best", "kernel.json"), "a").write(" "),
        "best-looks-write": lambda: open(os.path.join(other, "planted.csv"), "w").write("x"),
        "best-looks-read": lambda: os.listdir(other),
    }
    for what, attempt in tries.items():
        try:
            attempt()
            log(f"reach {what} ok")
        except OSError:
            log(f"reach {what} denied")


def hog():
    """The "hog" knob: a thread left busy on the CPU, logging `hog TIME` every few ms."""
    while True:
        burn(0.005)
        log(f"hog {time.time():.6f}")


def serve():
    log(f"start {os.getpid()} {os.getcwd()} {os.environ.get('PYTHONPYCACHEPREFIX', '-')}")
    k = kernel()
    mark = os.path.join(os.environ.get("TRITON_CACHE_DIR", "."), "flaky_start.once")  # the tree's cache
    if k.get("flaky_start") and not os.path.exists(mark):  # its first process dies at import, as a flaky assert does
        os.makedirs(os.path.dirname(mark), exist_ok=True)
        open(mark, "w").close()
        sys.exit(5)
    if k.get("hog"):
        threading.Thread(target=hog, daemon=True).start()
    if k.get("linger"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        answer(k)
    finally:
        while k.get("linger"):
            time.sleep(1)


def answer(k):
    """The protocol's requests on stdin until it ends (or the process must leave)."""
    kept, last_look, served, leaving, look_path = {}, None, 0, False, ""
    for line in sys.stdin:
        words = line.split()
        if words == ["load"]:
            k = kernel()
            print("loaded", flush=True)
            continue
        if words[:1] == ["prepare"] and len(words) == 3:  # `prepare N SEED` (a bench that knows it)
            if k.get("no_prepare"):  # as kopt's harness answers a request it does not know
                print(f"fail ? not a request: {line.strip()!r}", flush=True)
                continue
            log(f"prepare {words[1]} {words[2]} {os.getpid()} {os.getcwd()} {time.time():.6f}")
            if str(k.get("die_at_prepare")) == words[1]:
                sys.exit(7)
            if str(k.get("hang_at_prepare")) == words[1]:
                time.sleep(3600)
            if str(k.get("fail_at_prepare")) == words[1]:
                print(f"fail {words[1]} the harness broke", flush=True)
                continue
            burn(float(os.environ.get("FAKE_PREPARE_S", "0.05")))
            log(f"prepared {words[1]} {words[2]} {os.getpid()} {os.getcwd()} {time.time():.6f}")
            print(f"prepared {words[1]}", flush=True)
            continue
        if len(words) != 4 or words[0] not in ("look", "audit"):
            continue
        verb, n, seed, path = words
        log(f"{verb} {n} {seed} {os.getpid()} {os.getcwd()} {time.time():.6f}")
        if verb == "audit":
            if k.get("audit_fail"):
                print(f"fail {n} the audit broke", flush=True)
            elif n != last_look:
                print(f"fail {n} no look {n} to audit", flush=True)
            else:
                if k.get("late_outputs"):  # the promise rewritten once the seed is known: kopt read it before
                    with open(look_path + ".sets.json", "w") as f:
                        f.write(commitment(kept))
                with open(path, "w") as f:
                    f.write(audit(int(seed), kept))
                print(f"audited {n}", flush=True)
            if leaving:
                return
            continue
        print(f"measuring look {n}", flush=True)  # a log line the protocol ignores
        if str(k.get("die_at")) == n:
            sys.exit(7)
        if str(k.get("hang_at")) == n:
            time.sleep(3600)
        if str(k.get("fail_at")) == n:
            print(f"fail {n} the harness broke", flush=True)
            continue
        if k.get("reach"):
            reach(path)
        text, kept = look(int(seed), k)
        look_path = path
        with open(path, "w") as f:
            f.write(text)
        if not k.get("no_commitment"):
            promised = (
                {key: (config, [[0.0] * len(ys) for ys in outs]) for key, (config, outs) in kept.items()}
                if k.get("late_outputs")
                else kept
            )
            with open(path + ".sets.json", "w") as f:
                f.write(commitment(promised))
        last_look = n
        served += 1
        leaving = served >= int(k.get("looks") or 10**9)
        log(f"done {n} {seed} {os.getpid()} {os.getcwd()} {time.time():.6f}")
        print(f"done {n}{' last' if leaving else ''}", flush=True)


if "--serve" in sys.argv[1:]:
    serve()
else:
    sys.stdout.write(look(random.SystemRandom().randrange(2**63), kernel())[0])
