"""What a bench declares: `Spec`, the kernel under test and how to check and time it.

A Spec names the function to time and where it lives in a tree (`function`: a file path
inside the tree, `"ops/softmax.py:softmax"`, or a module name, `"mypkg.ops:softmax"`), the
configs (`shapes`, each marked production, regression or small), the inputs
(`make_inputs`), an fp64 `reference`, and the tolerances per dtype. The driver
(harness/bench.py) turns it into kopt's CSV in each mode: one tree per run (process-level),
and served looks of one tree per process (`--serve`).

The bundled kernels declare the same thing as a contract module (contract.py + roofline.py
beside solution/ and baseline/): `spec_from_folder` reads them into a Spec, so both use one
driver.

Pure: no torch, no triton, no kopt engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .loader import load_module
from .shapes import PRODUCTION, REGRESSION, SMALL, Shape

KINDS = (PRODUCTION, REGRESSION, SMALL)


def production(name: str, model: str = "", **dims: Any) -> Shape:
    """A production config: a shape a model runs (it votes in kopt's decision)."""
    return Shape(name, model or name, dict(dims), PRODUCTION)


def regression(name: str, why: str = "", **dims: Any) -> Shape:
    """A regression config: an odd size kept for correctness and to catch a slowdown (GPU)."""
    return Shape(name, why or f"regression: {name}", dict(dims), REGRESSION)


def small(name: str, why: str = "", **dims: Any) -> Shape:
    """A small config for the CPU (Triton's interpreter): what a machine without a GPU runs."""
    return Shape(name, why or f"CPU interpreter: {name}", dict(dims), SMALL)


@dataclass(frozen=True)
class Spec:
    """A kernel to check and time (see the module docstring and docs/byo-kernel.md)."""

    name: str
    """A short name (log lines, module names)."""
    function: str
    """Where the function to time lives in each tree: `path/inside/tree.py:func` (imported
    by path, under a module name of its own per tree) or `package.module:func` (imported with
    the tree first on sys.path, its package's modules isolated per tree)."""
    shapes: Sequence[Shape]
    tolerance: Mapping[str, tuple[float, float]]
    """dtype name (as torch names it: "bfloat16", "float16", "float32") -> (atol, rtol): a
    row passes when max |got - ref| / (atol + rtol |ref|) <= 1 (the CSV's `err`)."""
    make_inputs: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]]
    """(torch, dims, dtype, device, generator) -> (args, kwargs): fresh random inputs from the
    generator (seeded per run: the CSV's `seed`). The first tensor argument's dtype is the
    output's unless `same_dtype` is False."""
    reference: Callable[..., Any]
    """(torch, args, kwargs) -> the expected output, preferably computed in float64."""
    bytes_moved: Callable[..., float] | None = None
    """(**columns) -> the fewest bytes one call must move (read once, written once): the CSV's
    gbps, and a same-size device copy is timed beside the kernel (copy_us, pct_copy). None:
    those columns are NaN and no copy is timed."""
    columns: Callable[[Shape, str, int], dict[str, Any]] | None = None
    """(shape, dtype, element size) -> the CSV's config columns for that row. Default:
    `shape` (its name), its dims, `dtype`, `esize`."""
    class_by: Sequence[str] = ()
    """The config columns that form kopt's config classes (for `--kopt-toml` and the class
    check); empty: every config is its own class."""
    out: str | None = None
    """The keyword through which the function accepts a preallocated output (e.g. "out"), or
    None when it allocates its own: it is then checked after the allocator was poisoned, and
    timed with its outputs kept one per input set (bench.kept_outputs)."""
    baseline: str = ""
    """Optional: where a reference implementation with the same signature lives (same form
    as `function`): `--which baseline` times it instead."""
    class_args: Callable[[dict[str, Any]], tuple[Any, ...]] | None = None
    """Optional: the arguments of the module's own `class_key(...)`; when both exist, a row
    whose module computes another class than the row's class columns fails."""
    dtypes: Sequence[str] | None = None
    """The dtypes to run (default: the tolerance's keys; the first one only on the CPU)."""
    prepare: Callable[[Any, Any], Callable[..., Any]] | None = None
    """Optional: (the object `function` names, the Case) -> the callable to time, e.g. a model
    class instantiated on the case's device and dtype (KernelBench's ModelNew). Called once
    per tree and case."""
    graph: bool = True
    """Time blocks as CUDA graphs of k launches (no launch gaps); False: k eager launches
    between CUDA events (for functions a graph cannot capture)."""
    same_dtype: bool = True
    """The result must have the first input's dtype."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form values for the bench's own use (the harness ignores them)."""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"Spec.name must be a short identifier, not {self.name!r}")
        parse_locator(self.function, "Spec.function")
        if self.baseline:
            parse_locator(self.baseline, "Spec.baseline")
        if not self.shapes:
            raise ValueError(f"Spec {self.name!r}: no shapes")
        names = [s.name for s in self.shapes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"Spec {self.name!r}: shape name {dup[0]!r} appears twice")
        for s in self.shapes:
            if s.kind not in KINDS:
                raise ValueError(f"Spec {self.name!r}: shape {s.name!r} has kind {s.kind!r}, not one of {KINDS}")
        if not self.tolerance:
            raise ValueError(f"Spec {self.name!r}: tolerance needs at least one dtype")
        for dt, tol in self.tolerance.items():
            if len(tol) != 2 or min(tol) < 0:
                raise ValueError(f"Spec {self.name!r}: tolerance[{dt!r}] must be (atol, rtol) >= 0, not {tol!r}")
        for dt in self.dtypes or ():
            if dt not in self.tolerance:
                raise ValueError(f"Spec {self.name!r}: dtype {dt!r} has no tolerance")

    # -- the contract interface the driver uses -----------------------------------------

    @property
    def func_name(self) -> str:
        return parse_locator(self.function, "Spec.function")[1]

    def all_dtypes(self) -> list[str]:
        return list(self.dtypes or self.tolerance)

    def row_columns(self, shape: Shape, dtype: str, esize: int) -> dict[str, Any]:
        if self.columns is not None:
            return dict(self.columns(shape, dtype, esize))
        return {"shape": shape.name, **shape.dims, "dtype": dtype, "esize": esize}

    def config_columns(self) -> list[str]:
        """The config columns, as the first shape's row names them."""
        return list(self.row_columns(self.shapes[0], self.all_dtypes()[0], 2))

    def bytes_of(self, cols: dict[str, Any]) -> int:
        return int(self.bytes_moved(**cols)) if self.bytes_moved is not None else 0

    def locator(self, which: str) -> str:
        if which == "baseline":
            if not self.baseline:
                raise ValueError(f"Spec {self.name!r} names no baseline (Spec.baseline)")
            return self.baseline
        return self.function


def parse_locator(text: str, what: str = "locator") -> tuple[str, str]:
    """`path.py:func` or `pkg.module:func` -> (where, func); a bad one raises ValueError."""
    where, sep, func = text.rpartition(":")
    if not sep or not where or not func.isidentifier():
        raise ValueError(f"{what} {text!r}: expected 'path/in/tree.py:function' or 'package.module:function'")
    if not is_path_locator(where):
        if not all(part.isidentifier() for part in where.split(".")):
            raise ValueError(f"{what} {text!r}: {where!r} is neither a .py path nor a module name")
    elif Path(where).is_absolute() or ".." in Path(where).parts:
        raise ValueError(f"{what} {text!r}: the path must be relative to the tree, without '..'")
    return where, func


def is_path_locator(where: str) -> bool:
    return where.endswith(".py") or "/" in where


def spec_from_contract(contract: ModuleType, roofline: ModuleType | None = None) -> Spec:
    """A bundled kernel's contract module (and its roofline module) as a Spec: the solution
    is `solution/<NAME>.py:<FUNC>`, the baseline `baseline/<NAME>.py:<FUNC>`, with out=."""
    c = contract
    return Spec(
        name=c.NAME,
        function=f"solution/{c.NAME}.py:{c.FUNC}",
        baseline=f"baseline/{c.NAME}.py:{c.FUNC}",
        shapes=list(c.SHAPES),
        tolerance=dict(c.TOLERANCE),
        make_inputs=c.make_inputs,
        reference=c.reference,
        bytes_moved=getattr(roofline, "bytes_moved", None),
        columns=c.columns,
        class_by=list(c.CLASS_BY),
        out="out",
        class_args=getattr(c, "class_args", None),
        dtypes=list(c.DTYPES),
    )


def spec_from_folder(folder: str | Path, *, bytecode: bool = True) -> Spec:
    """A bundled kernel's folder (contract.py, roofline.py, solution/, baseline/) as a Spec
    (`bytecode`: loader.load_module's)."""
    folder = Path(folder).resolve()
    contract = load_module(folder / "contract.py", f"kopt_{folder.name}_contract", bytecode=bytecode)
    roofline = load_module(folder / "roofline.py", f"kopt_{folder.name}_roofline", bytecode=bytecode)
    return spec_from_contract(contract, roofline)


def as_spec(contract: Any, roofline: Any = None) -> Spec:
    """A Spec as is, or a bundled contract module (with its roofline module) read into one."""
    return contract if isinstance(contract, Spec) else spec_from_contract(contract, roofline)
