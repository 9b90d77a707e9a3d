"""The restart dialog: pick vK, see what the masked partial restart masks and what the
counters become, then confirm. The engine (or, with none running, `engine.api.send`) does
the masking; nothing here writes run.db."""

from __future__ import annotations

import dataclasses

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from kopt_supervisor.engine import api
from kopt_supervisor.engine.api import fmt
from kopt_supervisor.kopt_tui import model
from kopt_supervisor.kopt_tui.model import RunData
from kopt_supervisor.kopt_tui.screens.live import KoptModalScreen


def preview(data: RunData, version: int) -> Text:
    """What a restart from `version` does, in a few lines."""
    masks = model.restart_masks(data.iterations, version)
    masked = {it.version for it in masks}
    after = [dataclasses.replace(it, masked=True) if it.version in masked else it for it in data.iterations]
    best = api.best_iteration(after)
    c = api.counters(after)
    lines = [
        Text.assemble(
            ("BEST_COMMIT becomes ", ""),
            (fmt.sha(best.commit if best else None), "cyan"),
            f" (v{best.version})" if best else "",
        ),
        Text(
            f"consecutive regressions: {data.counters.consecutive_regressions} → {c.consecutive_regressions}; "
            f"keeps: {data.counters.keeps} → {c.keeps}"
        ),
    ]
    if not masks:
        lines.append(Text("masks nothing (it is the latest point)", style="dim"))
    else:
        lines.append(Text(f"masks {len(masks)} iteration(s) (kept in memory/, skipped from now on):", style="bold"))
        shown = masks[:8]
        for it in shown:
            lines.append(
                Text.assemble(
                    (f"  v{it.version:<4}", "bold"), (f"{it.status:<17}", "dim"), fmt.one_line(it.hypothesis, 80)
                )
            )
        if len(masks) > len(shown):
            lines.append(Text(f"  … and {len(masks) - len(shown)} more", style="dim"))
    return Text("\n").join(lines)


class RestartScreen(KoptModalScreen[None]):
    BINDINGS = [
        Binding("ctrl+s", "confirm", "restart", tooltip="Restart from the highlighted point"),
        Binding("escape", "cancel", "cancel", tooltip="Close without restarting"),
    ]

    def __init__(self, tag: str, selected: int | None) -> None:
        super().__init__()
        self.tag = tag
        self.selected = selected
        self.data: RunData | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="restart"):
            yield Label("Masked partial restart", classes="dialog-title")
            yield Static("Go back to (the baseline or a kept iteration):")
            yield OptionList(id="restart-points")
            with VerticalScroll(classes="dialog-scroll"):
                yield Static(id="restart-preview")
            yield Input(placeholder="why (optional, kept in the event log)", id="restart-why", compact=True)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Restart (ctrl+s)", id="confirm", variant="warning", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.data = self.app.latest.get(self.tag)
        options = self.query_one(OptionList)
        if self.data is None:
            return
        points = model.restart_points(self.data.iterations)
        for it in points:
            options.add_option(
                Option(
                    Text.assemble(
                        (f"v{it.version:<4}", "bold"),
                        (fmt.sha(it.commit), "cyan"),
                        "  ",
                        (it.status, "green"),
                        "  ",
                        fmt.one_line(it.hypothesis, 60),
                    ),
                    id=str(it.version),
                )
            )
        start = model.nearest_restart_point(self.data.iterations, self.selected)
        if start is not None:
            options.highlighted = [it.version for it in points].index(start)
        options.focus()
        self._show_preview()
        # The list has no height yet: scroll the chosen point into view once it is laid out.
        self.call_after_refresh(options.scroll_to_highlight)

    def _chosen(self) -> int | None:
        options = self.query_one(OptionList)
        if options.highlighted is None:
            return None
        opt = options.get_option_at_index(options.highlighted)
        return int(opt.id) if opt.id is not None else None

    def _show_preview(self) -> None:
        v = self._chosen()
        if self.data is None or v is None:
            return
        self.query_one("#restart-preview", Static).update(preview(self.data, v))
        self.query_one("#confirm", Button).label = f"Restart from v{v} (ctrl+s)"

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_preview()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#confirm", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.dismiss(None)

    def action_confirm(self) -> None:
        v = self._chosen()
        if v is None:
            return
        why = self.query_one("#restart-why", Input).value.strip()
        self.app.send_command(self.tag, "restart", {"version": v, "why": why or "restart from the TUI"})
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
