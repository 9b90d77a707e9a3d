"""No import cycle among the engine's modules, hidden or not (issue 29): every import counts,
at the top of a module, inside a function, under TYPE_CHECKING, as grimp (import-linter's
graph) reads them. A package's `__init__` is a module of its own.

A ratchet: a cycle still in the tree would be named in KNOWN with the way out; a new one
fails, and so does a known one that is gone (take it off the list)."""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter, in the dev extra")

ENGINE = "kopt_supervisor.engine"
KNOWN: set[frozenset[str]] = set()
"""None left (2026-11-29: nine before, the loop's seven-module one the last)."""


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def test_cycles_finds_what_a_cycle_is() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert cycles(edges) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_engine_has_no_import_cycle_but_the_known_ones() -> None:
    graph = grimp.build_graph("kopt_supervisor")
    short = {
        m: m.removeprefix(ENGINE + ".") if m != ENGINE else "engine"
        for m in graph.modules
        if m == ENGINE or m.startswith(ENGINE + ".")
    }
    edges = {short[m]: {short[x] for x in graph.find_modules_directly_imported_by(m) if x in short} for m in short}
    found = set(cycles(edges))
    new = found - KNOWN
    assert not new, f"import cycle(s) among the engine's modules: {[sorted(c) for c in new]}"
    gone = KNOWN - found
    assert not gone, f"no longer a cycle: take it off KNOWN: {[sorted(c) for c in gone]}"
