"""The pyplot calls triton.testing.Mark.run makes, doing nothing but creating the file savefig names."""

from typing import Any


class _Axes:
    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def figure(*args: Any, **kwargs: Any) -> None:
    return None


def subplot(*args: Any, **kwargs: Any) -> _Axes:
    return _Axes()


def show(*args: Any, **kwargs: Any) -> None:
    return None


def savefig(path: str, *args: Any, **kwargs: Any) -> None:
    open(path, "wb").close()
