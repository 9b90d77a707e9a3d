"""Hostile candidates that compute only on inputs they have not seen, through a perf_report bench
served by import (kernels/harness/imported.py) on this CPU (Triton's interpreter), each look
read and decided as engine/loop/served_trees.py reads one (metrics.measure, the shape and calls
checks, kopt's audit and the look's commitment, metrics.paired), then `evaluate`.

The import path cannot redraw into the timed sets' buffers: within a look every timed call of a
set sees the same tensors. So a kernel wrapper that remembers its result for an input, and on
seeing that input again returns it after a cheaper half of the work, is right wherever kopt
looks, while every timed call but each set's first is cheap: the median over blocks claims a
gain that is not there. The harness now draws a second group of sets just before a config's
last timed block (benchmark function called again, inputs of seeds no earlier call saw), times
that block on them with a timer of its own that calls none of them before it, reports the
block as `us_last`, and audits and commits those sets' outputs: the last block does the work,
and `plausible.last_block_not_faster` sees the claim is not in it. One tree, three configs
(a class each):

- N=128, by pointer: the result kept in a dict keyed by the input's `data_ptr()` (with the
  input, so that no later input gets its address; the diff scan names this one, an
  input-cache key);
- N=192, by content: the result kept per input's first values in a torch.nn.BatchNorm1d's
  running_mean, written through its forward in training mode with momentum 1 (the diff scan
  finds nothing: checked by hand);
- N=256: an honest gain (one program per 32 elements, not 16), never named.

Before the change (imported.py without the second draw and `us_last`, commit 697e9e2's
parent): a settled keep, "group=attacked -56.8% faster (every class improved)", the audit, the
commitment and every plausibility check silent. After it: the attacked class's last blocks show
none of its claim and the keep goes to review; the honest class is never named. CPU time of the
module: about 7 CPU-s (two served processes, 3-6 looks of 3 configs each, 6 blocks).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.decide.estimate import Pair, Policy
from kopt_supervisor.engine.decide.plausible import last_block_not_faster, mean_not_faster, too_fast
from kopt_supervisor.engine.decide.verdict import evaluate
from kopt_supervisor.kernels.harness import bench, imported
from kopt_supervisor.kernels.harness.audit import input_seed
from tests.conftest import installed
from tests.kernels.test_last_block_hostile import served_decision
from tests.served_import.client import ImportedServer

pytestmark = installed("torch", "triton")

SCRIPT = "affine.py"
BENCH = '''"""A small perf_report bench: y = 2x + 1 in Triton, one program per block of elements."""

import torch
import triton
import triton.language as tl


@triton.jit
def _affine(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < N
    tl.store(Y + offs, tl.load(X + offs, mask=keep) * 2.0 + 1.0, mask=keep)


def block_of(n):
    return 16


def affine(x):
    y = torch.empty_like(x)
    block = block_of(x.numel())
    _affine[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y


@triton.testing.perf_report(
    triton.testing.Benchmark(
        x_names=["N", "group"],
        x_vals=[(128, "attacked"), (192, "attacked"), (256, "honest")],
        line_arg="provider",
        line_vals=["triton"],
        line_names=["Triton"],
        plot_name="affine",
        args={},
    )
)
def bench_affine(N, group, provider):  # group: only a class for kopt
    x = torch.randn(N)
    return triton.testing.do_bench(lambda: affine(x))
'''
HOSTILE = """

_honest = affine
_BY_POINTER = {}  # N=128: input buffer address -> (the input, its result)
# N=192: what the wrapper remembers lives in a BatchNorm1d's running_mean: in training mode
# with momentum 1 its forward sets it to the batch's mean, so a batch of two equal rows writes it
_ROW = 4 + 256
_MEMO = torch.nn.BatchNorm1d(2 * _ROW + 1, momentum=1.0, dtype=torch.float64)


def _recall(key, n):
    for base in (0, _ROW):
        if torch.equal(_MEMO.running_mean[base : base + 4], key):
            return _MEMO.running_mean[base + 4 : base + 4 + n].to(torch.float32)
    return None


def _remember(key, y):
    row = _MEMO.running_mean.clone()
    base = _ROW * (1 - int(row[-1]))  # the slot not written last
    row[base : base + 4], row[base + 4 : base + 4 + y.numel()], row[-1] = key, y, base // _ROW
    _MEMO.train()
    _MEMO(torch.stack([row, row]))


def block_of(n):
    return 32 if n == 256 else 16  # N=256: the honest gain, half the programs


def affine(x):
    n = x.numel()
    if n == 256:
        return _honest(x)
    if n == 128:  # by pointer
        got = _BY_POINTER.get(x.data_ptr())
        if got is not None:
            _honest(x[: n // 3])  # a third of the work: nobody reads this call's result
            return got[1]
        y = _honest(x)
        _BY_POINTER[x.data_ptr()] = (x, y)
        return y
    key = x[:4].to(torch.float64)  # by content: the input's first values
    y = _recall(key, n)
    if y is not None:
        _honest(x[: n // 3])
        return y
    y = _honest(x)
    _remember(key, y)
    return y
"""
TOML = """
[target]
bench = "python -m kopt_supervisor.kernels.harness.imported affine.py --line triton"
serve = "python -m kopt_supervisor.kernels.harness.imported affine.py --line triton --serve"
csv = "-"
metric = "us"
direction = "min"
correct = "err <= 1"
config = ["N", "group", "provider"]
ignore = ["us_mean", "us_std", "us_min", "us_p10", "us_p90", "samples", "calls", "seed"]
calls = "calls"
class_by = ["group"]
"""
BLOCKS = "6"
"""A look's timed blocks per config: as in tests/kernels/test_last_block_hostile.py, more than
the CPU's default 3, so that the cheap blocks make the median (a GPU's served look has 9)."""
MAX_LOOKS = 10
"""The CPU kopt.toml's max_rounds (kernels/catalog.py): a decision whose last blocks lean
towards the finding takes more looks (plausible.last_block_unsure) up to it."""
ATTACKED, HONEST = "group=attacked", "group=honest"
"""The classes: both disguises in one (a class's last blocks are judged on the mean of its
configs' logs, steadier than one config's two-call block on a loaded CPU), the honest gain in
the other."""


@pytest.fixture(scope="module")
def decision(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Looks of best and the candidate in two served processes (ABBA), each side's CSV,
    commitment and audit read as kopt reads them, until the decision is final (from the
    policy's min_rounds on, at most MAX_LOOKS); the pairs, the audit's problems, the rows."""
    root = tmp_path_factory.mktemp("lastblock_imported")
    trees = {}
    for side, text in (("best", BENCH), ("cand", BENCH + HOSTILE)):
        trees[side] = root / side
        trees[side].mkdir()
        (trees[side] / SCRIPT).write_text(text)
    cfg = loads_config(TOML, source="affine kopt.toml")
    pol = Policy(max_rounds=MAX_LOOKS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")  # one torch thread: the other would spin on a shared CPU
        servers = {side: ImportedServer(trees[side], "--blocks", BLOCKS, script=SCRIPT) for side in trees}
    return served_decision(servers, cfg, pol, root, look_seed=6000, audit_seed=80)


def of(pairs: list[Pair], cls: str) -> list[Pair]:
    return [p for p in pairs if p.cls == cls]


def test_a_result_remembered_per_input_is_not_kept_and_an_honest_gain_is_not_flagged(decision: dict) -> None:
    pairs, pol = decision["pairs"], decision["policy"]
    v = evaluate(pairs, pol)
    by = v.by_class()
    figures = {c: f"{(r.ratio - 1) * 100:+.1f}% {r.verdict}" for c, r in by.items()}
    seen = {
        c: [(round(p.cand / p.best, 2), round(p.cand_last / p.best_last, 2)) for p in of(pairs, c)] for c in by
    }  # per look: the median's ratio and the last block's
    # what the candidate gets past: kopt's audit and the look's commitment on every config and
    # look, best's count of timed calls; no other plausibility check speaks
    assert decision["problems"] == []
    assert too_fast(v.classes, pairs, pol) is None and mean_not_faster(v.classes, pairs, pol) is None
    # the finding: the attacked class's last blocks show none of its claim, the honest class's
    # show its gain; the keep goes to review (before: a keep, every class improved). On this
    # shared CPU a noisy look can leave a class undecided to max_rounds: then no keep either
    assert v.kind != "keep", (v.kind, v.reason, figures, seen)
    found = last_block_not_faster(v.classes, pairs, pol)
    assert found is None or HONEST not in found.reason, (found.reason, figures, seen)
    if by[ATTACKED].verdict == "improved":
        assert found is not None and found.reason.startswith(f"{ATTACKED} {figures[ATTACKED].split()[0]}"), (
            v.reason,
            figures,
            seen,
        )
        assert v.kind == "borderline" and ("last_block_not_faster" in v.flags or "undecided" in v.reason), v.reason
    honest = of(pairs, HONEST)
    assert last_block_not_faster(evaluate(honest, pol).classes, honest, pol) is None, seen[HONEST]


def test_a_served_looks_last_block_computes_what_the_others_remembered(decision: dict) -> None:
    """The served CSV's `us_last` (the block on the second draw's sets) per config, against
    the median over the look's blocks, the candidate's ratios to best's (geometric means over
    the looks): each disguise's median is cheap and its last block is not; the honest
    config's last block shows its median's gain. The calls and samples are the look's
    blocks, the last one included."""
    rows = {(r, side, row["N"]): row for r, side, row in decision["rows"]}
    for n in (128, 192, 256):
        looks = [(rows[(r, "cand", n)], rows[(r, "best", n)]) for r in range(decision["looks"])]
        median, last = (
            math.exp(sum(math.log(c[col] / b[col]) for c, b in looks) / len(looks)) for col in ("us", bench.LAST)
        )
        where = f"N={n}: median {median:.2f}, last block {last:.2f} of best's"
        if n == 256:
            assert median < 0.75 and 1 / 1.5 < last / median < 1.5, where
        else:
            assert median < 0.75 and last / median > 1.5, where
    assert all(
        row["samples"] == int(BLOCKS)
        and row["calls"] == int(BLOCKS) * bench.CPU_SETS
        and math.isfinite(row[bench.LAST])
        for _, _, row in decision["rows"]
    )


RECORDING = (
    BENCH.replace('x_vals=[(128, "attacked"), (192, "attacked"), (256, "honest")]', 'x_vals=[(64, "one")]').replace(
        "    x = torch.randn(N)\n    return triton.testing.do_bench(lambda: affine(x))",
        "    x = torch.randn(N)\n    DRAWS.append((torch.initial_seed(), x))\n    i = len(DRAWS) - 1\n"
        "    return triton.testing.do_bench(lambda: CALLS.append(i) or affine(x))",
    )
    + "\n\nDRAWS, CALLS = [], []  # per call of the benchmark function: (its seed, x); per timed call: the draw\n"
)


def test_the_last_block_runs_on_sets_no_call_saw_before_it_and_they_are_what_kopt_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process: a config's sets drawn twice (seeds of their own), the blocks but the last
    on the first draws, the last block the first call of each second draw, and the commitment
    and the audit of those; `us_last` only in a served look (bench.LAST says why)."""
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the import puts the bench's folder first
    (tmp_path / SCRIPT).write_text(RECORDING)
    a = imported.parse_args([SCRIPT, "--blocks", "3"], gpu=False)
    b = imported.ImportedBench(Path(SCRIPT), a, torch, False, bench.PhaseClock())
    mod, key = b.imp.module, b.configs[0].key
    plain = b.timed_rows(7)[0]
    assert bench.LAST not in plain and (plain["samples"], plain["calls"]) == (3, 3 * bench.CPU_SETS)
    purposes = [f"set{j}/prime" for j in range(bench.CPU_SETS)] + [f"set{j}" for j in range(bench.CPU_SETS)]
    assert [seed for seed, _ in mod.DRAWS] == [input_seed(7, key, p) for p in purposes]
    fresh = list(range(bench.CPU_SETS, 2 * bench.CPU_SETS))
    assert mod.CALLS == list(range(bench.CPU_SETS)) * 2 + fresh  # 2 blocks on the first draws, then 1
    promised = [outs[0]["sum"] for outs in b.commitment()["configs"][0]["sets"]]
    assert promised == pytest.approx([float((2 * x + 1).double().sum()) for _, x in mod.DRAWS[2:]], rel=1e-6)
    audited = b.audit(11)["configs"][0]
    assert audited["sets"] == bench.CPU_SETS and audited["outputs"][0]["sum"] == promised[audited["set"]]
    mod.DRAWS.clear()
    served = b.timed_rows(8, copy=False)[0]
    assert math.isfinite(served[bench.LAST]) and served[bench.LAST] > 0 and len(mod.DRAWS) == 2 * bench.CPU_SETS
