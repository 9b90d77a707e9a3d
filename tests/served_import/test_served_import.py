"""A triton perf_report bench served by import (kernels/harness/imported.py), on this machine's
CPU (Triton's interpreter) with the layer-norm fixture: the served protocol (`look`, `audit`,
`load`) answered as kopt asks it, one CSV row per config with its commitment and audit checked
by kopt's own readers, the same seed giving the same outputs in two processes, and the bench's
own timing never read (a slow kernel whose bench returns fake fast figures is measured slow).
The pieces without a process: the capture, the closure's tensors, the audit tolerance, the
command kopt init proposes and its plan from a probe."""

from __future__ import annotations

import io
import json
import math
import types
from pathlib import Path

import pandas as pd
import pytest

from kopt_supervisor.engine import metrics
from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.decide import audit as kopt_audit
from kopt_supervisor.engine.metrics import BenchError
from kopt_supervisor.engine.onboard import scratch as onboard_scratch
from kopt_supervisor.engine.onboard.detect import BenchRun
from kopt_supervisor.kernels.harness import bench, imported, serve
from tests.conftest import installed
from tests.served_import.client import ImportedServer, layer_norm_tree

pytestmark = installed("torch", "triton")

CONFIG = ("N", "provider", "M", "dtype", "mode")
TOML = """
[target]
bench = "python -m kopt_supervisor.kernels.harness.imported 05-layer-norm.py --line triton"
serve = "python -m kopt_supervisor.kernels.harness.imported 05-layer-norm.py --line triton --serve"
csv = "-"
metric = "us"
direction = "min"
correct = "err <= 1"
config = ["N", "provider", "M", "dtype", "mode"]
ignore = ["us_mean", "us_std", "us_min", "us_p10", "us_p90", "samples", "calls", "seed"]
calls = "calls"
class_by = []
"""
SLOW = (
    (
        "        _ln_backward_dx[(M, )](",
        "        for _ in range(4):  # four times the work\n            _ln_backward_dx[(M, )](",
    ),
)
FAKE_FAST = (
    ("    return gbps(ms), gbps(max_ms), gbps(min_ms)", "    return 1e9, 1e9, 1e9  # fake fast figures"),
    (
        "@triton.testing.perf_report(",
        "triton.testing.do_bench = lambda fn, *a, **k: [1e-6] * 3  # a fake timer\n\n\n@triton.testing.perf_report(",
    ),
)
OWN_TIMER = (
    ("triton.testing.do_bench(lambda: y.backward", "own_timer(lambda: y.backward"),
    (
        "@triton.testing.perf_report(",
        "def own_timer(fn, **_):\n    fn()\n    return [1.0, 1.0, 1.0]\n\n\n@triton.testing.perf_report(",
    ),
)


def rows(path: Path) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(path.read_text()))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One served fixture tree for the module: looks, audits, a `load` between, bad requests."""
    root = tmp_path_factory.mktemp("served_import")
    tree = layer_norm_tree(root / "tree")
    out: dict = {"root": root, "tree": tree}
    with ImportedServer(tree) as s:
        out["before_any_look"] = s.ask(f"audit 1 5 {root / 'none.json'}")
        out["look1"] = s.look(1, 4242, root / "look1.csv")
        out["audit1_text"] = (s.audit(1, 99, root / "audit1.json"), (root / "audit1.json").read_text())[1]
        out["bad"] = [s.ask(req) for req in ("bogus", "look 2", "load now", f"audit 7 5 {root / 'a7.json'}")]
        out["load"] = s.ask("load")
        out["look2"] = s.look(2, 4242, root / "look2.csv")
        out["audit2_text"] = (s.audit(2, 99, root / "audit2.json"), (root / "audit2.json").read_text())[1]
        out["look3"] = s.look(3, 4243, root / "look3.csv")
        out["audit3"] = s.audit(3, 99, root / "audit3.json")
        out["noise"], out["stderr"] = s.noise, s.stderr()
        out["rc"] = s.close()
    return out


def test_a_look_writes_one_row_per_config_and_kopt_reads_it(served: dict) -> None:
    assert served["look1"] == "done 1" and served["rc"] == 0, served["stderr"]
    assert served["noise"] == []  # the bench's own prints went to stderr, never among the replies
    df = rows(served["root"] / "look1.csv")
    assert list(df["N"]) == [64, 96, 160] and set(df["provider"]) == {"triton"}  # never the torch line
    assert (df["err"] == 0).all() and (df["seed"] == 4242).all() and (df["us"] > 0).all()
    assert list(df["calls"]) == [bench.CPU_SETS * 3] * 3 and list(df["samples"]) == [3] * 3
    # nothing the benchmark function returned (its GB/s) is in the look
    assert not [c for c in df.columns if "GB/s" in c or "Triton" in c]
    cfg = loads_config(TOML, source="served-import kopt.toml")
    m = metrics.measure(df, cfg.target)
    assert m.ok and m.config_columns == CONFIG and len(m.configs) == 3
    assert m.timed == pytest.approx(sum(df["us"] * df["calls"]))


def test_the_commitment_and_the_audit_follow_kopts_rule(served: dict) -> None:
    root = served["root"]
    promise = kopt_audit.parse_commitment((root / f"look1.csv{serve.COMMITMENT_SUFFIX}").read_text(), CONFIG, "look1")
    audited = kopt_audit.parse(served["audit1_text"], CONFIG, "audit1")
    df = rows(root / "look1.csv")
    assert set(promise) == set(audited) == {metrics.key_of(r, CONFIG) for r in df.to_dict("records")}
    for key, a in audited.items():
        sets = promise[key]
        # the outputs of the timed call: x.grad (the bench's grad_to_none), M x N float16 values
        n = 8 * int(dict(a.config)["N"])
        assert len(sets) == bench.CPU_SETS and all(len(outs) == 1 and outs[0].numel == n for outs in sets)
        assert (a.atol, a.rtol) == imported.TOLERANCE["float16"] and a.outputs[0].nan == a.outputs[0].inf == 0
        assert kopt_audit.rule_problem(a, 99, key) is None and kopt_audit.commitment_problem(a, sets) is None
        assert kopt_audit.compare(a, a) is None and a.outputs[0].abs_sum > 0
        assert sets[0][0].sum != sets[1][0].sum  # two sets, two draws of the bench's inputs


def test_the_same_seed_gives_the_same_outputs_and_another_seed_others(served: dict) -> None:
    assert served["load"] == "loaded" and served["look2"] == "done 2"
    assert served["audit2_text"] == served["audit1_text"]  # after `load`, the same look seed: the same bytes
    assert served["look3"] == "done 3"
    sums = lambda text: [c["outputs"][0]["sum"] for c in json.loads(text)["configs"]]  # noqa: E731
    assert sums(json.dumps(served["audit3"])) != sums(served["audit1_text"])


def test_bad_requests_are_answered_and_the_process_goes_on(served: dict) -> None:
    assert served["before_any_look"].startswith("fail 1 no look 1 to audit here")
    bogus, short, load_now, stale = served["bad"]
    assert bogus.startswith("fail ? not a request") and short.startswith("fail ? expected `look N SEED PATH`")
    assert load_now.startswith("fail ? `load` takes no arguments") and stale.startswith("fail 7 no look 7")


def test_the_benchs_own_timing_is_never_read_a_slow_kernel_with_fake_fast_figures_is_slow(
    served: dict, tmp_path: Path
) -> None:
    """Hostile: the tree's kernel does four times the work, its benchmark function returns 1e9
    GB/s and its module replaces do_bench with a fake timer. kopt captures the callable anyway
    and times it: slower than the honest tree's on every config (~2x over all), by the OS's own CPU clock; its
    outputs are still right. The honest tree in another process, same seed: the same bytes."""
    honest = layer_norm_tree(tmp_path / "honest")
    cheat = layer_norm_tree(tmp_path / "cheat", SLOW + FAKE_FAST)
    for name, tree in (("honest", honest), ("cheat", cheat)):
        with ImportedServer(tree) as s:
            assert s.look(1, 4242, tmp_path / f"{name}.csv") == "done 1", s.stderr()
            s.audit(1, 99, tmp_path / f"{name}_audit.json")
            assert s.close() == 0
    # another process of the honest tree: the same look and audit bytes as the module's server
    assert (tmp_path / "honest_audit.json").read_text() == served["audit1_text"]
    assert (tmp_path / f"honest.csv{serve.COMMITMENT_SUFFIX}").read_text() == (
        served["root"] / f"look1.csv{serve.COMMITMENT_SUFFIX}"
    ).read_text()
    fair, fake = rows(tmp_path / "honest.csv"), rows(tmp_path / "cheat.csv")
    assert (fake["err"] == 0).all() and list(fake["calls"]) == list(fair["calls"])
    # the fake timer's figure would be 0.001 us: every row is kopt's own CPU time, slower than the
    # honest tree's (the trees run one after the other, so a busy machine moves each row by tens of
    # percent: the fourfold backward pass shows as ~2x per config, >= 1.5x over all three)
    timed = (list(fair["us"]), list(fake["us"]))
    assert (fake["us"] > 1000).all() and (fake["us"] > fair["us"]).all(), timed
    assert fake["us"].sum() > 1.5 * fair["us"].sum(), timed
    best = kopt_audit.parse((tmp_path / "honest_audit.json").read_text(), CONFIG, "honest")
    cand = kopt_audit.parse((tmp_path / "cheat_audit.json").read_text(), CONFIG, "cheat")
    assert all(kopt_audit.compare(best[k], cand[k]) is None for k in best)  # right, only slow


def test_a_bench_that_times_with_its_own_clock_fails_every_config(tmp_path: Path) -> None:
    """No do_bench call: nothing to capture. The look still answers, every row fails (err inf,
    no timed calls), and its audit lists no output, which kopt's reader refuses."""
    tree = layer_norm_tree(tmp_path / "own", OWN_TIMER)
    with ImportedServer(tree) as s:
        assert s.look(1, 7, tmp_path / "own.csv") == "done 1", s.stderr()
        s.audit(1, 8, tmp_path / "own_audit.json")
        err = s.stderr()
        assert s.close() == 0
    df = rows(tmp_path / "own.csv")
    assert (df["err"] == math.inf).all() and (df["calls"] == 0).all() and df["us"].isna().all()
    assert "called neither triton.testing.do_bench nor do_bench_cudagraph" in err
    with pytest.raises(BenchError, match="'outputs' must list the output tensors"):
        kopt_audit.parse((tmp_path / "own_audit.json").read_text(), CONFIG, "own")


# -- the pieces, without a process -------------------------------------------------------------------


def test_the_capture_records_the_callable_and_answers_in_do_benchs_shapes() -> None:
    import torch

    cap = imported.Capture()
    x = torch.ones(3, requires_grad=True)
    assert cap.do_bench(lambda: 1, 25, 100, [x], [0.5, 0.2, 0.8]) == [imported.PLACEHOLDER_MS] * 3
    assert cap.do_bench(lambda: 2) == imported.PLACEHOLDER_MS
    assert cap.do_bench_cudagraph(lambda: 3, 20, None, None, "all") == [imported.PLACEHOLDER_MS]
    assert [c.fn() for c in cap.captured] == [1, 2, 3] and cap.captured[0].grads == [x]


def test_the_capture_replaces_do_bench_where_the_bench_holds_it_and_puts_it_back() -> None:
    def real(fn: object, **_: object) -> float:
        return 5.0

    testing = types.SimpleNamespace(do_bench=real, do_bench_cudagraph=None)
    scope = {"do_bench": real, "timer": real, "other": print}
    cap = imported.Capture()
    with cap.installed(testing, scope):  # type: ignore[arg-type]  # a module's attributes
        assert testing.do_bench == cap.do_bench and scope["timer"] == cap.do_bench and scope["other"] is print
        scope["do_bench"] = print  # the bench rebinds a name while it runs: left as it set it
    assert testing.do_bench is real and scope["timer"] is real and scope["do_bench"] is print


def test_a_sets_outputs_are_what_it_returned_the_grads_it_names_else_its_closure() -> None:
    import torch

    a, b = torch.ones(4), torch.zeros(2)
    x = torch.ones(3, requires_grad=True)

    def backward() -> None:
        (x * 2).sum().backward()

    s = imported.TimedSet([imported.Captured(lambda: (a + 1, "tag"), []), imported.Captured(backward, [x])])
    s()
    outs = s.outputs()
    assert len(outs) == 2 and torch.equal(outs[0], a + 1) and torch.equal(outs[1], torch.full((3,), 2.0))
    s()  # grad_to_none: reset before each call, so the grad is the last call's, not a sum
    assert torch.equal(s.outputs()[1], torch.full((3,), 2.0))

    def in_place() -> None:
        a.add_(0)

    quiet = imported.TimedSet([imported.Captured(in_place, [])])
    quiet()
    assert [t is a for t in quiet.outputs()] == [True]  # nothing returned: the closure's tensors
    assert quiet.nbytes() == a.numel() * a.element_size()
    assert imported.closure_tensors(lambda: (a, b, a)) == [a, b]


def test_the_audit_tolerance_follows_the_least_precise_output() -> None:
    import torch

    f16, f32, i64 = torch.zeros(1, dtype=torch.float16), torch.zeros(1), torch.zeros(1, dtype=torch.int64)
    assert imported.tolerance([f32, f16], None, None) == imported.TOLERANCE["float16"]
    assert imported.tolerance([i64], None, None) == (0.0, 0.0)
    assert imported.tolerance([f32], 0.5, None) == (0.5, imported.TOLERANCE["float32"][1])


def test_lines_are_named_or_the_only_one() -> None:
    b = types.SimpleNamespace(line_vals=["triton", "torch"], line_names=["Triton", "Torch"])
    assert imported.pick_lines(b, ["Triton"], "x") == ["triton"] and imported.pick_lines(b, ["torch"], "x") == ["torch"]
    with pytest.raises(imported.ImportedError, match="2 lines .*name the kernel's with --line"):
        imported.pick_lines(b, [], "bench.py")
    with pytest.raises(imported.ImportedError, match="--line cuda names no line"):
        imported.pick_lines(b, ["cuda"], "bench.py")
    assert imported.pick_lines(types.SimpleNamespace(line_vals=["mine"], line_names=[]), [], "x") == ["mine"]


def test_the_harness_command_keeps_the_benchs_interpreter_environment_and_folder() -> None:
    cmd, note = onboard_scratch.harness_command("TRITON_INTERPRET=1 python3 -u 05-layer-norm.py", "--probe")
    assert cmd == f"TRITON_INTERPRET=1 python3 -u -m {onboard_scratch.MODULE} 05-layer-norm.py --probe" and note == ""
    cmd, note = onboard_scratch.harness_command("cd bench && /opt/py/bin/python scripts/ln.py --fast", "--line t")
    assert cmd == f"cd bench && /opt/py/bin/python -m {onboard_scratch.MODULE} scripts/ln.py --line t"
    assert "--fast" in note
    for bad in ("./run_bench.sh", "python -m mypkg.bench", "python bench.py && rm -rf out"):
        got, why = onboard_scratch.harness_command(bad, "--probe")
        assert got is None and "does not end in `python SCRIPT.py`" in why


def probe_run(probe: dict | None) -> BenchRun:
    return BenchRun("python 05-layer-norm.py", Path("."), 0, Path("stdout.out"), probe=probe)


def test_the_plan_serves_the_metrics_line_or_says_why_not() -> None:
    doc = {
        "version": 1,
        "config_columns": list(CONFIG),
        "benchmarks": [
            {
                "lines": [
                    {"value": "triton", "name": "Triton", "captured": True},
                    {"value": "torch", "name": "Torch", "captured": False, "why": "RuntimeError: no"},
                ]
            }
        ],
    }
    ok = {"ok": True, "probe": doc, "seconds": 3.5, "note": ""}
    p = onboard_scratch.plan(probe_run(ok), "Triton (GB/s)")
    assert p is not None and p.lines == ("triton",) and p.config == CONFIG and p.seconds == 3.5
    torch_plan = onboard_scratch.plan(probe_run(ok), "Torch (GB/s)")
    assert torch_plan is not None and not torch_plan.lines and "RuntimeError: no" in torch_plan.why
    failed = onboard_scratch.plan(
        probe_run({"ok": False, "why": "kopt's import of the bench failed (exit 1)"}), "Triton (GB/s)"
    )
    assert failed is not None and failed.why.startswith("kopt's import of the bench failed")
    assert onboard_scratch.plan(probe_run(None), "Triton (GB/s)") is None


def test_the_plan_serves_a_long_tables_provider_through_liger_kernels_convention() -> None:
    """A long table's metric column is `<provider> <metric name> (<unit>)` (Liger's
    `liger speed (ms)`): the probe of the run_benchmarks convention names the provider; a
    perf_report probe never matches a line by its first word."""
    cols = ["kernel_operation_mode", "T", "kernel_provider", "hidden_size", "dtype"]
    lines = [
        {"value": "huggingface", "name": "huggingface", "captured": True},
        {"value": "liger", "name": "liger", "captured": True},
    ]
    doc = {"version": 1, "convention": "liger", "config_columns": cols, "benchmarks": [{"lines": lines}]}
    ok = {"ok": True, "probe": doc, "seconds": 2.0, "note": ""}
    p = onboard_scratch.plan(probe_run(ok), "liger speed (ms)")
    assert p is not None and p.lines == ("liger",) and p.config == tuple(cols), p
    hf = onboard_scratch.plan(probe_run(ok), "huggingface speed (ms)")
    assert hf is not None and hf.lines == ("huggingface",)
    other = onboard_scratch.plan(probe_run(ok), "ligerx speed (ms)")
    assert other is not None and not other.lines and "no line named 'ligerx speed'" in other.why
    as_perf_report = {**ok, "probe": {**doc, "convention": "perf_report"}}
    no_prefix = onboard_scratch.plan(probe_run(as_perf_report), "liger speed (ms)")
    assert no_prefix is not None and not no_prefix.lines  # "Triton fused" is not the line "Triton"
    assert "long" in onboard_scratch.PROBED and "perf_report" in onboard_scratch.PROBED


def test_a_profile_summarises_each_configs_outputs_for_kopt_on_its_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under kopt's profile (KOPT_PROFILE_SEED, KOPT_PROFILE_OUTPUTS) the imported harness, like
    the public one, summarises every profiled call's outputs, each call on a set drawn of its
    own from kopt's seed, in the audit's JSON kopt reads (engine/loop/evidence.py
    `profile_outputs`; the seed's determinism: tests/kernels/test_public_harness.py, on the
    harness function both share)."""
    tree = layer_norm_tree(tmp_path / "tree")
    monkeypatch.chdir(tree)
    monkeypatch.setenv("KOPT_PROFILE_SEED", "11")
    monkeypatch.setenv("KOPT_PROFILE_OUTPUTS", str(tmp_path / "outputs.json"))
    monkeypatch.setenv("KOPT_PROFILE_CALLS", "3")
    assert imported.main(["05-layer-norm.py", "--line", "triton", "--profile"]) == 0
    got = kopt_audit.parse((tmp_path / "outputs.json").read_text(), CONFIG, "outputs")
    assert got and all(a.outputs and kopt_audit.compare(a, a) is None for a in got.values())
    for a in got.values():  # three calls' outputs, each its own: no two calls summed alike
        per_call = len(a.outputs) // 3
        assert per_call and len(a.outputs) == 3 * per_call
        sums = [tuple(o.sum for o in a.outputs[k * per_call : (k + 1) * per_call]) for k in range(3)]
        assert len(set(sums)) == 3, sums
    # the closer profile of one config only (KOPT_PROFILE_CONFIGS): its 6 calls, the others' own
    keys = sorted(got)
    monkeypatch.setenv("KOPT_PROFILE_CALLS", "6")
    monkeypatch.setenv("KOPT_PROFILE_CONFIGS", json.dumps(keys[:1]))
    assert imported.main(["05-layer-norm.py", "--line", "triton", "--profile"]) == 0
    again = kopt_audit.parse((tmp_path / "outputs.json").read_text(), CONFIG, "outputs")
    calls = {k: len(a.outputs) * 3 // len(got[k].outputs) for k, a in again.items()}
    assert calls == {k: 6 if k == keys[0] else imported.IMPORTED_PROFILE_CALLS for k in keys}, calls
