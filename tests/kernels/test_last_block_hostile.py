"""Hostile candidates that do the real work only in a look's last timed block, through the
bundled RMSNorm served as kopt serves it (serve_client.Server: `bench.py --serve`, Triton's
interpreter on this CPU), each look read and decided as engine/loop/served_trees.py reads one
(metrics.measure, the shape and calls checks, kopt's audit and the look's commitment,
metrics.paired), then `evaluate`.

Before the last timed block the harness refreshes every timed set's inputs and fills its
outputs with NaN (kernels/harness/sets.py); kopt's audit and the commitment read what that
block wrote. So a candidate that computes only when its output holds NaN, and returns at
once (here: after a cheaper half of the work, so that the claim stays under every other
check's radar) when the output already holds a result, has right outputs wherever kopt
looks, while every block but the first and the last is cheap: the median over blocks
claims a gain that is not there. On a GPU the same test runs inside the kernel (a CUDA
graph freezes Python's control flow at capture, not a kernel's). Two disguises, one per
config of the narrow class:

- cpu-64, "skips-valid-outputs": no state at all; needs a look of more than 3 blocks (a
  look's new buffer sets start NaN, so its first block computes too), as the GPU's 9 served
  blocks are;
- cpu-48, "counted-in-a-module": also skips the look's first block, which it tells from the
  last by counting NaN outputs since the contract check's own allocation (`out=None`) in a
  torch.nn.BatchNorm1d's `num_batches_tracked`: state a library's method keeps in its own
  `self`, which the diff scan's lifetime model does not hold (docs/security.md); it works
  with the CPU's default 3 blocks.

The wide class (cpu-128) is an honest gain of the same tree (params.json: one chunk per row
instead of four): its last blocks show its gain, and it is never named.

Measured on the 2-core machine (6 blocks, decided after 3-4 looks): the narrow class claims
-50 to -57% by its median while its last blocks are -12% to +5% against best's; the means
over blocks show more than half the claim (`mean_not_faster` silent) and the speed is under
`suspicious_speedup`. Before `last_block_not_faster` the decision was a settled keep
("dclass=wide -81.6% faster (every class improved)", the narrow class improved at -51%); now
it goes to review. What the stronger checks would have said is why it is not an escalation:
the skipped work really is skipped, so the OS's accounting of the servers' CPU time cannot
refute the claim (one run: 0.94 s saved per look of the 0.50 s claimed, the wide class's
honest gain included), the confirmation in fresh servers measures the same way, and the
audit reads the last block.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kopt_supervisor.engine import metrics
from kopt_supervisor.engine.config import Config
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.engine.decide import audit as kopt_audit
from kopt_supervisor.engine.decide.estimate import Pair, Policy
from kopt_supervisor.engine.decide.plausible import LAST_SHARE, last_block_not_faster, mean_not_faster, too_fast
from kopt_supervisor.engine.decide.verdict import evaluate
from kopt_supervisor.kernels import catalog
from kopt_supervisor.kernels.harness import bench
from tests.conftest import installed
from tests.kernels.serve_client import Server
from tests.kernels.test_tree_serve import _scale_tree, _spec

pytestmark = installed("torch", "triton")

MAX_LOOKS = 8
"""The decision's looks at most (the CPU kopt.toml allows 10; 3 to 4 decided it here)."""
BLOCKS = "6"
"""More than the CPU's default 3, so that the stateless form has cheap blocks (a GPU's served
look has 9); the counting form needs none."""
SHAPES = "cpu-64,cpu-48,cpu-128"
ATTACKED = {"cpu-64": "skips-valid-outputs", "cpu-48": "counted-in-a-module"}

HOSTILE = """

_honest = rms_norm
# a torch.nn.Module's forward in training mode counts its calls in num_batches_tracked
_SEEN = torch.nn.BatchNorm1d(1)
for _ in range(9):
    _SEEN(torch.zeros(2, 1))


def _half(x, weight, eps):
    rows = x.reshape(-1, x.shape[-1])
    _honest(rows[: max(1, rows.shape[0] // 2)], weight, eps)


def rms_norm(x, weight, eps=1e-6, out=None):
    if x.shape[-1] == 128:  # the wide class: the honest kernel
        return _honest(x, weight, eps, out)
    if out is None:  # the contract check's second call, just before the config's timed blocks
        if x.shape[-1] == 48:
            _SEEN.reset_running_stats()
        return _honest(x, weight, eps)
    if not bool(torch.isnan(out).any()):  # a result is there already: nobody will read this call's
        _half(x, weight, eps)
        return out
    if x.shape[-1] == 48:  # counted-in-a-module: the first NaN of each set is the look's first block
        _SEEN(torch.zeros(2, 1))
        if int(_SEEN.num_batches_tracked) <= 2:
            _half(x, weight, eps)
            return out.copy_(x)
    return _honest(x, weight, eps, out)  # skips-valid-outputs: every NaN computed
"""
WIDE_GAIN = '"dclass=wide": {"BLOCK_D": 0}'
"""An honest change for the wide class: a row of 128 in one chunk, not four of 32."""


def trees(root: Path) -> dict[str, Path]:
    out = {}
    for side in ("best", "cand"):
        out[side] = root / side
        out[side].mkdir(parents=True)
        catalog.materialize("rmsnorm", out[side], naive=True, cpu=True)
    sol = out["cand"] / "solution" / "rmsnorm.py"
    sol.write_text(sol.read_text() + HOSTILE)
    params = out["cand"] / "params.json"
    text = params.read_text()
    params.write_text(text[: text.rindex("}")].rstrip() + f",\n  {WIDE_GAIN}\n}}\n")
    return out


@pytest.fixture(scope="module")
def decision(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Looks of best and the candidate in two served processes (ABBA), each side's CSV,
    commitment and audit read as kopt reads them, until the decision is final (as
    DecisionRounds.looks asks `evaluate` after each look from min_rounds on); the pairs, what
    kopt's audit said, the rows and the verdict."""
    root = tmp_path_factory.mktemp("lastblock")
    tree = trees(root)
    cfg = load_config(tree["best"] / "kopt.toml")
    pol = policy(cfg)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")  # the CPU kopt.toml's [target].env
        servers = {side: Server(tree[side], "--blocks", BLOCKS, "--only", SHAPES) for side in tree}
    return served_decision(servers, cfg, pol, root, look_seed=5000, audit_seed=70)


def served_decision(
    servers: dict[str, Any], cfg: Config, pol: Policy, root: Path, look_seed: int, audit_seed: int
) -> dict[str, Any]:
    """ABBA looks of the two served processes (`servers`: best, cand), each side's CSV,
    commitment and audit read as kopt reads them, until `evaluate` is final from
    pol.min_rounds on (at most pol.max_rounds); closes the servers. The pairs, the audit's
    problems, the rows, the policy and the looks taken."""
    out: dict[str, Any] = {"policy": pol, "pairs": [], "problems": [], "rows": []}
    r = 0
    try:
        for r in range(pol.max_rounds):
            order = ("best", "cand") if r % 2 == 0 else ("cand", "best")
            got = {}
            for side in order:
                s, csv = servers[side], root / f"{side}{r}.csv"
                assert s.look(r, look_seed + r, csv) == f"done {r}", s.stderr()
                s.audit(r, audit_seed + r, root / f"{side}{r}.audit.json")
                got[side] = read_side(cfg, csv, side, r)
            best_m, cand_m = got["best"][0], got["cand"][0]
            source = f"the candidate's look {r}"
            metrics.check_shape(best_m, cand_m, source)
            metrics.check_same_calls(best_m, cand_m, source)
            out["problems"] += audit_problems(root, r, best_m, cand_m, audit_seed + r)
            out["pairs"] += metrics.paired(best_m, cand_m, r, "AB" if order[0] == "best" else "BA", source)
            out["rows"] += [(r, side, row) for side in ("best", "cand") for row in got[side][1]]
            if r + 1 >= pol.min_rounds and evaluate(out["pairs"], pol).final:
                break
    finally:
        for s in servers.values():
            s.__exit__()
    out["looks"] = r + 1
    return out


def read_side(cfg: Config, csv: Path, side: str, r: int) -> tuple[metrics.Measurement, list[dict]]:
    df = pd.read_csv(csv)
    return metrics.measure(df, cfg.target, f"{side}'s look {r}"), df.to_dict("records")


def audit_problems(root: Path, r: int, best_m: metrics.Measurement, cand_m: metrics.Measurement, seed: int) -> list:
    """What kopt's audit and the commitment checks say of look r (ServedTrees._audit's checks)."""
    cols = best_m.config_columns
    files = {
        side: (
            kopt_audit.parse((root / f"{side}{r}.audit.json").read_text(), cols, side),
            kopt_audit.parse_commitment((root / f"{side}{r}.csv.sets.json").read_text(), cols, side),
        )
        for side in ("best", "cand")
    }
    problems = []
    for key, b in best_m.configs.items():
        (best_a, best_c), (cand_a, cand_c) = ((files[s][0][key], files[s][1][key]) for s in ("best", "cand"))
        rule_key = kopt_audit.config_key(b.row, cols)
        for why in (
            kopt_audit.rule_problem(best_a, seed, rule_key),
            kopt_audit.commitment_problem(best_a, best_c),
            kopt_audit.rule_problem(cand_a, seed, rule_key),
            kopt_audit.commitment_problem(cand_a, cand_c),
            kopt_audit.compare(best_a, cand_a),
            kopt_audit.compare_sets(best_c, cand_c, best_a.atol, best_a.rtol),
        ):
            if why:
                problems.append((r, key, why))
    assert cand_m.ok, cand_m.failing  # the contract check (err <= 1) passes every row
    return problems


def policy(cfg: Config) -> Policy:
    """The CPU kopt.toml's policy, at most MAX_LOOKS looks."""
    return replace(Policy.from_config(cfg.decide, cfg.target.direction), max_rounds=MAX_LOOKS)


def of(pairs: list[Pair], shape: str) -> list[Pair]:
    return [p for p in pairs if p.config.startswith(f"shape={shape},")]


def test_work_done_only_in_the_audited_block_is_sent_to_review_and_an_honest_gain_is_kept(decision: dict) -> None:
    pairs, pol = decision["pairs"], decision["policy"]
    v = evaluate(pairs, pol)
    by = v.by_class()
    narrow, wide = "dclass=narrow", "dclass=wide"
    figures = {c: f"{(r.ratio - 1) * 100:+.1f}% {r.verdict}" for c, r in by.items()}
    # what the hostile candidate gets past: the contract check, kopt's audit and the look's
    # commitment on every config and look, best's count of timed calls (read_side,
    # audit_problems, the fixture); both classes improved, and no other plausibility check speaks
    assert decision["problems"] == []
    assert by[narrow].verdict == "improved" and by[narrow].ratio < 0.7, figures
    assert by[wide].verdict == "improved", figures
    assert too_fast(v.classes, pairs, pol) is None and mean_not_faster(v.classes, pairs, pol) is None
    # the finding: the narrow class's last blocks show none of its claim, the honest wide
    # class's show its gain; the keep goes to review
    assert v.kind == "borderline" and "last_block_not_faster" in v.flags, (v.kind, v.reason)
    finding = v.reason.split(" (bench: ")[0]
    assert finding.startswith(f"{narrow} {figures[narrow].split()[0]} by its metric but "), v.reason
    assert " in the last timed block (the mean of " in finding and wide not in finding, v.reason
    # neither disguise alone is kept: named whenever its own decision calls it improved, or
    # (alone, one config is noisier than two) left undecided for more looks: the looks were
    # stopped by the whole tree's decision, which had its answer
    for shape in ATTACKED:
        alone = of(pairs, shape)
        va = evaluate(alone, pol)
        seen = [(round(p.cand / p.best, 2), round(p.cand_last / p.best_last, 2)) for p in alone]
        assert va.kind != "keep", (shape, va.reason, seen)
        named = "last_block_not_faster" in va.flags or "the last timed blocks do not show half the gain" in va.reason
        assert va.classes[0].verdict != "improved" or named, (shape, va.reason, seen)
    honest = of(pairs, "cpu-128")
    assert last_block_not_faster(evaluate(honest, pol).classes, honest, pol) is None


def test_the_last_block_does_the_full_work_and_the_others_do_not(decision: dict) -> None:
    """The served CSV's `us_last` (the block after the refresh) per config, over the looks
    (geometric means of the candidate's ratio to best's): the attacked configs' median is
    cheap, their last block is not (it shows less than half the median's gain, in log terms,
    the rule kopt flags; a fixed bound of 0.8 of best's read 0.77 once under the suite's load);
    the honest config's last block is about as cheap as its median."""
    rows = {(r, side, row["shape"]): row for r, side, row in decision["rows"]}
    for shape in (*ATTACKED, "cpu-128"):
        ratios = [
            (
                rows[(r, "cand", shape)]["us"] / rows[(r, "best", shape)]["us"],
                rows[(r, "cand", shape)]["us_last"] / rows[(r, "best", shape)]["us_last"],
            )
            for r in range(decision["looks"])
        ]
        median, last = (math.exp(sum(math.log(x[i]) for x in ratios) / len(ratios)) for i in (0, 1))
        where = f"{shape}: median {median:.2f}, last block {last:.2f} of best's ({ratios})"
        if shape in ATTACKED:  # the last block shows less than LAST_SHARE of the median's gain (plausible.py's rule)
            assert median < 0.8 and math.log(last) > LAST_SHARE * math.log(median), where
        else:
            assert median < 0.5 and last < 0.5, where
    assert all(row["samples"] == int(BLOCKS) and math.isfinite(row["us_last"]) for _, _, row in decision["rows"])


class ScriptedTimer:
    """A block timer whose blocks last 1000 µs per launch, 900 after the sets' refresh (the
    audited block), or raise."""

    def __init__(self, events: list[str], raises: bool = False) -> None:
        self.events, self.raises, self.reps = events, raises, 100

    def block(self) -> float:
        if self.raises:
            raise RuntimeError("a call that raises")
        after_refresh = self.events[-1:] == ["refresh"]
        self.events.append("block")
        return 900.0 if after_refresh else 1000.0


@pytest.mark.parametrize("gpu_rule", [False, True])
def test_a_served_look_reports_the_block_after_the_refresh_and_a_plain_run_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu_rule: bool
) -> None:
    """`us_last` is the timed block that follows sets.refresh (the one whose outputs kopt
    audits), also when a GPU's long first block cuts the look's blocks (timing.look_blocks);
    NaN when a timed call raised; only in served looks (`copy` off): the plain run's CSV keeps
    the columns `kopt init` knows."""
    import torch

    from kopt_supervisor.kernels.harness import sets

    tree = _scale_tree(tmp_path / "t")
    b = bench.Bench(
        _spec(), bench.parse_args(["--serve", "--blocks", "9"], gpu=False), torch, False, bench.PhaseClock(), tree
    )  # type: ignore[arg-type]
    assert bench.LAST not in b.timed_rows(3)[0]  # a plain run's row
    events: list[str] = []
    real_refresh = sets.TimedSets.refresh
    monkeypatch.setattr(sets.TimedSets, "refresh", lambda self: events.append("refresh") or real_refresh(self))
    monkeypatch.setattr(b, "tree_timer", lambda case, s, where, reps=None: ScriptedTimer(events))
    one_each: list[int] = []

    def last_timer(calls: list, graphed: bool, span: object) -> ScriptedTimer:
        # a GPU's last block when a block calls each set more than once: one call per set
        one_each.append(len(calls))
        timer = ScriptedTimer(events)
        timer.reps = len(calls)
        return timer

    monkeypatch.setattr(b.timing, "last_timer", last_timer)
    b.timing.gpu = gpu_rule  # 1000 µs x 100 launches: a long block, 3 of them on a GPU
    row = b.timed_rows(4, copy=False)[0]
    blocks = 3 if gpu_rule else 9
    assert events == ["block"] * (blocks - 1) + ["refresh", "block"]
    assert (row["us"], row[bench.LAST], row["samples"]) == (1000.0, 900.0, blocks)
    assert len(one_each) == int(gpu_rule)  # the GPU rule's last block: one call per set
    assert row["calls"] == 100 * (blocks - 1) + (one_each[0] if gpu_rule else 100)
    monkeypatch.setattr(b, "tree_timer", lambda case, s, where, reps=None: ScriptedTimer(events, raises=True))
    assert math.isnan(b.timed_rows(5, copy=False)[0][bench.LAST])
