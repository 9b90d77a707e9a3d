"""Cost, tokens and session ids from each CLI's machine-readable output, on samples in the
formats their documentation gives (docs/agents.md lists the sources), and the hostile
cases: values that are not numbers, a run killed before its result, forged early results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kopt_supervisor.engine.propose import (
    budget_exhausted,
    cap_file,
    parse_aider,
    parse_claude,
    parse_codex,
    parse_gemini,
    parse_generic,
    parse_opencode,
    read_lines,
)
from kopt_supervisor.engine.records import AgentRun, spent

from .helpers import cfg_with

# `claude -p --output-format json` (code.claude.com/docs/en/headless; field list of the Agent SDK result)
CLAUDE_JSON = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "duration_ms": 3952,
    "duration_api_ms": 12932,
    "num_turns": 1,
    "result": "final text response",
    "session_id": "3f2a1b4c-0000-4000-8000-00000000abcd",
    "total_cost_usd": 0.10457895,
    "usage": {
        "input_tokens": 2,
        "output_tokens": 9,
        "cache_creation_input_tokens": 7924,
        "cache_read_input_tokens": 13368,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
    },
    "permission_denials": [],
    "uuid": "3eb1e1b4-0000-4000-8000-000000000000",
}
# `codex exec --json` (openai/codex docs/exec.md, sample output)
CODEX_JSONL = """\
{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Searching for README files**"}}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"README.md\\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Yep — there’s a README.md in the repository root."}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
"""


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def test_claude_json_result() -> None:
    run = parse_claude([json.dumps(CLAUDE_JSON)])
    assert run.cost_usd == pytest.approx(0.10457895)
    assert run.input_tokens == 2 + 7924 + 13368 and run.output_tokens == 9
    assert (run.cache_read_tokens, run.cache_write_tokens) == (13368, 7924)
    assert run.session_id == "3f2a1b4c-0000-4000-8000-00000000abcd" and run.turns == 1 and run.is_error is False


def test_claude_pretty_printed_json_and_the_old_cost_field() -> None:
    old = {**CLAUDE_JSON, "cost_usd": 0.5}
    del old["total_cost_usd"]
    run = parse_claude(lines(json.dumps(old, indent=2)))
    assert run.cost_usd == 0.5 and run.output_tokens == 9


def test_claude_stream_killed_before_its_result_counts_each_message_once() -> None:
    init = {"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-opus-4-5"}
    msg = {
        "type": "assistant",
        "message": {"id": "msg_1", "usage": {"input_tokens": 3, "cache_read_input_tokens": 100, "output_tokens": 5}},
    }
    msg_again = {
        "type": "assistant",
        "message": {"id": "msg_1", "usage": {"input_tokens": 3, "cache_read_input_tokens": 100, "output_tokens": 40}},
    }
    msg2 = {"type": "assistant", "message": {"id": "msg_2", "usage": {"input_tokens": 7, "output_tokens": 2}}}
    run = parse_claude([json.dumps(x) for x in (init, msg, msg_again, msg2)])
    assert run.cost_usd is None and run.session_id == "s-1" and run.model == "claude-opus-4-5"
    assert run.input_tokens == 103 + 7 and run.output_tokens == 40 + 2
    assert any("did not finish" in n for n in run.notes)


def test_claude_takes_the_last_result_not_a_forged_early_one() -> None:
    forged = {**CLAUDE_JSON, "total_cost_usd": 0.0, "usage": {"input_tokens": 0, "output_tokens": 0}}
    run = parse_claude([json.dumps(forged), "noise that is not JSON {", json.dumps(CLAUDE_JSON)])
    assert run.cost_usd == pytest.approx(0.10457895) and run.output_tokens == 9


@pytest.mark.parametrize("bad", [-1.0, "0.5", True, None, float("nan"), float("inf"), [1]])
def test_claude_values_that_are_not_finite_non_negative_numbers_are_dropped(bad: object) -> None:
    text = json.dumps({**CLAUDE_JSON, "total_cost_usd": bad, "usage": {**CLAUDE_JSON["usage"], "output_tokens": bad}})
    run = parse_claude([text])
    assert run.cost_usd is None and run.output_tokens is None
    if bad is not None:
        assert any("ignored" in n for n in run.notes)


def test_claude_error_result_is_noted() -> None:
    run = parse_claude([json.dumps({**CLAUDE_JSON, "subtype": "error_max_turns", "is_error": True})])
    assert run.is_error and any("error_max_turns" in n for n in run.notes)


def test_codex_sample_from_its_docs() -> None:
    run = parse_codex(lines(CODEX_JSONL))
    assert run.session_id == "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert (run.input_tokens, run.cache_read_tokens, run.output_tokens) == (24763, 24448, 122)
    assert run.cost_usd is None and "codex reports no cost" in run.notes and run.turns == 1


def test_codex_adds_up_turns_and_notes_a_failed_one() -> None:
    text = (
        CODEX_JSONL + '{"type":"turn.failed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":1},'
        '"error":{"message":"stream disconnected"}}\n'
    )
    run = parse_codex(lines(text))
    assert run.input_tokens == 24773 and run.output_tokens == 123 and run.is_error and run.turns == 2


def test_codex_without_events_knows_nothing() -> None:
    run = parse_codex(["Reading prompt from stdin...\n"])
    assert run.input_tokens is None and run.session_id is None


def test_gemini_stream_json() -> None:
    events = [
        {"type": "init", "timestamp": "t", "session_id": "g-s", "model": "gemini-2.5-pro"},
        {"type": "message", "timestamp": "t", "role": "assistant", "content": "hi", "delta": True},
        {
            "type": "result",
            "timestamp": "t",
            "status": "success",
            "stats": {
                "total_tokens": 130,
                "input_tokens": 100,
                "output_tokens": 30,
                "cached": 60,
                "input": 40,
                "duration_ms": 10,
                "tool_calls": 0,
            },
        },
    ]
    run = parse_gemini([json.dumps(e) for e in events])
    assert (run.session_id, run.model, run.input_tokens, run.output_tokens, run.cache_read_tokens) == (
        "g-s",
        "gemini-2.5-pro",
        100,
        30,
        60,
    )
    assert run.cost_usd is None and run.is_error is False


def test_gemini_json_output_counts_thoughts_as_output() -> None:
    obj = {
        "session_id": "g-2",
        "response": "ok",
        "stats": {
            "models": {
                "gemini-2.5-pro": {
                    "api": {"totalRequests": 2},
                    "tokens": {
                        "prompt": 24939,
                        "candidates": 20,
                        "total": 25113,
                        "cached": 21263,
                        "thoughts": 154,
                        "tool": 0,
                    },
                }
            }
        },
    }
    run = parse_gemini(lines(json.dumps(obj, indent=2)))
    assert (run.input_tokens, run.output_tokens, run.cache_read_tokens, run.reasoning_tokens) == (
        24939,
        174,
        21263,
        154,
    )
    assert run.session_id == "g-2" and run.model == "gemini-2.5-pro"


def test_gemini_error_result() -> None:
    run = parse_gemini(
        [
            json.dumps(
                {"type": "result", "timestamp": "t", "status": "error", "error": {"type": "x", "message": "quota"}}
            )
        ]
    )
    assert run.is_error and run.input_tokens is None


@pytest.mark.parametrize(
    "line,sent,recv,hit,write",
    [
        ("Tokens: 999 sent, 12 received.", 999, 12, None, None),
        ("Tokens: 1.2k sent, 3.4k received. Cost: $0.01 message, $0.02 session.", 1200, 3400, None, None),
        ("Tokens: 12k sent, 1.3k cache write, 8.1k cache hit, 219 received.", 12000, 219, 8100, 1300),
        ("Tokens: 1.5M sent, 2k received.", 1_500_000, 2000, None, None),
    ],
)
def test_aider_usage_lines(line: str, sent: int, recv: int, hit: int | None, write: int | None) -> None:
    run = parse_aider([line])
    assert run.input_tokens == sent + (hit or 0) and run.output_tokens == recv
    assert (run.cache_read_tokens, run.cache_write_tokens) == (hit, write)


def test_aider_session_cost_is_the_last_one_and_replies_add_up() -> None:
    text = [
        "Aider v0.86.1\n",
        "Tokens: 2.6k sent, 219 received. Cost: $0.0089 message, $0.0089 session.\n",
        "Applied edit to kernel.py\n",
        "Tokens: 12k sent, 540 received.\n",
        "Cost: $0.03 message, $0.04 session.\n",
    ]
    run = parse_aider(text)
    assert run.cost_usd == 0.04 and run.input_tokens == 14600 and run.output_tokens == 759 and run.turns == 2


def test_aider_model_without_price_has_tokens_and_no_cost() -> None:
    run = parse_aider(["Tokens: 2.6k sent, 219 received.\n"])
    assert run.cost_usd is None and run.input_tokens == 2600 and any("no `Cost:`" in n for n in run.notes)


def test_opencode_step_finish_events_add_up() -> None:
    ev = [
        {"type": "step_start", "timestamp": 1, "sessionID": "ses_1", "part": {"type": "step-start"}},
        {
            "type": "step_finish",
            "timestamp": 2,
            "sessionID": "ses_1",
            "part": {
                "type": "step-finish",
                "cost": 0.01,
                "tokens": {"input": 10, "output": 5, "reasoning": 1, "cache": {"read": 100, "write": 0}},
            },
        },
        {
            "type": "step_finish",
            "timestamp": 3,
            "sessionID": "ses_1",
            "part": {
                "type": "step-finish",
                "cost": 0.02,
                "tokens": {"input": 1, "output": 2, "reasoning": 0, "cache": {"read": 0, "write": 7}},
            },
        },
    ]
    run = parse_opencode([json.dumps(e) for e in ev])
    assert run.session_id == "ses_1" and run.cost_usd == pytest.approx(0.03)
    assert (run.input_tokens, run.output_tokens, run.cache_read_tokens, run.cache_write_tokens) == (118, 8, 100, 7)


def test_opencode_negative_cost_is_dropped_not_subtracted() -> None:
    ev = {"type": "step_finish", "sessionID": "s", "part": {"cost": -5, "tokens": {"input": 1, "output": 1}}}
    run = parse_opencode([json.dumps(ev)])
    assert run.cost_usd is None and any("part.cost" in n for n in run.notes)


def test_generic_reads_the_last_json_line_naming_usage() -> None:
    out = [
        '{"progress": 1}\n',
        '{"cost_usd": 0.2, "usage": {"input_tokens": 5, "output_tokens": 6}, "sessionId": "x"}\n',
    ]
    run = parse_generic(out)
    assert (run.cost_usd, run.input_tokens, run.output_tokens, run.session_id) == (0.2, 5, 6, "x")
    assert parse_generic(["plain text\n"]).cost_usd is None


def test_read_lines_skips_overlong_lines(tmp_path: Path) -> None:
    p = tmp_path / "t.out"
    p.write_bytes(b"short\n" + b"x" * 5000 + b"\n" + b'{"ok": 1}\n')
    assert list(read_lines(p, max_line_bytes=100)) == ["short\n", '{"ok": 1}\n']
    assert list(read_lines(tmp_path / "missing")) == []


def test_cap_file_keeps_head_and_tail(tmp_path: Path) -> None:
    p = tmp_path / "t.out"
    p.write_bytes(b"HEAD" + b"m" * 10000 + b"TAIL")
    size, cut = cap_file(p, 1000)
    data = p.read_bytes()
    assert (size, cut) == (10008, True) and data.startswith(b"HEAD") and data.endswith(b"TAIL")
    assert b"kopt cut 9008 bytes" in data
    assert cap_file(p, 10**6) == (len(data), False)


def _rec(*runs: dict) -> dict:
    return {"proposal": {"agent": runs[0]}, "repairs": [{"agent": r} for r in runs[1:]]}


def test_spent_adds_every_run_masked_ones_too() -> None:
    a = AgentRun(agent="claude-code", cost_usd=1.5, input_tokens=100, output_tokens=10, wall_s=3.0).to_dict()
    b = AgentRun(agent="codex", input_tokens=50, output_tokens=5, wall_s=2.0).to_dict()
    totals = spent([(1, _rec(a, b)), (2, {"proposal": {"command": "x"}}), (3, _rec(a))])
    assert totals.runs == 3 and totals.cost_usd == 3.0 and totals.runs_without_cost == 1
    assert totals.tokens == 275 and totals.wall_s == 8.0
    assert totals.by_version[1] == {"runs": 2, "cost_usd": 1.5, "tokens": 165, "wall_s": 5.0}
    assert 2 not in totals.by_version
    assert json.loads(json.dumps(totals.to_dict()))["by_version"]["3"]["cost_usd"] == 1.5


def test_budget_exhausted_states_the_reason() -> None:
    run = AgentRun(agent="claude-code", cost_usd=2.5, input_tokens=900, output_tokens=100).to_dict()
    totals = spent([(1, _rec(run)), (2, _rec(run))])
    assert budget_exhausted(cfg_with('kind = "command"\nagent = "claude-code"\nbudget_usd = 6\n'), totals) is None
    why = budget_exhausted(cfg_with('kind = "command"\nagent = "claude-code"\nbudget_usd = 5\n'), totals)
    assert why and "$5.00 of [propose].budget_usd = $5.00" in why
    why = budget_exhausted(cfg_with('kind = "command"\nagent = "codex"\nbudget_tokens = 2000\n'), totals)
    assert why and "2,000 tokens" in why
    assert budget_exhausted(cfg_with('kind = "command"\nagent = "codex"\n'), totals) is None


@pytest.mark.parametrize(
    "sid", ["--dangerously-skip-permissions", "-r", "a b", "x;rm -rf ~", "", "x" * 200, 42, "$(id)", "a\nb"]
)
def test_a_session_id_that_could_be_read_as_a_flag_or_worse_is_dropped(sid: object) -> None:
    for parse, line in (
        (parse_claude, {**CLAUDE_JSON, "session_id": sid}),
        (parse_codex, {"type": "thread.started", "thread_id": sid}),
        (parse_opencode, {"type": "step_finish", "sessionID": sid, "part": {}}),
        (parse_generic, {"cost_usd": 1, "session_id": sid}),
    ):
        assert parse([json.dumps(line)]).session_id is None, parse.__name__


def test_real_session_ids_pass() -> None:
    for sid in ("3f2a1b4c-0000-4000-8000-00000000abcd", "ses_494719016ffe85dkDMj0FPRbHK", "g-6-0", "abc:1.2@x"):
        assert parse_claude([json.dumps({**CLAUDE_JSON, "session_id": sid})]).session_id == sid


def test_gemini_json_on_one_line_and_a_stream_of_any_length_in_bounded_memory() -> None:
    doc = {
        "session_id": "g-3",
        "response": "ok",
        "stats": {"models": {"m": {"tokens": {"prompt": 5, "candidates": 2}}}},
    }
    assert parse_gemini([json.dumps(doc) + "\n"]).input_tokens == 5

    def stream():  # a generator: the parser must not need the whole output at once
        yield json.dumps({"type": "init", "session_id": "g-4", "model": "m"}) + "\n"
        for i in range(100_000):
            yield json.dumps({"type": "tool_result", "output": "x" * 50, "i": i}) + "\n"
        yield (
            json.dumps({"type": "result", "status": "success", "stats": {"input_tokens": 9, "output_tokens": 1}}) + "\n"
        )

    run = parse_gemini(stream())
    assert (run.session_id, run.input_tokens, run.output_tokens) == ("g-4", 9, 1)
