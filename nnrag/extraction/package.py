"""Blocks vendored as one package: a module per block plus one helpers module, ``_shared``, that
holds every definition two or more of the blocks need, written once and imported relatively.

Sharing is decided per copied statement: a statement goes to ``_shared`` when the closures of
several blocks copy it, together with everything it needs, so ``_shared`` never imports a block
module. A module name that two sources both hold (``models.common`` of two YOLO repositories)
means different code in each: its statements, and every statement that needs them, stay in each
block's own module.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, replace
from typing import Sequence

from .._version import __version__
from .assemble import Provenance, header, render
from .order import order_units
from .plan import Closure, DefTarget, UnitKey, UnitPlan
from .requirements import Requirement

HELPERS = "_shared"
MANIFEST = "vendor.json"
NOTICE = "NOTICE"
REQUIREMENTS = "requirements.txt"
_RESERVED = {HELPERS, "__init__", "__main__"}

_GKey = tuple[str, str, int]  # (source, module, statement): a statement across sources


@dataclass(frozen=True)
class Member:
    """One block of the package and where it lives there."""

    block_id: str
    source: str
    module: str  # the package module holding it (``drop_path``)
    class_name: str  # its name in that module
    requirements: tuple[str, ...]


@dataclass(frozen=True)
class Vendored:
    """What a package of blocks is made of: its files (relative path -> text) and members."""

    files: dict[str, str]
    members: tuple[Member, ...]
    shared: int  # statements written once in the helpers module
    requirements: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    """A block to vendor: its closure (without issues) and the provenance of its sources."""

    block_id: str
    closure: Closure
    requirements: tuple[Requirement, ...]  # of its standalone file
    provenance: Provenance
    lenders: tuple[Provenance, ...] = ()
    imports: str | None = None  # ``Assembled.imports``


def module_name(class_name: str, taken: set[str]) -> str:
    """A new module name for a block: its class name in snake case (``BlurPool2d`` -> ``blur_pool2d``)."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", class_name).lower()
    base = snake if snake.isidentifier() else "block"
    if keyword.iskeyword(base) or base in _RESERVED:
        base += "_block"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _shared_statements(items: Sequence[Item]) -> tuple[set[_GKey], dict[_GKey, UnitPlan], set[_GKey]]:
    def gkey(c: Closure, k: UnitKey) -> _GKey:
        return (c.module_sources.get(k[0], c.source), k[0], k[1])

    sources_of: dict[str, set[str]] = {}
    for item in items:
        for module, src in item.closure.module_sources.items():
            sources_of.setdefault(module, set()).add(src)
    users: dict[_GKey, set[int]] = {}
    deps: dict[_GKey, set[_GKey]] = {}
    plans: dict[_GKey, UnitPlan] = {}
    functions: set[_GKey] = set()
    for i, item in enumerate(items):
        c = item.closure
        for k, plan in c.units.items():
            g = gkey(c, k)
            users.setdefault(g, set()).add(i)
            plans.setdefault(g, plan)
            deps.setdefault(g, set()).update(gkey(c, d) for d in plan.early | plan.late)
            if k in c.functions:
                functions.add(g)
    own = {g for g in users if len(sources_of.get(g[1], ())) > 1}
    grew = True
    while grew:  # what needs a statement that stays per block stays per block too
        grew = False
        for g, needs in deps.items():
            if g not in own and needs & own:
                own.add(g)
                grew = True
    shared = {g for g, who in users.items() if len(who) > 1 and g not in own}
    stack = list(shared)
    while stack:  # a shared statement's needs are shared (the closures of two sources may differ)
        for d in deps[stack.pop()]:
            if d not in shared:
                shared.add(d)
                stack.append(d)
    return shared, plans, functions


def _within(plan: UnitPlan, keys: set[UnitKey]) -> UnitPlan:
    return replace(plan, early={d for d in plan.early if d in keys}, late={d for d in plan.late if d in keys})


def vendor_package(items: Sequence[Item]) -> Vendored:
    """The files of a package holding ``items``: ``_shared.py`` (when blocks share definitions),
    one module per block, ``__init__.py``, ``NOTICE``, ``requirements.txt``."""
    shared, plans, functions = _shared_statements(items)
    skeys = {(g[1], g[2]) for g in shared}
    files: dict[str, str] = {}
    names: dict[DefTarget, str] = {}
    if shared:
        units = {(g[1], g[2]): _within(plans[g], skeys) for g in shared}
        order, _ = order_units(units, min(units), {(g[1], g[2]) for g in functions & shared})
        future = set().union(*(i.closure.future for i in items if any(k in skeys for k in i.closure.units)))
        rendered = render(units, order, future)
        names = rendered.names
        files[f"{HELPERS}.py"] = _helpers_header(items, shared, rendered.requirements) + "\n" + rendered.code

    members: list[Member] = []
    taken: set[str] = set()
    for item in sorted(items, key=lambda i: i.block_id):
        c = item.closure
        own = {k: p for k, p in c.units.items() if (c.module_sources.get(k[0], c.source), k[0], k[1]) not in shared}
        order = [k for k in c.order if k in own]
        top = DefTarget(c.module, c.qualname.split(".")[0])
        first = c.targets[top][0] if c.targets[top][0] in own else None
        rendered = render(own, order, c.future if order else set(), first=first, home=c.module,
                          provided=names, helpers=HELPERS, exports=[top])
        class_name = rendered.names[top] + c.qualname[len(top.name):]
        text = header(c, item.provenance, item.lenders, item.requirements, class_name,
                      note=f"vendored; definitions other blocks also need are in {HELPERS}.py", imports=item.imports)
        module = module_name(top.name, taken)
        files[f"{module}.py"] = text + "\n" + rendered.code
        members.append(Member(item.block_id, c.source, module, class_name, tuple(r.pep508 for r in item.requirements)))

    requirements = tuple(sorted({r for m in members for r in m.requirements}))
    files["__init__.py"] = _init(members)
    files[NOTICE] = _notice(items, members, len(shared))
    files[REQUIREMENTS] = _requirements(requirements)
    return Vendored(files, tuple(members), len(shared), requirements)


def _requirements(requirements: Sequence[str]) -> str:
    """Pinned to the versions installed here; a distribution not installed here is imported only
    under ``try``/``except ImportError`` by code that works without it (else it could not pass)."""
    pinned = [r for r in requirements if "==" in r]
    optional = [r for r in requirements if "==" not in r]
    text = "# the versions the blocks were extracted and checked with\n" + "".join(f"{r}\n" for r in pinned)
    if optional:
        text += f"# optional, imported only if present: {', '.join(optional)}\n"
    return text


def _helpers_header(items: Sequence[Item], shared: set[_GKey], requirements: Sequence[Requirement]) -> str:
    sources = {g[0] for g in shared}
    provenance = {p.source: p for i in items for p in (i.provenance, *i.lenders)}
    lines = [f"# nnrag vendored helpers: {len(shared)} statements that several blocks of this package need, written once"]
    lines += [f"# from: {s} ({provenance[s].origin}); license: {provenance[s].license or 'unknown'}"
              for s in sorted(sources) if s in provenance]
    lines.append(f"# requirements: {', '.join(r.pep508 for r in requirements) or 'none'}")
    lines.append(f"# written by nnrag {__version__}; see NOTICE for every file these definitions come from")
    return "\n".join(lines) + "\n"


def _init(members: Sequence[Member]) -> str:
    seen: set[str] = set()
    lines = [f"# nnrag vendored package: {len(members)} blocks; see NOTICE for provenance and licenses", ""]
    exported = []
    for m in members:
        top = m.class_name.split(".")[0]
        if top in seen:  # two blocks of one name: the second is reached through its module
            continue
        seen.add(top)
        exported.append(top)
        lines.append(f"from .{m.module} import {top}")
    lines += ["", "__all__ = [" + ", ".join(repr(n) for n in exported) + "]"]
    return "\n".join(lines) + "\n"


def _notice(items: Sequence[Item], members: Sequence[Member], shared: int) -> str:
    by_id = {i.block_id: i for i in items}
    out = [f"The modules of this package were copied by nnrag {__version__} from the sources below.",
           "Each keeps the license of the source it comes from.", ""]
    for m in members:
        item = by_id[m.block_id]
        out += [f"{m.class_name}  ({m.module}.py)", f"  block:    {m.block_id}",
                f"  source:   {item.provenance.source} ({item.provenance.origin})",
                f"  license:  {item.provenance.license or 'unknown'}"]
        out += [f"  also from: {p.source} ({p.origin}); license: {p.license or 'unknown'}" for p in item.lenders]
        out += [f"  file:     {path}  sha1:{sha1}" for path, sha1 in sorted(item.closure.files.items())]
        out.append("")
    if shared:
        out.append(f"{HELPERS}.py holds {shared} statements of the files above that several blocks need, copied once.")
    return "\n".join(out) + "\n"
