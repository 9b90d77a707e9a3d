"""Does a served process carry an offset of its own, and is it in its buffers?

    python -m experiments.process_offset [--pairs 10] [--looks 6] [--variants kept,rebuild] [--out DIR]

Seen on the H200 (docs/h100-wave3/part6-process-offset-h200.md): comment-only candidates' per-config ratios
differ between candidates by more than their looks' noise explains (hd-100: the candidates'
means spread 0.87% sd against a 0.32% standard error each), and a tune step that changed one
class read the untouched class +1.7% [+0.2, +3.3] slower. A decision's looks all come from one
pair of processes, so an offset a process carries for its whole life is not averaged away by
more looks.

A/A: the tuned bundled RMSNorm materialized twice (trees A and B), served as kopt's
`[target].serve` runs them (unconfined here), `pairs` times a fresh pair of processes, each pair
warmed up at once and then asked for `looks` looks in ABBA order (the other side SIGSTOPped,
audits after each look), as engine/loop/served_trees.py does. Variants:

- `kept`: as kopt: a process draws each look's inputs into the buffers (and CUDA graphs) it made
  at its first look;
- `rebuild`: before every look each process is sent `load` (the tree imported again, its timed
  buffers and graphs made anew at the look: new allocations every look);
- `prepared`: as kopt serves since bc5e889 ([target].serve_prepare): the warm-up is `prepare` to
  both at once, and every look is `prepare N SEED` to both at once (checks, draws, captures)
  before each side's timed look alone;
- `prepared-alone`: the same, but each side prepares alone, one after the other. If `prepared`
  shows an offset and `prepared-alone` does not, what the two processes allocate at the same
  time is where it comes from (on the H200, 2026-12-01, comment-only candidates and a ~3% step
  read every config of a decision ~0.5-1.6% apart together: part 21);
- (`prepared-pad`, measured at 45a3d24 with the harness's `--pad-mb 64`, a new place in device
  memory for each look's buffers, spread the offset into the noise and helped nothing; the knob
  and the variant were removed: docs/h100-wave3/part22-the-spin-after-the-flush-h200.md);
- `prepared-spin`: as `prepared`, each process run with `--spin-us 100` (timing.L2Flush: the GPU
  spins after each block's flush, so the block's launches are queued before it reaches them).
  If it removes the offset, the host's speed at enqueuing a block was in the block's time. It
  did (the H200, 2026-12-01: docs/h100-wave3/part22-the-spin-after-the-flush-h200.md), and the
  harness spins by default since; every other variant here passes `--spin-us 0`, as measured.

Per config and per class (the mean of its configs' log ratios): the sd of the look log ratios
ln(us_B / us_A) within a pair, the sd of the pairs' means, and the process-pair offset that
implies: sqrt(max(0, between^2 - within^2 / looks)). If `rebuild` moves the offset into the
within-pair noise, the offset lives in where the buffers landed. Writes DIR/process_offset.json.
Needs a CUDA GPU (`--cpu`: Triton's interpreter, a smoke test of the script only).
"""

from __future__ import annotations

import json
import math
import secrets
import shlex
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from experiments.position_effect import Served, a_a_parser, a_a_setup, read_csv

SIDES = ("A", "B")
VARIANTS = ("kept", "rebuild", "prepared", "prepared-alone", "prepared-spin")
SPIN_US = 100


def run_pair(
    variant: str, trees: dict[str, Path], work: Path, pair: int, looks: int, cpu: bool
) -> list[dict[str, Any]]:
    """One fresh pair of processes: a warm-up for both at once (a look, or with the prepared
    variants a `prepare`, at once or in turn), then `looks` looks."""
    base = [sys.executable, "bench.py", "--serve", "--dtypes", "bfloat16"]
    base += ["--spin-us", str(SPIN_US if variant == "prepared-spin" else 0)]
    out = work / variant / f"pair{pair}"
    servers = {}
    for s in SIDES:
        (out / s).mkdir(parents=True, exist_ok=True)
        # one Triton cache per side for every pair: the compile is not what is measured
        servers[s] = Served(base, trees[s], work / f"cache-{s}", out / f"{s}.err")
    rows: list[dict[str, Any]] = []
    prepares = variant.startswith("prepared")
    try:
        seed = secrets.randbits(62)
        if prepares:
            prepare(servers, -1, seed, together=variant != "prepared-alone")
        else:
            at_once([(servers[s], f"look -1 {seed} {out / s / 'warm.csv'}") for s in SIDES])
        for r in range(looks):
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            if variant == "rebuild":
                for s in SIDES:
                    reply = servers[s].ask_line("load")
                    if reply != "loaded":
                        raise RuntimeError(f"load -> {reply!r}")
            seed = secrets.randbits(62)
            if prepares:
                prepare(servers, r, seed, together=variant != "prepared-alone")
            for s in order:
                other = servers["B" if s == "A" else "A"]
                other.signal(signal.SIGSTOP)
                try:
                    servers[s].ask(f"look {r} {seed} {out / s / f'look{r}.csv'}")
                finally:
                    other.signal(signal.SIGCONT)
            audit_seed = secrets.randbits(62)
            for s in order:
                servers[s].ask(f"audit {r} {audit_seed} {out / s / f'audit{r}.json'}")
            got = {s: read_csv(out / s / f"look{r}.csv") for s in SIDES}
            rows.append({"pair": pair, "look": r, "first": order[0], "us": got})
    finally:
        for sv in servers.values():
            sv.signal(signal.SIGCONT)
            sv.close()
    return rows


def at_once(requests: list[tuple[Served, str]]) -> None:
    """Each request sent to its process at the same time; returns when all are answered (the
    first error raised here)."""
    errors: list[BaseException] = []

    def ask(server: Served, line: str) -> None:
        try:
            server.ask(line)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=request) for request in requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def prepare(servers: dict[str, Served], n: int, seed: int, *, together: bool) -> None:
    """`prepare N SEED` to both sides, at once or one after the other (each alone)."""
    if together:
        at_once([(servers[s], f"prepare {n} {seed}") for s in SIDES])
        return
    for s in SIDES:
        servers[s].ask(f"prepare {n} {seed}")


def offsets(by_pair: dict[int, list[float]]) -> dict[str, float]:
    """Within-pair sd, between-pair sd of the means, and the implied pair offset (all in %)."""
    means = [statistics.fmean(xs) for xs in by_pair.values() if xs]
    resid = [x - statistics.fmean(xs) for xs in by_pair.values() for x in xs]
    n = statistics.fmean(len(xs) for xs in by_pair.values())
    within = statistics.pstdev(resid) * math.sqrt(len(resid) / max(1, len(resid) - len(means)))
    between = statistics.stdev(means) if len(means) > 1 else math.nan
    implied = math.sqrt(max(0.0, between**2 - within**2 / n)) if math.isfinite(between) else math.nan
    return {
        "within_pct": round(100 * within, 3),
        "between_pct": round(100 * between, 3),
        "offset_pct": round(100 * implied, 3),
        "pair_means_pct": [round(100 * m, 3) for m in means],
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    configs = list(rows[0]["us"]["A"])
    per_config: dict[str, Any] = {}
    classes: dict[str, dict[int, dict[int, list[float]]]] = {}
    for c in configs:
        by_pair: dict[int, list[float]] = {}
        cls = c.rsplit("/", 1)[-1]
        for row in rows:
            x = math.log(row["us"]["B"][c] / row["us"]["A"][c])
            by_pair.setdefault(row["pair"], []).append(x)
            classes.setdefault(cls, {}).setdefault(row["pair"], {}).setdefault(row["look"], []).append(x)
        per_config[c] = offsets(by_pair)
    per_class = {
        cls: offsets({p: [statistics.fmean(v) for _, v in sorted(looks.items())] for p, looks in pairs.items()})
        for cls, pairs in classes.items()
    }
    return {"configs": per_config, "classes": per_class}


def main(argv: list[str] | None = None) -> int:
    ap = a_a_parser(__doc__.splitlines()[0], 6, VARIANTS)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--budget-s", type=float, default=0.0, help="stop starting pairs after this many seconds")
    args = ap.parse_args(argv)
    variants, work, trees = a_a_setup(args, VARIANTS, "offset-")
    t_start = time.monotonic()
    share = args.budget_s / len(variants) if args.budget_s else math.inf
    results = []
    for i, v in enumerate(variants):
        rows: list[dict[str, Any]] = []
        t0 = time.monotonic()
        for p in range(args.pairs):  # pairs interleave with nothing else: variants run one after the other
            if time.monotonic() - t_start > share * (i + 1) and p >= 2:
                break
            rows += run_pair(v, trees, work, p, args.looks, args.cpu)
        res = {"variant": v, "pairs": len({r["pair"] for r in rows}), "looks": rows, "summary": summarize(rows)}
        res["seconds"] = round(time.monotonic() - t0, 1)
        results.append(res)
        print(f"{v:8s} {res['pairs']} pairs x {args.looks} looks  {res['seconds']:6.1f} s", flush=True)
        for name, d in {**res["summary"]["classes"], **res["summary"]["configs"]}.items():
            print(
                f"    {name:40s} within {d['within_pct']:5.2f}%  between {d['between_pct']:5.2f}%  "
                f"offset {d['offset_pct']:5.2f}%  pair means {d['pair_means_pct']}"
            )
        (work / "process_offset.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {work / 'process_offset.json'}  ({shlex.quote(' '.join(sys.argv))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
