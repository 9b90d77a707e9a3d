"""A kept tree slow as BEST, end to end (docs/security.md, "A kept tree slow as BEST").

A tree kept once runs as BEST in every later decision. Here the kept tree is an honest gain
(hostile.HONEST) with dormant code that does BEST's old work twice more per call wherever it
can tell that it runs as BEST; the next candidate, `comment`, is BEST's code with a comment
added. Until the keep's confirmation ran copies of the two trees that no process can tell
apart (engine/loop/look_files.py `BlindTrees`), that comment was kept at −78% with the diff
scan on, its confirmation in fresh servers and the OS's accounting agreeing (2026-12-02).

The decision is still fooled: best's process really does more work there. The confirmation,
in the copies, sees no gain and refutes the claim; the review that follows is rejected by the
policy (`review_default = "reject"`)."""

from __future__ import annotations

import pytest

from tests.security.harness import KEPT, NEEDS_BWRAP
from tests.security.test_hostile_wave3_e2e import SCAN_OFF, honest_kept, run_cases


@pytest.mark.slow
@NEEDS_BWRAP
@pytest.mark.parametrize(
    ("dormant", "toml"),
    [("as-best", ""), ("as-best-anywhere", SCAN_OFF)],
    ids=["script-folder-scan-on", "every-name-scan-off"],
)
def test_a_kept_tree_slow_in_its_role_buys_the_next_candidate_no_keep(
    tmp_path, monkeypatch: pytest.MonkeyPatch, dormant: str, toml: str
) -> None:
    """`as-best` tells from its script's folder, which no scan rule reads; `as-best-anywhere`
    from every name its process can see (its folder, argv, sys.path, the environment, its open
    files, its callers' strings: the look's request), with the scan allowed away."""
    rows = run_cases(tmp_path, monkeypatch, [dormant, "comment"], toml)
    honest_kept(rows[dormant])  # as a candidate it is the honest gain, and is kept
    comment = rows["comment"]
    assert comment.status not in KEPT and comment.commit is None, (comment.status, comment.reason)
    conf = comment.record["confirmation"]
    # the decision claimed the gain best's dormant code made; the copies showed none of it
    assert conf["path"] == "served" and conf["outcome"] == "refuted", conf
    assert "confirmation_disagrees" in comment.flags, comment.flags
    assert "the keep's confirmation in fresh servers is refuted" in comment.reason, comment.reason


def test_the_decisions_servers_end_before_the_confirmations_first_look() -> None:
    """The decision's servers run in best/ and cand/ and so know their roles: left alive, they
    could tell the confirmation's copies apart for them over any channel between processes. They
    end before the confirmation asks anything (Evidence.served_confirmation)."""
    from types import SimpleNamespace

    from kopt_supervisor.engine.config import DecideConfig
    from kopt_supervisor.engine.decide.estimate import Verdict
    from kopt_supervisor.engine.loop.evidence import Evidence
    from tests.decide.test_confirmation import cls, spread
    from tests.lanes.test_carry_review import FeedLooks, Spare

    seen: list[str] = []

    class Decision:
        def release(self) -> None:
            seen.append("decision's servers released")

    class Looks(FeedLooks):
        def looks(self, *args, **kw):  # type: ignore[no-untyped-def]
            seen.append("confirmation's looks")
            return super().looks(*args, **kw)

    claim = Verdict("keep", "narrow faster", (cls("narrow", 0.6, "improved"),))
    ctx = SimpleNamespace(cfg=SimpleNamespace(decide=DecideConfig()))
    evidence = Evidence(ctx, Looks(spread("narrow/cfg", "narrow", 0.6, 0.002)))  # type: ignore[arg-type]
    lane = SimpleNamespace(index=0, vendor="nvidia", measurer=Decision(), fresh=None)
    it = SimpleNamespace(version=2, record={})
    conf = evidence.served_confirmation(it, lane, claim, fresh=Spare())  # type: ignore[arg-type]
    assert conf.outcome == "confirmed" and seen == ["decision's servers released", "confirmation's looks"], seen
