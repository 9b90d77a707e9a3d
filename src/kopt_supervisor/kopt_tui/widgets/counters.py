"""Counters: consecutive regressions k/N (the stop rule), what the agent cost over the run,
what one decision costs with this bench, and the recent five regressions."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui.model import CountersView


class Counters(Widget):
    view: reactive[CountersView | None] = reactive(None)

    def watch_view(self, old: CountersView | None, new: CountersView | None) -> None:
        if self._height(old) != self._height(new):
            self.refresh(layout=True)

    @staticmethod
    def _height(v: CountersView | None) -> tuple[int, bool, bool]:
        return (len(v.recent), bool(v.agent), bool(v.decision)) if v else (0, False, False)

    def render(self) -> Text:
        v = self.view
        if v is None:
            return Text("")
        k, n = v.consecutive, max(1, v.limit)
        gauge = "▮" * min(k, n) + "▯" * max(0, n - k)
        style = "bold red" if k >= n - 1 else "yellow" if k else "green"
        lines = [
            Text.assemble(
                "regressions ",
                (f"{k}/{n} ", style),
                (gauge, style),
                f"  keeps {v.keeps} · candidates {v.candidates}",
                (f" · failed in a row {v.failures_in_row}" if v.failures_in_row else "", "dark_orange"),
            )
        ]
        if v.agent:
            lines.append(Text.assemble(("agent ", "dim"), v.agent))
        if v.decision:
            slow = "  ⚠ slow: a bench on kopt's harness decides in seconds (docs/byo-kernel.md)"
            lines.append(
                Text.assemble(
                    ("decision ", "dim"),
                    (v.decision, "bold yellow" if v.decision_slow else ""),
                    (slow if v.decision_slow else "", "yellow"),
                )
            )
        if not v.recent:
            lines.append(Text("no regression since the last keep or tie", style="dim"))
        for r in v.recent:
            lines.append(
                Text.assemble(
                    (f"v{r.version:<4}", "bold"),
                    (f"{fmt.change(r.delta):>15} ", "red"),
                    (f"{r.cls} ", "dim"),
                    r.hypothesis,
                )
            )
        out = Text("\n").join(lines)
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out
