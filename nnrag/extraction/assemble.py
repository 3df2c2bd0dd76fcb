"""Assemble a closure into one standalone file.

Layout: provenance header, ``from __future__`` imports, imports grouped stdlib / third-party
(original forms, one name per statement, sorted), then the copied statements in dependency order,
each verbatim. Names that collide in the single namespace are renamed (the block's own names win)
and every reference is rewritten with LibCST; only statements that need it are re-parsed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

from .._version import __version__
from ..errors import NATIVE_EXTENSION
from .plan import NAMESPACE_IMPORT, Closure, DefTarget, ExtImport, Missing, ModTarget, Namespace, Target, UnitKey, UnitPlan
from .requirements import Requirement, is_stdlib, modules_in, requirements_of
from .registry_scopes import keep_scopes, self_scoped
from .scope import shadowing
from .unavailable import defer, guard_imports, helper


@dataclass(frozen=True)
class Provenance:
    source: str
    origin: str  # "dist timm==1.0.31", "git https://... @ 1a2b3c", "local /path"
    license: str | None
    version: str | None = None  # the source's release, where it has one


@dataclass(frozen=True)
class Assembled:
    code: str
    class_name: str  # the block's qualified name inside the file
    requirements: tuple[Requirement, ...]
    renames: dict[str, str] = field(default_factory=dict)  # "module.name" -> new name
    imports: str | None = None  # what of its own package the file imports instead of copying, and why
    package_modules: tuple[str, ...] = ()  # with ``imports``: the modules of that package it imports

    def facts(self) -> dict[str, Any]:
        """Everything but the code, as JSON holds it: a file stored unjudged is validated later
        from its text and these (:meth:`with_code`)."""
        made = asdict(self)
        del made["code"]
        return made

    @classmethod
    def with_code(cls, facts: dict[str, Any], code: str) -> "Assembled":
        """The inverse of :meth:`facts`."""
        return cls(code=code, class_name=facts["class_name"], renames=facts["renames"], imports=facts["imports"],
                   requirements=tuple(Requirement(**{**r, "modules": tuple(r["modules"])}) for r in facts["requirements"]),
                   package_modules=tuple(facts["package_modules"]))


def _meaning(imp: ExtImport) -> str:
    if imp.name is None:
        return imp.module if imp.asname else imp.top
    return f"{imp.module}.{imp.name}"


class _Namespace:
    def __init__(self, reserved: set[str]) -> None:
        self.taken: dict[str, object] = {name: ("builtin", name) for name in reserved}

    def claim(self, want: str, key: object, hint: str) -> str:
        if self.taken.get(want, key) == key:
            self.taken[want] = key
            return want
        base = f"{want}_{hint}" if hint and hint != want else want
        name, n = base, 2
        while name in self.taken and self.taken[name] != key:
            name, n = f"{base}_{n}", n + 1
        self.taken[name] = key
        return name


def _module_hint(module: str) -> str:
    last = module.rsplit(".", 1)[-1]
    return last if last.isidentifier() else "mod"


def assemble(closure: Closure, provenance: Provenance, lenders: tuple[Provenance, ...] = ()) -> Assembled:
    """The standalone file of a closure; ``lenders``: the other sources it copied code from."""
    top = DefTarget(closure.module, closure.qualname.split(".")[0])
    rendered = render(closure.units, closure.order, closure.future, first=closure.targets[top][0], home=closure.module)
    name = rendered.names[top]
    requirements, imports, modules = rendered.requirements, None, ()
    if closure.imported_for is not None:
        requirements, imports = _importing(closure, provenance, requirements)
        package = closure.module.split(".")[0]
        modules = tuple(sorted({i.module for k in closure.order for i in closure.units[k].imports if i.top == package}))
    header_text = header(closure, provenance, lenders, requirements, name, imports=imports)
    class_name = name + closure.qualname[len(top.name) :]
    return Assembled(header_text + "\n" + rendered.code, class_name, requirements, rendered.renames, imports, modules)


def _importing(closure: Closure, provenance: Provenance,
               requirements: tuple[Requirement, ...]) -> tuple[tuple[Requirement, ...], str]:
    """A file that imports the rest of its own package: that requirement pinned to the source's
    release (the copied module was written against it), and the header line that says so."""
    package = closure.module.split(".")[0]
    here = next((r for r in requirements if package in r.modules), None)
    pinned = tuple(replace(r, version=provenance.version) if r is here and provenance.version else r for r in requirements)
    versions = provenance.version or "unknown release"
    if here and here.version and here.version != provenance.version:
        versions += f", installed here {here.version}"
    return pinned, f"the rest of {package} ({versions}), not copied: {closure.imported_for}"


@dataclass(frozen=True)
class Rendered:
    code: str  # imports and statements, without a header
    names: dict[DefTarget, str]  # each definition's name in the file
    requirements: tuple[Requirement, ...]
    renames: dict[str, str]  # "module.name" -> new name, for the definitions renamed


def references(plan: UnitPlan) -> Iterator[Target]:
    """Every target a copied statement refers to, also through attribute chains and rewritten imports."""
    yield from plan.refs.values()
    yield from (t for t, _ in plan.chains.values())
    for *_, pairs in plan.rewrites:
        for _, t in pairs:
            yield t
            if isinstance(t, Namespace):
                yield from t.leaves()
    for value in plan.values.values():
        yield from value.leaves()


def render(units: Mapping[UnitKey, UnitPlan], order: Sequence[UnitKey], future: set[str], *,
           first: UnitKey | None = None, home: str | None = None,
           provided: Mapping[DefTarget, str] | None = None, helpers: str = "",
           exports: Sequence[DefTarget] = ()) -> Rendered:
    """The statements ``order`` of ``units`` as one module: imports grouped, colliding names renamed.

    ``first``: the statement whose names win collisions (the block's); ``home``: the block's module,
    whose definitions may shadow builtins. Definitions the statements need but do not bind come from
    ``provided`` (their names in the module ``helpers`` of the same package) by a relative import,
    as do the ``exports`` the module must bind without holding their statements.
    """
    provided = provided or {}
    # Every name a copied statement binds is part of the one namespace, needed or not.
    defs: list[DefTarget] = []
    for key in ([first] if first is not None else []) + [k for k in reversed(order) if k != first]:
        for name in sorted(units[key].binds):
            t = DefTarget(key[0], name)
            if t not in defs:
                defs.append(t)
    ns = _Namespace(set().union(*(units[k].builtins for k in order)) - {d.name for d in defs if d.module == home})
    out_def = {d: ns.claim(d.name, d, _module_hint(d.module)) for d in defs}
    wanted: set[DefTarget] = set()
    if provided:  # a standalone file binds every definition it refers to
        wanted = {t for k in order for t in references(units[k]) if isinstance(t, DefTarget) and t not in out_def}
        wanted |= {t for t in exports if t not in out_def}
    out_local = {t: ns.claim(provided[t], t, _module_hint(t.module)) for t in sorted(wanted)}
    out_def.update(out_local)
    out_ext: dict[ExtImport, str] = {}
    for imp in sorted(set().union(*(units[k].imports for k in order)), key=ExtImport.render):
        out_ext[imp] = ns.claim(imp.binds, ("ext", _meaning(imp)), _module_hint(imp.module if imp.name else imp.top))

    def out_name(t: Target) -> str | None:
        if isinstance(t, DefTarget):
            return out_def[t]
        if isinstance(t, ExtImport):
            return out_ext[t]
        return None

    # a name a reference is renamed to that a function reading it binds locally takes another name
    for key in order:
        for name, t in units[key].refs.items():
            new = out_name(t)
            if new is not None and new != name and new in shadowing(units[key].text, name):
                names = out_def if isinstance(t, DefTarget) else out_ext
                names[t] = ns.claim(f"{new}_{_module_hint(t.module)}", t, "")  # type: ignore[union-attr,index]

    # modules used as values: one binding each, after every statement (their uses run later), or
    # just before the first statement that reads one as it runs
    values: dict[str, tuple[str, Namespace]] = {}
    for key in order:
        for local, value in sorted(units[key].values.items()):
            if value.module not in values:
                values[value.module] = (ns.claim(local, ("module", value.module), _module_hint(value.module)), value)

    bodies: list[str] = []
    # the stand-in for modules loaded by name (see unavailable.py), written only where used
    stand_in = ns.claim("_Unavailable", ("helper", "_Unavailable"), "") \
        if any(units[k].deferred or "import_module" in units[k].text or _unbuilt(units[k]) for k in order) else None
    stood_in = False
    renames_done: dict[str, str] = {}
    bound_early: set[str] = set()
    for key in order:
        plan = units[key]
        renames = {local: values[v.module][0] for local, v in plan.values.items() if values[v.module][0] != local}
        for name, t in plan.refs.items():
            new = out_name(t)
            if new is not None and new != name:
                renames[name] = new
        for name in plan.binds:
            new = out_def[DefTarget(key[0], name)]
            if new != name:
                renames[name] = new
                renames_done[f"{key[0]}.{name}"] = new
        if plan.aliases:
            bodies.append("".join(f"{out_def[DefTarget(key[0], n)]} = {out_name(t)}\n" for n, t in sorted(plan.aliases.items())))
            continue
        chains = {c: f"{out_name(t)}{suffix}" for c, (t, suffix) in plan.chains.items() if not isinstance(t, ModTarget)}
        text = _apply_rewrites(plan.text, plan.rewrites, out_name, stand_in)
        stood_in = stood_in or _unbuilt(plan)
        text = keep_scopes(text, frozenset(n for n, t in plan.refs.items() if self_scoped(t)), key[0])
        if renames or chains:
            from .rename import rename

            text = rename(text, renames, chains)
        if stand_in is not None:
            guarded = guard_imports(text, stand_in)
            if plan.deferred:
                guarded = defer(guarded or text, stand_in)
            if guarded is not None:
                text, stood_in = guarded, True
        for local in sorted(plan.early_values):
            module = plan.values[local].module
            if module not in bound_early:
                bound_early.add(module)
                bodies.append(f"{values[module][0]} = {_namespace_value(values[module][1], out_name)}  # {module}\n")
        bodies.append(text.rstrip("\n") + "\n")
    if stand_in is not None and stood_in:
        bodies.insert(0, helper(stand_in, {k[0].split(".")[0] for k in order}))
    for module, (local, value) in values.items():
        if module in bound_early:
            continue
        bodies.append(f"{local} = {_namespace_value(value, out_name)}  # {module}\n")

    import_lines = set()
    bound: set[tuple[str, str]] = set()
    starred = _star_imports(out_ext)
    for imp, name in out_ext.items():
        if imp.stars:
            continue
        if imp.name is not None or imp.asname:  # one statement per object bound (not ``import a.b``,
            if (_meaning(imp), name) in bound:  # which also loads a.b)
                continue
            bound.add((_meaning(imp), name))
        if name == imp.binds:
            import_lines.add(imp.render())
        elif imp.name is None and not imp.asname:
            import_lines.add(imp.render())
            import_lines.add(f"import {imp.top} as {name}")
        else:
            import_lines.add(imp.render(asname=name))
    stdlib = sorted((line for line in import_lines if is_stdlib(line.split()[1].split(".")[0])), key=_import_order)
    third = sorted(import_lines - set(stdlib), key=_import_order)
    local = sorted(f"from .{helpers} import {provided[t]}" + (f" as {name}" if name != provided[t] else "")
                   for t, name in out_local.items())

    body = "\n\n".join(bodies)
    sections = []
    if future:
        sections.append("".join(f"from __future__ import {f}\n" for f in sorted(future)))
    sections += ["\n".join(group) + "\n" for group in (starred, stdlib, third, local) if group]
    code = "\n".join(sections) + ("\n\n" if sections and body else "") + body
    requirements = tuple(requirements_of(set().union(*map(modules_in, [*starred, *import_lines, *bodies]))))
    return Rendered(code, out_def, requirements, renames_done)


def _star_imports(out_ext: Mapping[ExtImport, str]) -> list[str]:
    """The star imports that bind the names no file here says the source of (see
    :attr:`ExtImport.stars`), in the source's order, then an alias for each such name the file
    binds under another name: taken before a definition of the file binds the name again."""
    stars: dict[str, None] = {}
    aliases: set[str] = set()
    for imp, name in out_ext.items():
        if imp.stars:
            stars.update(dict.fromkeys(f"from {module} import *" for module in imp.stars))
            if name != imp.name:
                aliases.add(f"{name} = {imp.name}")
    return [*stars, *sorted(aliases)]


def _import_order(line: str) -> tuple[str, bool, str]:
    return (line.split()[1], line.startswith("from "), line)


def _namespace_value(t: Namespace, out_name) -> str:  # type: ignore[no-untyped-def]
    fields = ", ".join(f"{attr}={_namespace_value(target, out_name) if isinstance(target, Namespace) else out_name(target)}"
                       for attr, target in t.attrs)
    return f"{out_name(NAMESPACE_IMPORT)}.SimpleNamespace({fields})"


def _unbuilt(plan: UnitPlan) -> bool:
    """Whether a statement imports, inside it, an extension module its source compiles (see
    :func:`_apply_rewrites`)."""
    return any(isinstance(t, Missing) and t.code == NATIVE_EXTENSION and not t.fails_import
               for *_, pairs in plan.rewrites for _, t in pairs)


def _apply_rewrites(text: str, rewrites: list, out_name, stand_in: str | None = None) -> str:  # type: ignore[no-untyped-def]
    """Replace in-source imports inside a statement by bindings of the copied definitions. An
    extension module the source compiles (``try: from . import deform_conv_ext``) becomes
    ``stand_in``, which raises its ImportError where it is used: what never calls it runs."""
    if not rewrites:
        return text
    lines = text.splitlines(keepends=True)
    for first, last, indent, pairs in sorted(rewrites, reverse=True):
        stmts = []
        for local, t in pairs:
            if isinstance(t, (DefTarget, ExtImport)):
                if isinstance(t, ExtImport):
                    stmts.append(t.render())
                elif (new := out_name(t)) != local:
                    stmts.append(f"{local} = {new}")
            elif isinstance(t, Namespace):  # the module's attributes this statement reads, copied
                stmts.append(f"{local} = {_namespace_value(t, out_name)}  # {t.module}")
            elif stand_in is not None and t.code == NATIVE_EXTENSION and not t.fails_import:  # type: ignore[union-attr]
                stmts.append(f"{local} = {stand_in}(ImportError({t.message!r}))")  # type: ignore[union-attr]
            else:  # not Python source here: fail the way a missing optional module does
                stmts.append(f"raise ImportError({t.message!r})")  # type: ignore[union-attr]
        stmts = stmts or ["pass"]
        lines[first : last + 1] = [f"{indent}{s}\n" for s in stmts]
    return "".join(lines)


def header(closure: Closure, prov: Provenance, lenders: tuple[Provenance, ...], requirements: tuple[Requirement, ...],
            name: str, note: str | None = None, imports: str | None = None) -> str:
    """The provenance header; ``imports``: :attr:`Assembled.imports`; ``note``: what the file is
    (by default, a standalone copy or, with ``imports``, its module's definitions)."""
    lines = [
        f"# nnrag block: {closure.source}:{closure.module}.{closure.qualname}",
        f"# class: {name}",
        f"# source: {prov.source} ({prov.origin})",
        f"# license: {prov.license or 'unknown'}",
    ]
    lines += [f"# also from: {p.source} ({p.origin}); license: {p.license or 'unknown'}" for p in lenders]
    lines.append("# files:")
    lines += [f"#   {path}  sha1:{sha1}" for path, sha1 in sorted(closure.files.items())]
    reqs = ", ".join(r.pep508 for r in requirements) or "none"
    lines.append(f"# requirements: {reqs}")
    if imports:
        lines.append(f"# imports: {imports}")
    if note is None:
        note = "its own module's definitions, the rest imported" if imports else "a standalone copy of the definitions this block needs"
    lines.append(f"# extracted by nnrag {__version__}: {note}")
    return "\n".join(lines) + "\n"
