"""How often the OS's accounting "shows" a saving that is not there: many served looks of the
pyserve target's BEST against a candidate (a timer patch that saves nothing, or the honest
~2x gain), each side alone on the machine (the other SIGSTOPped), ABBA across looks, CPU read
as kopt reads it (engine/runner `cpu_seconds` over the process group); then
decide/external_truth `weigh` over every run of consecutive looks a decision and its
confirmation could weigh, with and without a load on the machine.

    python -m experiments.os_truth_null --cand marshal --looks 60 --load bursty --out null.jsonl
    python -m experiments.os_truth_null --replay null.jsonl

`--load bursty`: two busy processes (this machine has 2 cores) that spin and sleep in random
spells of 0.2-3 s, as the suite's workers load it; `--load none`: nothing.
The report: per window length n, the share of windows whose outcome is "shown" (for the
timer patch a false confirmation; for the honest gain the power), and what the per-look
savings look like (mean, sd, in units of the claim)."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kopt_supervisor.engine.decide import mean, stdev
from kopt_supervisor.engine.decide.external_truth import SideCost, looks_of, weigh
from kopt_supervisor.engine.runner import cpu_seconds
from tests.fake_target.pyserve import hostile

PYSERVE = Path(hostile.__file__).resolve().parent
FILES = ("serve.py", "solution.py", "shapes.csv", "problem.json")


def tree(root: Path, name: str, case: str | None) -> Path:
    out = root / name
    out.mkdir()
    for f in FILES:
        shutil.copy(PYSERVE / f, out / f)
    if case is not None:
        for path, content in hostile.BY_NAME[case].build(out).items():
            (out / path).write_bytes(content.encode() if isinstance(content, str) else content)
    return out


class Side:
    def __init__(self, path: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.p = subprocess.Popen(
            [sys.executable, "serve.py", "--serve"],
            cwd=path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=env,
        )

    def ask(self, line: str) -> str:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def signal(self, sig: int) -> None:
        os.killpg(self.p.pid, sig)

    def cpu(self) -> float:
        return cpu_seconds(self.p.pid, None)

    def close(self) -> None:
        self.signal(signal.SIGCONT)
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(10)


def claimed(csv_path: Path) -> float:
    rows = csv_path.read_text().splitlines()[1:]
    return sum(float(r.split(",")[3]) * int(r.split(",")[6]) for r in rows) / 1e6


def bursty(stop: float) -> None:
    """One busy process: spin and sleep in random spells until `stop` (monotonic)."""
    rnd = random.Random()
    while time.monotonic() < stop:
        until = time.monotonic() + rnd.uniform(0.2, 3.0)
        while time.monotonic() < until:
            pass
        time.sleep(rnd.uniform(0.2, 3.0))


def spin_command(stop: float) -> list[str]:
    """One busy process's command (`bursty` until `stop`): the module by its name, not
    `__name__`, which is "__main__" under `python -m`."""
    return [sys.executable, "-c", f"from experiments.os_truth_null import bursty; bursty({stop})"]


def run(cand_case: str, looks: int, load: str) -> list[SideCost]:
    root = Path(tempfile.mkdtemp(prefix="os-null-"))
    sides = {"best": Side(tree(root, "best", None)), "cand": Side(tree(root, "cand", cand_case))}
    loaders = []
    if load == "bursty":
        stop = time.monotonic() + 3600
        loaders = [subprocess.Popen(spin_command(stop)) for _ in range(2)]
        time.sleep(0.5)
        if any(p.poll() is not None for p in loaders):
            raise SystemExit("the load did not start (see its error above)")
    costs: list[SideCost] = []
    first = ("best", "cand") if random.random() < 0.5 else ("cand", "best")
    try:
        for r in range(looks):
            order = first if r % 2 == 0 else first[::-1]
            seed, audit_seed = random.getrandbits(63), random.getrandbits(63)
            cpu = {s: sides[s].cpu() for s in order}
            wall, claim = {}, {}
            for s in order:
                for o in sides:
                    sides[o].signal(signal.SIGCONT if o == s else signal.SIGSTOP)
                out = root / s / f"look{r}.csv"
                t0 = time.monotonic()
                assert sides[s].ask(f"look {r} {seed} {out}") == f"done {r}"
                wall[s] = time.monotonic() - t0
                claim[s] = claimed(out)
            for s in order:
                for o in sides:
                    sides[o].signal(signal.SIGCONT if o == s else signal.SIGSTOP)
                assert sides[s].ask(f"audit {r} {audit_seed} {root / s / 'audit.json'}") == f"audited {r}"
                cpu[s] = sides[s].cpu() - cpu[s]
            costs += [SideCost(s, r, cpu[s], wall[s], claim[s], started=r == 0) for s in ("best", "cand")]
            print(
                f"look {r}: saved cpu {cpu['best'] - cpu['cand']:+.4f} s of {claim['best'] - claim['cand']:.4f} s claimed",
                file=sys.stderr,
            )
    finally:
        for side in sides.values():
            side.close()
        for p in loaders:
            p.kill()
        shutil.rmtree(root, ignore_errors=True)
    return costs


def report(costs: list[SideCost], sizes: tuple[int, ...] = (4, 5, 6, 8, 12)) -> None:
    looks = [lk for lk in looks_of(costs) if not lk.started]
    saved = [lk.best.cpu_s - lk.cand.cpu_s for lk in looks]
    claims = [lk.claim_s for lk in looks]
    c = mean(claims)
    print(
        f"{len(looks)} steady looks; claim {c:.4f} s/look; CPU saved {mean(saved):+.4f} s/look, sd {stdev(saved):.4f} s "
        f"({mean(saved) / c:+.2f} and {stdev(saved) / c:.2f} claims)"
    )
    for n in sizes:
        outcomes: dict[str, int] = {}
        for i in range(len(looks) - n + 1):
            got = weigh(looks[i : i + n]).outcome
            outcomes[got] = outcomes.get(got, 0) + 1
        total = sum(outcomes.values())
        shares = ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(outcomes.items()))
        print(f"  windows of {n:2d} looks ({total}): {shares}")


def sequential(
    costs: list[SideCost], trials: int = 2000, first: int = 3, cap: int = 14
) -> tuple[dict[str, float], float]:
    """The rule as the loop applies it: `cap` looks drawn at random (without replacement: a look
    drawn twice would shrink the spread) from the steady ones, weighed after each from `first` on, stopping at the first outcome other than
    "inconclusive" or at `cap` looks (a decision's few steady looks and a confirmation's up to
    confirmation.OS_MAX_LOOKS): the share of each final outcome, and the mean looks taken
    (`cap` at most the steady looks recorded)."""
    looks = [lk for lk in looks_of(costs) if not lk.started]
    rnd = random.Random(0)
    outcomes: dict[str, int] = {}
    taken = 0
    for _ in range(trials):
        drawn = rnd.sample(looks, cap)
        for n in range(first, cap + 1):
            got = weigh(drawn[:n]).outcome
            if got != "inconclusive":
                break
        outcomes[got] = outcomes.get(got, 0) + 1
        taken += n
    return {k: v / trials for k, v in sorted(outcomes.items())}, taken / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cand", default="marshal", help="a case of tests/fake_target/pyserve/hostile.py")
    ap.add_argument("--looks", type=int, default=40)
    ap.add_argument("--load", choices=("none", "bursty"), default="none")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--replay", type=Path, help="report on the looks of an earlier --out")
    a = ap.parse_args()
    if a.replay:
        costs = [SideCost.from_dict(json.loads(line)) for line in a.replay.read_text().splitlines()]
    else:
        costs = run(a.cand, a.looks, a.load)
        if a.out:
            a.out.write_text("".join(json.dumps(c.to_dict()) + "\n" for c in costs))
    steady = len([lk for lk in looks_of(costs) if not lk.started])
    if steady < 3:
        print(f"{steady} steady look(s): too few to weigh (3 at least)")
        return
    report(costs)
    shares, looks = sequential(costs, cap=min(14, steady))
    told = ", ".join(f"{k} {v:.1%}" for k, v in shares.items())
    print(f"  sequential, 3..{min(14, steady)} looks (2000 draws): {told}; {looks:.1f} looks on average")


if __name__ == "__main__":
    main()
