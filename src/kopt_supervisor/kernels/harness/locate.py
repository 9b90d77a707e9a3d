"""Find the function to time in a tree: by file path or by module name, one copy per tree.

Each import is the tree's own module object, never one imported before or found elsewhere (a
served process imports its tree again on `load` and must read the tree's files as they are then):

- `path/in/tree.py:func`: the file is executed as a module of a name of its own per tree
  and tag (loader.load_module); it finds its neighbours through `__file__`.
- `package.module:func`: the tree goes first on sys.path, every module of that top-level
  package already imported is set aside, the module is imported, and the package's modules
  (this tree's copy) are taken out of sys.modules again and kept alive with the function:
  the next tree imports its own copy. A module that resolves outside the tree (an
  installed copy of the package, an editable install pointing elsewhere) is refused: both
  sides would time the same code.

A function that imports its own package lazily (inside its body, at call time) gets whatever
copy sys.modules holds then; import at module level.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .loader import load_module
from .spec import is_path_locator, parse_locator

_KEPT: list[dict[str, ModuleType]] = []
"""Each tree's isolated package modules, alive as long as the process (the functions hold
their globals, but a module object dropped from everywhere may be torn down)."""


class LocateError(Exception):
    """The function cannot be found in the tree (one line, naming tree and locator)."""


@dataclass(frozen=True)
class Located:
    module: ModuleType
    function: Any
    path: Path


def locate(tree: str | Path, locator: str, tag: str) -> Located:
    """The function `locator` names inside `tree`; `tag` makes the module names unique per
    caller (the bench's tree: "this")."""
    tree = Path(tree).resolve()
    where, func = parse_locator(locator, "function")
    if is_path_locator(where):
        path = tree / where
        if not path.is_file():
            raise LocateError(f"{locator}: no file {where} in {tree}")
        safe = "".join(ch if ch.isalnum() else "_" for ch in where.removesuffix(".py"))
        module = load_module(path, f"kopt_{tag}_{safe}")
    else:
        module = _import_isolated(tree, where)
        path = Path(getattr(module, "__file__", "") or "")
    fn = getattr(module, func, None)
    if fn is None or not callable(fn):
        raise LocateError(f"{locator}: {where} (in {tree}) has no function {func!r}")
    return Located(module, fn, path)


def _import_isolated(tree: Path, name: str) -> ModuleType:
    top = name.split(".")[0]

    def ours(key: str) -> bool:
        return key == top or key.startswith(top + ".")

    saved = {k: v for k, v in sys.modules.items() if ours(k)}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(tree))
    importlib.invalidate_caches()
    loaded: dict[str, ModuleType] = {}
    try:
        module = importlib.import_module(name)
        loaded = {k: v for k, v in sys.modules.items() if ours(k)}
    except ImportError as exc:
        raise LocateError(f"{name}: cannot import from {tree}: {exc}") from None
    finally:
        try:
            sys.path.remove(str(tree))
        except ValueError:
            pass
        for k in [k for k in sys.modules if ours(k)]:
            loaded.setdefault(k, sys.modules[k])
            del sys.modules[k]
        sys.modules.update(saved)
    _KEPT.append(loaded)
    file = getattr(module, "__file__", None)
    if not file or tree not in Path(file).resolve().parents:
        raise LocateError(
            f"{name}: imported from {file or 'a built-in'}, outside the tree {tree} "
            f"(an installed or editable copy of {top!r}?): both sides would time the same code"
        )
    return module
