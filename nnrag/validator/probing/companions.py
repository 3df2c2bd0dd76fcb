"""Values that have the attribute a guessed argument lacks: a wrapper reads ``net.attn_layers``
off the model it is given, a network reads ``block.expansion`` off the block type it is given.
Classes of the candidate's file that define it, instances of the source's blocks built as they
passed the gate (companions, see nnrag.library.companions), instances built from guesses, small
torch layers.

Runs inside the sandbox (torch imported).
"""

from __future__ import annotations

import functools
import inspect
import sys
from contextvars import ContextVar
from typing import Any, Callable, Iterator

from torch import nn

from ...indexing.attributes import assigned_on_self
from .arguments import Sizes, instance_of, is_depth
from .source import source_tree
from ..usage.recipes import construct

# Builders of the instances a request's companions describe (see nnrag.library.companions): set by
# the probe for each candidate (:func:`offer`); read deep inside the repairs, which every
# construction runs.
COMPANIONS: ContextVar[tuple[tuple[dict[str, Any], Callable[[dict[str, Any]], Any]], ...]] = ContextVar("companions", default=())
_BUILT: ContextVar[dict[int, tuple[Any, dict[str, Any]]] | None] = ContextVar("built companions", default=None)


def having(cls: type, attribute: str, sizes: Sizes, reads: frozenset[str] = frozenset()) -> Iterator[Any]:
    """Values that have ``attribute``: layer classes defining it (``expansion`` of a residual block)
    in the candidate's file or the modules its bases come from (torchvision's ``ResNet`` for an
    encoder built on it); instances of the source's blocks built as they passed the gate
    (companions), those with most of the other attributes the block ``reads`` off the argument
    first; then small torch layers whose instances carry it (``out_channels``)."""
    homes = list(dict.fromkeys(k.__module__ for k in cls.__mro__ if k not in (nn.Module, object)))
    for home in homes:
        module = sys.modules.get(home)
        for value in list(vars(module).values()) if module else ():
            if (isinstance(value, type) and issubclass(value, nn.Module) and value is not cls and value.__module__ == home
                    and any(attribute in vars(k) for k in value.__mro__ if k is not nn.Module)):
                if not inspect.isfunction(getattr(value, attribute, None)):
                    yield value
                elif (instance := instance_of(value, sizes, owner=cls)) is not None:
                    yield instance  # a method (``flow.inverse(z)``) is called on an instance, not on its class
    # most of what the block reads off the argument, then the fewest inputs its forward requires
    built = sorted((v for v in _companions() if hasattr(v, attribute) and not isinstance(v, cls)),
                   key=lambda v: (-sum(hasattr(v, r) for r in reads), _required_inputs(v)))
    yield from built
    # an attribute ``__init__`` sets (``self.max_seq_len = max_seq_len`` of the model a wrapper
    # takes): an instance of such a class, built from guesses; two at most, each costs a construction
    guessed = 0
    for home in homes:
        module = sys.modules.get(home)
        for value in list(vars(module).values()) if module else ():
            if guessed >= 2:
                break
            if (isinstance(value, type) and issubclass(value, nn.Module) and value is not cls and value.__module__ == home
                    and _sets(value, attribute)):
                guessed += 1
                instance = instance_of(value, sizes)
                if instance is not None and hasattr(instance, attribute):
                    yield instance
    d = sizes.dim
    # a backbone reads images: three channels in
    for layer in (nn.Conv2d(3, d, 3, padding=1), nn.Linear(d, d), nn.LSTM(d, d, batch_first=True)):
        if hasattr(layer, attribute):
            yield layer


def offer(companions: list[dict[str, Any]] | None, resolve: Callable[[str, str], Any]) -> None:
    """The companions of the candidate about to be probed (``{"cls", "args", "kwargs"}`` recipes,
    rebuilt through ``resolve``); none when it has none. Set for every candidate, so that a process
    probing several never offers one candidate's instances to the next."""
    COMPANIONS.set(tuple((c, functools.partial(construct, resolve=resolve)) for c in companions or ()))
    _BUILT.set(None)


def _companions() -> list[Any]:
    """The companions' instances, built once per candidate: one block deep where the recipe gives
    a depth (a 12-layer transformer at its recorded size can use up the check's time), else, or
    when that does not build, at their recorded size."""
    made = _BUILT.get()
    if made is None:
        made = {}
        for recipe, make in COMPANIONS.get():
            small = shallow(recipe)
            for tried in (small, recipe) if small != recipe else (recipe,):
                try:
                    instance = make(tried)
                except Exception:  # noqa: BLE001 - a companion that does not build here is not offered
                    continue
                made[id(instance)] = (instance, tried)
                break
        _BUILT.set(made)
    return [instance for instance, _ in made.values()]


def shallow(recipe: Any) -> Any:
    """The recipe with every depth argument above one set to one, in the recipes of the modules it
    is given too (``attn_layers=Decoder(dim=512, depth=12)``)."""
    if isinstance(recipe, list):
        return [shallow(r) for r in recipe]
    if not isinstance(recipe, dict):
        return recipe
    out = {k: shallow(v) for k, v in recipe.items()}
    if "cls" in recipe and isinstance(recipe.get("kwargs"), dict):
        out["kwargs"] = {k: {"v": 1} if is_depth(k) and _above_one(v) else shallow(v) for k, v in recipe["kwargs"].items()}
    return out


def _above_one(value: Any) -> bool:
    number = value.get("v") if isinstance(value, dict) else None
    return isinstance(number, int) and not isinstance(number, bool) and number > 1


def companion_recipes() -> dict[int, dict[str, Any]]:
    """The construction recipe of each companion instance built, by ``id``: a block built with
    one records how to build it again (see usage.recipes.dump)."""
    return {key: recipe for key, (_, recipe) in (_BUILT.get() or {}).items()}


def _required_inputs(module: nn.Module) -> int:
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)


def _sets(klass: type, attribute: str) -> bool:
    """Whether ``klass.__init__`` assigns ``self.<attribute>``."""
    init = vars(klass).get("__init__")
    tree = source_tree(init) if init is not None else None
    return tree is not None and attribute in assigned_on_self(tree)
