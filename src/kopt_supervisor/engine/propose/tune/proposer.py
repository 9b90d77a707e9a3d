"""The `tune` proposer itself: reads the params file from the candidate tree, asks the search
for the next point, writes the file and the plan. The one module of the tune package with
side effects (it writes the params file and the plan).
"""

from __future__ import annotations

from pathlib import Path

from kopt_supervisor.engine.config.sections import TuneConfig
from kopt_supervisor.engine.errors import BadInput
from kopt_supervisor.engine.propose.base import Proposal, ProposalContext, format_plan
from kopt_supervisor.engine.propose.tune.params import ALL, apply_point, dump_params, load_params
from kopt_supervisor.engine.propose.tune.plan import hypothesis, plan_body
from kopt_supervisor.engine.propose.tune.search import choose, handed_back
from kopt_supervisor.engine.workspace import write_atomic


class TuneProposer:
    kind = "tune"
    instant = True
    """Proposes in the engine in a moment: a serving bench stays up across it."""

    def __init__(self, cfg: TuneConfig) -> None:
        if not cfg.params or not cfg.space:
            raise BadInput("kopt.toml: [propose.tune] needs params (the params file) and space for the tune proposer")
        self.cfg = cfg

    def propose(self, ctx: ProposalContext) -> Proposal:
        name = self.cfg.params
        if ctx.repair:
            return Proposal(
                False,
                f"the tune proposer does not repair: this point of {name} fails correctness "
                "and is not proposed again from this best",
                {"repair": ctx.repair},
            )
        try:
            path = self._path(ctx.worktree)
            params = load_params(self._read(path), name)
            if self.cfg.per_class and not ctx.classes:
                raise BadInput("[propose.tune].per_class = true but the bench has no config classes yet")
            previous = (ctx.handed_back or {}).get("proposal")
            again = (
                handed_back(params, self.cfg, ctx.classes, ctx.history, ctx.best_commit, name, previous)
                if isinstance(previous, dict)
                else None
            )
            choice = again or choose(params, self.cfg, ctx.classes, ctx.history, ctx.best_commit, name)
            busy = (
                choice is None
                and choose(params, self.cfg, ctx.classes, ctx.history, ctx.best_commit, name, busy=()) is not None
            )
        except BadInput as e:
            return Proposal(False, str(e), {"error": str(e), "fatal": True})
        if busy:  # the loop waits for a lane to end and asks again
            return Proposal(
                False,
                "every point left overlaps a point another lane is deciding (the same parameter for classes in common)",
                {"busy": True, "base": ctx.best_commit},
            )
        if choice is None:
            where = "every class" if self.cfg.per_class else "the global entry"
            return Proposal(
                False,
                f"search space exhausted: every point of [propose.tune].space for {where} "
                f"has been tried from best {ctx.best_commit[:10]}",
                {"exhausted": True, "base": ctx.best_commit},
            )
        move = choice.move
        new = apply_point(params, choice.cls, move.changed)
        write_atomic(path, dump_params(new), mode=path.stat().st_mode & 0o777)
        ctx.plan_path.parent.mkdir(parents=True, exist_ok=True)
        ctx.plan_path.write_text(format_plan(hypothesis(choice), choice.cls, plan_body(choice, ctx.best_commit, name)))
        return Proposal(
            True,
            "",
            {
                "proposer": "tune",
                "params_file": name,
                "class": choice.cls,
                "entry": choice.cls or ALL,
                "base": ctx.best_commit,
                "from": choice.base_point,
                "point": move.point,
                "changed": {p: list(v) for p, v in move.changed.items()},
                "directions": move.directions,
                "move": move.kind,
                "retry": choice.retry,
                **({"handed_back": True} if again is not None else {}),
            },
        )

    def _path(self, worktree: Path) -> Path:
        path = (worktree / self.cfg.params).resolve()
        if not path.is_relative_to(worktree.resolve()):
            raise BadInput(f"[propose.tune].params = {self.cfg.params!r} lies outside the repository")
        return path

    def _read(self, path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BadInput(f"{self.cfg.params}: not found in the candidate tree ([propose.tune].params)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise BadInput(f"{self.cfg.params}: cannot read it: {e}") from None
