"""No-op pyplot for the shim (see the package docstring): every call returns an object whose
every attribute and call is itself, so a plot is drawn nowhere and `savefig` writes nothing."""

from typing import Any


class _Nothing:
    def __call__(self, *args: Any, **kwargs: Any) -> "_Nothing":
        return self

    def __getattr__(self, name: str) -> "_Nothing":
        return self


_nothing = _Nothing()


def __getattr__(name: str) -> _Nothing:
    return _nothing
