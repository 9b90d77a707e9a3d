"""What the kopt app's screens share.

`KoptScreen` and `KoptModalScreen`: screens of `KoptApp`, whose `app` is that app, typed
(Textual's `getters.app`): the run data it holds, `now`, `send_command`, `watch_run`... so a
screen's use of the app is type-checked. A dialog stops the app's bindings (Textual ends the
binding chain at a modal screen), so `KoptModalScreen` binds `?` itself: the help opens over
the dialog, which keeps its state (a note being written) underneath.

`renders_data`: the poller's updates arrive whenever the engine writes. When the app closes
(`q`, the end of a test), a screen's widgets are removed one by one while an update can still
be in flight; a render method marked `@renders_data` then has nothing to show, and shows
nothing instead of raising NoMatches into the app.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

from textual import getters
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen

from kopt_supervisor.kopt_tui.app import KoptApp

F = TypeVar("F", bound=Callable[..., Any])
ResultT = TypeVar("ResultT")


class KoptScreen(Screen[ResultT]):
    """A full screen of the kopt app."""

    app = getters.app(KoptApp)


class KoptModalScreen(ModalScreen[ResultT]):
    """A dialog of the kopt app."""

    BINDINGS = [
        Binding("question_mark", "help", "help", key_display="?", show=False, tooltip="Every key, on every screen")
    ]

    app = getters.app(KoptApp)

    def action_help(self) -> None:
        self.app.action_help()


def renders_data(method: F) -> F:
    """Mark a method that writes poller data into the screen's widgets."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with suppress(NoMatches):
            return method(*args, **kwargs)
        return None

    return wrapper  # type: ignore[return-value]  # functools.wraps loses F's signature; the wrapper keeps it
