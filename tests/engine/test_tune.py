"""The `tune` proposer (engine/propose/tune.py, tune_space.py): search order, no
repeats, plans, bad files."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from kopt_supervisor.engine.config import Config, TuneConfig
from kopt_supervisor.engine.propose.proposer import ProposalContext, parse_plan
from kopt_supervisor.engine.propose.tune import TuneProposer
from kopt_supervisor.engine.propose.tune_space import dump_params

SPACE = {"num_warps": [1, 2, 4, 8], "BLOCK_D": [64, 128, 0], "num_stages": [1, 2]}
START = {"*": {"num_warps": 2, "BLOCK_D": 128, "num_stages": 1, "eps": 1e-6}}
CLASSES = ["dclass=narrow", "dclass=wide"]


def space_size(space: dict[str, list[Any]]) -> int:
    n = 1
    for v in space.values():
        n *= len(v)
    return n


class Harness:
    """The loop's side of the proposer: a worktree reset to the best params before each
    proposal, and the history of records the proposals leave behind."""

    def __init__(
        self,
        tmp: Path,
        params: dict[str, Any],
        *,
        space=SPACE,
        per_class=False,
        seed=0,
        classes=CLASSES,
        name="params.json",
        order=(),
        alike=None,
    ) -> None:
        self.tmp, self.name = tmp, name
        self.tree = tmp / "cand"
        self.tree.mkdir(exist_ok=True)
        self.best_text = dump_params(params)
        self.base = "c0" * 20
        self.classes = classes
        self.history: list[dict[str, Any]] = []
        self.proposer = TuneProposer(
            TuneConfig(params=name, space=space, per_class=per_class, seed=seed, order=list(order), alike=alike or {})
        )
        self.n = 0

    def ctx(self, repair: int = 0) -> ProposalContext:
        self.n += 1
        return ProposalContext(
            iteration=self.n,
            repair=repair,
            worktree=self.tree,
            workspace=self.tmp,
            prompt_path=self.tmp / "prompt.md",
            plan_path=self.tmp / "plans" / f"v{self.n}_plan.md",
            log_dir=self.tmp / "logs",
            config=Config(),
            best_commit=self.base,
            classes=self.classes,
            history=list(self.history),
        )

    def propose(self, status: str = "regression"):
        (self.tree / self.name).write_text(self.best_text)
        ctx = self.ctx()
        p = self.proposer.propose(ctx)
        plan = parse_plan(ctx.plan_path.read_text()) if p.ok else None
        written = json.loads((self.tree / self.name).read_text())
        self.history.append(
            {
                "version": self.n,
                "status": status if p.ok else "fail_propose",
                "best_commit_before": self.base,
                "commit": None,
                "target_class": plan.target_class if plan else None,
                "proposal": p.details,
            }
        )
        return p, plan, written

    def keep_last(self, written: dict[str, Any], commit: str) -> None:
        self.history[-1].update(status="keep", commit=commit)
        self.base, self.best_text = commit, dump_params(written)

    def until_exhausted(self, limit: int = 500):
        out = []
        for _ in range(limit):
            p, plan, written = self.propose()
            if not p.ok:
                return out, p
            out.append((p, plan, written))
        raise AssertionError("never exhausted")


def in_space(point: dict[str, Any], space=SPACE) -> bool:
    return set(point) == set(space) and all(point[k] in space[k] for k in space)


def test_global_search_covers_the_space_once_in_tier_order_then_is_exhausted(tmp_path):
    h = Harness(tmp_path, START)
    got, last = h.until_exhausted()
    points = [json.dumps(p.details["point"], sort_keys=True) for p, _, _ in got]
    assert len(points) == len(set(points)) == space_size(SPACE) - 1  # every point but the best, once
    for p, plan, written in got:
        assert in_space(p.details["point"])
        assert written["*"] == {**START["*"], **p.details["point"]}  # only "*" edited, eps untouched
        assert set(written) == {"*"}
        assert plan.scope == "global" and plan.target_class is None
        assert p.details["base"] == h.base and p.details["class"] is None
    kinds = [p.details["move"] for p, _, _ in got]
    assert kinds == sorted(kinds, key=("step", "leap", "pair", "explore").index)
    # one-parameter moves: 2 + 2 + 1 adjacent values; num_warps first, up first
    assert kinds.count("step") == 5
    assert [p.details["changed"] for p, _, _ in got[:2]] == [{"num_warps": [2, 4]}, {"num_warps": [2, 1]}]
    # then the one leap the lines allow: warps 2 -> 8, past 4 (no better); BLOCK_D 128 has no
    # value two places away
    leaps = [(p.details["changed"], plan.hypothesis) for p, plan, _ in got if p.details["move"] == "leap"]
    assert [c for c, _ in leaps] == [{"num_warps": [2, 8]}] and "(past 4, which was no better)" in leaps[0][1]
    # adjacent pairs: warps x BLOCK_D + warps x stages + BLOCK_D x stages
    assert kinds.count("pair") == 2 * 2 + 2 * 1 + 2 * 1
    assert last.details == {"exhausted": True, "base": h.base}
    assert "exhausted" in last.reason


def test_per_class_targets_one_class_and_writes_only_its_entry(tmp_path):
    start = {"*": dict(START["*"]), "dclass=wide": {"BLOCK_D": 0}}
    h = Harness(tmp_path, start, per_class=True)
    got, last = h.until_exhausted()
    seen: set[str] = set()
    for p, plan, written in got:
        cls = p.details["class"]
        assert cls in CLASSES and plan.target_class == cls and plan.scope == "class"
        seen.add(json.dumps([cls, p.details["point"]], sort_keys=True))
        assert written["*"] == START["*"]
        for other in set(start) - {"*", cls}:
            assert written[other] == start[other]
        effective = {**written["*"], **written.get(cls, {})}
        assert {k: effective[k] for k in SPACE} == p.details["point"] and in_space(p.details["point"])
        assert all(written["*"][k] != v for k, v in written.get(cls, {}).items())  # no no-op overrides
    assert len(seen) == len(got) == len(CLASSES) * (space_size(SPACE) - 1)
    # round robin: the classes alternate while both have neighbours left
    assert [p.details["class"] for p, _, _ in got[:4]] == [*CLASSES, *CLASSES]
    assert got[1][0].details["from"]["BLOCK_D"] == 0  # the wide class starts from its own values
    assert last.details["exhausted"] is True


def test_hypothesis_names_the_change_and_why(tmp_path):
    h = Harness(
        tmp_path,
        {"*": {"num_warps": 4, "ROWS_PER_PROG": 1, "BLOCK_D": 128}},
        space={"num_warps": [1, 2, 4, 8], "ROWS_PER_PROG": [1, 4], "BLOCK_D": [128, 0]},
        per_class=True,
    )
    plans = [h.propose()[1] for _ in range(6)]
    hyps = [p.hypothesis for p in plans]
    assert hyps[0] == "num_warps 4→8 to keep more loads in flight on dclass=narrow"
    assert hyps[1] == "num_warps 4→8 to keep more loads in flight on dclass=wide"
    assert any(x.startswith("num_warps 4→2 ") and "dclass=" in x for x in hyps)
    assert any("ROWS_PER_PROG 1→4 to amortise" in x for x in hyps)
    rest = [h.propose()[1].hypothesis for _ in range(2)]
    assert any("BLOCK_D 128→0 (" in x and "reads x once" in x for x in rest)
    text = plans[0].text
    assert "params.json entry 'dclass=narrow'" in text and '"num_warps": 8' in text


def test_never_repeats_discards_or_failures_from_the_same_best_but_retries_interrupted(tmp_path):
    space = {"num_warps": [2, 4, 8]}
    h = Harness(tmp_path, {"*": {"num_warps": 4}}, space=space)
    p1, _, _ = h.propose(status="fail_bench")
    p2, _, _ = h.propose(status="fail_correctness")
    assert {p1.details["point"]["num_warps"], p2.details["point"]["num_warps"]} == {8, 2}
    p3, _, _ = h.propose()
    assert p3.details.get("exhausted") is True
    h.history[0]["status"] = "interrupted"  # never evaluated: offered again on resume
    p4, _, _ = h.propose()
    assert p4.ok and p4.details["point"] == p1.details["point"]


def test_after_a_keep_the_new_best_is_the_base_momentum_first_and_old_points_last(tmp_path):
    space = {"num_warps": [1, 2, 4, 8], "num_stages": [1, 2]}
    h = Harness(tmp_path, {"*": {"num_warps": 2, "num_stages": 1}}, space=space)
    p, _, written = h.propose()
    assert p.details["changed"] == {"num_warps": [2, 4]}
    h.keep_last(written, "c1" * 20)
    p, plan, written = h.propose()
    assert p.details["changed"] == {"num_warps": [4, 8]}  # keep going the way that worked
    assert p.details["base"] == "c1" * 20 and "to keep more loads in flight" in plan.hypothesis
    got, last = h.until_exhausted()
    points = [p.details["point"] for p in [p] + [g[0] for g in got]]
    old_best = {"num_warps": 2, "num_stages": 1}
    assert old_best in points and points.index(old_best) == len(points) - 1  # the known-worse point last
    assert got[-1][0].details["retry"] is True and got[0][0].details["retry"] is False
    assert len(points) == space_size(space) - 1 and last.details["exhausted"]


def test_per_class_the_latest_keeps_class_goes_on_first_then_the_classes_take_turns(tmp_path):
    h = Harness(tmp_path, START, per_class=True)
    h.propose()
    p, plan, written = h.propose()
    assert plan.target_class == "dclass=wide" and p.details["changed"] == {"num_warps": [2, 4]}
    h.keep_last(written, "c1" * 20)
    p, plan, _ = h.propose()
    assert plan.target_class == "dclass=wide" and p.details["changed"] == {"num_warps": [4, 8]}
    p, plan, _ = h.propose()
    assert plan.target_class == "dclass=narrow" and p.details["base"] == "c1" * 20
    assert p.details["changed"] == {"num_warps": [2, 1]}  # 2→4 was tried from the older best: later


def test_pairs_built_on_a_step_that_got_slower_or_failed_go_last(tmp_path):
    space = {"num_warps": [2, 4, 8], "ROWS_PER_PROG": [1, 2, 4]}
    h = Harness(tmp_path, {"*": {"num_warps": 4, "ROWS_PER_PROG": 2}}, space=space)
    outcomes = {"num_warps": {8: "regression", 2: "tie"}, "ROWS_PER_PROG": {4: "fail_bench", 1: "tie"}}
    for _ in range(4):
        p, _, _ = h.propose()
        ((param, (_, new)),) = p.details["changed"].items()
        h.history[-1]["status"] = outcomes[param][new]
    pairs = [h.propose()[0].details["changed"] for _ in range(4)]
    # no bad half, one bad half each (prior order: mixed directions, warps up first), both bad
    assert pairs == [
        {"num_warps": [4, 2], "ROWS_PER_PROG": [2, 1]},
        {"num_warps": [4, 8], "ROWS_PER_PROG": [2, 1]},
        {"num_warps": [4, 2], "ROWS_PER_PROG": [2, 4]},
        {"num_warps": [4, 8], "ROWS_PER_PROG": [2, 4]},
    ]


def test_a_global_change_that_splits_the_classes_comes_back_for_the_class_it_helped(tmp_path):
    h = Harness(tmp_path, START)
    p1, _, _ = h.propose(status="split")
    h.history[-1]["classes"] = {
        "dclass=narrow": {"verdict": "regressed", "delta_pct": 7.2},
        "dclass=wide": {"verdict": "improved", "delta_pct": -7.0},
    }
    p2, plan, written = h.propose()
    assert p1.details["changed"] == p2.details["changed"] == {"num_warps": [2, 4]}
    assert plan.target_class == "dclass=wide" and p2.details["move"] == "split"
    assert written == {**START, "dclass=wide": {"num_warps": 4}}
    assert plan.hypothesis == (
        "num_warps 2→4 to keep more loads in flight on dclass=wide only: v1's change for "
        "every class made dclass=wide -7.0% but dclass=narrow +7.2%; dclass=wide takes "
        "its own value (the split rule)"
    )
    p3, plan, _ = h.propose()  # once tried, the global search goes on
    assert plan.scope == "global" and p3.details["changed"] == {"num_warps": [2, 1]}
    h.base = "c1" * 20  # a split from an older best is history
    p4, plan, _ = h.propose()
    assert plan.scope == "global" and p4.details["move"] == "step"


def test_seed_decides_the_exploration_order_deterministically(tmp_path):
    space = {"num_warps": [1, 2, 4, 8, 16], "BLOCK_D": [64, 128, 256, 512, 0], "num_stages": [1, 2, 3]}
    start = {"*": {"num_warps": 1, "BLOCK_D": 64, "num_stages": 1}}

    def sequence(seed: int, sub: str) -> list[str]:
        (tmp_path / sub).mkdir()
        h = Harness(tmp_path / sub, start, space=space, seed=seed)
        return [json.dumps(h.propose()[0].details["point"], sort_keys=True) for _ in range(40)]

    a, b, c = sequence(1, "a"), sequence(1, "b"), sequence(2, "c")
    assert a == b
    n_near = 3 + 3  # from a corner: one step up per param, then one pair per two params
    assert a[:n_near] == c[:n_near] and a != c


def test_bad_params_file_is_one_clear_line_naming_file_and_key(tmp_path):
    h = Harness(tmp_path, START)
    cases = [
        (None, "params.json: not found"),
        ("{nope", "params.json: not valid JSON"),
        ("[1, 2]", 'params.json: must be a JSON object with a "*" entry'),
        ('{"*": {"num_warps": 2, "BLOCK_D": 64}}', 'params.json: "*" has no value for num_stages'),
        (
            '{"*": {"num_warps": 2, "BLOCK_D": 64, "num_stages": 1}, "dclass=wide": 3}',
            "params.json: entry 'dclass=wide' must be an object",
        ),
        ('{"*": {"num_warps": [2], "BLOCK_D": 64, "num_stages": 1}}', "params.json: '*'.num_warps must be"),
    ]
    for text, message in cases:
        path = h.tree / "params.json"
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)
        ctx = h.ctx()
        p = h.proposer.propose(ctx)
        assert not p.ok and p.reason.startswith(message) and "\n" not in p.reason, (text, p.reason)
        assert p.details["fatal"] is True and not p.details.get("exhausted")
        assert not ctx.plan_path.exists()


def test_no_repair_and_a_deterministic_minimal_file(tmp_path):
    h = Harness(tmp_path, START)
    (h.tree / "params.json").write_text(h.best_text)
    (h.tree / "params.json").chmod(0o644)
    p = h.proposer.propose(h.ctx(repair=1))
    assert not p.ok and "does not repair" in p.reason
    assert (h.tree / "params.json").read_text() == h.best_text
    p, _, _ = h.propose()
    text = (h.tree / "params.json").read_text()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    diff = [(a, b) for a, b in itertools.zip_longest(h.best_text.splitlines(), text.splitlines()) if a != b]
    assert diff == [('    "num_warps": 2', '    "num_warps": 4')]
    assert (h.tree / "params.json").stat().st_mode & 0o777 == 0o644


def test_a_tune_proposer_without_params_or_space_is_refused_up_front():
    from kopt_supervisor.engine import BadInput

    for cfg in (TuneConfig(space=SPACE), TuneConfig(params="params.json")):
        with pytest.raises(BadInput, match=r"\[propose.tune\] needs params"):
            TuneProposer(cfg)


def test_params_outside_the_tree_is_refused(tmp_path):
    h = Harness(tmp_path, START, name="../params.json")
    (tmp_path / "params.json").write_text(h.best_text)
    p = h.proposer.propose(h.ctx())
    assert not p.ok and "outside the repository" in p.reason


@pytest.mark.parametrize(
    "current, values, expected",
    [
        (3, [1, 2, 4, 8], [4, 2]),
        (100, [1, 2, 4, 8], [8]),
        (0, [1, 2, 4, 8], [1]),
        (32, [64, 128, 256, 0], [64]),
        (1000, [64, 128, 256, 0], [0, 256]),
        (200, [64, 128, 256, 0], [256, 128]),
        ("x", ["a", "b"], ["a", "b"]),
    ],
)
def test_an_off_list_value_steps_to_its_place_in_the_listed_order(current, values, expected):
    from kopt_supervisor.engine.propose.tune_space import steps

    assert [v for v, _ in steps(current, values)] == expected


def make_tune_run(tmp_path, monkeypatch, space: str = ""):
    """A git repo of the fake tune target and its `kopt init`ed workspace `tn`."""
    import shutil
    import sys

    from kopt_supervisor.engine.workspace import Workspace
    from kopt_supervisor.kopt_tui.cli import main as kopt
    from tests.conftest import FAKE, git

    monkeypatch.delenv("KOPT_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KOPT_ROOT", raising=False)
    repo = tmp_path / "target"
    repo.mkdir()
    shutil.copy(FAKE / "tune_bench.py", repo / "tune_bench.py")
    shutil.copy(FAKE / "tune_params.json", repo / "params.json")
    toml = (FAKE / "tune_kopt.toml").read_text().replace('"python tune_bench.py"', f'"{sys.executable} tune_bench.py"')
    if space:
        toml = toml.replace("space = {num_warps = [1, 2, 4, 8], ROWS_PER_PROG = [1, 2, 4]}", f"space = {space}")
    (repo / "kopt.toml").write_text(toml)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tune target")
    root = tmp_path / "ws"
    assert kopt(["--root", str(root), "init", "--repo", str(repo), "--tag", "tn"]) == 0
    return repo, Workspace(root, "tn")


def test_the_loop_with_the_tune_proposer_splits_a_global_change_into_class_keeps(tmp_path, monkeypatch):
    """The real loop on a fake target whose classes want different params: a global change
    that splits the classes comes back as a class-targeted keep in that class's entry."""
    from kopt_supervisor.engine.daemon import run_engine
    from tests.conftest import git

    repo, ws = make_tune_run(tmp_path, monkeypatch)

    assert run_engine(ws, max_iters=4) == 0

    with ws.open_store(readonly=True) as s:
        assert [it.status for it in s.iterations()][0] == "baseline"
    records = [json.loads(ws.memory_path(v).read_text()) for v in range(1, 5)]
    tried = set()
    for r in records:
        d = r["proposal"]
        assert r["target_class"] == d["class"] and d["base"] == r["best_commit_before"]
        assert r["hypothesis"].startswith(next(iter(d["changed"])))
        key = json.dumps([d["class"], d["base"], d["point"]], sort_keys=True)
        assert key not in tried
        tried.add(key)
    # v1: warps 2→4 for every class: wide (best at 8 warps) faster, narrow (best at 1) slower
    v1, v2, v3, v4 = records
    assert v1["status"] == "split" and v1["scope"] == "global" and v1["proposal"]["changed"] == {"num_warps": [2, 4]}
    assert v1["classes"]["dclass=wide"]["verdict"] == "improved"
    # v2: the same change for the class it helped, in its own entry: kept and committed
    assert v2["status"] == "keep" and v2["target_class"] == "dclass=wide" and v2["proposal"]["move"] == "split"
    assert "split rule" in v2["hypothesis"] and v2["proposal"]["changed"] == {"num_warps": [2, 4]}
    assert json.loads(git(repo, "show", f"{v2['commit']}:params.json")) == {
        "*": {"ROWS_PER_PROG": 2, "num_warps": 2},
        "dclass=wide": {"num_warps": 4},
    }
    # v3: the global search goes on from the new best, the old global point is not retried;
    # v4: whatever narrow gained from v3's global change is kept in narrow's entry
    assert v3["scope"] == "global" and v3["proposal"]["point"] != v1["proposal"]["point"]
    assert v3["classes"]["dclass=narrow"]["verdict"] == "improved"
    assert v4["status"] == "keep" and v4["target_class"] == "dclass=narrow" and v4["proposal"]["move"] == "split"
    committed = json.loads(git(repo, "show", f"{v4['commit']}:params.json"))
    assert committed["dclass=wide"] == {"num_warps": 4} and committed["dclass=narrow"] == {"num_warps": 1}
    assert git(repo, "rev-parse", "kopt/tn") == v4["commit"]


def test_a_params_file_the_proposer_cannot_read_stops_the_run_with_its_reason(tmp_path, monkeypatch):
    """No retry fixes a broken params file: one failed iteration, then a stop naming the key."""
    from kopt_supervisor.engine.daemon import run_engine

    _, ws = make_tune_run(tmp_path, monkeypatch, space="{num_warps = [1, 2, 4, 8], num_stages = [1, 2]}")
    assert run_engine(ws, max_iters=4) == 1  # a run whose proposer cannot go on failed
    with ws.open_store(readonly=True) as s:
        statuses = [it.status for it in s.iterations()]
        reason = s.get("stop_reason")
    assert statuses == ["baseline", "fail_propose"]
    assert reason.startswith('the proposer cannot go on: params.json: "*" has no value for num_stages'), reason


def test_a_declared_order_goes_before_the_built_in_prior(tmp_path):
    """[propose.tune].order: the engineer's prior (the tile first) wins over warps-first."""
    h = Harness(tmp_path, START, order=["BLOCK_D", "num_stages"])
    got, _ = h.until_exhausted()
    firsts = [next(iter(p.details["changed"])) for p, _, _ in got if p.details["move"] == "step"]
    assert firsts == ["BLOCK_D", "BLOCK_D", "num_stages", "num_warps", "num_warps"]


def test_an_order_naming_a_param_outside_the_space_is_refused():
    import pytest

    from kopt_supervisor.engine import BadInput
    from kopt_supervisor.engine.config.toml_io import loads

    text = (
        '[target]\nbench = "b"\nmetric = "us"\n[propose]\nkind = "tune"\n[propose.tune]\nparams = "p.json"\n'
        'space = {num_warps = [1, 2]}\norder = ["BLOCK_D"]\n'
    )
    with pytest.raises(BadInput, match=r"\[propose.tune\].order.*'BLOCK_D'"):
        loads(text)


def test_a_line_already_measured_goes_after_the_new_ones(tmp_path):
    space = {"num_warps": [1, 2, 4, 8], "ROWS_PER_PROG": [1, 2, 4]}
    h = Harness(tmp_path, {"*": {"num_warps": 2, "ROWS_PER_PROG": 1}}, space=space)
    p, _, written = h.propose()
    assert p.details["changed"] == {"num_warps": [2, 4]}
    h.keep_last(written, "c1" * 20)
    p, _, _ = h.propose()  # momentum: 4→8, slower
    assert p.details["changed"] == {"num_warps": [4, 8]}
    p, _, written = h.propose()  # 4→2 is the way the keep came from: rows first
    assert p.details["changed"] == {"ROWS_PER_PROG": [1, 2]}
    h.keep_last(written, "c2" * 20)
    p, _, _ = h.propose()
    assert p.details["changed"] == {"ROWS_PER_PROG": [2, 4]}
    # from (4, 2) every line is measured: 4→8 was slower at rows 1, 4→2 and 2→1 are where the
    # keeps came from. They are tried again (other params moved since), before any pair.
    p, _, _ = h.propose()
    assert p.details["changed"] == {"num_warps": [4, 8]} and p.details["move"] == "step"


def test_shared_first_steps_every_class_at_once_until_a_class_wants_its_own(tmp_path):
    from dataclasses import replace as dc_replace

    h = Harness(tmp_path, START, per_class=True)
    h.proposer = TuneProposer(dc_replace(h.proposer.cfg, shared_first=True))
    p1, plan, written = h.propose(status="split")
    assert plan.target_class is None and plan.scope == "global" and p1.details["entry"] == "*"
    assert p1.details["changed"] == {"num_warps": [2, 4]} and set(written) == {"*"}
    h.history[-1]["classes"] = {
        "dclass=narrow": {"verdict": "regressed", "delta_pct": 3.0},
        "dclass=wide": {"verdict": "improved", "delta_pct": -9.0},
    }
    p2, plan, written = h.propose()  # the split rule: wide takes 4 on its own
    assert plan.target_class == "dclass=wide" and p2.details["move"] == "split"
    h.keep_last(written, "c1" * 20)
    p3, plan, _ = h.propose()  # warps now differ per class: shared steps leave them alone
    assert plan.target_class is None and p3.details["changed"] == {"BLOCK_D": [128, 0]}
    h.propose(status="tie")
    h.propose(status="tie")
    h.propose(status="tie")  # BLOCK_D down and num_stages up: every shared line measured
    p, plan, _ = h.propose()
    assert plan.target_class is not None
    # narrow's 2→4 was measured in the shared step (3% slower for narrow): its other way first
    assert (plan.target_class, p.details["changed"]) != ("dclass=narrow", {"num_warps": [2, 4]})


NARROW_ALIKE = {"dclass=narrow": {"BLOCK_D": [128, 0]}}
"""Every narrow row fits in 128: BLOCK_D 128 and 0 (the whole row) are one tile there."""


def test_alike_values_are_one_point_for_their_class(tmp_path):
    """[propose.tune].alike: the narrow class is never offered a change between 128 and 0 and
    covers its space with one point fewer per alike value; the wide class keeps every point."""
    h = Harness(tmp_path, START, per_class=True, alike=NARROW_ALIKE)
    got, last = h.until_exhausted()
    narrow = [p for p, _, _ in got if p.details["class"] == "dclass=narrow"]
    wide = [p for p, _, _ in got if p.details["class"] == "dclass=wide"]
    assert len(wide) == space_size(SPACE) - 1
    assert len(narrow) == space_size({**SPACE, "BLOCK_D": [64, 128]}) - 1
    assert not any(p.details["point"]["BLOCK_D"] == 0 for p in narrow)
    assert any(p.details["point"]["BLOCK_D"] == 0 for p in wide)
    assert last.details["exhausted"] is True


def test_a_class_holding_the_second_alike_value_steps_from_there(tmp_path):
    """The file holds BLOCK_D 0 for narrow (alike 128): no step to 128, the step down names
    the value the file holds, and nothing leaps past 128 as if it had been measured."""
    start = {"*": dict(START["*"]), "dclass=narrow": {"BLOCK_D": 0}}
    h = Harness(tmp_path, start, per_class=True, alike=NARROW_ALIKE, order=["BLOCK_D"])
    h.classes = ["dclass=narrow"]
    got, _ = h.until_exhausted()
    changes = [p.details["changed"].get("BLOCK_D") for p, _, _ in got]
    assert [0, 128] not in changes
    first, plan, written = got[0]
    assert first.details["changed"] == {"BLOCK_D": [0, 64]}
    assert plan.hypothesis.startswith("BLOCK_D 0→64") and written["dclass=narrow"] == {"BLOCK_D": 64}
    assert first.details["from"]["BLOCK_D"] == 0


def test_a_point_tried_under_an_alike_value_counts_as_tried(tmp_path):
    """A history written before [propose.tune].alike (narrow tried BLOCK_D 0 from this best):
    its alike twin, 128 with the same other values, is not proposed again."""
    h = Harness(tmp_path, {"*": dict(START["*"], BLOCK_D=64)}, per_class=True, order=["BLOCK_D"])
    h.classes = ["dclass=narrow"]
    p, _, _ = h.propose(status="tie")
    assert p.details["changed"] == {"BLOCK_D": [64, 128]}
    h.history[-1]["proposal"]["point"] = dict(p.details["point"], BLOCK_D=0)  # as if it had tried 0
    h.history[-1]["proposal"]["changed"] = {"BLOCK_D": [64, 0]}
    h.proposer = TuneProposer(
        TuneConfig(params=h.name, space=SPACE, per_class=True, order=["BLOCK_D"], alike=NARROW_ALIKE)
    )
    got, _ = h.until_exhausted()
    assert not any(
        q.details["point"]["BLOCK_D"] in (128, 0)
        and {k: v for k, v in q.details["point"].items() if k != "BLOCK_D"}
        == {k: v for k, v in p.details["point"].items() if k != "BLOCK_D"}
        for q, _, _ in got
    )


def test_the_global_entry_treats_values_as_alike_only_where_every_class_does(tmp_path):
    h = Harness(tmp_path, {"*": dict(START["*"], BLOCK_D=64)}, order=["BLOCK_D"], alike=NARROW_ALIKE)
    got, _ = h.until_exhausted()
    assert any(p.details["point"]["BLOCK_D"] == 0 for p, _, _ in got)  # the wide class tells 0 from 128
    both = {c: {"BLOCK_D": [128, 0]} for c in CLASSES}
    (tmp_path / "both").mkdir()
    h2 = Harness(tmp_path / "both", {"*": dict(START["*"], BLOCK_D=64)}, order=["BLOCK_D"], alike=both)
    got2, _ = h2.until_exhausted()
    assert not any(p.details["point"]["BLOCK_D"] == 0 for p, _, _ in got2)
    assert len(got2) == space_size({**SPACE, "BLOCK_D": [64, 128]}) - 1


@pytest.mark.parametrize(
    "alike,match",
    [
        ('{"dclass=narrow" = {BLOCK_D = [128, 0]}}', None),
        ('{"dclass=narrow" = {BLOCK_M = [128, 0]}}', r"alike.'dclass=narrow'.BLOCK_M names 'BLOCK_M'"),
        ('{"dclass=narrow" = {BLOCK_D = [128, 256]}}', r"alike.'dclass=narrow'.BLOCK_D lists 256"),
        ('{"dclass=narrow" = {BLOCK_D = [128]}}', r"at least two values"),
    ],
)
def test_alike_is_checked_against_the_space(alike, match):
    from kopt_supervisor.engine import BadInput
    from kopt_supervisor.engine.config.toml_io import loads

    text = (
        '[target]\nbench = "b"\nmetric = "us"\n[propose]\nkind = "tune"\n[propose.tune]\nparams = "p.json"\n'
        f"space = {{BLOCK_D = [64, 128, 0]}}\nalike = {alike}\n"
    )
    if match is None:
        assert loads(text).propose.tune.alike == {"dclass=narrow": {"BLOCK_D": [128, 0]}}
    else:
        with pytest.raises(BadInput, match=match):
            loads(text)


def test_no_split_follow_up_for_a_class_where_the_change_is_no_change(tmp_path):
    """A global BLOCK_D 128→0 that read faster for narrow (where 128 and 0 are one tile: noise)
    and slower for wide is not handed to narrow as its own change."""
    from dataclasses import replace as dc_replace

    h = Harness(tmp_path, START, per_class=True, alike=NARROW_ALIKE, order=["BLOCK_D"])
    h.proposer = TuneProposer(dc_replace(h.proposer.cfg, shared_first=True))
    p1, _, _ = h.propose(status="split")
    assert p1.details["class"] is None and p1.details["changed"] == {"BLOCK_D": [128, 0]}
    h.history[-1]["classes"] = {
        "dclass=narrow": {"verdict": "improved", "delta_pct": -1.5},
        "dclass=wide": {"verdict": "regressed", "delta_pct": 4.0},
    }
    p2, plan, _ = h.propose()
    assert p2.details["move"] != "split"
    assert not (p2.details["class"] == "dclass=narrow" and p2.details["changed"].get("BLOCK_D") == [128, 0])


def test_init_refuses_a_params_file_the_repository_does_not_track(tmp_path, monkeypatch, capsys):
    """A new user's `params = "params_missing.json"` was accepted at init; the run then failed at
    its first iteration, after the baseline. kopt init refuses it in one line (exit 2), and
    takes the file once it is committed."""
    from kopt_supervisor.kopt_tui.cli import main as kopt
    from tests.conftest import git

    repo, _ = make_tune_run(tmp_path, monkeypatch)
    (repo / "kopt.toml").write_text((repo / "kopt.toml").read_text().replace('"params.json"', '"tuned.json"'))
    git(repo, "commit", "-qam", "params renamed in the config only")
    root = str(tmp_path / "ws")
    capsys.readouterr()
    assert kopt(["--root", root, "init", "--repo", str(repo), "--tag", "missing"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "[propose.tune].params = 'tuned.json': no such file tracked in" in err, err
    (repo / "tuned.json").write_text((repo / "params.json").read_text())
    git(repo, "add", "tuned.json")
    git(repo, "commit", "-qm", "the params file")
    assert kopt(["--root", root, "init", "--repo", str(repo), "--tag", "found"]) == 0
