"""The frozen runs' proposer (tests/tui/make_fixture.py): the scripted edit and plan of
tests/fake_target/proposer.py, run the way an agent CLI runs.

Around the scripted proposer it does what kopt reads of an agent: it prints a transcript as
JSON lines (the shape of Claude Code's stream-json: an init event, assistant messages with a
tool call, a result), reports what it cost through the file named by $KOPT_USAGE (kopt's
usage contract for a plain `command`: docs/agents.md), and on some iterations adds to the
plan a line that cites the evidence of the context pack (the slowest class), so the frozen
runs hold plans with and without citations. The numbers are fixed per iteration; v3 reports
tokens but no cost (as a CLI without prices does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPTED = Path(__file__).resolve().parents[1] / "fake_target" / "proposer.py"


def main() -> int:
    n = int(os.environ["KOPT_ITERATION"])
    repair = int(os.environ.get("KOPT_REPAIR", "0"))
    session = f"fixture-v{n}" + (f"-r{repair}" if repair else "")
    print(json.dumps({"type": "system", "subtype": "init", "session_id": session, "model": "fixture-model"}))
    print(
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "text",
                            "text": f"Reading the brief for v{n}" + (f" (repair {repair})" if repair else "") + ".",
                        }
                    ],
                },
                "session_id": session,
            }
        )
    )
    done = subprocess.run([sys.executable, str(SCRIPTED)], check=False)
    print(
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "name": "Edit", "input": {"file_path": "kernel.json"}}],
                },
                "session_id": session,
            }
        )
    )
    plan = Path(os.environ["KOPT_PLAN"])
    if done.returncode == 0 and plan.is_file() and n % 2 == 0:
        pack = json.loads(Path(os.environ["KOPT_PROMPT_JSON"]).read_text())
        classes = list((pack.get("evidence") or {}).get("classes") or {})
        if classes:
            with plan.open("a") as f:
                f.write(f"\nEvidence: {classes[-1]} is where the time goes in the brief.\n")
    tokens_in, tokens_out = 1000 * n + 234, 100 * n + 17
    usage: dict[str, object] = {
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "cache_read_tokens": 800 * n,
        "session_id": session,
    }
    if n != 3:
        usage["cost_usd"] = round(0.01 * n + 0.0021 * (repair + 1), 4)
    Path(os.environ["KOPT_USAGE"]).write_text(json.dumps(usage))
    print(
        json.dumps(
            {
                "type": "result",
                "subtype": "success" if done.returncode == 0 else "error",
                "is_error": done.returncode != 0,
                "session_id": session,
                "result": "plan written",
            }
        )
    )
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
