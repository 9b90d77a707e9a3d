"""The fake CPU target's benchmark: prints kopt's CSV with controllable speed per class.

kernel.json (the "kernel" a proposer edits) sets a speed factor per config class and can
make the result wrong, NaN, hang or crash. Noise is real (unseeded): FAKE_NOISE (relative
sigma, default 0.002) per run, so paired statistics have something to do. FAKE_LINGER=s
leaves a `sleep s` child in the bench's process group (an orphan if the engine dies).
Knob in kernel.json: speed_n ({"n": factor}: one config's speed); a file `<cls>.speed` in the
tree multiplies that class's time (lanes' tests: two changes in two files rebase cleanly); a file
`<cls>.boost` multiplies it too, but only while `<cls>.speed` leaves the class at 0.9 or slower
(a gain that another change makes moot: lanes' tests of a keep carried to a new BEST).
FAKE_BIND_LOG=path appends the CUDA_VISIBLE_DEVICES this run was bound to, its start and end
times and its tree (lanes' tests: never two lanes on one GPU at once). Fault knobs: crash, flaky (fails the first run of a tree: a mark in its cache), segv,
hang, flood_mib, write_tree, touch (a path), nan, inf, wrong, fast (divide the latency),
fast_unless_fresh (the same, except in a cache kopt made fresh: a confirmation told apart),
drop (a column), malformed, empty, no_csv; under kopt's profile (KOPT_PROFILE_OUTPUTS) each config's
output is summarised there, profile_wrong (a list of classes) halves theirs (profile_wrong_closer: only in a closer
profile, KOPT_PROFILE_CALLS other than its own 3 a config), each entry saying its calls as kopt's harness does
(profile_no_calls: not, as a bench that is not kopt's harness), profile_no_outputs
writes none; hostile ones (tests/security/test_profile_hostile.py): profile_as_best (knobs applied
only when profiled as best), profile_nan (classes), profile_atol, profile_raw (the file's text),
profile_nested (depth), profile_fifo, profile_sparse_mib, profile_link (a symlink's target). Held
(KOPT_PROFILE_HOLD, a keep's profile started ahead): as kopt's harness, unless ignores_hold
(never holds) or held_exit (holds, then exits before the word); after `go` it logs `warmed PID CWD TIME
0|1` (1: a warm-up's mark in its cache). A held profile's warm-up (KOPT_PROFILE_WARM) logs `warm
...` and `warm_end ...` and marks its cache; warm_s (seconds it takes), warm_go (a path, relative to
its tree, where it writes "go": logs `warm_go_written` or `warm_go_refused`). FAKE_REPS=N adds a `reps` column (N timed calls per
row) and sleeps what N calls at each config's latency take, before `fast` divides it: the
wall time holds the timed calls, and a lying timer's claim is not in it.
"""

import math
import os
import sys
import time


def load_json(path, text=None):
    """json.load through the json module's own C scanner (_json) (`text`: parse it, not the file).
    The json package imports `re`, and with `subprocess` (imported only to linger) they took this
    bench from 20 to 37 ms of CPU, and from 43 to 120-157 ms on a fresh bytecode cache (kopt's
    sandbox gives every new tree one); the suite runs the bench thousands of times."""
    text = (open(path).read() if text is None else text).strip()
    try:
        import _json
    except ImportError:  # an interpreter without it
        import json

        return json.loads(text)

    class Context:
        strict, object_hook, object_pairs_hook, memo = True, None, None, {}
        parse_float, parse_int, parse_constant = float, int, float

    try:
        value, end = _json.make_scanner(Context())(text, 0)
    except StopIteration as e:
        raise ValueError(f"{path}: not JSON at character {e.value}") from None
    if end != len(text):
        raise ValueError(f"{path}: extra data at character {end}")
    return value


class Gauss:
    """random.Random().gauss's distribution without the random module, whose imports (warnings,
    operator, bisect, ...) were ~1.8 ms of this bench's ~16 ms of CPU a start (median of 200
    alternated starts), in the suite's ~3,000 runs: Box-Muller on os.urandom, unseeded as
    before (each run's noise its own)."""

    def gauss(self, mu, sigma):
        u1 = ((int.from_bytes(os.urandom(7), "big") >> 3) + 1) / 2**53  # (0, 1]: log(u1) is finite
        u2 = (int.from_bytes(os.urandom(7), "big") >> 3) / 2**53
        return mu + sigma * math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


if os.environ.get("FAKE_LINGER"):  # a child that outlives the bench in its process group
    os.posix_spawnp("sleep", ["sleep", os.environ["FAKE_LINGER"]], os.environ)  # subprocess: 60 ms more CPU


def _calls_of(key, exact):
    """The calls tests/fake_target/bin/ncu makes of the config `key` (kopt's harness says them)."""
    asked, configs = os.environ.get("KOPT_PROFILE_CALLS", ""), os.environ.get("KOPT_PROFILE_CONFIGS", "")
    if exact is not None:
        return exact.get(key, 3)
    return int(asked) if asked and (not configs or key in load_json("", configs)) else 3


def note(line):
    """A line in FAKE_SERVE_LOG (the served fake's log), where set."""
    log = os.environ.get("FAKE_SERVE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(line + "\n")


def held(go):
    """A profile started ahead (KOPT_PROFILE_HOLD), as kopt's harness holds: `<go>.held` first
    (logs `held PID CWD TIME` to FAKE_SERVE_LOG), then a look every 10 ms until `go` (logs `go
    ...`) or `stop` (logs `stopped ...`, leaves)."""
    open(go + ".held", "w").write(str(os.getpid()))
    note(f"held {os.getpid()} {os.getcwd()} {time.time():.6f}")
    if k.get("held_exit"):  # held, then ended before the word (its own limit, memory): exit 3
        sys.exit(3)
    while True:
        word = open(go).read().strip() if os.path.exists(go) else ""
        if word == "go":
            note(f"go {os.getpid()} {os.getcwd()} {time.time():.6f}")
            return
        if word == "stop":
            note(f"stopped {os.getpid()} {os.getcwd()} {time.time():.6f}")
            sys.exit(0)
        time.sleep(0.01)


k = load_json("kernel.json")
UNHELD = bool(os.environ.get("KOPT_PROFILE_HOLD") and k.get("ignores_hold"))
"""ignores_hold: a command that is not kopt's harness runs at once (logs `unheld ...` when it
starts and `unheld_end ...` when it ends)."""
WARMED = os.path.join(os.environ.get("TRITON_CACHE_DIR", "."), "warmed")
if os.environ.get("KOPT_PROFILE_HOLD") and not UNHELD:
    held(os.environ["KOPT_PROFILE_HOLD"])
    note(f"warmed {os.getpid()} {os.getcwd()} {time.time():.6f} {int(os.path.exists(WARMED))}")
if os.environ.get("KOPT_PROFILE_WARM"):  # a held profile's warm-up: "compiles" into the cache, then leaves
    note(f"warm {os.getpid()} {os.getcwd()} {time.time():.6f}")
    if k.get("warm_go"):  # hostile: releases its own held profile, were the go file in reach
        try:
            with open(k["warm_go"], "w") as f:
                f.write("go\n")
            note(f"warm_go_written {os.getpid()} {os.getcwd()} {time.time():.6f}")
        except OSError:
            note(f"warm_go_refused {os.getpid()} {os.getcwd()} {time.time():.6f}")
    time.sleep(float(k.get("warm_s", 0)))
    os.makedirs(os.path.dirname(WARMED) or ".", exist_ok=True)
    open(WARMED, "w").close()
    note(f"warm_end {os.getpid()} {os.getcwd()} {time.time():.6f}")
    sys.exit(0)
if UNHELD:
    note(f"unheld {os.getpid()} {os.getcwd()} {time.time():.6f}")
if k.get("crash"):
    sys.exit(3)
FLAKY = os.path.join(os.environ.get("TRITON_CACHE_DIR", "."), "flaky.once")  # the tree's cache: kept between runs
if k.get("flaky") and not os.path.exists(FLAKY):  # fails once: a bench whose own check is flaky
    os.makedirs(os.path.dirname(FLAKY), exist_ok=True)
    open(FLAKY, "w").close()
    sys.exit(4)
if k.get("segv"):
    os.kill(os.getpid(), 11)
if k.get("hang"):
    time.sleep(3600)
if k.get("flood_mib"):  # runaway output
    chunk = "x" * (1 << 20) + "\n"
    for _ in range(int(k["flood_mib"])):
        sys.stdout.write(chunk)
if k.get("touch") and not os.path.exists(k["touch"] + ".once"):  # once: a file a test's double watches
    open(k["touch"] + ".once", "w").close()
    open(k["touch"], "w").close()
if k.get("write_tree"):  # a bench that edits a tracked file of its tree
    with open("kopt.toml", "a") as f:
        f.write("# written by the bench\n")
started = time.time()
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
noise = float(os.environ.get("FAKE_NOISE", "0.002"))
rng = Gauss()
CONFIGS = [("small", 128, 10.0), ("small", 256, 14.0), ("large", 4096, 120.0), ("large", 8192, 230.0)]
reps = int(os.environ.get("FAKE_REPS", "0"))
out = ["shape,cls,n,us,err" + (",reps" if reps else "")]
for i, (cls, n, base) in enumerate(CONFIGS):
    extra = float(open(f"{cls}.speed").read()) if os.path.exists(f"{cls}.speed") else 1.0  # a class's own file
    if extra >= 0.9 and os.path.exists(f"{cls}.boost"):  # moot once the class's own file made it faster
        extra *= float(open(f"{cls}.boost").read())
    us = (
        base
        * float(k["speed"][cls])
        * extra
        * float(k.get("speed_n", {}).get(str(n), 1.0))
        * (1.0 + rng.gauss(0.0, noise))
    )
    if k.get("nan") and cls in k.get("nan_classes", ["small", "large"]):
        us = math.nan
    if k.get("inf"):
        us = math.inf
    if reps and math.isfinite(us):
        time.sleep(us * reps * 1e-6)  # the timed calls, as long as they really take
    if k.get("fast"):  # a timer that lies (or a kernel that skips the work)
        us /= float(k["fast"])
    if k.get("fast_unless_fresh") and "fresh_" not in os.environ.get("TRITON_CACHE_DIR", ""):
        us /= float(k["fast_unless_fresh"])  # ... only where it guesses no confirmation watches
    err = 1 if k.get("wrong") else 0
    out.append(f"s{i},{cls},{n},{us:.6f},{err}" + (f",{reps}" if reps else ""))
profile_out = os.environ.get("KOPT_PROFILE_OUTPUTS")
if profile_out and os.path.basename(os.path.dirname(profile_out)).startswith("best"):
    k.update(k.get("profile_as_best") or {})  # a tree's dormant code, awake once it is profiled as best
if profile_out and not k.get("profile_no_outputs"):  # kopt's profile: each config's output summarised
    seed = int(os.environ.get("KOPT_PROFILE_SEED", "0"))
    wrong = k.get("profile_wrong")  # a tree that does other work only while it is profiled
    asked = os.environ.get("KOPT_PROFILE_CALLS", "")
    exact = load_json("KOPT_PROFILE_CALLS", asked) if asked.startswith("{") else None  # each config's, named
    if asked and (exact is None or any(v != 3 for v in exact.values())):  # ... or only in a keep's closer profile
        wrong = [*(wrong or []), *k.get("profile_wrong_closer", [])]
    entries = []
    for i, (cls, n, _) in enumerate(CONFIGS):
        value = (seed % 97 + n) * (0.5 if wrong and cls in wrong else 1.0)
        if cls in k.get("profile_nan", []):  # NaN outputs, their count hidden
            value = math.nan
        entries.append(
            {
                "config": {"shape": f"s{i}", "cls": cls, "n": n},
                "sets": 1,
                "set": 0,
                "atol": float(k.get("profile_atol", 1e-3)),
                "rtol": float(k.get("profile_atol", 1e-3)),
                "outputs": [
                    {"numel": n, "nan": 0, "inf": 0, "sum": value * n, "abs_sum": value * n, "samples": [[0, value]]}
                ],
                **({} if k.get("profile_no_calls") else {"calls": _calls_of(f"shape=s{i},cls={cls},n={n}", exact)}),
            }
        )
    text = '{"version": 1, "configs": [' + ", ".join(repr(e).replace("'", '"') for e in entries) + "]}\n"
    text = text.replace(": nan", ": NaN").replace(", nan]", ", NaN]")  # JSON's spelling
    if "profile_raw" in k:  # any text at all
        text = k["profile_raw"]
    if k.get("profile_nested"):  # JSON nested that deep
        text = "[" * int(k["profile_nested"])
    if k.get("profile_fifo"):  # a FIFO where kopt reads a file
        os.mkfifo(profile_out)
    elif k.get("profile_sparse_mib"):  # a huge (sparse) file
        with open(profile_out, "w") as f:
            f.truncate(int(k["profile_sparse_mib"]) << 20)
    else:
        with open(profile_out, "w") as f:
            f.write(text)
    if k.get("profile_link"):  # the file swapped for a link (relative to its folder) on the way out
        os.remove(profile_out)
        os.symlink(k["profile_link"], profile_out)
if k.get("drop"):  # a missing column
    cols = out[0].split(",")
    j = cols.index(k["drop"])
    out = [",".join(c for i, c in enumerate(line.split(",")) if i != j) for line in out]
if k.get("malformed"):
    out.insert(2, 's9,"small,1')
if k.get("empty"):
    out = []
csv = os.environ.get("FAKE_CSV_TO")
if k.get("no_csv"):
    pass
elif csv:
    os.makedirs(os.path.dirname(csv) or ".", exist_ok=True)
    with open(csv, "w") as f:
        f.write("\n".join(out) + "\n" if out else "")
else:
    print("fake bench starting")
    print("\n".join(out))
    print("done")
if os.environ.get("FAKE_BIND_LOG"):  # which GPU this run was bound to, and when (lanes' tests)
    with open(os.environ["FAKE_BIND_LOG"], "a") as f:
        f.write(
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', '-')} {started:.6f} {time.time():.6f} "
            f"{os.path.basename(os.path.dirname(os.getcwd()))}/{os.path.basename(os.getcwd())}\n"
        )
if UNHELD:
    note(f"unheld_end {os.getpid()} {os.getcwd()} {time.time():.6f}")
