"""What screens fed by the run.db poller share.

The poller's updates arrive whenever the engine writes. When the app closes (`q`, the
end of a test), a screen's widgets are removed one by one while an update can still be
in flight; a render method marked `@renders_data` then has nothing to show, and shows
nothing instead of raising NoMatches into the app.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

from textual.css.query import NoMatches

F = TypeVar("F", bound=Callable[..., Any])


def renders_data(method: F) -> F:
    """Mark a method that writes poller data into the screen's widgets."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with suppress(NoMatches):
            return method(*args, **kwargs)
        return None

    return wrapper  # type: ignore[return-value]
