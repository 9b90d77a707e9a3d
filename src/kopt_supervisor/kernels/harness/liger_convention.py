"""Liger-Kernel's bench convention, for harness/imported.py: a script whose `__main__` block calls
`run_benchmarks(bench_test_fn=..., kernel_operation_modes=[...], metric_name="speed",
x_name=..., x_values=[...], kernel_providers=[...], extra_benchmark_configs=[{...}], ...)`,
imported `from X import run_benchmarks` (Liger's benchmark/scripts/utils.py).

`record_runs` finds X in the script's AST, imports it afresh with the script's folder first on
sys.path, replaces X.run_benchmarks with a recorder, runs the script as `__main__` (argv
[script]; the caller's context around it: do_bench captured, prints to stderr) and puts
X.run_benchmarks back: the calls are recorded, not run (nothing measured, no CSV written).
The speed calls are kept (metric_name "speed"), the others (memory) dropped. A kept call
(`Run`) gives one `Point` per extra config x operation mode x chosen provider x x value, in
that order (run_benchmarks' own); imported.py makes them its Configs. Nothing here imports
torch or triton.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import runpy
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNNER = "run_benchmarks"
INPUT = "SingleBenchmarkRunInput"
"""The class X defines for bench_test_fn's one argument (x, kernel_provider,
kernel_operation_mode, extra_benchmark_config)."""
SPEED = "speed"
MODE, PROVIDER = "kernel_operation_mode", "kernel_provider"
"""The config columns of the operation mode and the provider (beside the call's x_name)."""


class ConventionError(Exception):
    """The script follows the convention but cannot be served (one line; imported.py names the file)."""


@dataclass(frozen=True)
class Run:
    """One recorded speed call of run_benchmarks: its arguments by name (defaults applied), the
    input class of X, and the globals where the bench may hold do_bench under a name."""

    args: dict[str, Any]
    input_cls: Any
    scopes: tuple[dict[str, Any], ...]

    @property
    def plot_name(self) -> str:
        return str(self.args.get("kernel_name") or "")

    @property
    def x_name(self) -> str:
        return str(self.args["x_name"])

    @property
    def line_vals(self) -> list[Any]:
        """The providers: what `--line` picks among (imported.pick_lines)."""
        return list(self.args["kernel_providers"])

    @property
    def line_names(self) -> list[Any]:
        return self.line_vals

    @property
    def modes(self) -> list[Any]:
        return list(self.args.get("kernel_operation_modes") or [None])

    @property
    def extras(self) -> list[dict[str, Any]]:
        return [dict(e or {}) for e in self.args.get("extra_benchmark_configs") or [{}]]

    @property
    def x_values(self) -> list[Any]:
        return list(self.args["x_values"])


@dataclass(frozen=True)
class Point:
    """One benchmark call of a Run: `fn()` calls bench_test_fn with its input; `named` the
    config columns it always has (mode, x, provider), `extra` the extra config."""

    fn: Callable[[], Any]
    named: dict[str, Any]
    extra: dict[str, Any]


def caller(run: Run, x: Any, provider: Any, mode: Any, extra: dict[str, Any]) -> Callable[[], Any]:
    """bench_test_fn called with a new input of X's class, as run_benchmarks calls it."""
    bench_test_fn = run.args["bench_test_fn"]

    def call() -> Any:
        return bench_test_fn(
            run.input_cls(x=x, kernel_provider=provider, kernel_operation_mode=mode, extra_benchmark_config=extra)
        )

    return call


def points(run: Run, providers: Sequence[Any]) -> list[Point]:
    """The run's calls of `providers`: extra configs x modes x providers x x values."""
    return [
        Point(caller(run, x, provider, mode, extra), {MODE: mode, run.x_name: x, PROVIDER: provider}, extra)
        for extra in run.extras
        for mode in run.modes
        for provider in providers
        for x in run.x_values
    ]


def runner_module(script: Path) -> str | None:
    """X of the script's first `from X import run_benchmarks` (absolute imports only), else None."""
    tree = ast.parse(script.read_text(), filename=str(script))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if any(alias.name == RUNNER for alias in node.names):
                return node.module
    return None


def record_runs(
    script: Path, around: Callable[[], contextlib.AbstractContextManager[Any]]
) -> tuple[str | None, list[Run]]:
    """(X, the speed calls the script's `__main__` block made), or (None, []) when it imports no
    run_benchmarks; `around()` is entered for the import of X and the run (the module docstring)."""
    name = runner_module(script)
    if name is None:
        return None, []
    folder = str(script.parent.resolve())
    if not sys.path or sys.path[0] != folder:
        sys.path.insert(0, folder)  # as `python script.py` would: its neighbours import
    calls: list[dict[str, Any]] = []
    argv = sys.argv
    with around():
        sys.modules.pop(name, None)  # this tree's X, not one imported before (`utils` is a common name)
        runner = importlib.import_module(name)
        original = getattr(runner, RUNNER, None)
        if original is None:
            raise ConventionError(f"{name} has no {RUNNER}")
        signature = inspect.signature(original)

        def recorder(*args: Any, **kwargs: Any) -> None:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            calls.append(dict(bound.arguments))

        setattr(runner, RUNNER, recorder)
        sys.argv = [str(script)]
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise ConventionError(f"its __main__ block exited with {exc.code!r}") from exc
        finally:
            sys.argv = argv
            setattr(runner, RUNNER, original)
    return name, [make_run(runner, call) for call in calls if call.get("metric_name") == SPEED]


def make_run(runner: Any, args: dict[str, Any]) -> Run:
    """A recorded call as a Run: the input class looked up in X, do_bench's scopes: X's globals
    and bench_test_fn's."""
    input_cls = getattr(runner, INPUT, None)
    if input_cls is None:
        raise ConventionError(f"{runner.__name__} has no {INPUT} (bench_test_fn's input)")
    for required in ("bench_test_fn", "x_name", "x_values", "kernel_providers"):
        if args.get(required) is None:
            raise ConventionError(f"a {RUNNER}(...) call without {required}")
    scopes = {id(s): s for s in (vars(runner), getattr(args["bench_test_fn"], "__globals__", None)) if s is not None}
    return Run(args, input_cls, tuple(scopes.values()))
