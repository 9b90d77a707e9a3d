"""Profiler ranges around each config's checked and timed calls: NVTX on NVIDIA, roctx on AMD.

The range of a config is named `kopt:` + `col=value,col=value` over the config's columns
(values written as kopt's metrics.format_value writes them: a float that is an integer loses
its ".0"). kopt's profiler adapters attribute every kernel launched inside a range to the
CSV row whose columns match all the pairs of the name (docs/design.md §5, §12): neither adding nor
renaming a kernel escapes the comparison.

Backends, chosen once per process (`open_ranges`):
- CUDA: torch.cuda.nvtx (range_push / range_pop);
- ROCm: roctx through ctypes (rocprofiler-sdk's `librocprofiler-sdk-roctx.so`, which
  rocprofv3 --marker-trace reads, or the older `libroctx64.so`), else torch.cuda.nvtx (which
  a ROCm build of torch maps to roctx);
- no GPU, or no working backend: no-ops (and `why` says which).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .params import config_key

PREFIX = "kopt:"
ROCTX_LIBRARIES = ("librocprofiler-sdk-roctx.so", "librocprofiler-sdk-roctx.so.1", "libroctx64.so", "libroctx64.so.4")


def range_name(cols: Mapping[str, Any]) -> str:
    """`kopt:col=value,col=value` for a config's columns (in their order)."""
    return PREFIX + config_key(cols)


class Ranges:
    """push/pop of named ranges; `span(name)` is the context manager the driver uses."""

    def __init__(self, push: Callable[[str], Any], pop: Callable[[], Any], kind: str, why: str = "") -> None:
        self._push, self._pop, self.kind, self.why = push, pop, kind, why

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        self._push(name)
        try:
            yield
        finally:
            self._pop()

    def around(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        """`fn` called inside the range `name`: only its own launches count in the config
        (the reference's and the comparison's kernels stay outside)."""

        def ranged(*args: Any, **kwargs: Any) -> Any:
            with self.span(name):
                return fn(*args, **kwargs)

        return ranged


def no_ranges(why: str) -> Ranges:
    return Ranges(lambda _name: None, lambda: None, "none", why)


def _roctx(loader: Callable[[str], Any]) -> Ranges | None:
    for lib in ROCTX_LIBRARIES:
        try:
            handle = loader(lib)
            push, pop = handle.roctxRangePushA, handle.roctxRangePop
        except (OSError, AttributeError):
            continue
        push.argtypes, push.restype = [ctypes.c_char_p], ctypes.c_int
        pop.restype = ctypes.c_int

        def push_name(name: str, push: Any = push) -> Any:
            return push(name.encode())

        return Ranges(push_name, pop, f"roctx ({lib})")
    return None


def open_ranges(torch: Any, gpu: bool, *, loader: Callable[[str], Any] = ctypes.CDLL) -> Ranges:
    """The range backend of this process (see the module docstring)."""
    if not gpu:
        return no_ranges("no GPU: ranges are no-ops")
    if getattr(getattr(torch, "version", None), "hip", None):
        found = _roctx(loader)
        if found is not None:
            return found
    nvtx = getattr(getattr(torch, "cuda", None), "nvtx", None)
    if nvtx is None:
        return no_ranges("torch.cuda.nvtx is missing")
    try:  # a torch built without NVTX raises here, not at import
        nvtx.range_push(PREFIX + "probe")
        nvtx.range_pop()
    except Exception as exc:  # noqa: BLE001 - any failure means no ranges, said once
        return no_ranges(f"torch.cuda.nvtx does not work here ({type(exc).__name__}: {exc})")
    kind = "roctx (torch.cuda.nvtx on ROCm)" if getattr(torch.version, "hip", None) else "nvtx"
    return Ranges(nvtx.range_push, nvtx.range_pop, kind)
