"""Patches a copied module makes to another package's classes (``logging.Logger.warning_once =
warning_once``), and which of them a closure needs: those setting an attribute the copied code
reads. The code relies on them having run; a closure keeps them as it keeps registry fillers,
left out when they cannot be copied."""

from __future__ import annotations

from typing import Callable

from .plan import UnitKey, UnitPlan
from .units import ModuleUnits


class Patches:
    """The patches of the modules a closure copies from, by attribute, until needed."""

    def __init__(self) -> None:
        self._by_attribute: dict[str, list[UnitKey]] = {}
        self._read: set[str] = set()  # attribute names the copied statements read
        self._walked: set[UnitKey] = set()

    def add(self, mu: ModuleUnits, imported: Callable[[str], bool]) -> None:
        """The statements of ``mu`` that set an attribute on an object reached through a name
        ``imported`` says the module imports."""
        for attribute, found in mu.patches.items():
            self._by_attribute.setdefault(attribute, []).extend((mu.module, k) for root, k in found if imported(root))

    def needed(self, units: dict[UnitKey, UnitPlan], units_of: Callable[[str], ModuleUnits]) -> list[UnitKey]:
        """The patches not copied yet that set an attribute the statements of ``units`` read."""
        if not any(self._by_attribute.values()):
            return []
        for key in [k for k in units if k not in self._walked]:
            self._walked.add(key)
            self._read.update(units_of(key[0]).attributes_read(key[1]))
        return [key for attribute in sorted(self._read & self._by_attribute.keys())
                for key in self._by_attribute.pop(attribute) if key not in units]
