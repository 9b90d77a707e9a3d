"""Reading a run's history as the engine trusts it: the rows, the chain of keeps its seals
vouch for (`chain`), BEST_COMMIT (`best_commit`: a forged keep is never BEST), the baseline
and best iterations, the counters the stop conditions read, and what the agent has cost.

Reads run.db only; one per store connection (each lane has its own).
"""

from __future__ import annotations

from typing import Any

from kopt_supervisor.engine import bookkeeping, history, integrity
from kopt_supervisor.engine.propose.costs import Spent, spent
from kopt_supervisor.engine.records import Iteration, IterationRow
from kopt_supervisor.engine.store import Store


class RunHistory:
    def __init__(self, store: Store, key: bytes) -> None:
        self.store = store
        self.key = key
        """The run's secret (engine/integrity.py): what the seals are checked with."""
        self._ended_records: dict[int, Any] = {}

    def rows(self) -> list[IterationRow]:
        return self.store.rows()

    def chain(self) -> integrity.ChainCheck:
        """What the run's seals vouch for (which keeps may be BEST)."""
        return history.chain(self.key, self.store)

    def best_commit(self) -> str:
        """BEST_COMMIT: the last keep whose seal verifies (a forged keep never is; integrity.
        Tampered when the seals vouch for no commit at all)."""
        best = self.trusted_best()
        if best is None:
            raise integrity.Tampered(self.chain().problem or "no BEST_COMMIT the run's seals vouch for")
        return best

    def trusted_best(self) -> str | None:
        """BEST_COMMIT as the seals vouch for it, None when they vouch for none."""
        chain = self.chain()
        return bookkeeping.best_commit(self.rows(), chain.trusted) or chain.baseline_commit

    def baseline(self) -> Iteration | None:
        v = bookkeeping.baseline_version(self.rows())
        return None if v is None else self.store.iteration(v)

    def best_iteration(self) -> Iteration | None:
        best = bookkeeping.best_row(self.rows(), self.chain().trusted)
        return None if best is None else self.store.iteration(best.version)

    def counters(self) -> bookkeeping.Counters:
        return bookkeeping.counters(self.rows(), self._records)

    def agent_spent(self) -> Spent:
        """What the agent cost so far (masked iterations too: their money is spent). Ended
        iterations' records are read once."""
        rows = self.rows()
        wanted = [r.version for r in rows if r.version not in self._ended_records]
        records: dict[int, Any] = {}
        for it in self.store.iterations(versions=wanted):
            records[it.version] = it.record
            if it.final:
                self._ended_records[it.version] = it.record
        return spent(sorted({**self._ended_records, **records}.items()))

    def _records(self, versions: list[int]) -> dict[int, Iteration]:
        return {it.version: it for it in self.store.iterations(versions=versions)}
