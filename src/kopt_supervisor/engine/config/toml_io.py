"""Reading, checking and writing kopt.toml.

Loading (`load`, `loads`): the TOML tables walked into the section dataclasses (the package's `__init__`),
unknown keys rejected with a "did you mean" hint (a typo must never silently change a run),
every value's type checked against its field's, then `validate`: the values' rules (ranges,
choices, expressions, paths) with one-line errors that name the key at fault, every
expression parsed once so that a bad one is reported at `kopt init`, not hours into a run.
`decide.Policy` applies the [decide] rules to a [decide] built in code (`decide_problems`).

Writing a Config as TOML (`dumps`): the frozen copy in a workspace shows every effective
value, defaults included, and loads back to the same Config.

Pure: reads the one file it is given, returns a `Config`; a Config in, text or BadInput out.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from kopt_supervisor.engine import BadInput, expr
from kopt_supervisor.engine.config import (
    AGENT_NAMES,
    FORMATS,
    KINDS,
    Config,
    DecideConfig,
    ProposeConfig,
    supports_resume,
)
from kopt_supervisor.engine.diffscan.findings import parse_allow


def decide_problems(d: DecideConfig) -> list[tuple[str, str]]:
    """(key, what is wrong) for each [decide] value out of range: the one set of rules, for
    kopt.toml (`validate`) and for every `decide.Policy` built in code."""
    checks = [
        (0.5 < d.confidence < 1, "confidence", f"must be between 0.5 and 1, not {d.confidence}"),
        (d.min_effect_pct > 0, "min_effect_pct", f"must be > 0, not {d.min_effect_pct}"),
        (d.min_rounds >= 2, "min_rounds", f"must be at least 2 (a paired test needs two rounds), not {d.min_rounds}"),
        (
            d.max_rounds >= d.min_rounds,
            "max_rounds",
            f"must be >= [decide].min_rounds ({d.min_rounds}), not {d.max_rounds}",
        ),
        (d.budget_gpu_s > 0, "budget_gpu_s", f"must be > 0, not {d.budget_gpu_s}"),
        (
            d.max_other_regression_pct >= 0,
            "max_other_regression_pct",
            f"must be >= 0, not {d.max_other_regression_pct}",
        ),
        (
            d.guard_max_regression_pct >= 0,
            "guard_max_regression_pct",
            f"must be >= 0, not {d.guard_max_regression_pct}",
        ),
        (d.suspicious_speedup > 1, "suspicious_speedup", f"must be > 1, not {d.suspicious_speedup}"),
        (d.review_timeout_s >= 0, "review_timeout_s", f"must be >= 0, not {d.review_timeout_s}"),
        (
            d.review_default in ("reject", "accept"),
            "review_default",
            f'must be "reject" or "accept", not {d.review_default!r}',
        ),
        (
            0 <= d.futility_confidence < d.confidence,
            "futility_confidence",
            f"must be >= 0 and below [decide].confidence ({d.confidence}), not {d.futility_confidence}",
        ),
    ]
    return [(key, why) for ok, key, why in checks if not ok]


def validate(cfg: Config, source: str = "kopt.toml") -> None:
    def need(ok: bool, key: str, msg: str) -> None:
        if not ok:
            raise BadInput(f"{source}: {key} {msg}")

    t = cfg.target
    need(bool(t.bench.strip()), "[target].bench", "is required (the fixed benchmark command)")
    need(bool(t.metric.strip()), "[target].metric", "is required (the CSV column to optimise)")
    need(t.direction in ("min", "max"), "[target].direction", f'must be "min" or "max", not {t.direction!r}')
    need(t.timeout_s > 0, "[target].timeout_s", "must be > 0")
    need(
        not t.calls or t.direction == "min",
        "[target].calls",
        'needs a latency metric (direction = "min"): it turns per-call times into timed seconds',
    )
    need(t.max_output_mib > 0, "[target].max_output_mib", "must be > 0")
    need(
        t.csv == "-" or _inside(t.csv),
        "[target].csv",
        f'must be "-" or a glob relative to the worktree (no absolute path, no ".."), not {t.csv!r}',
    )
    for key in ("correct", "production"):
        if getattr(t, key):
            expr.parse_rule(getattr(t, key), where=f"{source}: [target].{key}")
    if t.serve:
        need(bool(t.serve.strip()), "[target].serve", "must be a command (or empty: no served looks)")
        need(
            "{best}" not in t.serve and "{cand}" not in t.serve,
            "[target].serve",
            f"serves one tree (its working directory): no {{best}} or {{cand}} placeholders, not {t.serve!r}",
        )
        need(
            t.format == "csv",
            "[target].serve",
            f'needs [target].format = "csv" (it writes kopt\'s CSV), not {t.format!r}',
        )
    need(
        not t.serve_prepare or bool(t.serve.strip()),
        "[target].serve_prepare",
        "needs [target].serve (the command that answers `prepare`)",
    )
    parse_allow(t.allow_constructs, where=f"{source}: [target].allow_constructs")
    need(t.format in FORMATS, "[target].format", f"must be one of {', '.join(map(repr, FORMATS))}, not {t.format!r}")
    need(
        t.adapter.unit in ("ns", "us", "ms", "s"),
        "[target.adapter].unit",
        f'must be "ns", "us", "ms" or "s", not {t.adapter.unit!r}',
    )
    need(
        t.adapter.stat in ("median", "mean", "min"),
        "[target.adapter].stat",
        f'must be "median", "mean" or "min", not {t.adapter.stat!r}',
    )

    for key, paths in (
        ("[target].writable", t.writable),
        ("[propose].writable", cfg.propose.writable),
        ("[target].readable", t.readable),
        ("[propose].readable", cfg.propose.readable),
    ):
        for i, path in enumerate(paths):
            p = path.rstrip("/")
            parts = p.split("/")[1:]
            need(
                p.startswith(("/", "~/")) and all(x not in ("", ".", "..") for x in parts),
                f"{key}[{i}]",
                f'must be an absolute path or one under ~/ (no "..", "." or "//"), not {path!r}',
            )
            need(
                len(parts) >= (1 if p.startswith("~/") else 2),
                f"{key}[{i}]",
                f"must name a folder below the home or below a top-level folder, not {path!r} (the sandbox "
                f"would leave too much writable)",
            )

    d = cfg.decide
    for key, why in decide_problems(d):
        need(False, f"[decide].{key}", why)
    need(
        not d.production_verdicts or bool(t.production.strip()),
        "[decide].production_verdicts",
        "needs [target].production (the rule that marks the production rows)",
    )

    g = cfg.gpu
    need(
        g.vendor in ("auto", "nvidia", "amd", "none"),
        "[gpu].vendor",
        f'must be "auto", "nvidia", "amd" or "none", not {g.vendor!r}',
    )
    need(0 <= g.util_max_pct <= 100, "[gpu].util_max_pct", "must be between 0 and 100")
    need(g.mem_used_max_mib >= 0, "[gpu].mem_used_max_mib", "must be >= 0")
    need(g.mem_growth_max_mib >= 0, "[gpu].mem_growth_max_mib", "must be >= 0")
    need(all(d >= 0 for d in g.devices), "[gpu].devices", "must list GPU indices >= 0")
    need(g.samples >= 1, "[gpu].samples", "must be >= 1")
    need(g.sample_interval_s >= 0, "[gpu].sample_interval_s", "must be >= 0")
    need(g.wait_s > 0, "[gpu].wait_s", "must be > 0")
    need(g.wait_max_s >= 0, "[gpu].wait_max_s", "must be >= 0")
    need(g.quick_recheck_s >= 0, "[gpu].quick_recheck_s", "must be >= 0")

    prof = cfg.profile
    need(
        prof.kind in ("auto", "ncu", "rocprofv3", "none"),
        "[profile].kind",
        f'must be "auto", "ncu", "rocprofv3" or "none", not {prof.kind!r}',
    )
    need(0 <= prof.run_noise_pct <= 50, "[profile].run_noise_pct", "must be between 0 and 50")
    need(1 <= prof.repeats <= 20, "[profile].repeats", "must be between 1 and 20")
    need(
        prof.outside_ranges in ("time", "full"),
        "[profile].outside_ranges",
        f'must be "time" or "full", not {prof.outside_ranges!r}',
    )
    need(prof.keep in ("time", "full"), "[profile].keep", f'must be "time" or "full", not {prof.keep!r}')
    need(
        prof.baseline in ("auto", "first-keep", "early", "start"),
        "[profile].baseline",
        f'must be "auto", "first-keep", "early" or "start", not {prof.baseline!r}',
    )
    need(0 <= prof.reuse_best_s <= 86400, "[profile].reuse_best_s", "must be between 0 and 86400")
    need(prof.ahead in ("auto", "on", "off"), "[profile].ahead", f'must be "auto", "on" or "off", not {prof.ahead!r}')
    if prof.kernel:
        import re

        try:
            re.compile(prof.kernel)
        except re.error as exc:
            raise BadInput(f"{source}: [profile].kernel is not a valid regex: {exc}") from None

    pr = cfg.propose
    need(
        pr.kind in ("manual", "command", "tune"),
        "[propose].kind",
        f'must be "manual", "command" or "tune", not {pr.kind!r}',
    )
    _validate_agent(pr, need)
    need(pr.timeout_s >= 0, "[propose].timeout_s", "must be >= 0 (0: the agent preset's)")
    need(0 <= pr.repair_attempts <= 10, "[propose].repair_attempts", "must be between 0 and 10")
    if pr.kind == "tune":
        need(bool(pr.tune.params), "[propose.tune].params", 'is required when [propose].kind = "tune"')
        need(bool(pr.tune.space), "[propose.tune].space", 'is required when [propose].kind = "tune"')
    need(
        not pr.tune.params or _inside(pr.tune.params),
        "[propose.tune].params",
        f'must be a path relative to the repo root (no absolute path, no ".."), not {pr.tune.params!r}',
    )
    for name in pr.tune.order:
        need(name in pr.tune.space, "[propose.tune].order", f"names {name!r}, which is not in [propose.tune].space")
    need(
        not pr.tune.shared_first or pr.tune.per_class,
        "[propose.tune].shared_first",
        "needs per_class = true (it steps every class at once before tuning each on its own)",
    )
    for name, values in pr.tune.space.items():
        need(len(values) > 0, f"[propose.tune].space.{name}", "must list at least one value")
    for cls, groups in pr.tune.alike.items():
        for name, values in groups.items():
            key = f"[propose.tune].alike.{cls!r}.{name}"
            need(name in pr.tune.space, key, f"names {name!r}, which is not in [propose.tune].space")
            listed = {repr(v) for v in pr.tune.space.get(name, [])}
            off = [v for v in values if repr(v) not in listed]
            need(not off, key, f"lists {off[0]!r}, which is not among [propose.tune].space.{name}" if off else "")
            need(len(values) > 1, key, "must list at least two values (the ones that launch the same kernel)")

    par = cfg.parallel
    need(1 <= par.lanes <= 64, "[parallel].lanes", f"must be between 1 and 64, not {par.lanes}")
    need(par.backend in ("local", "ray"), "[parallel].backend", f'must be "local" or "ray", not {par.backend!r}')
    need(bool(par.address.strip()), "[parallel].address", 'must name the Ray cluster ("auto" or host:port)')
    need(par.connect_timeout_s > 0, "[parallel].connect_timeout_s", "must be > 0")

    s = cfg.stop
    need(s.consecutive_regressions >= 1, "[stop].consecutive_regressions", "must be >= 1")
    need(s.consecutive_failures >= 1, "[stop].consecutive_failures", "must be >= 1")
    need(s.max_iters >= 0, "[stop].max_iters", "must be >= 0")
    need(s.max_hours >= 0, "[stop].max_hours", "must be >= 0")
    need(0 < s.target_pct_of_peak <= 100, "[stop].target_pct_of_peak", "must be in (0, 100]")

    r = cfg.roofline
    for key in ("flops", "bytes"):
        if getattr(r, key):
            expr.parse(getattr(r, key), where=f"{source}: [roofline].{key}")
    need(r.unit_scale > 0, "[roofline].unit_scale", "must be > 0")


def _validate_agent(pr: ProposeConfig, need: Any) -> None:
    """[propose] keys of the command proposer and its agent preset."""
    command = pr.command.strip()
    need(
        pr.kind != "command" or bool(command) or bool(pr.agent),
        "[propose].command",
        'is required when [propose].kind = "command" (or name an agent preset: [propose].agent)',
    )
    need(
        not pr.agent or pr.agent in AGENT_NAMES,
        "[propose].agent",
        f"must be one of {', '.join(repr(a) for a in AGENT_NAMES)}, not {pr.agent!r}",
    )
    need(
        not pr.agent or pr.kind == "command",
        "[propose].agent",
        f'needs [propose].kind = "command" (an agent is a command proposer), not {pr.kind!r}',
    )
    need(
        pr.agent != "generic" or bool(command),
        "[propose].command",
        'is required with [propose].agent = "generic" (a CLI without a preset)',
    )
    need(pr.session in ("fresh", "resume"), "[propose].session", f'must be "fresh" or "resume", not {pr.session!r}')
    if pr.session == "resume":
        need(pr.kind == "command", "[propose].session", '= "resume" needs an agent ([propose].kind = "command")')
        need(
            supports_resume(pr.agent, command),
            "[propose].session",
            f'= "resume": {_agent_name(pr)} cannot continue a session'
            + (" (aider has no session id)" if pr.agent == "aider" else "")
            + (
                " (put {session} in [propose].command where the CLI takes the session id)"
                if command or pr.agent in ("", "generic")
                else ""
            ),
        )
    need(
        not pr.model or bool(pr.agent) and pr.agent != "generic" and not command,
        "[propose].model",
        "needs an agent preset without [propose].command (put the model in the command instead)",
    )
    need(
        not pr.args or bool(pr.agent) and pr.agent != "generic" and not command,
        "[propose].args",
        "needs an agent preset without [propose].command (put the arguments in the command instead)",
    )
    for key in ("budget_usd", "budget_tokens"):
        value = getattr(pr, key)
        need(value >= 0, f"[propose].{key}", "must be >= 0 (0: no limit)")
        need(
            value == 0 or pr.kind == "command",
            f"[propose].{key}",
            'counts agent runs: it needs [propose].kind = "command"',
        )
    if pr.budget_usd > 0 and pr.agent:
        pre = KINDS[pr.agent]
        need(
            pre.reports_cost,
            "[propose].budget_usd",
            f"cannot be kept: {pre.title} reports no cost (use [propose].budget_tokens)",
        )
    need(pr.transcript_max_kib >= 16, "[propose].transcript_max_kib", "must be >= 16")
    need(8 <= pr.prompt_max_kib <= 1024, "[propose].prompt_max_kib", "must be between 8 and 1024")


def _agent_name(pr: ProposeConfig) -> str:
    if pr.command.strip():
        return "[propose].command without {session}"
    return f'the "{pr.agent}" agent' if pr.agent else "a plain command"


def _inside(path: str) -> bool:
    """A relative path or glob that stays inside the folder it is resolved in."""
    from pathlib import PurePosixPath

    p = PurePosixPath(path)
    return bool(path.strip()) and not p.is_absolute() and ".." not in p.parts and not path.startswith("~")


def load(path: str | Path, *, past: bool = False) -> Config:
    """`past`: as `loads`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    return loads(text, source=str(path), past=past)


def loads(text: str, *, source: str = "kopt.toml", past: bool = False) -> Config:
    """`past`: the config of a run that exists, read to show it (status, report, dashboard):
    a withdrawn feature's key is ignored whatever its value (WITHDRAWN); an engine that would
    run it reads it without `past`, and refuses it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: not valid TOML: {exc}") from None
    cfg = _build(Config, data, source, "", past)
    validate(cfg, source)
    return cfg


RETIRED = {"profile.agree_margin_pct": "the profiler's agreement is judged per class by intervals"}
"""Keys kopt once read and no longer does: accepted (a run's frozen kopt.toml keeps them),
never used."""

ONE_PROCESS = (
    "kopt no longer measures both trees in one process (candidate code there could bend best's "
    "measurement): serve each tree in its own process with [target].serve (docs/byo-kernel.md), "
    "or remove the key to run the bench once per tree"
)
WITHDRAWN = {"target.ab_command": ("", ONE_PROCESS), "target.ab_serve": (False, ONE_PROCESS)}
"""Keys whose feature was removed, with their off value: that value (what a run's frozen
kopt.toml from before holds when it did not use the feature) is accepted and ignored; any other
is refused with the reason and what to use, except when a run that already exists is read to be
shown (`loads(past=True)`: its status, report, dashboard), never to be run."""


def _build(cls: type, data: Any, source: str, where: str, past: bool = False) -> Any:
    if not isinstance(data, dict):
        raise BadInput(f"{source}: [{where}] must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{where}.{key}" if where else key
        if dotted in RETIRED:
            continue
        if dotted in WITHDRAWN:
            off, why = WITHDRAWN[dotted]
            if not past and (type(value) is not type(off) or value != off):
                raise BadInput(f"{source}: {_show(dotted)} = {value!r}: {why}")
            continue
        if key not in fields:
            hint = difflib.get_close_matches(key, fields, n=1)
            more = f" (did you mean {hint[0]!r}?)" if hint else f" (known: {', '.join(fields)})"
            raise BadInput(f"{source}: unknown key {_show(dotted)}{more}")
        typ = hints[key]
        if isinstance(typ, type) and dataclasses.is_dataclass(typ):
            kwargs[key] = _build(typ, value, source, dotted, past)
        else:
            kwargs[key] = _coerce(value, typ, source, dotted)
    return cls(**kwargs)


def _show(dotted: str) -> str:
    section, _, key = dotted.rpartition(".")
    return f"[{section}].{key}" if section else key


def _coerce(value: Any, typ: Any, source: str, dotted: str) -> Any:
    origin = typing.get_origin(typ)
    args = typing.get_args(typ)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], source, dotted)
    bad = BadInput(f"{source}: {_show(dotted)} must be {_type_name(typ)}, not {value!r}")
    if typ is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            raise bad
        return value
    if origin is list:
        if not isinstance(value, list):
            raise bad
        (item,) = args
        return [_coerce(v, item, source, f"{dotted}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise bad
        _, item = args
        return {str(k): _coerce(v, item, source, f"{dotted}.{k}") for k, v in value.items()}
    if typ is Any:
        return value
    raise bad  # pragma: no cover - a schema type this function does not know


def _type_name(typ: Any) -> str:
    origin = typing.get_origin(typ)
    if origin is list:
        return "a list"
    if origin is dict:
        return "a table"
    if origin in (types.UnionType, typing.Union):
        return _type_name([a for a in typing.get_args(typ) if a is not type(None)][0])
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(typ, str(typ))


def dumps(cfg: Config) -> str:
    """TOML text for a Config: every section and key, defaults included."""
    out: list[str] = []
    for f in dataclasses.fields(cfg):
        _dump_table(getattr(cfg, f.name), f.name, out)
    return "\n".join(out).strip() + "\n"


def _dump_table(obj: Any, name: str, out: list[str]) -> None:
    out.append(f"[{name}]")
    nested = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            nested.append((f.name, value))
        elif value is not None:
            out.append(f"{f.name} = {_toml_value(value)}")
    out.append("")
    for key, value in nested:
        _dump_table(value, f"{name}.{key}", out)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def _toml_key(k: str) -> str:
    import re

    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)
