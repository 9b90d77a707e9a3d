"""The harness's per-tree serve protocol (kernels/harness/serve.py) driven as kopt drives it: the
bundled RMSNorm's `bench.py --serve` in its tree, over stdin/stdout, on this machine's CPU
(Triton's interpreter): `look N SEED PATH` -> CSV with `calls`, `audit N SEED PATH` -> JSON
with the shared rule's set and positions, the same seed in two processes -> the same bytes,
a changed kernel -> other sums, bad requests. The shared rule itself against the spec's
formula on known values (the engine's reimplementation checks the same values)."""

from __future__ import annotations

import io
import math
import random
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from kopt_supervisor.engine import metrics
from kopt_supervisor.engine.config.toml_io import load as load_config
from kopt_supervisor.kernels.harness import audit, bench, serve, timing
from tests.conftest import installed
from tests.kernels.serve_client import Server, edit, look_and_audit, materialize

pytestmark = installed("torch", "triton")

CONFIG = ["shape", "B", "N", "H", "hd", "dtype", "esize", "dclass"]


# -- the shared rule ------------------------------------------------------------------------------


def spec_formula(seed: int, config_key: str, sets: int, numels: list[int]) -> tuple[int, list[list[int]]]:
    """The rule exactly as the serve spec writes it."""
    rng = random.Random(f"{seed}/{config_key}")
    i = rng.randrange(sets)
    return i, [sorted(rng.randrange(n) for _ in range(min(64, n))) for n in numels]


KNOWN = [
    # (seed, config key, S, numels) -> (set, positions): kopt's engine checks the same values
    (
        (12345678901234567890, "M=3,N=5,dtype=float16", 7, [15, 3]),
        (5, [[1, 3, 4, 5, 6, 9, 10, 11, 12, 12, 12, 13, 14, 14, 14], [0, 1, 2]]),
    ),
    (
        (0, "shape=cpu-64,B=1,N=2,H=2,hd=64,dtype=bfloat16,esize=2,dclass=narrow", 2, [256]),
        (
            1,
            [
                [
                    0,
                    7,
                    7,
                    9,
                    11,
                    11,
                    14,
                    21,
                    24,
                    27,
                    35,
                    37,
                    43,
                    47,
                    52,
                    56,
                    57,
                    61,
                    65,
                    71,
                    71,
                    72,
                    72,
                    72,
                    78,
                    85,
                    102,
                    103,
                    104,
                    107,
                    107,
                    116,
                    120,
                    122,
                    127,
                    130,
                    138,
                    143,
                    147,
                    164,
                    166,
                    169,
                    169,
                    169,
                    170,
                    174,
                    174,
                    180,
                    184,
                    184,
                    186,
                    187,
                    189,
                    189,
                    189,
                    190,
                    198,
                    200,
                    200,
                    202,
                    205,
                    207,
                    211,
                    252,
                ]
            ],
        ),
    ),
]


@pytest.mark.parametrize("args,expected", KNOWN)
def test_the_audit_rule_gives_the_known_values(args: tuple, expected: tuple) -> None:
    assert audit.audit_choice(*args) == expected
    assert spec_formula(*args) == expected


def test_the_audit_rule_is_the_spec_formula() -> None:
    rng = random.Random(7)
    for _ in range(200):
        seed = rng.randrange(1 << 64)
        key = f"shape=s{rng.randrange(9)},M={rng.randrange(1, 5000)},dtype=bfloat16"
        sets = rng.randrange(1, 300)
        numels = [rng.randrange(1, 200) for _ in range(rng.randrange(1, 4))]
        assert audit.audit_choice(seed, key, sets, numels) == spec_formula(seed, key, sets, numels)
    # the config key is kopt's key_of over the config columns in the CSV's order
    row = {"shape": "p", "M": 64.0, "N": 32, "dtype": "float16"}
    from kopt_supervisor.kernels.harness.params import config_key

    assert config_key(row) == metrics.key_of(row, list(row)) == "shape=p,M=64,N=32,dtype=float16"
    with pytest.raises(ValueError, match="at least one timed buffer set"):
        audit.audit_choice(1, "k", 0, [3])


def test_input_seeds_differ_by_purpose_config_and_look() -> None:
    seeds = {
        audit.input_seed(s, k, p)
        for s in (1, 2)
        for k in ("a=1", "a=2")
        for p in ("check", "set0", "set0/prime", "set1")
    }
    assert len(seeds) == 16 and all(0 <= s < 1 << 63 for s in seeds)
    assert audit.input_seed(1, "a=1", "check") == audit.input_seed(1, "a=1", "check")


def test_summaries_count_nan_and_inf_apart_and_sum_the_finite_rest() -> None:
    import torch

    t = torch.tensor([1.0, -2.0, math.nan, math.inf, 0.5], dtype=torch.bfloat16)
    s = audit.summarise(torch, t, [0, 2, 4])
    assert (s["numel"], s["nan"], s["inf"], s["sum"], s["abs_sum"]) == (5, 1, 1, -0.5, 3.5)
    assert s["samples"][0] == [0, 1.0] and math.isnan(s["samples"][1][1]) and s["samples"][2] == [4, 0.5]
    assert audit.output_tensors((t, [t, "x"], None)) == [t, t] and audit.output_tensors(None) == []


def test_a_profiled_calls_outputs_are_summarised_on_the_host() -> None:
    """Under a profiler every kernel is profiled, a summary's on the GPU too (80 s of ncu per
    tree on the H200): a profile's outputs are copied to the host first, and summarised there
    alike, on a thread of their own, positions drawn from the config's rng in call order. With
    room for one copy only, each waits for the one before it: the summaries are the same."""
    import torch

    gen = torch.Generator().manual_seed(5)
    calls = [torch.randn(300, generator=gen), torch.randn(200, generator=gen)]

    class OnDevice:  # a device tensor's stand-in: only its host copy may be summarised
        copied = 0

        def __init__(self, t: torch.Tensor) -> None:
            self.t = t

        def numel(self) -> int:
            return int(self.t.numel())

        def detach(self) -> OnDevice:
            return self

        def cpu(self) -> torch.Tensor:
            OnDevice.copied += 1
            return self.t

    for room in (audit.PENDING_BYTES, 1):
        OnDevice.copied = 0
        later = audit.HostSummaries(torch, max_pending_bytes=room)
        rng = random.Random(9)
        futures = [f for t in calls for f in later.add([OnDevice(t)], rng)]
        later.close()
        assert OnDevice.copied == 2
        again = random.Random(9)
        for future, t in zip(futures, calls, strict=True):
            exact = audit.summarise(torch, t, audit.audit_positions(again, int(t.numel())))
            assert _same_summary(future.result(), exact)


def _same_summary(fast: dict, exact: dict) -> bool:
    """summarise_host's summary against summarise's: counts and samples equal, sums within
    float32's rounding of the sum of |x|."""
    slack = 1e-6 * max(exact["abs_sum"], 1.0)
    return (
        all(fast[k] == exact[k] for k in ("numel", "nan", "inf"))
        and repr(fast["samples"]) == repr(exact["samples"])  # NaN samples compare by their text
        and abs(fast["sum"] - exact["sum"]) <= slack
        and abs(fast["abs_sum"] - exact["abs_sum"]) <= slack
    )


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16", "float32"])
def test_the_host_summary_counts_nan_and_inf_and_survives_a_float32_overflow(
    dtype_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """summarise_host sums each chunk in float32 and counts NaN/Inf only where a chunk's sums are
    not finite: a NaN, an Inf, or finite values whose float32 sum overflows must each take the
    exact path, so its counts and sums are summarise's."""
    import torch

    dtype = getattr(torch, dtype_name)
    monkeypatch.setattr(audit, "SUMMARY_CHUNK", 64)
    g = torch.Generator().manual_seed(11)
    t = (torch.randn(1000, generator=g) * 3).to(dtype)
    assert _same_summary(audit.summarise_host(torch, t, [3, 400]), audit.summarise(torch, t, [3, 400]))
    t[7], t[500], t[999] = math.nan, math.inf, -math.inf
    fast = audit.summarise_host(torch, t, [3, 7, 500])
    assert (fast["nan"], fast["inf"]) == (1, 2)
    assert _same_summary(fast, audit.summarise(torch, t, [3, 7, 500]))
    if dtype != torch.float16:  # float16's largest value sums finite in float32
        big = torch.full((200,), torch.finfo(dtype).max, dtype=dtype)
        over = audit.summarise_host(torch, big, [0])
        assert (over["nan"], over["inf"]) == (0, 0) and math.isfinite(over["sum"])
        assert _same_summary(over, audit.summarise(torch, big, [0]))


def test_summaries_in_chunks_equal_the_whole_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit sums in float64 chunks (a whole output in float64 ran a served process out of
    memory on the H100): chunked and whole sums agree, NaN/Inf counted across chunk edges."""
    import torch

    g = torch.Generator().manual_seed(3)
    t = torch.randn(1000, generator=g).to(torch.bfloat16)
    t[7], t[500], t[999] = math.nan, math.inf, -math.inf
    whole = audit.summarise(torch, t, [1, 500, 998])
    monkeypatch.setattr(audit, "SUMMARY_CHUNK", 64)
    chunked = audit.summarise(torch, t, [1, 500, 998])
    assert (
        (chunked["numel"], chunked["nan"], chunked["inf"])
        == (whole["numel"], whole["nan"], whole["inf"])
        == (1000, 1, 2)
    )
    assert chunked["sum"] == pytest.approx(whole["sum"], abs=1e-9)
    assert chunked["abs_sum"] == pytest.approx(whole["abs_sum"], rel=1e-12)
    assert chunked["samples"][0] == whole["samples"][0] and chunked["samples"][2] == whole["samples"][2]


def test_a_served_tree_leaves_the_other_trees_process_room_on_the_gpu() -> None:
    """Two per-tree processes share a GPU; each leaves at a share that leaves both headroom."""
    from kopt_supervisor.kernels.harness import bench as bench_mod

    tree = bench_mod.parse_args(["--serve"], gpu=True)
    explicit = bench_mod.parse_args(["--serve", "--serve-memory", "0.4"], gpu=True)
    assert 2 * tree.serve_memory <= 0.5 and explicit.serve_memory == 0.4


# -- the protocol, one served process ---------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One served RMSNorm tree for the module: two looks of the same seed (a `load` between)
    and audits, the replies and files kept for the tests."""
    root = tmp_path_factory.mktemp("served")
    tree = materialize(root / "tree")
    out: dict = {"root": root, "tree": tree}
    with Server(tree) as s:
        out["before_any_look"] = s.ask(f"audit 1 5 {root / 'none.json'}")
        out["look1"] = s.look(1, 4242, root / "look1.csv")
        out["audit1"] = s.audit(1, 99, root / "audit1.json")
        out["audit1_text"] = (root / "audit1.json").read_text()
        out["bad"] = [
            s.ask(req)
            for req in (
                "bogus",
                "look 2",
                "look x 5 /tmp/p.csv",
                "look 2 notaseed /tmp/p.csv",
                "load now",
                f"audit 7 5 {root / 'a7.json'}",
            )
        ]
        out["load"] = s.ask("load")
        out["look2"] = s.look(2, 4242, root / "look2.csv")
        out["stale"] = s.ask(f"audit 1 99 {root / 'stale.json'}")
        out["audit2_text"] = (s.audit(2, 99, root / "audit2.json"), (root / "audit2.json").read_text())[1]
        out["other_audit"] = s.audit(2, 100, root / "audit2b.json")
        out["look3"] = s.look(3, 4243, root / "look3.csv")
        out["audit3"] = s.audit(3, 99, root / "audit3.json")
        out["look4"] = s.look(4, 4242, root / "look4.csv")  # look 1's seed, on the sets kept since look 2
        out["audit4_text"] = (s.audit(4, 99, root / "audit4.json"), (root / "audit4.json").read_text())[1]
        # prepared, then timed: look 1's seed again
        out["bad_prepare"] = [s.ask(req) for req in ("prepare 5", "prepare 5 x", "prepare 5 1 /tmp/p.csv")]
        out["prepare5"] = s.ask("prepare 5 4242")
        out["audit4_after_prepare"] = s.ask(f"audit 4 99 {root / 'audit4b.json'}")
        out["look5"] = s.look(5, 4242, root / "look5.csv")
        out["audit5_text"] = (s.audit(5, 99, root / "audit5.json"), (root / "audit5.json").read_text())[1]
        out["noise"], out["stderr"] = s.noise, s.stderr()
        out["rc"] = s.close()
    return out


def test_a_look_writes_one_row_per_config_with_its_timed_calls(served: dict) -> None:
    assert served["look1"] == "done 1" and served["rc"] == 0 and served["noise"] == []
    csv = (served["root"] / "look1.csv").read_text()
    df = pd.read_csv(io.StringIO(csv))
    assert list(df["shape"]) == ["cpu-48", "cpu-128"] and (df["err"] <= 1).all() and (df["seed"] == 4242).all()
    # CPU: 3 blocks, each one call per buffer set (2): us is the per-call time of 6 timed calls
    assert list(df["calls"]) == [bench.CPU_SETS * 3] * 2 and list(df["samples"]) == [3, 3]
    cfg = load_config(served["tree"] / "kopt.toml")
    m = metrics.measure(df, cfg.target)
    assert m.ok and m.config_columns == tuple(CONFIG)
    claimed = sum(df["us"] * df["calls"])
    assert m.timed == pytest.approx(claimed) and m.timed > 0


def test_an_audit_follows_the_shared_rule(served: dict) -> None:
    doc = served["audit1"]
    df = pd.read_csv(served["root"] / "look1.csv")
    assert doc["version"] == 1 and len(doc["configs"]) == len(df)
    for row, c in zip(df.to_dict("records"), doc["configs"], strict=True):
        assert c["config"] == {k: row[k] for k in CONFIG}  # the CSV's config columns, in its order
        key = metrics.key_of(row, CONFIG)
        n = row["B"] * row["N"] * row["H"] * row["hd"]
        assert c["sets"] == bench.CPU_SETS and (c["atol"], c["rtol"]) == (1e-2, 1.6e-2)
        want_set, want_positions = spec_formula(99, key, c["sets"], [n])
        assert c["set"] == want_set and len(c["outputs"]) == 1
        o = c["outputs"][0]
        assert o["numel"] == n and o["nan"] == o["inf"] == 0 and o["abs_sum"] > abs(o["sum"])
        assert [p for p, _ in o["samples"]] == want_positions[0]
        assert all(math.isfinite(v) for _, v in o["samples"]) and any(v != 0 for _, v in o["samples"])


def test_the_same_seed_draws_the_same_inputs_and_another_seed_others(served: dict) -> None:
    # after `load`, the same look seed and audit seed in the same process: the same bytes
    assert served["load"] == "loaded" and served["look2"] == "done 2"
    assert served["audit2_text"] == served["audit1_text"]
    l1, l2 = (pd.read_csv(served["root"] / f"look{i}.csv") for i in (1, 2))
    assert list(l1["err"]) == list(l2["err"])  # the contract check's inputs too
    # another audit seed picks other positions of the same outputs; another look seed other inputs
    other = served["other_audit"]["configs"]
    assert [c["outputs"][0]["samples"] for c in other] != [
        c["outputs"][0]["samples"] for c in served["audit1"]["configs"]
    ]
    assert served["look3"] == "done 3"
    sums3 = [c["outputs"][0]["sum"] for c in served["audit3"]["configs"]]
    assert sums3 != [c["outputs"][0]["sum"] for c in served["audit1"]["configs"]]


def test_a_look_commits_to_every_sets_outputs_and_the_audit_keeps_its_promise(served: dict) -> None:
    from kopt_supervisor.engine.decide import audit as kopt_audit

    columns = tuple(CONFIG)
    for look in ("look1", "look4"):
        text = (served["root"] / f"{look}.csv{serve.COMMITMENT_SUFFIX}").read_text()
        promise = kopt_audit.parse_commitment(text, columns, look)
        assert all(
            len(sets) == bench.CPU_SETS and all(o.samples == () for outs in sets for o in outs)
            for sets in promise.values()
        )
    promise = kopt_audit.parse_commitment(
        (served["root"] / f"look1.csv{serve.COMMITMENT_SUFFIX}").read_text(), columns, "look1"
    )
    audited = kopt_audit.parse(served["audit1_text"], columns, "audit1")
    assert sorted(promise) == sorted(audited)
    assert all(kopt_audit.commitment_problem(audited[k], promise[k]) is None for k in audited)


def test_sets_summarised_as_a_batch_agree_with_one_by_one() -> None:
    import torch

    gen = torch.Generator().manual_seed(3)
    outs = [[torch.randn(37, 5, generator=gen, dtype=torch.float32) * 1e3] for _ in range(6)]
    outs[2][0][1, 1] = math.nan
    outs[4][0][0, 0] = math.inf
    batch = audit.summarise_sets(torch, outs)
    alone = [[audit.summarise(torch, t, []) for t in o] for o in outs]
    for b, a in zip(batch, alone, strict=True):
        assert (b[0]["numel"], b[0]["nan"], b[0]["inf"]) == (a[0]["numel"], a[0]["nan"], a[0]["inf"])
        for k in ("sum", "abs_sum"):
            assert b[0][k] == pytest.approx(a[0][k], rel=1e-12, abs=1e-9)
    assert [b[0]["nan"] for b in batch] == [0, 0, 1, 0, 0, 0] and batch[4][0]["inf"] == 1
    pairs = [[torch.ones(3), torch.zeros(2)] for _ in range(2)]
    assert audit.summarise_sets(torch, pairs)[1][0]["sum"] == 3.0


def test_sets_past_one_chunk_are_batched_and_agree_with_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commitment sums in batches of at most SUMMARY_CHUNK elements, a larger output chunk by
    chunk, all in one transfer: 256 sets whose outputs pass one chunk together (the H200's hd-72
    config), sets of two outputs of unequal shapes and dtypes, an integer output, an empty one
    and one past a chunk must each get summarise's counts and sums, in the sets' order."""
    import torch

    monkeypatch.setattr(audit, "SUMMARY_CHUNK", 100)
    gen = torch.Generator().manual_seed(5)
    many = [[(torch.randn(30, generator=gen) * 50).to(torch.bfloat16)] for _ in range(256)]
    many[7][0][3], many[200][0][29], many[255][0][0] = math.nan, -math.inf, math.inf
    mixed = [
        [torch.randn(4, 3, generator=gen), torch.arange(5, dtype=torch.int32)],
        [torch.randn(250, generator=gen, dtype=torch.float64), torch.empty(0)],
        [torch.randn(4, 3, generator=gen), torch.arange(5, dtype=torch.int32) - 9],
    ]
    mixed[1][0][180] = math.nan  # in the second chunk of an output past one chunk
    for sets in (many, mixed):
        got = audit.summarise_sets(torch, sets)
        assert [len(g) for g in got] == [len(s) for s in sets]
        for g_set, outs in zip(got, sets, strict=True):
            for g, t in zip(g_set, outs, strict=True):
                a = audit.summarise(torch, t, [])
                assert (g["numel"], g["nan"], g["inf"], g["samples"]) == (a["numel"], a["nan"], a["inf"], [])
                for k in ("sum", "abs_sum"):
                    assert g[k] == pytest.approx(a[k], rel=1e-12, abs=1e-9)
    got = audit.summarise_sets(torch, many)
    assert [i for i, g in enumerate(got) if g[0]["nan"]] == [7]
    assert [i for i, g in enumerate(got) if g[0]["inf"]] == [200, 255]
    assert audit.summarise_sets(torch, mixed)[1][0]["nan"] == 1
    assert audit.summarise_sets(torch, []) == [] and audit.summarise_sets(torch, [[]]) == [[]]


def test_a_later_look_makes_new_buffers_and_gives_a_fresh_process_bytes(served: dict) -> None:
    # look 4 draws look 1's seed into buffers and a timer made anew (serve.KEEP_BUFFERS: a new
    # placement in memory every look): what it leaves for the audit, and its calls, are look 1's
    assert not serve.KEEP_BUFFERS
    assert served["look4"] == "done 4"
    assert served["audit4_text"] == served["audit1_text"]
    l1, l4 = (pd.read_csv(served["root"] / f"look{i}.csv") for i in (1, 4))
    assert list(l1["calls"]) == list(l4["calls"]) and list(l1["err"]) == list(l4["err"])
    phases = {line.split(":")[0]: line for line in served["stderr"].splitlines() if ": bench phases:" in line}
    assert all("capture" in phases[f"look {n}"] for n in (2, 3, 4))
    # the process's start before its first look, by parts (interpreter, torch, the rest)
    started = dict(re.findall(r"(\w+) (\d+\.\d+) s", phases["serving"]))
    assert {"start", "torch", "setup", "total"} <= set(started) and float(started["torch"]) > 0.1


def test_a_prepared_look_times_what_was_prepared_and_gives_the_same_bytes(served: dict) -> None:
    # `prepare N SEED`: the checks, draws and captures of look N; the look then only times them. Its
    # outputs, calls and checks are a whole look's at that seed (look 1's), and the previous look's
    # outputs are dropped at the prepare (audited already; the new sets are drawn beside none of them)
    assert served["prepare5"] == "prepared 5" and served["look5"] == "done 5"
    assert served["audit4_after_prepare"] == "fail 4 no look 4 to audit here (no look's outputs are kept)"
    assert served["audit5_text"] == served["audit1_text"]
    l1, l5 = (pd.read_csv(served["root"] / f"look{i}.csv") for i in (1, 5))
    assert list(l1["calls"]) == list(l5["calls"]) and list(l1["err"]) == list(l5["err"])
    phases = {line.split(":")[0]: line for line in served["stderr"].splitlines() if ": bench phases:" in line}
    assert "check" in phases["prepare 5"] and "check" not in phases["look 5"]
    short, bad_seed, extra = served["bad_prepare"]
    assert short.startswith("fail ? expected `prepare N SEED`") and extra.startswith("fail ? expected `prepare N SEED`")
    assert bad_seed.startswith("fail ? prepare 5: SEED must be an integer")


def test_bad_requests_are_answered_and_the_process_goes_on(served: dict) -> None:
    assert served["before_any_look"] == "fail 1 no look 1 to audit here (no look's outputs are kept)"
    bogus, short, bad_n, bad_seed, load_args, unknown_look = served["bad"]
    assert bogus.startswith("fail ? not a request") and "'bogus'" in bogus
    assert short.startswith("fail ? expected `look N SEED PATH`")
    assert bad_n.startswith("fail ? look: N must be an integer")
    assert bad_seed.startswith("fail ? look 2: SEED must be an integer")
    assert load_args.startswith("fail ? `load` takes no arguments")
    assert unknown_look == "fail 7 no look 7 to audit here (the outputs kept are look 1's)"
    # only the last look's outputs are kept
    assert served["stale"] == "fail 1 no look 1 to audit here (the outputs kept are look 2's)"


def test_two_processes_give_the_same_bytes_and_a_changed_kernel_other_sums(tmp_path: Path) -> None:
    a, b = materialize(tmp_path / "a"), materialize(tmp_path / "b")
    edit(b, "rstd = tl.math.rsqrt(", "rstd = 1.004 * tl.math.rsqrt(")  # every kernel's rows 0.4% larger
    csv1, audit1 = look_and_audit(a, tmp_path / "a1", 2026, 11)
    csv2, audit2 = look_and_audit(a, tmp_path / "a2", 2026, 11)
    assert audit1 == audit2  # byte-identical
    assert list(pd.read_csv(io.StringIO(csv1))["err"]) == list(pd.read_csv(io.StringIO(csv2))["err"])
    csv3, audit3 = look_and_audit(b, tmp_path / "b1", 2026, 11)
    import json

    d1, d3 = json.loads(audit1), json.loads(audit3)
    assert [c["set"] for c in d1["configs"]] == [c["set"] for c in d3["configs"]]  # the same choice...
    for c1, c3 in zip(d1["configs"], d3["configs"], strict=True):
        assert c1["outputs"][0]["sum"] != c3["outputs"][0]["sum"]  # ...of other values
        assert c1["outputs"][0]["abs_sum"] < c3["outputs"][0]["abs_sum"]  # 0.4% larger everywhere
    assert (pd.read_csv(io.StringIO(csv3))["err"] <= 1).all()  # the bench's own check passes it


def test_a_look_that_cannot_be_written_fails_and_the_process_leaves(tmp_path: Path) -> None:
    tree = materialize(tmp_path / "t")
    with Server(tree) as s:
        reply = s.look(1, 5, tmp_path)  # a directory: the CSV cannot be written there
        assert reply is not None and reply.startswith("fail 1 IsADirectoryError")
        assert s.proc.wait(timeout=60) == 1


def test_load_imports_the_tree_again_and_a_broken_one_fails(tmp_path: Path) -> None:
    tree = materialize(tmp_path / "t")
    with Server(tree) as s:
        assert s.ask("load") == "loaded"
        (tree / "solution" / "rmsnorm.py").write_text("def broken(:\n")
        reply = s.ask("load")
        assert reply is not None and reply.startswith("fail load SyntaxError")
        assert s.proc.wait(timeout=60) == 1


# -- `done N last`: the audit of N, then the process leaves (in-process, a plain torch function) ----


def _scale_tree(root: Path) -> Path:
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "scale.py").write_text("def scale(x):\n    return x * 2\n")
    return root


def _spec() -> object:
    from kopt_supervisor.kernels import harness

    def make_inputs(torch, dims, dtype, device, gen):  # noqa: ANN001, ANN202
        return (torch.randn(dims["M"], dims["N"], generator=gen, device=device).to(dtype),), {}

    return harness.Spec(
        name="scale",
        function="ops/scale.py:scale",
        make_inputs=make_inputs,
        reference=lambda torch, args, kwargs: args[0].double() * 2,
        shapes=[harness.small("a", M=3, N=5)],
        tolerance={"float32": (1e-6, 1e-6)},
    )


def test_the_timer_binds_its_spin_before_the_tree_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree that patches torch.cuda._sleep when it is imported (to make the spin after each
    flush free, or slow best's blocks) patches what the harness no longer calls: Bench builds
    its Timing (whose L2Flush looks the spin up once) before it imports the tree."""
    import torch

    monkeypatch.setattr(torch.cuda, "_sleep", torch.cuda._sleep)  # restored after the test
    genuine = torch.cuda._sleep
    tree = _scale_tree(tmp_path / "t")
    (tree / "ops" / "scale.py").write_text(
        "import torch\ntorch.cuda._sleep = lambda cycles: None  # the tree's patch\ndef scale(x):\n    return x * 2\n"
    )
    bound: list[object] = []

    class SpyFlush:  # the GPU's flush, built here without a GPU
        def __init__(self, torch_: Any, device: int = 0, spin_us: float = timing.SPIN_US) -> None:
            self.sleep = torch_.cuda._sleep
            self.spin_cycles = 1
            bound.append(self.sleep)

    monkeypatch.setattr(bench, "L2Flush", SpyFlush)
    monkeypatch.setattr(bench, "l2_bytes", lambda torch_: 1 << 20)
    monkeypatch.setattr(bench, "open_ranges", lambda torch_, gpu: bench.no_ranges("no GPU here"))
    monkeypatch.setattr(bench, "chosen_configs", lambda spec, a, gpu: ([], []))
    b = bench.Bench(_spec(), bench.parse_args(["--serve"], gpu=True), torch, True, bench.PhaseClock(), tree)  # type: ignore[arg-type]
    assert torch.cuda._sleep is not genuine, "the tree was imported and patched torch.cuda._sleep"
    assert bound == [genuine] and b.timing.flush.sleep is genuine  # type: ignore[union-attr]


@pytest.mark.parametrize("after", ["audit", "look"])
def test_done_last_serves_its_audit_then_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: str) -> None:
    import torch

    tree = _scale_tree(tmp_path / "t")
    a = bench.parse_args(["--serve"], gpu=False)
    b = bench.Bench(_spec(), a, torch, False, bench.PhaseClock(), tree)  # type: ignore[arg-type]
    monkeypatch.setattr(b, "memory_full", lambda share: True)  # the kept buffers passed --serve-memory
    replies: list[str] = []
    requests = [
        f"look 1 3 {tmp_path / 'l1.csv'}",
        f"audit 1 4 {tmp_path / 'a1.json'}" if after == "audit" else f"look 2 3 {tmp_path / 'l2.csv'}",
        "load",
    ]
    assert serve.serve_tree(b, requests, replies.append) == 0
    assert replies == (["done 1 last", "audited 1"] if after == "audit" else ["done 1 last"])
    # a served tree's function allocates its own output here (no out=): its kept result is audited
    if after == "audit":
        import json

        doc = json.loads((tmp_path / "a1.json").read_text())
        assert doc["configs"][0]["outputs"][0]["numel"] == 15


def test_serve_options() -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--serve", "--once"], gpu=False)
    with pytest.raises(SystemExit):
        bench.parse_args(["--serve", "--seed", "3"], gpu=False)
    assert (
        bench.parse_args(["--serve"], gpu=False).blocks == 3 and bench.parse_args(["--seed", "9"], gpu=False).seed == 9
    )


class _Cuda:
    """torch.cuda as release_cache sees it: free memory, this process's peak and its cache."""

    def __init__(self, free_gb: float, peak_gb: float, reserved_gb: float) -> None:
        self.free, self.peak, self.reserved = free_gb * 1e9, peak_gb * 1e9, reserved_gb * 1e9
        self.emptied = 0

    def mem_get_info(self) -> tuple[float, float]:
        return self.free, 141e9

    def max_memory_reserved(self) -> float:
        return self.peak

    def memory_reserved(self) -> float:
        return self.reserved

    def empty_cache(self) -> None:
        self.emptied += 1
        self.free, self.reserved = self.free + self.reserved, 0.0


@pytest.mark.parametrize(
    ("release", "free_gb", "given_back"),
    [
        ("auto", 100.0, False),  # room for another 18.6 GB check beside this one: kept (no slowed next side)
        ("auto", 27.0, True),  # less than 1.5 x the peak free: given back, so another process's check fits
        ("look", 100.0, True),
        ("never", 1.0, False),
    ],
)
def test_cached_blocks_are_given_back_only_when_the_device_is_short(
    monkeypatch: pytest.MonkeyPatch, release: str, free_gb: float, given_back: bool
) -> None:
    cuda = _Cuda(free_gb, peak_gb=18.6, reserved_gb=18.6)
    b = object.__new__(bench.Bench)
    b.gpu, b.torch, b.a = (
        True,
        type("T", (), {"cuda": cuda})(),
        bench.parse_args(["--serve", "--release", release], True),
    )
    slept: list[float] = []
    monkeypatch.setattr(bench.time, "sleep", slept.append)
    b.release_cache()
    assert cuda.emptied == int(given_back)
    # memory given back: the driver's work on it is over before the other side measures
    assert slept == ([bench.RELEASE_SETTLE_S] if given_back else [])
    assert bench.parse_args(["--serve"], gpu=True).release == "auto"


def test_warm_blocks_run_untimed_at_later_looks_and_a_raising_one_fails_only_its_row(tmp_path: Path) -> None:
    import torch

    tree = _scale_tree(tmp_path / "t")
    a = bench.parse_args(["--serve", "--warm-blocks", "2"], gpu=False)
    b = bench.Bench(_spec(), a, torch, False, bench.PhaseClock(), tree)  # type: ignore[arg-type]
    b.timed_rows(3, copy=False, keep=True)  # the first look makes the timer (no warm blocks: a new one ran its own)
    ((sets, timer),) = b.held.values()
    calls: list[int] = []
    real = timer.block
    timer.block = lambda: calls.append(1) or real()  # type: ignore[method-assign]
    row = b.timed_rows(4, copy=False, keep=True)[0]
    assert len(calls) == a.blocks + 2 and row["samples"] == a.blocks  # two untimed blocks, then the timed ones
    assert row["calls"] == timer.reps * a.blocks and math.isfinite(row["us"])

    def broken() -> float:
        raise RuntimeError("a call that raises")

    timer.block = broken  # type: ignore[method-assign]
    row = b.timed_rows(5, copy=False, keep=True)[0]  # raises in a warm block: the row fails, the look goes on
    assert row["err"] == math.inf and row["samples"] == 0 and not b.held


@pytest.mark.parametrize(("us_per_launch", "blocks"), [(1000.0, 3), (50.0, 9), (250.0, 4)])
def test_a_long_first_block_cuts_the_looks_blocks_on_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, us_per_launch: float, blocks: int
) -> None:
    # timing.look_blocks: blocks of reps x us_per_launch µs; 100 ms of them at most, never fewer than 3,
    # and the refresh still comes before the last block that is timed
    import torch

    tree = _scale_tree(tmp_path / "t")
    a = bench.parse_args(["--serve", "--blocks", "9"], gpu=False)
    b = bench.Bench(_spec(), a, torch, False, bench.PhaseClock(), tree)  # type: ignore[arg-type]
    b.timed_rows(3, copy=False, keep=True)
    ((sets, timer),) = b.held.values()
    events: list[str] = []
    timer.reps = 100
    timer.block = lambda: events.append("block") or us_per_launch  # type: ignore[method-assign]
    real_refresh = sets.refresh
    sets.refresh = lambda: events.append("refresh") or real_refresh()  # type: ignore[method-assign]
    b.timing.gpu = True  # the rule is a GPU one: the interpreter's blocks are one call per set
    last = type("Last", (), {"reps": sets.count, "block": lambda self: events.append("block") or us_per_launch})
    monkeypatch.setattr(b.timing, "last_timer", lambda calls, graphed, span: last())  # one call per set
    row = b.timed_rows(4, copy=False, keep=True)[0]
    assert row["samples"] == blocks and row["us"] == us_per_launch
    assert row["calls"] == 100 * (blocks - 1) + sets.count
    assert events == ["block"] * (blocks - 1) + ["refresh", "block"]
    assert timing.look_blocks(9, 75_000.0) == 3 and timing.look_blocks(2, 1e9) == 2  # never more than asked
    assert timing.look_blocks(9, float("nan")) == 9


def test_a_served_process_leaves_when_the_device_is_short_of_free_memory_not_only_its_tensors() -> None:
    """memory_allocated misses the private pools of the graphs kept alive and the other side's
    process: on the H200 best's process reached 72.8 GiB under the share and its next look ran
    out of memory. The device's free memory after the look decides too."""
    gib = 1 << 30

    def state(allocated: float, free: float, peak: float) -> SimpleNamespace:
        cuda = SimpleNamespace(
            get_device_properties=lambda i: SimpleNamespace(total_memory=140 * gib),
            memory_allocated=lambda: int(allocated * gib),
            mem_get_info=lambda: (int(free * gib), 140 * gib),
            max_memory_allocated=lambda: int(peak * gib),
        )
        return SimpleNamespace(gpu=True, torch=SimpleNamespace(cuda=cuda))

    full = bench.Bench.memory_full
    assert full(state(29, 100, 30), 0.2)  # its own tensors past the share, as before
    assert not full(state(2, 60, 3), 0.2)  # room to spare
    assert full(state(2, 0.02, 3), 0.2)  # the layer-norm case: little allocated, the device all but full
    assert full(state(2, 13, 3), 0.2)  # under 10% of the device free
    assert full(state(2, 20, 16), 0.2)  # less free than 1.5x this process's peak look
    assert not full(SimpleNamespace(gpu=False, torch=None), 0.2)


# -- `prepare N SEED` (in-process) ------------------------------------------------------------------


class _Sets:
    """A stand-in for one config's timed sets (the look's largest buffers)."""


class _PreparingBench:
    """What serve_tree asks of a bench that prepares: each prepare draws new sets (weakly
    watched), a look times what was prepared and keeps its sets for the audit (`looked`)."""

    prepares = True

    def __init__(self) -> None:
        self.looked: list = []
        self.clock = bench.PhaseClock()
        self.a = SimpleNamespace(serve_memory=0.5)
        self.drawn: list = []
        """Weak references to every set drawn so far."""
        self.alive_at_prepare: list[int] = []
        """At each prepare, how many sets drawn before it were still alive."""

    def prepare_look(self, seed: int) -> list:
        import gc
        import weakref

        gc.collect()
        self.alive_at_prepare.append(sum(ref() is not None for ref in self.drawn))
        ready = [bench.Prepared(case=None, where="", err=0.0, sets=_Sets(), t=None, warm=False) for _ in range(2)]  # type: ignore[arg-type]
        self.drawn += [weakref.ref(p.sets) for p in ready]
        return ready

    def timed_rows(self, seed: int, *, copy: bool = True, keep: bool = False, prepared: list | None = None) -> list:
        assert prepared is not None
        self.looked = [(p.case, p.sets) for p in prepared]
        return [{"us": 1.0, "seed": seed}]

    def commitment(self) -> dict:
        return {}

    def audit(self, seed: int) -> dict:
        return {"configs": len(self.looked)}

    def release_cache(self) -> None:
        pass

    def memory_full(self, share: float) -> bool:
        return False


def test_a_prepare_draws_its_sets_with_the_previous_looks_sets_freed(tmp_path: Path) -> None:
    """At `prepare N SEED` the previous look's timed sets have been audited: nothing may keep them
    (the look's prepared cases held in serve_tree did, so every prepare drew a look's sets beside
    the last one's: twice the timed buffers on the device, never seen by memory_full)."""
    b = _PreparingBench()
    replies: list[str] = []
    requests = []
    for n in range(3):
        requests += [f"prepare {n} {7 + n}", f"look {n} {7 + n} {tmp_path / f'l{n}.csv'}"]
        requests += [f"audit {n} 5 {tmp_path / f'a{n}.json'}"]
    assert serve.serve_tree(b, requests, replies.append) == 0  # type: ignore[arg-type]
    assert replies == [f"{verb} {n}" for n in range(3) for verb in ("prepared", "done", "audited")]
    assert b.alive_at_prepare == [0, 0, 0]


class _Timer:
    def __init__(self, reps: int) -> None:
        self.reps = reps
        self.blocks = 0

    def block(self) -> float:
        self.blocks += 1
        return 1.0


def _gpu_ruled_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nbytes: int = 0) -> tuple:
    """A Bench on this CPU whose prepares follow the GPU's rules (no capture before a config's
    calibration in a look), its timers made by a calibration that reads the µs of one call from
    `estimates` (the bytes rule, where the spec says a call moves `nbytes`, and the count as
    timing.block_launches chooses them), and torch.cuda.synchronize recorded. Returns (bench,
    estimates, made, synced)."""
    import dataclasses

    import torch

    tree = _scale_tree(tmp_path / "t")
    spec = dataclasses.replace(_spec(), bytes_moved=(lambda **cols: nbytes) if nbytes else None)  # type: ignore[type-var]
    b = bench.Bench(spec, bench.parse_args(["--serve"], gpu=False), torch, False, bench.PhaseClock(), tree)  # type: ignore[arg-type]
    real_cases = b.cases

    def cpu_cases(seed: int, **kw: object):  # noqa: ANN202
        b.gpu = False  # the configs' buffers on this CPU
        try:
            made = list(real_cases(seed, **kw))  # type: ignore[arg-type]
        finally:
            b.gpu = True
        return iter(made)

    estimates: list[float] = []
    made: list[tuple[str, int]] = []

    def tree_timer(case: object, sets: object, where: str, reps: int | None = None) -> _Timer:
        if reps is None:
            est = estimates.pop(0)
            reps = timing.block_launches(case.bytes, est, b.timing.block_us, b.timing.max_reps, sets.count)  # type: ignore[attr-defined]
            made.append(("calibrated", reps))
        else:
            made.append(("cached", reps))
        return _Timer(reps)

    synced: list[int] = []
    monkeypatch.setattr(b, "cases", cpu_cases)
    monkeypatch.setattr(b, "tree_timer", tree_timer)
    monkeypatch.setattr(b, "last_block_timer", lambda case, sets, t: _Timer(sets.count))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synced.append(1))
    b.gpu = True
    return b, estimates, made, synced


def test_a_calibration_disturbed_once_does_not_set_later_looks_calls_per_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config's calls per block kept for later prepares (their captures beside the other
    side's prepare) are only the bytes rule's, which no calibration moves. Hostile: the
    candidate's process queues kernels just before it answers `prepare` (SIGSTOP stops its
    threads, not its kernels), so best's first calibration, in its look, reads one call as
    slow: fewer calls per block, each block's fixed cost spread over fewer calls, best's calls
    slower. Kept, that count served every later look of best's process (decision after
    decision); before prepared looks it moved one look."""
    b, estimates, made, _ = _gpu_ruled_bench(tmp_path, monkeypatch, nbytes=120)
    estimates += [1e9, 1e9, 1.0]  # µs of one call as each calibration reads it: the first two disturbed
    rows = []
    for n in range(3):
        ready = b.prepare_look(10 + n)
        rows.append(b.timed_rows(10 + n, copy=False, prepared=ready)[0])
    ((case, sets),) = b.looked
    fixed, disturbed = (
        timing.block_launches(case.bytes, us, b.timing.block_us, b.timing.max_reps, sets.count) for us in (1.0, 1e9)
    )
    assert case.bytes > 0 and disturbed < fixed
    # look 0's prepare calibrates beside the other side's (disturbed: not the bytes rule's count, thrown
    # away) and its look again, alone (disturbed again: timed with it, never kept); look 1's prepare
    # leaves it to the look (a first capture is tried once), which calibrates alone (the bytes rule's
    # count: kept), and look 2's prepare captures with it
    assert made == [("calibrated", disturbed), ("calibrated", disturbed), ("calibrated", fixed), ("cached", fixed)]
    blocks = b.a.blocks
    assert [r["calls"] for r in rows] == [
        disturbed * (blocks - 1) + sets.count,
        *[fixed * (blocks - 1) + sets.count] * 2,
    ]
    # without the bytes a call moves every count is the calibration's: chosen again in each look,
    # alone (kept, one calibration's noise would set all of best's later looks, decision after decision)
    b, estimates, made, _ = _gpu_ruled_bench(tmp_path / "nobytes", monkeypatch)
    estimates += [30.0, 20.0, 50.0]
    for n in range(3):
        b.timed_rows(20 + n, copy=False, prepared=b.prepare_look(20 + n))
    ((case, sets),) = b.looked
    assert [kind for kind, _ in made] == ["calibrated"] * 3 and not b.reps
    counts = [
        timing.block_launches(0, us, b.timing.block_us, b.timing.max_reps, sets.count) for us in (30.0, 20.0, 50.0)
    ]
    assert [reps for _, reps in made] == counts


def test_a_new_process_s_first_look_is_prepared_as_every_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config with the bytes a call moves is calibrated and captured at its first `prepare` (the
    bytes rule's count, which no calibration's noise moves), so a new process's first look runs
    warm blocks on a timer made before it, as every later look does: no capture in the look.
    Made in the look, the candidate's first look read its largest configs 5-8% slower than its
    later ones (H200, 2026-12-01): a bias against every candidate, whose process is always new."""
    b, estimates, made, _ = _gpu_ruled_bench(tmp_path, monkeypatch, nbytes=120)
    estimates += [1.0]
    (ready,) = b.prepare_look(1)
    fixed = timing.block_launches(120, 1.0, b.timing.block_us, b.timing.max_reps, ready.sets.count)
    assert made == [("calibrated", fixed)] and ready.t is not None and ready.warm and b.reps
    b.a.warm_blocks = 2  # a GPU's look runs some before its timed blocks (this CPU's parse gives none)
    (row,) = b.timed_rows(1, copy=False, prepared=[ready])
    assert made == [("calibrated", fixed)]  # nothing calibrated or captured in the look
    assert ready.t.blocks == 2 + b.a.blocks - 1  # warm blocks, then the timed ones (the last is the last block's timer)
    assert row["calls"] == fixed * (b.a.blocks - 1) + ready.sets.count


def test_a_config_whose_count_the_calibration_chooses_is_captured_once_a_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: a config with the bytes a call moves whose bytes-rule block would last past
    LONG_BLOCK_US never gets the bytes rule's count, so a first capture at every prepare was thrown
    away and made again in the look: two captures a look, each graph kept for the process's life.
    The first capture is tried once per loaded tree; later looks capture it once, alone."""
    b, estimates, made, _ = _gpu_ruled_bench(tmp_path, monkeypatch, nbytes=120)
    estimates += [1e9] * 5  # every calibration reads a long call: never the bytes rule's count
    for n in range(4):
        b.timed_rows(n, copy=False, prepared=b.prepare_look(n))
    assert [kind for kind, _ in made] == ["calibrated"] * 5 and not b.reps  # the first prepare's, then one a look
    b.reload()  # a tree loaded again tries its first capture again
    estimates += [1e9, 1e9]
    b.timed_rows(9, copy=False, prepared=b.prepare_look(9))
    assert len(made) == 7


def test_a_prepare_leaves_no_work_queued_on_the_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kopt stops a process once it answers `prepare` and times the other alone: what the prepare
    queued (the timed sets' draws of a config still to be calibrated are asynchronous) must be
    done by then, or it runs beside the other side's timed look and its calibration."""
    b, estimates, _, synced = _gpu_ruled_bench(tmp_path, monkeypatch)
    estimates += [1.0]
    b.prepare_look(1)
    assert synced == [1]


def test_a_capture_that_fails_while_both_prepare_is_tried_again_alone_in_the_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config's capture at `prepare` (with its kept calls per block) that fails, as one short of
    memory beside the other side's prepare would, leaves the config to be captured in its look,
    alone, calibrated again: its row is timed, never an untimed row that fails the tree."""
    b, estimates, made, _ = _gpu_ruled_bench(tmp_path, monkeypatch, nbytes=120)
    estimates += [1.0, 1.0]
    b.timed_rows(1, copy=False, prepared=b.prepare_look(1))  # the first prepare calibrates: the bytes rule's count
    calibrated = b.tree_timer
    failed: list[int | None] = []

    def failing_in_prepare(case: object, sets: object, where: str, reps: int | None = None) -> object:
        if reps is not None:  # the prepare's capture with the kept count
            failed.append(reps)
            return None  # tree_timer's answer when a capture raises (logged there)
        return calibrated(case, sets, where)

    monkeypatch.setattr(b, "tree_timer", failing_in_prepare)
    (row,) = b.timed_rows(2, copy=False, prepared=b.prepare_look(2))
    assert len(failed) == 1 and made[-1][0] == "calibrated"  # tried once more, in the look, calibrating
    assert row["calls"] > 0 and row["us"] == row["us"]  # timed (not NaN)
