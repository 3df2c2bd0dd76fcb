"""The order of a closure's statements: definition-time needs first, then what functions called
at import time read; ties keep the original order."""

from __future__ import annotations

import heapq
from graphlib import CycleError, TopologicalSorter
from typing import Any, Callable, TypeVar

from .plan import UnitKey, UnitPlan

T = TypeVar("T")


def _runs_at_import(units: dict[UnitKey, UnitPlan], functions: set[UnitKey],
                    metaclasses: dict[UnitKey, set[UnitKey]]) -> dict[UnitKey, set[UnitKey]]:
    """Definition-time needs, plus what the functions a statement calls at import time need when
    they run: ``gelu = get_activation("gelu")`` must come after every global ``get_activation``
    reads (``ACT2FN``), and a decorator after the registry it fills. A class's metaclass runs
    as the class is made: what its methods read counts the same way."""
    runtime: dict[UnitKey, set[UnitKey]] = {}

    def needs_when_run(f: UnitKey) -> set[UnitKey]:
        if f not in runtime:
            runtime[f] = set()  # a recursive function terminates
            found: set[UnitKey] = set()
            for d in units[f].early | units[f].late:
                found.add(d)
                if d in functions:
                    found |= needs_when_run(d)
            runtime[f] = found
        return runtime[f]

    deps: dict[UnitKey, set[UnitKey]] = {}
    for k, plan in units.items():
        extra = set().union(*(needs_when_run(f) for f in plan.early if f in functions or f in metaclasses.get(k, ())))
        deps[k] = (plan.early | extra) - {k}
    return deps


def order_units(units: dict[UnitKey, UnitPlan], root: UnitKey, functions: set[UnitKey] = frozenset(),  # type: ignore[assignment]
                metaclasses: dict[UnitKey, set[UnitKey]] | None = None) -> tuple[list[UnitKey], bool]:
    """Topological order over definition-time edges (with what functions called at import time
    read); ties keep the statements' original order, module by module in the order a depth-first
    walk from the block finishes them."""
    rank: dict[UnitKey, int] = {}
    seen: set[UnitKey] = set()
    stack: list[tuple[UnitKey, list[UnitKey]]] = []
    for start in [root, *sorted(units)]:
        if start in seen:
            continue
        seen.add(start)
        stack.append((start, sorted(units[start].early | units[start].late, reverse=True)))
        while stack:
            node, children = stack[-1]
            if children:
                child = children.pop()
                if child not in seen:
                    seen.add(child)
                    stack.append((child, sorted(units[child].early | units[child].late, reverse=True)))
                continue
            stack.pop()
            rank[node] = len(rank)
    module_rank: dict[str, int] = {}
    for k in sorted(rank, key=rank.__getitem__):
        module_rank.setdefault(k[0], len(module_rank))
    early = {k: p.early for k, p in units.items()}
    runtime = _runs_at_import(units, functions, metaclasses or {})

    def key(k: UnitKey) -> tuple[int, int]:
        return module_rank[k[0]], k[1]

    try:
        return _topological(runtime, key), False
    except CycleError:
        pass
    try:
        # What called functions read is over-approximated (every branch counts), so it may form
        # cycles a run never takes; each such cycle is ordered by definition-time needs alone, and
        # every need outside the cycles still holds (one cycle of a language-model library's
        # utilities had left ``gelu = get_activation("gelu")`` before the ``ACT2FN`` it reads).
        # Definition-time needs are among them, so a cycle of those raises inside its component.
        return _condensed(runtime, lambda members: _topological({k: early[k] & set(members) for k in members}, key),
                          key), False
    except CycleError:
        # A real cycle of definition-time needs: the statements of each cycle keep their original
        # order, and everything else is still ordered around them.
        return _condensed(early, lambda members: sorted(members, key=key), key), True


def _condensed(graph: dict[UnitKey, set[UnitKey]], within: Callable[[list[UnitKey]], list[UnitKey]],
               key: Callable[[UnitKey], Any]) -> list[UnitKey]:
    """The strongly connected components of ``graph`` in topological order (the one holding the
    lowest ``key`` first among those ready), the members of each in the order ``within`` gives."""
    components = _components(graph)
    of = {k: i for i, members in enumerate(components) for k in members}
    condensed = {i: {of[d] for k in members for d in graph[k]} - {i} for i, members in enumerate(components)}
    first = [min(key(k) for k in members) for members in components]
    order: list[UnitKey] = []
    for i in _topological(condensed, first.__getitem__):
        order += within(components[i])
    return order


def _topological(graph: dict[T, set[T]], priority: Callable[[T], Any]) -> list[T]:
    """A topological order; among the nodes ready at once, the lowest ``priority`` first."""
    sorter: TopologicalSorter[T] = TopologicalSorter(graph)
    sorter.prepare()
    ready: list[tuple[Any, int, T]] = []
    order: list[T] = []
    tie = 0
    while sorter.is_active():
        for k in sorter.get_ready():
            heapq.heappush(ready, (priority(k), tie, k))
            tie += 1
        *_, k = heapq.heappop(ready)
        order.append(k)
        sorter.done(k)
    return order


def _components(graph: dict[UnitKey, set[UnitKey]]) -> list[list[UnitKey]]:
    """Strongly connected components (Tarjan's algorithm, iterative)."""
    index: dict[UnitKey, int] = {}
    low: dict[UnitKey, int] = {}
    stack: list[UnitKey] = []
    on_stack: set[UnitKey] = set()
    out: list[list[UnitKey]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    k = stack.pop()
                    on_stack.discard(k)
                    members.append(k)
                    if k == node:
                        break
                out.append(members)
    return out
