"""The command palette (ctrl+p): every action of the screen on view, and the app's, by name.

The entries come from the same `Binding`s as the keys, the footer and the help screen, and
`check_action` hides what does not apply now (no accept without a pending review), so the
palette can never offer an action the keys do not have.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.dom import DOMNode

KEY_NAMES = {"question_mark": "?", "escape": "esc", "left": "←", "right": "→"}


def key_label(b: Binding) -> str:
    """How a binding's keys are written for people: "n / esc", "?", "R"."""
    if b.key_display:
        return b.key_display
    return " / ".join(KEY_NAMES.get(k, k) for k in b.key.split(","))


def available_actions(screen: DOMNode) -> list[tuple[Binding, DOMNode]]:
    """(binding, the node whose action it is) for the screen's and the app's bindings that apply now."""
    seen: set[str] = set()
    out = []
    for node in (screen, screen.app):
        for b in node.BINDINGS:
            if not isinstance(b, Binding) or b.action in seen:
                continue
            seen.add(b.action)
            name = b.action.split("(")[0]
            if node.check_action(name, ()) is False:
                continue
            out.append((b, node))
    return out


class KoptCommands(Provider):
    def _entries(self) -> list[tuple[str, str, Callable[[], object]]]:
        entries: list[tuple[str, str, Callable[[], object]]] = []
        for b, node in available_actions(self.screen):
            title = b.tooltip or b.description
            entries.append((title, f"key: {key_label(b)}", partial(self.app.run_action, b.action, node)))
        return entries

    async def discover(self) -> Hits:
        for title, help_text, run in self._entries():
            yield DiscoveryHit(title, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, run in self._entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), run, help=help_text)
