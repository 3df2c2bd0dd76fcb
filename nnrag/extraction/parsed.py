"""The parsed modules an extractor keeps from one block to the next."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

from .units import ModuleUnits

# About 1 MB each. Blocks of one module share most of what they read; a language-model library's
# blocks together read thousands of modules, and one block's closure may wander through a
# thousand before it fails: eviction waits for the block's end, so a block never parses a module
# twice.
KEEP_MODULES = 600


class ParsedModules:
    """Modules parsed on first read, the least recently read dropped first when a block ends
    with more than ``KEEP_MODULES`` held."""

    def __init__(self, parse: Callable[[str], ModuleUnits]) -> None:
        self._parse = parse
        self._held: OrderedDict[str, ModuleUnits] = OrderedDict()

    def get(self, module: str) -> ModuleUnits:
        mu = self._held.get(module)
        if mu is None:
            mu = self._held[module] = self._parse(module)
        else:
            self._held.move_to_end(module)
        return mu

    def block_done(self) -> None:
        while len(self._held) > KEEP_MODULES:
            self._held.popitem(last=False)

    def __len__(self) -> int:
        return len(self._held)
