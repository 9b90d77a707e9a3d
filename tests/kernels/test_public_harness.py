"""kopt's public harness (kopt_supervisor.kernels.harness) as a user's bench uses it: a Spec, the
function found in each tree (by path or by module, one copy per tree), the contract without an
`out=` keyword, NVTX/roctx ranges named after each config, the driver's modes, and
a KernelBench Model/ModelNew pair. On this machine's CPU (Triton's interpreter is not needed:
the functions here are plain torch)."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from kopt_supervisor.engine import metrics
from kopt_supervisor.engine.config import TargetConfig
from kopt_supervisor.kernels import harness
from kopt_supervisor.kernels.harness import bench as hb
from kopt_supervisor.kernels.harness import ranges, serve
from tests.conftest import installed

pytestmark = installed("torch")


def make_inputs(torch, dims, dtype, device, gen):  # noqa: ANN001, ANN201 - a user's bench, as written
    return (torch.randn(dims["M"], dims["N"], generator=gen, device=device).to(dtype),), {}


def reference(torch, args, kwargs):  # noqa: ANN001, ANN201
    return args[0].double() * 2


def spec(function: str = "ops/scale.py:scale", name: str = "scale", **kw: object) -> harness.Spec:
    return harness.Spec(
        name=name,
        function=function,
        make_inputs=make_inputs,
        reference=reference,
        shapes=[
            harness.production("p", M=64, N=32),
            harness.small("cpu-a", M=3, N=5),
            harness.small("cpu-b", M=2, N=7),
        ],
        tolerance={"float16": (1e-3, 1e-3), "float32": (1e-6, 1e-6)},
        bytes_moved=lambda M, N, esize, **_: 2 * M * N * esize,
        class_by=["dtype"],
        **kw,
    )  # type: ignore[arg-type]  # test keywords


def tree(root: Path, body: str = "return x * 2", name: str = "ops/scale.py") -> Path:
    f = root / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(f"def scale(x):\n    {body}\n")
    return root


# -- Spec and locators -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"function": "scale"}, "expected 'path/in/tree.py:function'"),
        ({"function": "/abs/ops.py:scale"}, "relative to the tree"),
        ({"function": "../ops.py:scale"}, "relative to the tree"),
        ({"function": "ops.py:not a name"}, "expected"),
        ({"dtypes": ["int8"]}, "dtype 'int8' has no tolerance"),
        ({"name": "two words"}, "short identifier"),
    ],
)
def test_spec_refuses_what_it_cannot_run(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        spec(**kw)
    with pytest.raises(ValueError, match="appears twice"):
        harness.Spec(
            name="s",
            function="a.py:f",
            make_inputs=make_inputs,
            reference=reference,
            shapes=[harness.small("x", M=1), harness.small("x", M=2)],
            tolerance={"float32": (0, 0)},
        )


def test_by_path_each_tree_gets_its_own_module(tmp_path: Path) -> None:
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b", "return x * 3")
    fa, fb = harness.locate(a, "ops/scale.py:scale", "best"), harness.locate(b, "ops/scale.py:scale", "cand")
    assert fa.module is not fb.module and fa.function(2) == 4 and fb.function(2) == 6
    with pytest.raises(harness.LocateError, match="no file ops/nope.py"):
        harness.locate(a, "ops/nope.py:scale", "best")
    with pytest.raises(harness.LocateError, match="has no function 'scal'"):
        harness.locate(a, "ops/scale.py:scal", "best")


def test_by_module_each_tree_imports_its_own_package_and_sys_modules_is_restored(tmp_path: Path) -> None:
    for side, k in (("best", 2), ("cand", 5)):
        pkg = tmp_path / side / "kpkg"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "consts.py").write_text(f"K = {k}\n")
        (pkg / "ops.py").write_text(
            "from .consts import K\nfrom kpkg import consts\n\ndef scale(x):\n    return x * K + 0 * consts.K\n"
        )
    sys.modules["kpkg"] = SimpleNamespace(marker="the caller's own")  # type: ignore[assignment]  # a stand-in
    try:
        best = harness.locate(tmp_path / "best", "kpkg.ops:scale", "best")
        cand = harness.locate(tmp_path / "cand", "kpkg.ops:scale", "cand")
        assert best.function(1) == 2 and cand.function(1) == 5  # relative and absolute imports: own tree
        assert sys.modules["kpkg"].marker == "the caller's own" and "kpkg.ops" not in sys.modules
        assert str(tmp_path / "best") not in sys.path
    finally:
        sys.modules.pop("kpkg", None)


def test_a_module_found_outside_the_tree_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an installed (or editable) copy would make both sides time the same code
    elsewhere = tmp_path / "site"
    (elsewhere / "kinst").mkdir(parents=True)
    (elsewhere / "kinst" / "__init__.py").write_text("def scale(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(elsewhere))
    (tmp_path / "tree").mkdir()
    with pytest.raises(harness.LocateError, match="outside the tree .*both sides would time the same code"):
        harness.locate(tmp_path / "tree", "kinst:scale", "cand")


# -- ranges ---------------------------------------------------------------------------------------


def test_range_names_are_kopts_config_keys() -> None:
    assert (
        ranges.range_name({"shape": "p", "M": 64.0, "N": 32, "dtype": "float16"})
        == "kopt:shape=p,M=64,N=32,dtype=float16"
    )
    assert ranges.range_name({"shape": "p", "M": 64.0}) == "kopt:" + metrics.key_of(
        {"shape": "p", "M": 64.0}, ["shape", "M"]
    )


class RecordingNvtx:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def range_push(self, name: str) -> None:
        if self.fail:
            raise RuntimeError("NVTX functions not installed")
        self.calls.append("push " + name)

    def range_pop(self) -> None:
        self.calls.append("pop")


def test_range_backends() -> None:
    import torch

    assert ranges.open_ranges(torch, False).kind == "none"
    nv = RecordingNvtx()
    cuda_torch = SimpleNamespace(version=SimpleNamespace(hip=None), cuda=SimpleNamespace(nvtx=nv))
    r = ranges.open_ranges(cuda_torch, True)
    with r.span("kopt:a=1"):
        pass
    assert r.kind == "nvtx" and nv.calls[-2:] == ["push kopt:a=1", "pop"]
    broken = ranges.open_ranges(
        SimpleNamespace(version=SimpleNamespace(hip=None), cuda=SimpleNamespace(nvtx=RecordingNvtx(fail=True))), True
    )
    assert broken.kind == "none" and "does not work here" in broken.why

    class Lib:
        pushed: list[bytes] = []

        def __init__(self) -> None:
            self.roctxRangePushA = lambda name: Lib.pushed.append(name) or 0
            self.roctxRangePop = lambda: 0

    def loader(name: str) -> Lib:
        if name != "libroctx64.so":
            raise OSError(name)
        return Lib()

    rocm = SimpleNamespace(version=SimpleNamespace(hip="6.2"), cuda=SimpleNamespace(nvtx=RecordingNvtx()))
    r = ranges.open_ranges(rocm, True, loader=loader)
    with r.span("kopt:b=2"):
        pass
    assert r.kind == "roctx (libroctx64.so)" and Lib.pushed == [b"kopt:b=2"]
    r = ranges.open_ranges(rocm, True, loader=lambda name: (_ for _ in ()).throw(OSError(name)))
    assert r.kind == "roctx (torch.cuda.nvtx on ROCm)"


# -- the driver ------------------------------------------------------------------------------------


def run_main(
    s: harness.Spec, argv: list[str], t: Path, capsys: pytest.CaptureFixture[str], log: list[str] | None = None
) -> pd.DataFrame:
    assert harness.main(s, argv, tree=t) == 0
    cap = capsys.readouterr()
    if log is not None:
        log.append(cap.err)
    return pd.read_csv(io.StringIO(cap.out))


def test_process_level_rows_with_ranges_around_checks_and_timing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spans: list[str] = []
    rec = ranges.Ranges(lambda name: spans.append("push " + name), lambda: spans.append("pop"), "test")
    monkeypatch.setattr(hb, "open_ranges", lambda torch, gpu: rec)
    df = run_main(spec(), [], tree(tmp_path / "t"), capsys)
    # the CPU runs the small shapes, the first dtype; the default columns are shape, dims, dtype, esize
    assert list(df["shape"]) == ["cpu-a", "cpu-b"] and list(df.columns[:5]) == ["shape", "M", "N", "dtype", "esize"]
    assert (df["err"] <= 1).all() and (df["prod"] == 1).all() and (df["us"] > 0).all()
    assert ("push kopt:shape=cpu-a,M=3,N=5,dtype=float16,esize=2") in spans and spans.count("pop") == sum(
        s.startswith("push") for s in spans
    ) >= 4  # checked and timed: each inside the config's range
    m = metrics.measure(df, TargetConfig(bench="x", metric="us", correct="err <= 1", ignore=[*hb.STATS, *hb.EXTRA]))
    assert m.ok and m.classes() == [
        "shape=cpu-a,M=3,N=5,dtype=float16,esize=2",
        "shape=cpu-b,M=2,N=7,dtype=float16,esize=2",
    ]


def test_a_wrong_tree_fails_its_rows_and_a_tree_without_the_function_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log: list[str] = []
    df = run_main(spec(), [], tree(tmp_path / "wrong", "return x * 2.01"), capsys, log)
    assert (df["err"] > 1).all() and "FAILS contract" in log[0]
    m = metrics.measure(df, TargetConfig(bench="x", metric="us", correct="err <= 1", ignore=[*hb.STATS, *hb.EXTRA]))
    assert not m.ok
    gone = tmp_path / "gone"
    gone.mkdir()
    with pytest.raises(harness.LocateError, match="no file ops/scale.py"):
        harness.main(spec(), [], tree=gone)


def test_a_function_without_out_is_checked_after_poisoning_and_must_keep_its_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = tree(tmp_path / "t", "x.mul_(2)\n    return x")
    log: list[str] = []
    df = run_main(spec(), ["--once"], t, capsys, log)
    assert (df["err"] == math.inf).all() and "FAILS contract: the kernel modified an input" in log[0]
    t2 = tree(tmp_path / "t2", "return (x * 2).float()")  # the wrong dtype
    assert (run_main(spec(), ["--once"], t2, capsys)["err"] == math.inf).all()
    assert (run_main(spec(same_dtype=False), ["--once"], t2, capsys)["err"] <= 1).all()


def test_served_looks_time_the_tree_as_imported_until_load(tmp_path: Path) -> None:
    import torch

    t = tree(tmp_path / "t")
    b = hb.Bench(spec(), hb.parse_args(["--serve"], gpu=False), torch, False, hb.PhaseClock(), t)
    replies: list[str] = []
    looks = [tmp_path / f"l{i}.csv" for i in (1, 2, 3)]
    assert serve.serve_tree(b, [f"look 1 5 {looks[0]}", "bogus"], replies.append) == 0
    assert replies[0] == "done 1" and replies[1].startswith("fail ? not a request")
    (t / "ops" / "scale.py").write_text("def scale(x):\n    return x * 2.01\n")
    assert serve.serve_tree(b, [f"look 2 5 {looks[1]}", "load", f"look 3 5 {looks[2]}"], replies.append) == 0
    assert replies[2:] == ["done 2", "loaded", "done 3"]
    l1, l2, l3 = (pd.read_csv(p) for p in looks)
    assert len(l1) == len(l2) == len(l3) == 2  # 2 shapes, one row each
    assert (l1["err"] <= 1).all() and (l2["err"] <= 1).all()  # not loaded: still the tree as first imported
    assert (l3["err"] > 1).all()  # loaded: the changed file
    (t / "ops" / "scale.py").write_text("syntax error here\n")
    assert serve.serve_tree(b, ["load"], replies.append) == 1 and replies[-1].startswith("fail load SyntaxError")


# -- KernelBench ------------------------------------------------------------------------------------

REF = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.scale = scale

    def forward(self, x):
        return torch.softmax(self.proj(x) * self.scale, dim=1)


batch_size = 4
dim = 32


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.5]
"""

NEW = """\
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.proj = nn.Linear({dim}, {dim})
        self.scale = scale

    def forward(self, x):
        y = self.proj(x) * self.scale
        e = (y - y.amax(dim=1, keepdim=True)).exp()
        return e / e.sum(dim=1, keepdim=True){extra}
"""


def kernelbench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return subprocess.run(
        [sys.executable, "-m", "kopt_supervisor.kernels.harness.kernelbench", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_kernelbench_pair_timed_and_checked_against_model(tmp_path: Path) -> None:
    best, cand = tmp_path / "best", tmp_path / "cand"
    for t, extra in ((best, ""), (cand, " + 0.05")):  # the candidate's softmax is off by 0.05
        (t / "level1").mkdir(parents=True)
        (t / "level1" / "23_Softmax_Linear.py").write_text(REF)
        (t / "new.py").write_text(NEW.format(dim=32, extra=extra))
    res = kernelbench(best, "--ref", "level1/23_Softmax_Linear.py", "--new", "new.py")
    assert res.returncode == 0, res.stderr[-2000:]
    df = pd.read_csv(io.StringIO(res.stdout))
    assert list(df.columns[:5]) == ["problem", "batch_size", "dim", "dtype", "esize"]
    assert df.loc[0, "problem"] == "23_Softmax_Linear" and df.loc[0, "err"] <= 1 and df.loc[0, "us"] > 0
    res = kernelbench(cand, "--ref", "level1/23_Softmax_Linear.py", "--new", "new.py")
    assert res.returncode == 0, res.stderr[-2000:]
    assert (pd.read_csv(io.StringIO(res.stdout))["err"] > 1).all() and "FAILS contract" in res.stderr
    res = kernelbench(best, "--ref", "level1/nope.py", "--new", "new.py")
    assert res.returncode != 0 and "level1/nope.py: no such file" in res.stderr
    (best / "bad_ref.py").write_text("import torch\n")
    res = kernelbench(best, "--ref", "bad_ref.py", "--new", "new.py")
    assert res.returncode != 0 and "defines Model, get_inputs and get_init_inputs" in res.stderr


def test_public_api_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "byo-kernel.md").read_text()
    for name in (
        "Spec",
        "production",
        "regression",
        "small",
        "make_inputs",
        "reference",
        "bytes_moved",
        "out",
        "prepare",
        "--serve",
        "--once",
        "kopt:",
        "TRITON_INTERPRET",
        "kernelbench",
    ):
        assert name in doc, name
    assert textwrap.dedent(harness.__doc__ or "").strip()


def test_profile_mode_calls_each_solution_profile_calls_times_in_its_range_and_never_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # what a profiler runs: under ncu every launch costs 10-80 ms, and the contract check's
    # own launches outside the ranges were 86 s of a 90 s profile on the H100
    spans: list[str] = []
    rec = ranges.Ranges(lambda name: spans.append("push " + name), lambda: spans.append("pop"), "test")
    monkeypatch.setattr(hb, "open_ranges", lambda torch, gpu: rec)
    t = tmp_path / "t"
    (t / "ops").mkdir(parents=True)
    (t / "ops" / "scale.py").write_text("CALLS = []\ndef scale(x):\n    CALLS.append(x.shape)\n    return x * 2\n")
    refs: list[int] = []

    def counting_reference(torch, args, kwargs):  # noqa: ANN001, ANN202
        refs.append(1)
        return args[0].double() * 2

    checks: list[int] = []
    monkeypatch.setattr(hb, "check_call", lambda *a, **k: checks.append(1))
    monkeypatch.setattr(sys.modules[__name__], "reference", counting_reference)
    df = run_main(spec(), ["--profile"], t, capsys)
    assert refs == [] and checks == []  # no fp64 reference, no comparison
    names = [s for s in spans if s.startswith("push ")]
    assert len(names) == hb.PROFILE_CALLS * len(df) and spans.count("pop") == len(
        names
    )  # PROFILE_CALLS per config, each ranged
    assert df["err"].isna().all() and list(df["shape"]) == ["cpu-a", "cpu-b"]
    # a solution that raises: its row is inf, and the profile goes on to the next config
    df = run_main(spec(), ["--profile"], tree(tmp_path / "broken", "raise RuntimeError('boom')"), capsys)
    assert list(df["shape"]) == ["cpu-a", "cpu-b"] and (df["err"] == math.inf).all()
    with pytest.raises(SystemExit):
        hb.parse_args(["--serve", "--profile"], gpu=False)
    # kopt's second profile of a keep asks for more calls per config (KOPT_PROFILE_CALLS)
    spans.clear()
    monkeypatch.setenv("KOPT_PROFILE_CALLS", "5")
    df = run_main(spec(), ["--profile"], t, capsys)
    assert len([s for s in spans if s.startswith("push ")]) == 5 * len(df)
    for bad in ("0", "65", "two", "-1"):
        with pytest.raises(SystemExit, match=f"KOPT_PROFILE_CALLS='{bad}': a whole number of calls from 1 to 64"):
            hb.profile_calls({"KOPT_PROFILE_CALLS": bad})
    assert hb.profile_calls({}) == hb.PROFILE_CALLS == 4
    # ... and only of the configs it names (KOPT_PROFILE_CONFIGS: the classes it could not tell)
    spans.clear()
    key = "shape=cpu-a,M=3,N=5,dtype=float16,esize=2"  # its range's name, kopt's config key
    monkeypatch.setenv("KOPT_PROFILE_CONFIGS", json.dumps([key]))
    df = run_main(spec(), ["--profile"], t, capsys)
    pushes = [s for s in spans if s.startswith("push ")]
    assert len(pushes) == 5 + hb.PROFILE_CALLS * (len(df) - 1) and pushes[:5] == [f"push kopt:{key}"] * 5, pushes
    with pytest.raises(SystemExit, match="KOPT_PROFILE_CONFIGS='shape=a': a JSON list of config keys"):
        hb.profile_calls_for("x", {"KOPT_PROFILE_CALLS": "5", "KOPT_PROFILE_CONFIGS": "shape=a"})
    monkeypatch.delenv("KOPT_PROFILE_CONFIGS")

    # a config past GPU_DRAW_BYTES takes at most LARGE_PROFILE_CALLS of the calls asked for, and
    # LARGE_FIRST_CALLS when kopt asked for none of it (its calls cost seconds under ncu and vary
    # little); the others all of them. Its bytes are read only when they can matter.
    def size(n: int) -> Callable[[], int]:
        def read() -> int:
            reads.append(n)
            return n

        return read

    big, reads = hb.GPU_DRAW_BYTES + 1, []
    more, only_a = {"KOPT_PROFILE_CALLS": "12"}, {"KOPT_PROFILE_CALLS": "12", "KOPT_PROFILE_CONFIGS": '["a"]'}
    assert hb.profile_calls_for("a", more, size(big)) == hb.LARGE_PROFILE_CALLS == 4
    assert hb.profile_calls_for("a", more, size(hb.GPU_DRAW_BYTES)) == 12
    assert hb.profile_calls_for("a", {"KOPT_PROFILE_CALLS": "3"}, size(big)) == 3
    assert hb.profile_calls_for("a", {}, size(big)) == hb.LARGE_FIRST_CALLS == 2
    assert hb.profile_calls_for("b", only_a, size(big)) == hb.LARGE_FIRST_CALLS  # not asked of b
    assert hb.profile_calls_for("b", only_a, size(1)) == hb.PROFILE_CALLS
    assert hb.profile_calls_for("a", {}, None) == hb.PROFILE_CALLS  # no GPU: no bytes to read
    reads.clear()
    assert hb.profile_calls_for("a", {"KOPT_PROFILE_CALLS": "1"}, size(big)) == 1 and reads == []
    # kopt names each config's calls (a JSON object): exactly those, a large config's too (kopt
    # divides each config's GPU time by them); a config it does not name takes the harness's own
    named = {"KOPT_PROFILE_CALLS": '{"a": 6, "b": 1}'}
    assert hb.profile_calls_for("a", named, size(big)) == 6 and hb.profile_calls_for("b", named, size(1)) == 1
    assert hb.profile_calls_for("c", named, size(big)) == hb.LARGE_FIRST_CALLS
    assert hb.profile_calls_for("c", named, size(1)) == hb.PROFILE_CALLS
    for bad in ('{"a": 0}', '{"a": 65}', '{"a": true}', '{"a": "2"}', "{x"):
        with pytest.raises(
            SystemExit, match="KOPT_PROFILE_CALLS=.*: a JSON object of config keys to calls from 1 to 64"
        ):
            hb.profile_calls_for("a", {"KOPT_PROFILE_CALLS": bad})
    # kopt's profile of a keep: each config's last output summarised for kopt to compare, on
    # inputs from kopt's seed (the same seed: the same summaries; engine/decide/audit.py reads them)
    from kopt_supervisor.engine.decide import audit as kopt_audit

    monkeypatch.delenv("KOPT_PROFILE_CALLS")
    monkeypatch.setenv("KOPT_PROFILE_SEED", "7")
    texts = []
    for n in range(2):
        out = tmp_path / f"outputs{n}.json"
        monkeypatch.setenv("KOPT_PROFILE_OUTPUTS", str(out))
        df = run_main(spec(), ["--profile"], t, capsys)
        texts.append(out.read_text())
    assert texts[0] == texts[1]
    got = kopt_audit.parse(texts[0], ["shape", "dtype"], "outputs")
    assert len(got) == len(df) and all(a.outputs and a.outputs[0].numel > 0 for a in got.values())
    assert {a.calls for a in got.values()} == {hb.PROFILE_CALLS}  # each config says its calls (kopt's `own_calls`)
    monkeypatch.setenv("KOPT_PROFILE_CALLS", json.dumps({key: 2}))
    run_main(spec(), ["--profile"], t, capsys)
    said = kopt_audit.parse((tmp_path / "outputs1.json").read_text(), ["shape", "dtype"], "outputs")
    assert sorted(a.calls for a in said.values()) == [2] + [hb.PROFILE_CALLS] * (len(df) - 1)
    monkeypatch.delenv("KOPT_PROFILE_CALLS")
    monkeypatch.setenv("KOPT_PROFILE_SEED", "8")
    run_main(spec(), ["--profile"], t, capsys)
    assert (tmp_path / "outputs1.json").read_text() != texts[0]  # other inputs, other outputs


def test_a_profile_draws_its_inputs_on_the_host_and_falls_back_to_the_device(capsys: pytest.CaptureFixture) -> None:
    # --profile's inputs come from a CPU generator (no draw kernel on the GPU for ncu to count
    # as work outside the ranges), the same values as the device draw of the same seed on
    # this CPU; a spec whose draw refuses the CPU is drawn on the device, logged
    import torch

    asked: list[tuple[str, str]] = []

    def recording(torch_, dims, dtype, device, gen):  # noqa: ANN001, ANN202
        asked.append((device, str(gen.device)))
        return make_inputs(torch_, dims, dtype, device, gen)

    s = dataclasses.replace(spec(), make_inputs=recording)
    shape = s.shapes[0]
    case = hb.Case(torch, s, None, shape, "float32", 7, False, reference=False)
    asked.clear()
    host = case.host_draw(7)
    assert asked == [("meta", "cpu"), ("cpu", "cpu")]  # its size first, on the meta device: no allocation
    assert all(torch.equal(a, b) for a, b in zip(host[0], case.draw(7)[0], strict=True))
    assert case.input_bytes() == sum(a.numel() * a.element_size() for a in host[0] if hasattr(a, "element_size"))

    def device_only(torch_, dims, dtype, device, gen):  # noqa: ANN001, ANN202
        if device == "cpu" and not any(a == "refused" for a, _ in asked):
            asked.append(("refused", device))
            raise RuntimeError("this spec draws on the device only")
        return make_inputs(torch_, dims, dtype, device, gen)

    asked.clear()
    case.spec = dataclasses.replace(spec(), make_inputs=device_only)
    drawn = case.host_draw(7)
    assert asked == [("refused", "cpu")] and torch.equal(drawn[0][0], case.draw(7)[0][0])
    assert "inputs drawn on the GPU (RuntimeError: this spec draws on the device only)" in capsys.readouterr().err


def test_a_profile_draws_inputs_larger_than_gpu_draw_bytes_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    # on the H200 the host's draw of a 730 MB input set took 4.6-8 s of a tree's profile; past
    # GPU_DRAW_BYTES (sized on the meta device) the device draws them: a few launches
    import torch

    case = hb.Case(torch, spec(), None, spec().shapes[0], "float32", 7, False, reference=False)
    size = case.input_bytes()
    device_draws: list[int] = []
    real = hb.Case.draw
    monkeypatch.setattr(hb.Case, "draw", lambda self, seed: device_draws.append(seed) or real(self, seed))
    monkeypatch.setattr(hb, "GPU_DRAW_BYTES", size)  # not larger: the host draws
    case.host_draw(3)
    assert size > 0 and device_draws == []
    monkeypatch.setattr(hb, "GPU_DRAW_BYTES", size - 1)
    drawn = case.host_draw(3)
    assert device_draws == [3] and torch.equal(drawn[0][0], real(case, 3)[0][0])
