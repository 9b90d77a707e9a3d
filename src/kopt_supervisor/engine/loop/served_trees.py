"""`[target].serve`'s served trees: best and the candidate each in a served process of its own,
confined to its tree, asked for each look on its stdin in ABBA order with one seed for both,
then audited by kopt (docs/files.md, "The per-tree serve protocol"; engine/decide/audit.py).
What every look leaves and what is checked around it: look_files.py."""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kopt_supervisor.engine import adapters, metrics
from kopt_supervisor.engine.decide import audit
from kopt_supervisor.engine.decide.external_truth import SideCost
from kopt_supervisor.engine.loop.context import Lane, Look, RunContext
from kopt_supervisor.engine.loop.look_files import (
    NEUTRAL,
    BlindTrees,
    check_after_run,
    empty_folder,
    ensure_best_pristine,
    keep_bytes,
    keep_csv,
    tree_hashes,
)
from kopt_supervisor.engine.metrics import BenchError, ConfigResult, Measurement
from kopt_supervisor.engine.records import Iteration
from kopt_supervisor.engine.runner.server import Server, ServerEnded, ServerError
from kopt_supervisor.engine.sandbox import read_output

SIDES = ("best", "cand")
T = TypeVar("T")
MAX_AUDIT_BYTES = 16 * 1024 * 1024
"""The most kopt reads of a side's commitment or audit file."""
SPLIT_LOOKS = True
"""On a GPU, a look is prepared in both processes at once (`prepare N SEED`: checks, draws, CUDA
graphs at the bytes rule's calls per block; ~0.55 s of each side's ~1.0 s on the H200, part 19),
then timed in each alone; a count the calibration chooses is chosen in the look, alone."""


def answers_prepare(n: int) -> Callable[[str], bool]:
    """Whether a line answers `prepare N SEED`: `prepared N`, `unprepared N`, `fail N WHY`, or
    `fail ? WHY` (a bench that does not know the request, as kopt's harness answers one)."""
    return lambda line: (
        line.split()[:2] in (["prepared", str(n)], ["unprepared", str(n)], ["fail", str(n)], ["fail", "?"])
    )


def unprepared(reply: str) -> bool:
    """The process's looks are whole: it answered `prepare` as one it cannot, or does not know."""
    words = reply.split()
    return words[:1] == ["unprepared"] or words[:2] == ["fail", "?"]


def commitment_path(csv: Path) -> Path:
    """Where a look's commitment is written beside its table."""
    return Path(f"{csv}{audit.COMMITMENT_SUFFIX}")


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One look's requests to its sides (`ServedTrees._exchange`): per side its table, its audit
    and its commitment as read before the audit seed (bytes, or why it could not be read);
    the audit seed; each side's CPU and wall seconds."""

    csvs: dict[str, Path]
    audits: dict[str, Path]
    promised: dict[str, bytes | str]
    audit_seed: int
    cpu: dict[str, float]
    wall: dict[str, float]


class ServedTrees:
    """`[target].serve`: one served process per tree (docs/files.md, "The per-tree serve
    protocol"), each started in its tree (read-only to it), with a cache of its own and one
    output folder, so candidate code never runs where best is measured.

    A look: `look N SEED PATH` to both in ABBA order across looks, the same SEED (drawn with
    `secrets`) for both; then a second seed, drawn only after both answered, and `audit N
    SEED PATH` to both: kopt checks the rule's choices and compares the candidate's audited
    outputs with best's (engine/decide/audit.py); a difference is a correctness failure of
    the candidate's config. While one side is asked, the other's processes are stopped
    (SIGSTOP): nothing it left running competes with the side being measured. Each side's
    CPU time (its process tree, from just before its look to its audit's reply) and wall
    time go into the look's `costs`.

    Best's process is kept while BEST's tree does not change (it runs only kept code); the
    candidate's is started anew at every decision, so nothing one candidate's code left in
    its process reaches the next. `fresh` (the confirmation of a keep): both are started anew at
    every decision, in copies of the trees no process can tell apart, each with a new cache
    (`BlindTrees`).

    On a GPU, when both processes are new at a look, both first warm up at the same time
    (`_warm_up`: that look's prepare, or a whole look never read): their compiles and captures
    overlap instead of adding up (the H100's first look of a fresh pair took 21 s one after the
    other, part 2). Without a GPU (`warm_ups` None, no GPU chosen) two at once only share the CPU."""

    def __init__(self, ctx: RunContext, lane: Lane, *, fresh: bool = False, warm_ups: bool | None = None) -> None:
        self.ctx, self.lane, self.fresh = ctx, lane, fresh
        self.warm_ups = warm_ups
        """Warm a new pair up at once: True, False, or None (when the lane's GPU is a real one)."""
        self.blind = BlindTrees(ctx) if fresh else None
        """A keep's confirmation (`fresh`): both trees as copies no process can tell apart by where
        it runs, each with a new cache and looks folder beside it (look_files.BlindTrees)."""
        self.coin = 0  # who is started and asked first at even looks: best, or (copies) a secret coin's side
        self.looks = ctx.ws.dir / "looks" / f"lane{lane.index}"
        """Each side's output folder is `looks/<side>` (`_folder`): the one folder its process may write."""
        self.servers: dict[str, Server] = {}
        self.serving: dict[str, str] = {}
        """side -> the tree hash its process was started on."""
        self.stale: set[str] = set(SIDES)
        """Sides whose process starts anew at the next look."""
        self.new: set[str] = set()
        """Sides whose process was started for the look in progress."""
        self.unlooked: set[str] = set()
        """Sides whose process has answered no look yet (started for this look)."""
        self.warm = True
        """Warm-ups still pay: none has been answered `done N last` (a process that leaves
        after every look gains nothing from one)."""
        self.started = 0
        self.failed_new: str | None = None
        """The side whose process, started for the look in progress, failed it."""
        self.restarted: set[str] = set()
        """Sides started again this decision after their new process failed its first look."""
        self.whole: set[str] = set()
        """Sides whose process answered `unprepared`: its looks are whole, never prepared."""
        self.ending: list[Server] = []
        """Processes told to end and not yet waited for (`_close`, `_reap`)."""
        self.prepared: dict[str, tuple[int, int]] = {}  # side -> the (look, seed) its warm-up prepared

    def new_decision(self) -> None:
        self.restarted.clear()
        if self.blind is not None:
            self.blind.drop()  # new copies, new labels, a new secret coin for who goes first
            self.coin = secrets.randbits(1)
        self.stale |= set(SIDES) if self.fresh else {"cand"}

    def close(self) -> None:
        self.release()

    def release(self) -> None:
        """Both sides' processes end, waited for (they hold GPU memory)."""
        for side in list(self.servers):
            self._close(side)
        self._reap()
        if self.blind is not None:
            self.blind.drop()

    def look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        """One look; a side whose process was started for it and failed it is started once
        more (per decision) and the look taken again from the start, when the process ended or
        answered `fail` (never after a timeout or a flood). A bench that asserts at
        import on fresh random data fails some starts of an unchanged tree (Triton's
        layer-norm tutorial: 1 in 3 on the H200, 2026-11-30); a second start cannot buy a
        verdict, since the look it answers is read and audited as any other, and a tree that
        fails twice fails the bench. Both sides' new processes may fail the same look (a fresh
        pair of a flaky tree): each is started once more."""
        while True:  # at most once more per side
            self.failed_new = None
            try:
                return self._look(it, stage, r, env)
            except BenchError as e:
                side = self.failed_new
                if side is None or side in self.restarted:
                    raise
                self.restarted.add(side)
                self.ctx.event(
                    "serve",
                    f"{side}'s new process failed its first look ({e}); starting it once more",
                    it=it,
                    level="warn",
                )

    def _look(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> Look:
        ctx, lane = self.ctx, self.lane
        laps = [time.monotonic()]
        hashes = dict(zip(SIDES, tree_hashes(lane, it), strict=True))
        if self.blind is None:
            ensure_best_pristine(ctx, lane, it, r)
        else:  # kopt's read-only copies of what was measured, made for this confirmation
            self.blind.make(lane, it, hashes)
        order = self._first() if r % 2 == 0 else self._first()[::-1]
        self.new.clear()
        laps.append(time.monotonic())
        for side in order:
            self._server(side, it, stage, env, hashes[side])
        laps.append(time.monotonic())
        if self.warm and self.unlooked >= set(SIDES) and self._warms():
            self._warm_up(it, stage, env, hashes, r)
        laps.append(time.monotonic())
        self._reap()
        laps.append(time.monotonic())
        x = self._exchange(it, stage, r, order)
        laps.append(time.monotonic())
        if self.new:  # where a look that starts processes spends its seconds (issue 26: the first look)
            spent = [b - a for a, b in zip(laps, laps[1:], strict=False)]
            ctx.event(
                "serve",
                f"v{it.version} {stage} look {r}: {' and '.join(sorted(self.new))} started; "
                f"trees checked {spent[0]:.2f} s, processes spawned {spent[1]:.2f} s, "
                f"warm-up {spent[2]:.2f} s, old processes ended {spent[3]:.2f} s, "
                f"the look and its audit {spent[4]:.2f} s",
                it=it,
            )
        got, order_of = {}, {}
        for side in SIDES:
            got[side], order_of[side] = self._read(x.csvs[side], side, r)
        best_m, cand_m = got["best"], got["cand"]
        source = f"the candidate's look {r}"
        metrics.check_shape(best_m, cand_m, source)
        if lane.vendor == "none":  # on a GPU a long config's blocks follow its tree's speed
            metrics.check_same_calls(best_m, cand_m, source)
        cand_m = self._audit(x, best_m, cand_m, order_of["best"], r)
        pairs = metrics.paired(best_m, cand_m, r, "AB" if order[0] == "best" else "BA", source)
        scale = ctx.cfg.roofline.unit_scale
        costs = tuple(
            SideCost(
                side,
                r,
                round(x.cpu[side], 6),
                round(x.wall[side], 6),
                None if m.timed is None else m.timed * scale,
                started=side in self.new,
            )
            for side, m in (("best", best_m), ("cand", cand_m))
        )
        return Look(pairs, best_m, cand_m, sum(x.wall.values()), costs=costs)

    def look_best(self, it: Iteration, stage: str, r: int, env: dict[str, str]) -> tuple[Measurement, float]:
        """Best alone, in the process the decisions will use (the baseline of a served target:
        no process-level run, and the first decision finds best's process started and warm).
        A look and its audit as in a decision, best's audit held to the rule and its
        commitment; its measurement and the look's seconds (a new process's start included).
        A process that ended or answered `fail` raises BenchError with `ended` set (`_ask`:
        the baseline tries it again in a new process; a hang or a flood is never tried again)."""
        ensure_best_pristine(self.ctx, self.lane, it, r)
        t0 = time.monotonic()
        self._server("best", it, stage, env, tree_hashes(self.lane, it)[0])
        x = self._exchange(it, stage, r, ("best",))
        m, columns = self._read(x.csvs["best"], "best", r)
        self._check_best(self._side_audit("best", x, m, r), m, columns, x.audit_seed, r)
        return m, time.monotonic() - t0

    def _exchange(self, it: Iteration, stage: str, r: int, order: tuple[str, ...]) -> Exchange:
        """One look's requests to the sides' processes in `order`, each alone on the machine
        (`_focus`): `look N SEED PATH` to each with one seed, their commitments read, then the
        audit seed drawn (no process could see it coming) and `audit N SEED PATH` to each;
        what they wrote kept beside the iteration's logs, their trees checked and put back."""
        self._reap()  # nothing of an ended process runs while a side is measured
        name = f"v{it.version}_{stage}_r{r}"
        csvs = {side: self._folder(side) / f"{name}.csv" for side in order}
        audits = {side: self._folder(side) / f"{name}_audit.json" for side in order}
        for side in order:  # earlier looks' files (their copies are in logs/), whatever else a process left
            empty_folder(self._folder(side))
        ready = {side: self.prepared.pop(side) for side in list(self.prepared)}
        seed = next((s for n, s in ready.values() if n == r), None) or secrets.randbits(63)
        cpu: dict[str, float] = {}
        wall: dict[str, float] = {}
        leaving: set[str] = set()
        try:
            cpu = {side: self.servers[side].cpu_seconds() for side in order}
            todo = tuple(side for side in order if ready.get(side) != (r, seed))  # a warm-up prepared the others
            if len(order) > 1 and self._splits() and todo:
                self._prepare(todo, r, seed)
            self.lane.settle(self.ctx.control.pump)  # nothing started beside the decision runs past here
            for side in order:
                self._focus(side)
                t0 = time.monotonic()
                words = self._ask(side, f"look {r} {seed} {csvs[side]}", "done", r)
                wall[side] = time.monotonic() - t0
                if words[2:3] == ["last"]:  # it leaves after this look's audit
                    leaving.add(side)
            promised = {side: self._snapshot(commitment_path(csvs[side])) for side in order}  # before the seed exists
            audit_seed = secrets.randbits(63)
            for side in order:
                self._focus(side)
                self._ask(side, f"audit {r} {audit_seed} {audits[side]}", "audited", r)
                cpu[side] = self.servers[side].cpu_seconds() - cpu[side]
        finally:
            for server in self.servers.values():
                server.resume()
            for side in leaving:
                self._close(side)
        self.unlooked -= set(order)
        for side in order:
            keep_csv(self.ctx, it, csvs[side], f"{stage}_r{r}_{side}")
            data = promised[side]
            if isinstance(data, bytes):  # the commitment as kopt read it before the audit seed
                keep_bytes(self.ctx, it, data, f"{stage}_r{r}_{side}_sets.json")
            keep_csv(self.ctx, it, audits[side], f"{stage}_r{r}_{side}_audit", suffix=".json")
        for side in order if self.blind is None else ():  # copies: read-only, removed after
            check_after_run(self.ctx, self.lane, it, self._tree(side))
        return Exchange(csvs, audits, promised, audit_seed, cpu, wall)

    def _warms(self) -> bool:
        if self.warm_ups is not None:
            return self.warm_ups
        return self.lane.vendor != "none"

    def _splits(self) -> bool:
        return SPLIT_LOOKS and self.ctx.cfg.target.serve_prepare and self._warms()

    def _prepare(self, sides: tuple[str, ...], n: int, seed: int) -> None:
        """`prepare N SEED` to `sides` at once (none paused); a side that answers `unprepared`
        has whole looks from then on. A failure is the side's look failing (`_ask`)."""
        asking = [side for side in sides if side not in self.whole]
        for server in self.servers.values():
            server.resume()
        replies = self._ask_all(dict.fromkeys(asking, f"prepare {n} {seed}"), answers_prepare(n))
        for side, reply in replies.items():
            tree = self._name(side)
            if isinstance(reply, ServerError):
                ended = isinstance(reply, ServerEnded)
                if ended:
                    self._failed(side)
                else:
                    self._close(side)
                raise BenchError(f"serve on {tree}/ {reply}", ended=ended)
            words = reply.split()
            if unprepared(reply):
                self.whole.add(side)
            elif words[0] == "fail":
                self._failed(side)
                raise BenchError(
                    f"serve on {tree}/ could not prepare look {n}: {' '.join(words[2:]) or 'no reason given'}",
                    ended=True,
                )

    def _ask_all(self, requests: dict[str, str], is_reply: Callable[[str], bool]) -> dict[str, str | ServerError]:
        """Each side's request sent at once, then each reply awaited in turn with the engine's
        commands pumped (a stop or pause is acted on while a process works or hangs: the
        interrupt propagates, the process waited on closed); per side its reply, or the
        ServerError that ended it (the process then closed)."""
        replies: dict[str, str | ServerError] = {}
        sent: dict[str, float] = {}
        for side, request in requests.items():
            try:
                sent[side] = self.servers[side].send(request)
            except ServerError as e:
                replies[side] = e
        for side, start in sent.items():
            try:
                replies[side] = self.servers[side].reply(
                    requests[side],
                    start,
                    is_reply=is_reply,
                    timeout_s=self.ctx.cfg.target.timeout_s,
                    poll=self.ctx.control.pump,
                    poll_interval_s=self.ctx.poll_interval_s,
                )
            except ServerError as e:
                replies[side] = e
        return replies

    def _warm_up(self, it: Iteration, stage: str, env: dict[str, str], hashes: dict[str, str], r: int) -> None:
        """Both new processes answer one look at the same time (imports, compiles, captures
        overlapping); its files are removed unread. On a GPU lane with `serve_prepare` that is
        a `prepare` (no timing, no commitment), and a whole look for a side that answers
        `unprepared`. Requests go to both at once and the replies are awaited in turn with the
        engine's commands pumped (`_ask_all`). A side whose warm-up failed or that leaves after
        it is closed and started again here for the measured look, which reports what is wrong.
        A `prepare` is look r's own, at its seed (`prepared`; a whole look is numbered -1-r)."""
        n = -1 - r
        for server in self.servers.values():
            server.resume()
        seed = secrets.randbits(63)
        ok = dict.fromkeys(SIDES, False)
        whole = list(SIDES)
        if self._splits():  # look r's checks (compiles), draws and captures; a failure is the look's
            self._prepare(self._first(), r, seed)
            whole = [side for side in self._first() if side in self.whole]  # a whole look warms it up
            for side in SIDES:
                ok[side] = side not in whole
                if ok[side]:
                    self.prepared[side] = (r, seed)
        looks = {
            side: f"look {n} {seed} {self._folder(side) / f'warmup{-n}.csv'}" for side in self._first() if side in whole
        }
        done = self._ask_all(looks, lambda line: line.split()[:2] in (["done", str(n)], ["fail", str(n)]))
        if any(isinstance(reply, str) and reply.split()[2:3] == ["last"] for reply in done.values()):
            self.warm = False  # a process that leaves after every look gains nothing from a warm-up
        for side, reply in done.items():
            ok[side] = isinstance(reply, str) and reply.split()[0] == "done" and self.warm
        for side in SIDES:
            empty_folder(self._folder(side))
            if not ok[side]:
                self._close(side)
        self.ctx.control.pump()
        for side in self._first():
            self._server(side, it, stage, env, hashes[side])

    def _read(self, path: Path, side: str, r: int) -> tuple[Measurement, tuple[str, ...]]:
        """A side's look by the target's rules, each config in one row; and its config
        columns in the CSV's order (the audit rule names a config by them)."""
        t = self.ctx.cfg.target
        source = f"{side}'s look {r} ({path.name})"
        df = adapters.read_kopt_csv(path, metric=t.metric)
        m = metrics.measure(df, t, source)
        twice = [(k, len(c.values)) for k, c in m.configs.items() if len(c.values) > 1]
        if twice:
            raise BenchError(f"{source}: config {twice[0][0]} in {twice[0][1]} rows (one row per config)")
        return m, tuple(c for c in df.columns if c in m.config_columns)

    def _audit(
        self, x: Exchange, best_m: Measurement, cand_m: Measurement, columns: tuple[str, ...], r: int
    ) -> Measurement:
        """Both sides' commitments and audits read and checked (`audit.best_problem`, a bench
        failure; `audit.candidate_problems`, each a failed config of the candidate, the first
        bad value its reason)."""
        best, cand = self._side_audit("best", x, best_m, r), self._side_audit("cand", x, cand_m, r)
        self._check_best(best, best_m, columns, x.audit_seed, r)
        keys = {key: audit.config_key(c.row, columns) for key, c in best_m.configs.items()}
        failed: dict[str, ConfigResult] = {}
        for key, why in audit.candidate_problems(best, cand, keys, x.audit_seed).items():
            c = cand_m.configs[key]
            failed[key] = dataclasses.replace(c, ok=False, reasons=(*c.reasons, f"kopt's audit: {why}"))
        return dataclasses.replace(cand_m, configs={**cand_m.configs, **failed}) if failed else cand_m

    def _side_audit(
        self, side: str, x: Exchange, m: Measurement, r: int
    ) -> tuple[dict[str, audit.ConfigAudit], dict[str, audit.Committed]]:
        """A side's audit and its commitment (as read before the audit seed existed), parsed."""
        path = commitment_path(x.csvs[side])
        what = f"{side}'s commitment of look {r}"
        commits = self._read_side(path, what, m, audit.parse_commitment, "committed", x.promised[side])
        return self._read_side(x.audits[side], f"{side}'s audit of look {r}", m, audit.parse, "audited"), commits

    @staticmethod
    def _check_best(
        best: tuple[dict[str, audit.ConfigAudit], dict[str, audit.Committed]],
        m: Measurement,
        columns: tuple[str, ...],
        seed: int,
        r: int,
    ) -> None:
        """Best's audit follows the rule and its commitment: else a bench failure."""
        keys = {key: audit.config_key(c.row, columns) for key, c in m.configs.items()}
        wrong = audit.best_problem(*best, keys, seed)
        if wrong:
            raise BenchError(
                f"best's audit of look {r}, config {wrong[0]}: {wrong[1]} (the bench does not follow the "
                "audit rule of docs/files.md)"
            )

    @staticmethod
    def _snapshot(path: Path) -> bytes | str:
        """A side's file as it is now (its bytes), or why it cannot be read."""
        try:
            return read_output(path, MAX_AUDIT_BYTES)
        except OSError as e:
            return str(e.strerror or e)

    def _read_side(
        self,
        path: Path,
        what: str,
        m: Measurement,
        parse: Callable[[str, tuple[str, ...], str], dict[str, T]],
        verb: str,
        data: bytes | str | None = None,
    ) -> dict[str, T]:
        """One side's audit or commitment file (or its bytes read earlier, or why they could not
        be), parsed, with exactly the configs of its look."""
        source = f"{what} ({path.name})"
        if data is None:
            data = self._snapshot(path)
        if isinstance(data, str):
            raise BenchError(f"{source}: cannot read it: {data}")
        text = data.decode("utf-8", errors="replace")
        got = parse(text, m.config_columns, source)
        missing = sorted(set(m.configs) - set(got))
        extra = sorted(set(got) - set(m.configs))
        if missing or extra:
            raise BenchError(
                f"{source}: "
                + (f"config {missing[0]} not {verb}" if missing else f"config {extra[0]} is not in its look")
            )
        return got

    def _server(self, side: str, it: Iteration, stage: str, env: dict[str, str], tree_hash: str) -> Server:
        """The side's process: the one kept (its tree and GPU unchanged, not due to start
        anew), or a fresh one in a clean output folder."""
        server = self.servers.get(side)
        place = self._place(side)
        where = self.blind.cache(side) if self.blind is not None else None
        env = {**env, **self.ctx.jails.env(place, tree_hash, cache=where)}  # unconfined: the tree's cache
        if (
            server is not None
            and server.alive
            and side not in self.stale
            and self.serving.get(side) == tree_hash
            and server.env == self.ctx.procs.env(env)
        ):
            return server
        self._close(side)
        self.stale.discard(side)
        tree = self._tree(side)
        folder = self._folder(side)
        if folder.is_symlink():
            folder.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        empty_folder(folder)  # what an earlier process of this side left
        self.started += 1
        jail = self.ctx.jails.bench(tree, place, tree_hash, outputs=(folder,), write_tree=False, cache=where)
        name, logs = (f"{stage}_{place}_serve{self.started}", None)
        if self.blind is not None:  # in its copy's logs/, a neutral name and a token (no counter), moved out after
            name, logs = f"{stage}_{NEUTRAL}_serve{secrets.token_hex(4)}", self.blind.logs(side)
        try:
            server = self.ctx.procs.server(
                it, self.ctx.cfg.target.serve, cwd=tree, env=env, confine=jail, name=name, log_dir=logs
            )
        except ServerError as e:
            raise BenchError(f"serve on {self._name(side)}/ {e}") from None
        self.servers[side], self.serving[side] = server, tree_hash
        self.whole.discard(side)
        self.new.add(side)
        self.unlooked.add(side)
        return server

    # where a side runs and what names it: its tree, cache and log (the side, or its copy's label),
    # its looks folder, how messages name it, and who goes first (copies: a secret coin's side)
    def _tree(self, side: str) -> Path:
        return self.blind.tree(side) if self.blind is not None else self.lane.best if side == "best" else self.lane.cand

    def _place(self, side: str) -> str:
        return self.blind.label(side) if self.blind is not None else side

    def _folder(self, side: str) -> Path:
        return self.blind.looks(side) if self.blind is not None else self.looks / side

    def _name(self, side: str) -> str:
        return self._tree(side).name if self.blind is None else f"{side}'s copy {self._place(side)}"

    def _first(self) -> tuple[str, ...]:
        return SIDES if self.coin == 0 else SIDES[::-1]

    def _focus(self, side: str) -> None:
        """Only `side`'s process runs: the other is stopped (SIGSTOP, its whole tree) until
        the look's requests are answered, so nothing it left running (a busy thread, a child)
        takes a CPU from the side being measured or does work outside its own requests."""
        for other, server in self.servers.items():
            if other != side:
                server.pause()
        self.servers[side].resume()

    def _ask(self, side: str, request: str, answer: str, r: int) -> list[str]:
        """One request to a side's process; its reply's words. No reply, or `fail`, is a
        bench failure (the process is ended)."""
        tree = self._name(side)
        try:
            reply = self.servers[side].ask(
                request,
                timeout_s=self.ctx.cfg.target.timeout_s,
                poll=self.ctx.control.pump,
                poll_interval_s=self.ctx.poll_interval_s,
                is_reply=lambda line: line.split()[:2] in ([answer, str(r)], ["fail", str(r)]),
            )
        except ServerError as e:
            ended = isinstance(e, ServerEnded)  # not a hang nor a flood: those are never started again
            if ended:
                self._failed(side)
            else:
                self._close(side)
            raise BenchError(f"serve on {tree}/ {e}", ended=ended) from None
        words = reply.split()
        if words[0] == "fail":
            self._failed(side)
            what = "audit" if answer == "audited" else "measure"
            why = " ".join(words[2:]) or "no reason given"
            raise BenchError(f"serve on {tree}/ could not {what} look {r}: {why}", ended=True)
        return words

    def _failed(self, side: str) -> None:
        if side in self.unlooked:  # started for this look, none answered yet
            self.failed_new = side
        self._close(side)

    def _close(self, side: str) -> None:
        """The side's process told to end now; it is waited for (`_reap`) before the next look
        runs anything on the device, and meanwhile its successor starts."""
        self.serving.pop(side, None)
        self.unlooked.discard(side)
        self.prepared.pop(side, None)
        server = self.servers.pop(side, None)
        if server is not None:
            server.hurry()
            self.ending.append(server)

    def _reap(self) -> None:
        """Every process told to end (`_close`) gone, its group killed if it lingers: nothing of
        it runs while a side is measured. A served torch process took 0.4-1.2 s to leave (H200)."""
        while self.ending:
            self.ending.pop().close(grace_s=0.0)
