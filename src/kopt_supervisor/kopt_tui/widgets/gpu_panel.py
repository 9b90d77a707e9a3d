"""GPUs: utilisation, memory, foreign processes, idle or busy and why, the gate's choice."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui.model import GpuRow, GpusView


def _height(v: GpusView | None) -> int:
    if v is None:
        return 1
    return sum(1 + bool(g.reasons) for g in v.rows) + bool(v.note) + (not v.rows and not v.note)


def gpu_line(g: GpuRow) -> Text:
    mem = f"{g.mem_used / 1024:.1f}/{g.mem_total / 1024:.0f}G" if g.mem_used is not None and g.mem_total else "mem —"
    util = f"{g.util:3.0f}%" if g.util is not None else "  —"
    why = "; ".join(g.reasons) if g.reasons else ""
    return Text.assemble(
        (f"{g.index} ", "bold"),
        ("idle" if g.idle else "busy", "green" if g.idle else "yellow"),
        f" {util} {mem} ",
        (g.name, "dim"),
        ("  ◀ chosen" if g.chosen else "", "bold cyan"),
        ("  ◀ " + ", ".join(f"lane {i}" for i in g.lanes) if g.lanes else "", "bold cyan"),
        (f"\n  {why}" if why else "", "yellow"),
    )


class GpuPanel(Widget):
    view: reactive[GpusView | None] = reactive(None)

    def watch_view(self, old: GpusView | None, new: GpusView | None) -> None:
        if _height(old) != _height(new):
            self.refresh(layout=True)

    def render(self) -> Text:
        v = self.view
        if v is None:
            return Text("reading GPUs…", style="dim")
        lines = [gpu_line(g) for g in v.rows]
        if v.note:
            lines.append(Text(v.note, style="dim"))
        if not lines:
            lines.append(Text(fmt.DASH, style="dim"))
        out = Text("\n").join(lines)
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out
