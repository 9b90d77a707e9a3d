"""Colours and symbols for states and verdicts, in one place (Rich style strings)."""

from __future__ import annotations

STATE_STYLE = {
    "running": ("●", "bold green"),
    "paused": ("‖", "bold yellow"),
    "waiting_gpu": ("◌", "bold yellow"),
    "awaiting_review": ("⚑", "bold magenta"),
    "stopped": ("■", "bold blue"),
    "finished": ("■", "bold blue"),
    "crashed": ("✖", "bold red"),
    "unreadable": ("?", "bold red"),
}

STATUS_STYLE = {
    "baseline": "bold",
    "keep": "bold green",
    "accepted": "bold green",
    "regression": "red",
    "likely_regression": "red",
    "rejected": "red",
    "split": "yellow",
    "tie": "",
    "borderline": "bold magenta",
    "running": "cyan",
    "interrupted": "dim",
    "fail_bench": "dark_orange",
    "fail_correctness": "dark_orange",
    "fail_protected": "dark_orange",
    "fail_propose": "dark_orange",
}

VERDICT_STYLE = {"improved": "green", "regressed": "red", "tied": "", "undecided": "yellow", "baseline": "bold"}


def state_badge(state: str) -> tuple[str, str]:
    return STATE_STYLE.get(state, ("?", "bold"))


def delta_style(delta: float | None) -> str:
    """Negative is faster (cost ratios below 1), whatever the metric's direction."""
    if delta is None:
        return "dim"
    return "green" if delta < 0 else "red" if delta > 0 else ""
