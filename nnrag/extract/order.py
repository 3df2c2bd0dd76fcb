"""The order of a closure's statements: definition-time needs first, then what functions called
at import time read; ties keep the original order."""

from __future__ import annotations

import heapq
from graphlib import CycleError, TopologicalSorter

from .plan import UnitKey, UnitPlan


def _runs_at_import(units: dict[UnitKey, UnitPlan], functions: set[UnitKey]) -> dict[UnitKey, set[UnitKey]]:
    """Definition-time needs, plus what the functions a statement calls at import time need when
    they run: ``gelu = get_activation("gelu")`` must come after every global ``get_activation``
    reads (``ACT2FN``), and a decorator after the registry it fills."""
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
        extra = set().union(*(needs_when_run(f) for f in plan.early if f in functions))
        deps[k] = (plan.early | extra) - {k}
    return deps


def order_units(units: dict[UnitKey, UnitPlan], root: UnitKey, functions: set[UnitKey] = frozenset()) -> tuple[list[UnitKey], bool]:  # type: ignore[assignment]
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
    for graph in (_runs_at_import(units, functions), {k: p.early for k, p in units.items()}):
        sorter: TopologicalSorter[UnitKey] = TopologicalSorter(graph)
        try:
            sorter.prepare()
        except CycleError:
            continue
        ready: list[tuple[int, int, UnitKey]] = []
        order: list[UnitKey] = []
        while sorter.is_active():
            for k in sorter.get_ready():
                heapq.heappush(ready, (module_rank[k[0]], k[1], k))
            *_, k = heapq.heappop(ready)
            order.append(k)
            sorter.done(k)
        return order, False
    return sorted(units, key=rank.__getitem__), True
