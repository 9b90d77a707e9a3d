"""The pure rules of kopt's MCP judge: where a proposal came from, and the moment a submit may
be sent (variations of what the end-to-end tests drive once)."""

from __future__ import annotations

import pytest

from kopt_supervisor.engine import mcp as rules
from kopt_supervisor.engine.api import mcp_source, proposal_origin
from kopt_supervisor.engine.mcp import Refused, RunMoment, parse_version, submit_problem


@pytest.mark.parametrize(
    ("proposal", "via", "agent"),
    [
        ({"submitted_by": mcp_source("claude-code", "2.1.3")}, "mcp", "claude-code 2.1.3"),
        ({"submitted_by": mcp_source("\x1b[31mevil\nname", None)}, "mcp", "31mevilname"),
        ({"submitted_by": mcp_source(None, None)}, "mcp", "unnamed client"),
        ({"submitted_by": "cli:123"}, "cli", ""),
        ({"submitted_by": "tui:9"}, "tui", ""),
        ({"command": "claude -p", "agent": {"agent": "claude-code"}}, "command", "claude-code"),
        ({"command": "python p.py", "agent": {"agent": "command"}}, "command", ""),
        ({"proposer": "tune"}, "tune", ""),
        ("not a mapping", "unknown", ""),
    ],
)
def test_proposal_origin(proposal, via, agent):
    o = proposal_origin(proposal)
    assert (o.via, o.agent) == (via, agent)


def moment(**kw) -> RunMoment:
    base = {
        "tag": "t",
        "alive": True,
        "proposer": "manual",
        "lanes": 1,
        "state": "running",
        "version": 3,
        "status": "running",
        "phase": "propose",
    }
    return RunMoment(**{**base, **kw})


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({}, None),
        ({"alive": False, "stop_reason": "done"}, "no engine runs run t (done)"),
        ({"proposer": "command"}, "uses the 'command' proposer"),
        ({"lanes": 2}, None),  # lanes are served: each session's own
        ({"lanes": 2, "lane": 1, "phase": "measure"}, "lane 1: v3 is being evaluated (measure)"),
        ({"lanes": 2, "lane": 1, "pending_submit": "cli:1"}, "lane 1: a submit is already waiting"),
        ({"lanes": 2, "lane": 1, "waiting": False}, "lane 1: the engine is about to wait for v3's submit"),
        ({"waiting": False}, "the engine is about to wait for v3's submit"),
        ({"phase": "measure"}, "v3 is being evaluated (measure)"),
        ({"status": "borderline", "phase": "review"}, "awaits the engineer's review"),
        ({"status": "keep", "phase": "done"}, "between iterations"),
        ({"pending_submit": "cli:1"}, "already waiting for the engine (from cli:1)"),
    ],
)
def test_when_a_submit_may_be_sent(changes, says):
    problem = submit_problem(moment(**changes))
    assert (problem is None) if says is None else (says in str(problem)), problem


@pytest.mark.parametrize("bad", ["", "v", "v-1", "1e3", "../1", " v1/2", "٣", 10**8, -1, 1.5, None])
def test_versions_that_are_refused(bad):
    with pytest.raises(Refused):
        parse_version(bad)


def test_versions_read_as_the_cli_reads_them():
    assert [parse_version(x) for x in (3, "3", "v3", " V12 ")] == [3, 3, 3, 12]


def test_a_review_the_submit_s_looks_missed_is_still_said():
    """The engineer may answer between two looks of a waiting submit (a loaded machine): the
    agent must still learn that a person, not the statistics, decided its iteration."""
    accepted = {"decided_by": "engineer", "status": "accepted"}
    said = rules.review_missed("t", 3, False, accepted)
    assert said is not None and "v3" in said and "engineer's review" in said and "accepted" in said
    assert rules.review_missed("t", 3, True, accepted) is None
    assert rules.review_missed("t", 3, False, {"decided_by": "stats", "status": "keep"}) is None
