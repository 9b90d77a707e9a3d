"""Why does the tuned RMSNorm read several per cent apart with its position in a served look?

    python -m experiments.position_effect [--looks 16] [--variants stop,nostop,gap,warm] [--out DIR]

A/A: the tuned bundled RMSNorm materialized twice (two trees, two served processes, each with
a Triton cache of its own, as kopt's `[target].serve` runs them, unconfined), asked for looks
in ABBA order across looks as engine/loop/measure.py's ServedTrees does (the same seed for
both sides, then both audits in the look's order). Per variant:

- `stop`: as kopt: the side not being asked is stopped (SIGSTOP) while the other answers;
- `nostop`: nobody stopped;
- `gap`: as `stop`, with the GPU left idle 0.5 s before each side's look (both positions
  follow the same idle);
- `gap0.1`, `gap0.03`: the same with 0.1 s, 0.03 s;
- `keep`: as `stop`, the processes keep the allocator's cached blocks (`--release never`);
- `auto`: as `stop`, with the harness's default `--release auto` (keep them while the device has
  room; every other variant gives them back after every look, `--release look`).
(A variant waiting for the device after giving them back, torch.cuda.synchronize(), changed
nothing on the H200: 9.5%; the driver's work on freed memory is not the process's.)
- `warm`: as `stop`, both processes started with `--warm-blocks 2` (two untimed blocks per
  config before its timed ones at every look);
- `audit_swap`: as `stop`, the audits in the reverse of the look's order (the look's first
  side then no longer follows its own audit).

For every config and variant: the per-look log ratio ln(us_B / us_A), its mean over the looks
where A went first minus its mean where B went first (the position effect, halved: what going
second adds to a side), and the sd of the look ratios around their order means; the SM clock
(NVML) before each side's look. The tree is the same on both sides: every ratio away from 1 is
the measurement's. Writes DIR/position_effect.json and prints a table. Needs a CUDA GPU
(`--cpu` runs the same on Triton's interpreter: a smoke test of the script only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import secrets
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SIDES = ("A", "B")
VARIANTS = ("stop", "nostop", "gap", "gap0.1", "gap0.03", "warm", "audit_swap", "keep", "auto")


class Served:
    """One `bench.py --serve` process of one tree: requests on stdin, one reply line each."""

    def __init__(self, argv: list[str], tree: Path, cache: Path, log: Path) -> None:
        env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "PYTHONPYCACHEPREFIX": str(cache / "pyc")}
        self.err = log.open("wb")
        self.p = subprocess.Popen(
            argv,
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            start_new_session=True,
            env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.p.stdout is not None
        for text in self.p.stdout:
            self.lines.put(text.strip())
        self.lines.put(None)

    def ask_line(self, line: str, timeout_s: float = 300.0) -> str | None:
        """Send one request; its reply line as it is (None: the process left)."""
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.lines.get(timeout=timeout_s)

    def ask(self, line: str, timeout_s: float = 300.0) -> str:
        reply = self.ask_line(line, timeout_s)
        if reply is None or reply.split()[0] not in ("done", "audited", "prepared"):
            raise RuntimeError(f"{line!r} -> {reply!r} (see {self.err.name})")
        return reply

    def signal(self, sig: int) -> None:
        os.killpg(self.p.pid, sig)

    def close(self) -> None:
        if self.p.stdin:
            self.p.stdin.close()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
        self.err.close()


def sm_clock() -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return float(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # noqa: BLE001 - no NVML: no clock column
        return None


def read_csv(path: Path) -> dict[str, float]:
    import csv

    with path.open() as f:
        rows = list(csv.DictReader(f))
    keys = [c for c in rows[0] if c in ("shape", "dtype", "dclass")]
    return {"/".join(r[k] for k in keys): float(r["us"]) for r in rows}


def run_variant(variant: str, trees: dict[str, Path], work: Path, looks: int, cpu: bool) -> dict[str, Any]:
    base = [sys.executable, "bench.py", "--serve", "--dtypes", "bfloat16"]
    if variant == "warm":
        base += ["--warm-blocks", "2"]
    base += ["--release", {"keep": "never", "auto": "auto"}.get(variant, "look")]
    out = work / variant
    servers = {}
    for s in SIDES:
        (out / s).mkdir(parents=True, exist_ok=True)
        servers[s] = Served(base, trees[s], work / f"cache-{variant}-{s}", out / f"{s}.err")
    rows: list[dict[str, Any]] = []
    try:
        seed = secrets.randbits(62)
        with_threads = [
            threading.Thread(target=servers[s].ask, args=(f"look -1 {seed} {out / s / 'warm.csv'}",)) for s in SIDES
        ]
        for t in with_threads:  # both compile and capture at once, as kopt's warm-up look
            t.start()
        for t in with_threads:
            t.join()
        for r in range(looks):
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            seed = secrets.randbits(62)
            clocks: dict[str, float | None] = {}
            secs: dict[str, float] = {}
            for s in order:
                other = servers["B" if s == "A" else "A"]
                if variant != "nostop":
                    other.signal(signal.SIGSTOP)
                if variant.startswith("gap"):
                    time.sleep(float(variant[3:] or 0.5))
                clocks[s] = sm_clock()
                t0 = time.monotonic()
                servers[s].ask(f"look {r} {seed} {out / s / f'look{r}.csv'}")
                secs[s] = time.monotonic() - t0
                other.signal(signal.SIGCONT)
            audit_seed = secrets.randbits(62)
            for s in order[::-1] if variant == "audit_swap" else order:
                servers[s].ask(f"audit {r} {audit_seed} {out / s / f'audit{r}.json'}")
            got = {s: read_csv(out / s / f"look{r}.csv") for s in SIDES}
            rows.append({"look": r, "first": order[0], "clock": clocks, "seconds": secs, "us": got})
    finally:
        for sv in servers.values():
            sv.signal(signal.SIGCONT)
            sv.close()
    return {"variant": variant, "looks": rows, "summary": summarize(rows)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    configs = list(rows[0]["us"]["A"])
    per: dict[str, Any] = {}
    for c in configs:
        lr = [(row["first"], math.log(row["us"]["B"][c] / row["us"]["A"][c])) for row in rows]
        a_first = [x for f, x in lr if f == "A"]
        b_first = [x for f, x in lr if f == "B"]
        ma, mb = statistics.fmean(a_first), statistics.fmean(b_first)
        resid = [x - (ma if f == "A" else mb) for f, x in lr]
        per[c] = {
            "second_adds_pct": round(100 * (ma - mb) / 2, 2),  # B second in A-first looks
            "sd_within_order_pct": round(100 * statistics.pstdev(resid), 2),
            "sd_all_pct": round(100 * statistics.pstdev([x for _, x in lr]), 2),
            "us_A_median": round(statistics.median(row["us"]["A"][c] for row in rows), 3),
        }
    effects = [abs(v["second_adds_pct"]) for v in per.values()]
    sds = [v["sd_within_order_pct"] for v in per.values()]
    return {
        "configs": per,
        "median_abs_position_pct": round(statistics.median(effects), 2),
        "max_abs_position_pct": round(max(effects), 2),
        "median_sd_within_order_pct": round(statistics.median(sds), 2),
        "median_sd_all_pct": round(statistics.median(v["sd_all_pct"] for v in per.values()), 2),
    }


def a_a_parser(description: str, looks: int, variants: tuple[str, ...]) -> argparse.ArgumentParser:
    """The options every A/A experiment here takes: --looks, --variants, --out, --cpu."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--looks", type=int, default=looks)
    ap.add_argument("--variants", default=",".join(variants))
    ap.add_argument("--out", default="")
    ap.add_argument("--cpu", action="store_true", help="Triton's interpreter: a smoke test of the script")
    return ap


def a_a_setup(args: argparse.Namespace, known: tuple[str, ...], prefix: str) -> tuple[list[str], Path, dict[str, Path]]:
    """The variants asked for (each one of `known`), the work folder (--out, or a new one named
    `prefix`...), and the tuned RMSNorm materialized twice in it (trees A and B)."""
    variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in variants if v not in known]
    if bad:
        raise SystemExit(f"--variants: {bad[0]!r} is not one of {', '.join(known)}")
    from experiments.h100_wave3 import targets

    work = Path(args.out or tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    return variants, work, {s: targets.rms_repo(work / f"tree-{s}", cpu=args.cpu) for s in SIDES}


def main(argv: list[str] | None = None) -> int:
    args = a_a_parser(__doc__.splitlines()[0], 16, VARIANTS).parse_args(argv)
    variants, work, trees = a_a_setup(args, VARIANTS, "position-")
    results = []
    for v in variants:
        t0 = time.monotonic()
        res = run_variant(v, trees, work, args.looks, args.cpu)
        res["seconds"] = round(time.monotonic() - t0, 1)
        results.append(res)
        s = res["summary"]
        print(
            f"{v:10s} {args.looks} looks {res['seconds']:6.1f} s  position |median| {s['median_abs_position_pct']:5.2f}% "
            f"max {s['max_abs_position_pct']:5.2f}%  sd within order {s['median_sd_within_order_pct']:5.2f}% "
            f"(all {s['median_sd_all_pct']:5.2f}%)",
            flush=True,
        )
        for c, d in s["configs"].items():
            print(
                f"    {c:40s} second adds {d['second_adds_pct']:+6.2f}%  sd {d['sd_within_order_pct']:5.2f}%  "
                f"A {d['us_A_median']:9.3f} us"
            )
        (work / "position_effect.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {work / 'position_effect.json'}  ({shlex.quote(' '.join(sys.argv))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
