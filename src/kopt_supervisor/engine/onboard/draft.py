"""A kopt.toml proposal as it is drafted: the `Proposal` the steps fill in (keys, the reason
for each, what to check, open `Question`s and their `Choice`s) and the commented kopt.toml it
renders to, checked to load before it is returned. Pure.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from kopt_supervisor.engine.config.toml_io import loads as loads_config
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.onboard import cost as cost_mod
from kopt_supervisor.engine.onboard.detect import BenchRun, Candidate

ANSWER_KEYS = "table=KEY, metric=COLUMN, direction=min|max"
"""Every key `kopt init --bench --answer` takes, as the messages that need one list them."""


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True)
class Question:
    """Something the output does not settle: the CLI asks it (or fails naming the choices)."""

    key: str
    """The answer's key: "table", "metric" or "direction"."""
    prompt: str
    choices: tuple[Choice, ...]
    why: str
    default: str | None = None

    def line(self) -> str:
        """One line for a terminal-less `kopt init`: the question, the candidates, the way to answer."""
        values = ", ".join(c.value for c in self.choices)
        return (
            f"{self.prompt} ({self.why}); candidates: {values}; answer with --answer {self.key}=VALUE "
            f"(--answer may be repeated: {ANSWER_KEYS})"
        )


@dataclass
class Proposal:
    run: BenchRun
    target: dict[str, Any] = field(default_factory=dict)
    adapter: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)
    """[section].key -> why (written above the key)."""
    checks: list[str] = field(default_factory=list)
    """What the engineer should check before running (the file's header)."""
    questions: list[Question] = field(default_factory=list)
    candidate: Candidate | None = None
    cost: cost_mod.DecisionCost | None = None
    served: bool = False
    """Looks are served (one process per tree answers them), not whole runs of the bench."""
    serving: str = ""
    """How looks are taken and why; for a process-level proposal, why it is not served and
    what would be (also among `checks`)."""

    @property
    def complete(self) -> bool:
        return not self.questions

    def error_line(self) -> str:
        """The one-line error of a terminal-less `kopt init --bench` with open questions."""
        if not self.questions:
            return ""
        more = f" (and {len(self.questions) - 1} more question(s))" if len(self.questions) > 1 else ""
        return f"kopt init --bench: {self.questions[0].line()}{more}"

    def text(self) -> str:
        """The commented kopt.toml (only once every question is answered)."""
        if self.questions:
            raise BadInput(self.error_line())
        return render(self)


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r}")


def _comment(text: str) -> list[str]:
    out = []
    for para in text.split("\n"):
        line = "#"
        for word in para.split(" "):
            if len(line) + len(word) > 96 and line != "#":
                out.append(line)
                line = "#  "
            line += " " + word
        out.append(line)
    return out


def render(p: Proposal) -> str:
    run = p.run
    head = [
        "# kopt.toml proposed by `kopt init --bench` from one run of the bench:",
        f"#   {run.bench}",
        f"# ({time.strftime('%Y-%m-%d')}, {run.seconds:.1f} s, exit {run.returncode}). Each choice says why.",
    ]
    if p.checks:
        head.append("#")
        head.append("# Check before `kopt run`:")
        for c in p.checks:
            head += ["#  - " + ln[2:] if i == 0 else "#    " + ln[4:] for i, ln in enumerate(_comment(c))]
    if p.served and p.serving:
        head.append("#")
        head += _comment(f"Looks: {p.serving}")
    if p.cost is not None:
        head.append("#")
        head += _comment(f"Decision cost: {p.cost.text()}")
    lines = head + ["", "[target]"]
    for key, value in p.target.items():
        why = p.comments.get(f"target.{key}")
        if why:
            lines += _comment(why)
        lines.append(f"{key} = {_toml(value)}")
    if p.adapter:
        lines += ["", "[target.adapter]"]
        for key, value in p.adapter.items():
            why = p.comments.get(f"target.adapter.{key}")
            if why:
                lines += _comment(why)
            lines.append(f"{key} = {_toml(value)}")
    for section, keys in p.sections.items():
        lines += ["", f"[{section}]"]
        for key, value in keys.items():
            why = p.comments.get(f"{section}.{key}")
            if why:
                lines += _comment(why)
            lines.append(f"{key} = {_toml(value)}")
    text = "\n".join(lines) + "\n"
    loads_config(text, source="proposed kopt.toml")  # a proposal always loads
    return text
