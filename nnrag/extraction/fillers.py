"""Which statements that only fill a registry a closure keeps: those that can be copied with
what they need; the registry lacks the others' entries and the rest of the closure stands."""

from __future__ import annotations

from .plan import UnitKey, UnitPlan


def without_failing_fillers(units: dict[UnitKey, UnitPlan], roots: list[UnitKey], fillers: set[UnitKey],
                             failing: set[UnitKey]) -> set[UnitKey]:
    """The statements to keep: a statement that only fills a registry is left out when it, or what
    only it brings, cannot be copied (mmengine's ``@CheckpointLoader.register_scheme`` loaders read
    ``mmengine.__path__``); the registry then lacks that entry, and the rest of the closure stands.
    ``roots``: the block and the classes a copied string names, which are needed, never fillers."""
    def reach(start: list[UnitKey], skip: set[UnitKey], stop: set[UnitKey] = frozenset()) -> set[UnitKey]:  # type: ignore[assignment]
        seen: set[UnitKey] = set()
        stack = [k for k in start if k in units and k not in skip]
        while stack:
            k = stack.pop()
            if k in seen or k in stop:
                continue
            seen.add(k)
            stack += [d for d in units[k].early | units[k].late if d in units and d not in skip and d not in seen]
        return seen

    core = reach(roots, fillers)
    # each filler on its own: fillers of one registry need the registry, which lists them all
    dropped = {f for f in fillers if f in units and f not in core and reach([f], fillers - {f}, core) & failing}
    # a filler reached by nothing (its registry was linked before the filler was found) still fills it
    return reach(roots + sorted(f for f in fillers if f in units and f not in dropped), dropped)
