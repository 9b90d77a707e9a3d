"""Hostile candidates against the served look's audit: each passes the bench's own contract check
(`err` <= 1 in its CSV), and each one's audited timed outputs differ from an honest tree's on
the same look and audit seeds beyond the tolerance kopt applies, because the timed buffer sets
are never the check's inputs, no reference is computed for them, and before the last timed
block they get fresh contents and NaN-filled outputs (kernels/harness/sets.py).

The bundled RMSNorm served as kopt serves it (serve_client.Server: a subprocess over
stdin/stdout, Triton's interpreter on this CPU), its solution wrapped by each attack."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import installed
from tests.kernels.serve_client import look_and_audit, materialize

pytestmark = installed("torch", "triton")

LOOK_SEED, AUDIT_SEED = 31337, 2718

ATTACKS = {
    # the harness's fp64 reference of the check, found through gc and kept: returned for every call
    "gc-reference": """
import gc as _gc
_STOLEN = {}


def rms_norm(x, weight, eps=1e-6, out=None):
    for o in _gc.get_objects():
        if isinstance(o, torch.Tensor) and o.dtype == torch.float64 and tuple(o.shape) == tuple(x.shape):
            _STOLEN[tuple(x.shape)] = o
    ref = _STOLEN.get(tuple(x.shape))
    if ref is None:
        return _honest(x, weight, eps, out)
    out = torch.empty_like(x) if out is None else out
    return out.copy_(ref)
""",
    # a result cached by shape: the first call (the check's) computed, every later one copied
    "shape-cache": """
_CACHE = {}


def rms_norm(x, weight, eps=1e-6, out=None):
    key = (tuple(x.shape), x.dtype)
    if key not in _CACHE:
        _CACHE[key] = _honest(x, weight, eps).clone()
    out = torch.empty_like(x) if out is None else out
    return out.copy_(_CACHE[key])
""",
    # a result cached by input pointer: each buffer set computed once, copied from then on
    "pointer-cache": """
_CACHE = {}


def rms_norm(x, weight, eps=1e-6, out=None):
    key = (x.data_ptr(), tuple(x.shape))
    if key not in _CACHE:
        _CACHE[key] = _honest(x, weight, eps).clone()
    out = torch.empty_like(x) if out is None else out
    return out.copy_(_CACHE[key])
""",
    # lazy: an output buffer it has written once is taken as still holding the right values
    "skips-known-outputs": """
_WRITTEN = set()


def rms_norm(x, weight, eps=1e-6, out=None):
    if out is not None and out.data_ptr() in _WRITTEN:
        return out
    out = _honest(x, weight, eps, out)
    _WRITTEN.add(out.data_ptr())
    return out
""",
}


def wrap(tree: Path, attack: str) -> None:
    sol = tree / "solution" / "rmsnorm.py"
    sol.write_text(sol.read_text() + "\n\n_honest = rms_norm\n" + ATTACKS[attack])


def beyond_tolerance(best: dict, cand: dict) -> list[str]:
    """What kopt's comparison would name (the serve spec's rule), per config: NaN/Inf beyond
    best's, a sample off by more than atol + rtol |b|, a sum off by more than n atol + rtol
    abs_sum."""
    bad = []
    for b, c in zip(best["configs"], cand["configs"], strict=True):
        assert (b["config"], b["sets"], b["set"]) == (c["config"], c["sets"], c["set"])
        atol, rtol = b["atol"], b["rtol"]
        for ob, oc in zip(b["outputs"], c["outputs"], strict=True):
            name = b["config"]["shape"]
            if oc["nan"] + oc["inf"] > ob["nan"] + ob["inf"]:
                bad.append(f"{name}: {oc['nan']} NaN")
            off = [
                p
                for (p, vb), (_, vc) in zip(ob["samples"], oc["samples"], strict=True)
                if not abs(vc - vb) <= atol + rtol * abs(vb)
            ]
            if off:
                bad.append(f"{name}: {len(off)} samples")
            if not abs(oc["sum"] - ob["sum"]) <= ob["numel"] * atol + rtol * ob["abs_sum"]:
                bad.append(f"{name}: sum")
    return bad


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("honest")
    csv, audit = look_and_audit(materialize(root / "tree"), root / "out", LOOK_SEED, AUDIT_SEED)
    return json.loads(audit)


def test_an_honest_tree_matches_itself(tmp_path: Path, honest: dict) -> None:
    # the comparison's other side: a second honest process shows nothing beyond tolerance
    _, audit = look_and_audit(materialize(tmp_path / "tree"), tmp_path / "out", LOOK_SEED, AUDIT_SEED)
    assert beyond_tolerance(honest, json.loads(audit)) == []


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_that_passes_the_check_is_caught_by_the_audit(tmp_path: Path, honest: dict, attack: str) -> None:
    tree = materialize(tmp_path / "tree")
    wrap(tree, attack)
    csv, audit = look_and_audit(tree, tmp_path / "out", LOOK_SEED, AUDIT_SEED)
    df = pd.read_csv(tmp_path / "out" / "look.csv")
    assert (df["err"] <= 1).all(), df[["shape", "err"]]  # the bench's own check passes it
    doc = json.loads(audit)
    assert doc != honest
    bad = beyond_tolerance(honest, doc)
    shapes = {c["config"]["shape"] for c in honest["configs"]}
    assert {b.split(":")[0] for b in bad} == shapes, bad  # every config's audited output is wrong
    if attack == "skips-known-outputs":  # what the last timed block did not write is NaN
        assert all(c["outputs"][0]["nan"] == c["outputs"][0]["numel"] for c in doc["configs"])
