"""A kopt.toml proposal as it is drafted: the proposal, what one decision with it will cost
(`DecisionCost`; its estimate is the onboard package's `estimate_decision_s`), and the static
scan behind its protected and sources (below). The draft is pure; the scan reads files.

The draft: the `Proposal` the steps fill in (keys, the reason for each, what to check, open
`Question`s and their `Choice`s) and the commented kopt.toml it renders to, checked to load
before it is returned.

The scan: which files a bench command runs and imports, for kopt.toml's protected and
sources.

The bench command names its script (`python bench.py ...`, `python -m pkg.bench`, `pytest
tests/bench_x.py`); the script's imports that resolve to files of the repo (by module name,
from the script's folder or the repo root or src/, relative imports included) are followed
one by one. A module that defines a kernel (Triton's `@triton.jit`, an inline CUDA/C++
extension, numba's `cuda.jit`, CuPy's RawKernel...) is the kernel: kopt's proposer may
change it, so it is not protected and its own imports are not followed. Everything else the
bench reaches (timing helpers, reference implementations, input generators, conftest.py
files pytest loads) decides what a measurement means: protected. String literals naming
existing files of the repo (a params.json, a data file) are listed as sources; a string
naming a function as `"package.module:function"` (kopt's harness Spec) is followed as an import.
`unreviewed` names what the bench reaches that is neither protected nor a declared source
(`kopt init` warns about them when a config declares no sources).

Reads files; no imports are executed.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import shlex
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput
from kopt_supervisor.engine.config.toml_io import loads as loads_config
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
    cost: DecisionCost | None = None
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


MODES = ("process", "served")
SLOW_S = 180.0
"""A decision longer than this is worth a word on the dashboard and in `kopt status`."""
DEFAULT_NOISE_PCT = 1.0
"""Per-run noise assumed when the baseline cannot tell (one run, or no config in common)."""
HARNESS_HINT = (
    "a bench on kopt's harness serves looks from one process per tree "
    "([target].serve: docs/byo-kernel.md), which decides in seconds"
)


@dataclass(frozen=True)
class DecisionCost:
    mode: str
    round_s: float
    """Seconds one round (process) or one look (served) takes."""
    start_s: float
    """Seconds before the first look (served: the process start; else 0)."""
    noise_pct: float
    """The per-run noise used (the baseline's, or DEFAULT_NOISE_PCT)."""
    rounds_tie: int
    """Rounds (looks) to settle a candidate that changes nothing."""
    rounds_change: int
    """Rounds (looks) to settle a true change of twice min_effect_pct."""
    max_rounds: int
    undecided_tie: bool
    """A no-change candidate is not settled within max_rounds at this noise (it then goes to
    the futility rule or review)."""
    noise_runs: int = 0
    """How many runs the noise was measured over (0: not measured, DEFAULT_NOISE_PCT assumed)."""

    @property
    def seconds_tie(self) -> float:
        return self.start_s + self.rounds_tie * self.round_s

    @property
    def seconds_change(self) -> float:
        return self.start_s + self.rounds_change * self.round_s

    @property
    def seconds_max(self) -> float:
        return self.start_s + self.max_rounds * self.round_s

    @property
    def slow(self) -> bool:
        return self.seconds_tie > SLOW_S

    def text(self) -> str:
        """One line for the log, the dashboard and `kopt status`."""
        unit = "ABBA rounds of 2 runs" if self.mode == "process" else "looks"
        per = (
            f"{_dur(self.round_s / 2)} per run"
            if self.mode == "process"
            else f"{_dur(self.round_s)} per look" + (f" after a {_dur(self.start_s)} start" if self.start_s else "")
        )
        tie = f"{_dur(self.seconds_tie)} ({self.rounds_tie} {unit}" + (
            ", then still undecided: futility rule or review)" if self.undecided_tie else ")"
        )
        noise = (
            f"run-to-run noise {self.noise_pct:.2g}% over {self.noise_runs} runs"
            if self.noise_runs >= 2
            else f"run-to-run noise not measured (one run: {self.noise_pct:.2g}% assumed; the baseline's runs "
            f"measure it)"
        )
        line = (
            f"one decision takes about {_dur(self.seconds_change)} for a clear change "
            f"({self.rounds_change} {unit}) and {tie} for no change; {per}, {noise}"
        )
        if self.slow and self.mode == "process":
            line += f". Slow: {HARNESS_HINT}"
        return line

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "round_s": self.round_s,
            "start_s": self.start_s,
            "noise_pct": self.noise_pct,
            "rounds_tie": self.rounds_tie,
            "rounds_change": self.rounds_change,
            "max_rounds": self.max_rounds,
            "seconds_tie": self.seconds_tie,
            "seconds_change": self.seconds_change,
            "seconds_max": self.seconds_max,
            "undecided_tie": self.undecided_tie,
            "slow": self.slow,
            "noise_runs": self.noise_runs,
            "text": self.text(),
        }


def _dur(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


KERNEL_MARKERS = (
    "triton.jit",
    "@triton.autotune",
    "@jit",
    "load_inline",
    "cpp_extension",
    "cuda.jit",
    "RawKernel",
    "RawModule",
    "tilelang",
    "cute.kernel",
    "@cute.",
    "ctypes.CDLL",
    "tl.load",
)
"""Text that marks a module defining (or loading) kernel code."""
BENCH_IS_KERNEL = "defines kernel code and is the bench itself"
"""The scan's note on a bench script that is its own kernel module (onboard/scratch.py rewords it)."""
PYTHONS = ("python", "python3", "python3.10", "python3.11", "python3.12", "python3.13", "uv", "poetry")


@dataclass
class Scan:
    scripts: list[str] = field(default_factory=list)
    """The files the bench command names (repo-relative, POSIX)."""
    kernel: list[str] = field(default_factory=list)
    """Modules that define kernel code (not protected)."""
    helpers: list[str] = field(default_factory=list)
    """Other modules of the repo the bench imports (protected)."""
    data: list[str] = field(default_factory=list)
    """Existing files of the repo named by string literals in the scanned modules."""
    notes: list[str] = field(default_factory=list)

    @property
    def protected(self) -> list[str]:
        return sorted({*(s for s in self.scripts if s not in self.kernel), *self.helpers})

    @property
    def sources(self) -> list[str]:
        return sorted({*self.scripts, *self.kernel, *self.helpers, *self.data})


def _rel(path: Path, repo: Path) -> str | None:
    try:
        return path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return None


def bench_scripts(bench: str, repo: Path, cwd: Path | None = None) -> tuple[list[Path], list[str]]:
    """The repo files the command runs (scripts, `-m` modules, pytest paths), and notes. A
    command of several parts (`cd benchmark && python scripts/b.py; ...`) is read part by
    part, each from the folder the `cd`s before it lead to."""
    cwd = cwd or repo
    try:
        lex = shlex.shlex(bench, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        tokens = list(lex)
    except ValueError as exc:
        return [], [f"cannot split the bench command ({exc})"]
    found: list[Path] = []
    parts: list[list[str]] = [[]]
    for tok in tokens:
        if tok and set(tok) <= set(";&|"):
            parts.append([])
        else:
            parts[-1].append(tok)
    for argv in parts:
        if argv[:1] == ["cd"]:
            target = (cwd / argv[1]).resolve() if len(argv) > 1 else repo
            cwd = target if target.is_dir() and _rel(target, repo) is not None else cwd
            continue
        found += _part_scripts(argv, repo, cwd)
    notes: list[str] = []
    if not found:
        notes.append(
            "the bench command names no Python file of the repo: list what it runs and reads in "
            "[target].protected yourself (a compiled bench: its sources and build files)"
        )
    return found, notes


def _part_scripts(argv: list[str], repo: Path, cwd: Path) -> list[Path]:
    """The repo files one simple command runs."""
    found: list[Path] = []
    for i, tok in enumerate(argv):
        if tok == "-m" and i + 1 < len(argv) and argv[i + 1] not in ("pytest",):
            parts = argv[i + 1].split(".")
            for k in range(1, len(parts) + 1):  # `-m a.b` runs a/__init__.py first
                mod = resolve_module(".".join(parts[:k]), [cwd, repo, repo / "src"], repo)
                if mod is not None:
                    found.append(mod)
            continue
        if tok.startswith("-"):
            tok = tok.split("=", 1)[1] if "=" in tok else ""
            if not tok:
                continue
        p = cwd / tok
        if p.is_file() and _rel(p, repo) is not None and (p.suffix == ".py" or i == 0):
            found.append(p)
        elif p.is_dir() and _rel(p, repo) is not None and any(a in argv for a in ("pytest", "py.test")):
            found.extend(sorted(p.rglob("test_*.py")) + sorted(p.rglob("*_test.py")))
    return found


def resolve_module(name: str, roots: list[Path], repo: Path) -> Path | None:
    """The repo file of module `name` under one of `roots`, or None (installed, or missing)."""
    parts = name.split(".")
    for root in roots:
        base = root.joinpath(*parts)
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file() and _rel(cand, repo) is not None:
                return cand
    return None


def _imports(tree: ast.AST, path: Path, roots: list[Path], repo: Path) -> list[Path]:
    out: list[Path] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                mod = node.module.split(".") if node.module else []
                target = base.joinpath(*mod)
                cands = [target.with_suffix(".py"), target / "__init__.py"]
                cands += [target / f"{a.name}.py" for a in node.names]
                out += [c for c in cands if c.is_file() and _rel(c, repo) is not None]
                continue
            if node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            parts = n.split(".")
            for k in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__.py and a/b/__init__.py too
                found = resolve_module(".".join(parts[:k]), roots, repo)
                if found is not None:
                    out.append(found)
    return out


def _named_modules(tree: ast.AST, roots: list[Path], repo: Path) -> list[Path]:
    """Modules named by a `"package.module:function"` string (how kopt's harness Spec and
    entry-point style configs name the function a bench times): imported at run time, so
    followed like an import."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.count(":") == 1:
            mod, _, attr = node.value.partition(":")
            parts = mod.split(".")
            if attr.isidentifier() and mod and all(part.isidentifier() for part in parts):
                for k in range(1, len(parts) + 1):  # importing a.b runs a/__init__.py too
                    found = resolve_module(".".join(parts[:k]), roots, repo)
                    if found is not None:
                        out.append(found)
    return out


def _strings(tree: ast.AST, path: Path, repo: Path) -> list[Path]:
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and 0 < len(node.value) < 200
            and "\n" not in node.value
            and "." in node.value
        ):
            for base in (path.parent, repo):
                p = base / node.value
                try:
                    if p.is_file() and _rel(p, repo) is not None:
                        out.append(p)
                        break
                except (OSError, ValueError):
                    break
    return out


def is_kernel(text: str) -> bool:
    return any(m in text for m in KERNEL_MARKERS)


def scan(bench: str, repo: Path, cwd: Path | None = None, *, limit: int = 200) -> Scan:
    """Scripts, kernel modules, helpers and data files of the bench (see the module docstring)."""
    repo = repo.resolve()
    scripts, notes = bench_scripts(bench, repo, cwd)
    result = Scan(notes=notes)
    queue = list(scripts)
    for s in scripts:
        rel = _rel(s, repo)
        if rel:
            result.scripts.append(rel)
        if "pytest" in bench or "py.test" in bench:  # pytest loads every conftest.py up to the rootdir
            d = s.parent
            while _rel(d, repo) is not None:
                if (d / "conftest.py").is_file():
                    queue.append(d / "conftest.py")
                if d == repo:
                    break
                d = d.parent
    seen: set[str] = set()
    while queue and len(seen) < limit:
        path = queue.pop(0)
        rel = _rel(path, repo)
        if rel is None or rel in seen:
            continue
        seen.add(rel)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            tree = ast.parse(text)
        except (OSError, SyntaxError, ValueError):
            if path.suffix == ".py":
                result.notes.append(f"{rel}: cannot be parsed; its imports were not followed")
            continue
        if is_kernel(text):
            result.kernel.append(rel)
            if rel not in result.scripts:
                continue  # a kernel module's own imports are the kernel's to change
            result.notes.append(
                f"{rel} {BENCH_IS_KERNEL}: kopt cannot protect "
                f"its timing code from the proposer (move the kernel into a module of its "
                f"own, or use kopt's harness)"
            )  # ... but what the bench script imports is the bench's: followed below
        elif rel not in result.scripts:
            result.helpers.append(rel)
        roots = [path.parent, repo, repo / "src"]
        queue.extend(_imports(tree, path, roots, repo))
        queue.extend(_named_modules(tree, roots, repo))
        result.data.extend(r for r in (_rel(p, repo) for p in _strings(tree, path, repo)) if r and r not in result.data)
    result.data = [d for d in result.data if d not in seen]
    return result


def unreviewed(s: Scan, tracked: Collection[str], protected: Sequence[str]) -> list[str]:
    """The tracked files the bench runs, imports or names (the scan `s`) that `protected`
    does not cover: with no [target].sources declared, a candidate's change to any of them
    is measured as it is (an input generator or a batch size edited looks like a faster
    kernel), so `kopt init` names them."""
    reached = sorted({*s.scripts, *s.kernel, *s.helpers, *s.data} & set(tracked))
    return [p for p in reached if not fnmatch_any(p, protected)]


def fnmatch_any(path: str, globs: Sequence[str]) -> bool:
    """`path` matches one of `globs` as kopt.toml's protected and sources read them (a glob,
    the path itself, or a folder holding it)."""
    return any(fnmatch.fnmatch(path, g) or path == g.rstrip("/") or path.startswith(g.rstrip("/") + "/") for g in globs)
