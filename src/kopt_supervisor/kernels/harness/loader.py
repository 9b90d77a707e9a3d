"""Import a source file by path under a chosen module name (a tree's solution, a contract)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_module(path: str | Path, name: str, *, bytecode: bool = True) -> ModuleType:
    """Execute `path` as module `name` (registered in sys.modules, replacing any earlier one).
    `bytecode=False`: compiled from its source, no cached bytecode read (a profile started ahead
    reads the contract so: the bytecode cache of the candidate's tree is written by its served
    process, which could leave a .pyc there that runs other code for the same source)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        if bytecode:
            spec.loader.exec_module(module)
        else:
            exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
