"""Block discovery: which classes are usable ``nn.Module`` blocks.

A block is a class that derives from ``torch.nn.Module`` (through bases resolved across files and
sources, or a well-known external base), is not abstract (no ``abc`` abstract method left
unimplemented) and has a concrete ``forward`` of its own or inherited along its MRO. A ``forward``
that is an ``@abstractmethod`` or only raises ``NotImplementedError`` does not count, nor does one
that reaches such a stub through calls on ``self`` resolved along the MRO (a base class whose
subclasses supply the hook: ``forward`` → ``apply_func`` → ``apply_transform``).

``@abstractmethod`` stops instantiation only under ``ABCMeta``, and ``nn.Module``'s metaclass is
``type``: in a class with no ``ABC`` base and no metaclass along its MRO an unimplemented abstract
method is an optional hook (torch_geometric's ``MessagePassing.message_and_aggregate``, which
every ``GATConv`` and ``GCNConv`` leaves alone), so it counts as a stub: the class is abstract only
when its ``forward`` reaches it.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from dataclasses import dataclass, field

from . import known_bases
from ..codekeys import code_key
from .categories import guess_category
from .generated import template_copies
from ..sourcing.globs import matches_any
from .parse import COND_TYPE_CHECKING, KIND_CLASS, reached_stubs
from .resolve import DefInfo, ModuleInfo, Ref, Resolver, load_modules

def discovery_version() -> str:
    """What discovery writes (its verdicts, the category guess) is made by this code: an index
    discovered by other code runs discovery again, even when no file changed."""
    return code_key("nnrag.indexing.discovery")

log = logging.getLogger(__name__)

ROOT_NAME = "torch.nn.Module"
_ABSTRACT_NAME = re.compile(r"^ABC|Abstract|^Abc")  # abc.ABC, ABCMeta, AbstractBase, a project's own ABC


@dataclass(eq=False)
class ClassNode:
    """A class in the inheritance graph: one from the index, or an external leaf."""

    key: str  # dotted name: module.qualname
    is_root: bool = False
    known_module: bool = False  # an external base known to be an nn.Module
    forward: str | None = None  # "concrete" | "abstract" | None (defines none itself)
    methods: frozenset[str] = frozenset()
    abstract: frozenset[str] = frozenset()
    calls: dict[str, list[str]] = field(default_factory=dict)
    stubs: frozenset[str] = frozenset()
    abc_meta: bool = False  # names an ABC base or a metaclass itself: abstract methods may bind
    bases: list["ClassNode"] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    module: ModuleInfo | None = None
    definition: DefInfo | None = None


@dataclass(frozen=True)
class Judgement:
    """What discovery concludes about one class: whether it is a block, and why."""

    is_block: bool
    is_module: bool
    forward: str | None
    abstract: tuple[str, ...]
    chain: tuple[str, ...]
    unresolved: tuple[str, ...]


def _c3(node: ClassNode, memo: dict[int, list[ClassNode]]) -> list[ClassNode]:
    cached = memo.get(id(node))
    if cached is not None:
        return cached
    memo[id(node)] = [node]  # guards against cyclic inheritance in broken code
    seqs = [list(_c3(b, memo)) for b in node.bases] + [list(node.bases)]
    result = [node]
    while True:
        seqs = [s for s in seqs if s]
        if not seqs:
            break
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:  # inconsistent hierarchy: fall back to depth-first order
            for seq in seqs:
                for n in seq:
                    if n not in result:
                        result.append(n)
            break
        result.append(head)
        for seq in seqs:
            if seq and seq[0] is head:
                del seq[0]
    memo[id(node)] = result
    return result


class Discoverer:
    """Builds class nodes over a :class:`Resolver` and judges each class."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self._nodes: dict[str, ClassNode] = {}  # external leaves, by dotted name
        self._internal: dict[tuple[int, str], ClassNode] = {}  # by (file id, qualname)
        self._mro: dict[int, list[ClassNode]] = {}
        self._is_module: dict[int, bool] = {}

    def external(self, dotted: str) -> ClassNode:
        node = self._nodes.get(dotted)
        if node is None:
            has_forward = known_bases.lookup(dotted)
            node = ClassNode(
                key=dotted,
                is_root=dotted in known_bases.MODULE_ROOTS,
                known_module=has_forward is not None,
                forward="concrete" if has_forward else None,
            )
            self._nodes[dotted] = node
        return node

    def node(self, mod: ModuleInfo, d: DefInfo) -> ClassNode:
        node = self._internal.get((mod.file_id, d.qualname))
        if node is not None:
            return node
        key = f"{mod.module}.{d.qualname}"
        node = ClassNode(
            key=key,
            is_root=key in known_bases.MODULE_ROOTS,
            forward=d.forward,
            methods=frozenset(d.methods),
            abstract=frozenset(d.abstract),
            calls=d.calls,
            stubs=frozenset(d.stubs),
            module=mod,
            definition=d,
        )
        self._internal[(mod.file_id, d.qualname)] = node
        if node.is_root:
            node.forward = None  # Module.forward is a placeholder that raises
            return node
        # any metaclass counts (one derived from ABCMeta enforces too), and so does a base that is
        # not a Module and looks abstract by name: keeping a class out is the safe mistake
        node.abc_meta = "metaclass" in d.keywords
        for base in d.bases:
            ref = self.resolver.resolve_dotted(mod, base)
            if ref.kind != KIND_CLASS and _ABSTRACT_NAME.search((ref.target if ref.kind == "external" else base).rsplit(".", 1)[-1]):
                node.abc_meta = True
            base_node = self._base_node(ref, base)
            if base_node is None:
                if ref.kind == "unresolved":  # external non-Module bases (Enum, ...) are fine
                    node.unresolved.append(f"{base}: {ref.target}")
            elif base_node is not node:
                node.bases.append(base_node)
        return node

    def _base_node(self, ref: Ref, text: str) -> ClassNode | None:
        if ref.kind == KIND_CLASS and ref.module is not None and ref.definition is not None:
            return self.node(ref.module, ref.definition)
        if ref.kind == "external":  # only Module bases matter; object, ABC, Generic... drop out
            node = self.external(ref.target)
            return node if (node.known_module or node.is_root) else None
        return None

    def is_module(self, node: ClassNode) -> bool:
        cached = self._is_module.get(id(node))
        if cached is not None:
            return cached
        self._is_module[id(node)] = False  # cycle guard
        result = node.is_root or node.known_module or any(self.is_module(b) for b in node.bases)
        self._is_module[id(node)] = result
        return result

    def chain(self, node: ClassNode) -> list[str]:
        out = [node.key]
        seen = {id(node)}
        while not (node.is_root or node.known_module and node.module is None):
            nxt = next((b for b in node.bases if self.is_module(b) and id(b) not in seen), None)
            if nxt is None:
                break
            seen.add(id(nxt))
            out.append(nxt.key)
            node = nxt
        if node.is_root:
            out[-1] = ROOT_NAME
        elif out[-1] != ROOT_NAME:
            out.append(ROOT_NAME)
        return out

    def judge(self, mod: ModuleInfo, d: DefInfo) -> Judgement:
        node = self.node(mod, d)
        is_module = self.is_module(node) and not node.is_root
        mro = _c3(node, self._mro)
        forward = next((n.forward for n in mro if n.forward is not None), None)
        abstract: set[str] = set()
        for n in reversed(mro):
            abstract = {a for a in abstract if a not in n.methods}
            abstract |= n.abstract
        binding = any(n.abc_meta for n in mro)
        if not binding:
            abstract = set()  # left unimplemented, they are stubs: only reaching one counts

        def resolve(name: str) -> tuple[list[str], bool] | None:
            owner = next((n for n in mro if name in n.methods or name in n.abstract), None)
            if owner is None:
                return None
            return owner.calls.get(name, []), name in owner.stubs or (not binding and name in owner.abstract)

        # a stub forward reaches through calls on self (``self._check_input_dim(x)``, or
        # forward → apply_func → apply_transform across the MRO) leaves the class abstract
        abstract |= {f"{stub}@forward" for stub in reached_stubs(resolve)}
        unresolved = tuple(u for n in mro for u in n.unresolved)
        return Judgement(
            is_block=is_module and forward == "concrete" and not abstract,
            is_module=is_module,
            forward=forward,
            abstract=tuple(sorted(abstract)),
            chain=tuple(self.chain(node)) if is_module else (),
            unresolved=unresolved,
        )


@dataclass(frozen=True)
class BlockRow:
    source_id: int
    file_id: int
    name: str
    qualname: str
    line: int
    end_line: int
    category: str
    chain: tuple[str, ...]


@dataclass(frozen=True)
class DiscoveryResult:
    blocks: list[BlockRow]
    classes: int
    modules_not_blocks: int  # Module subclasses rejected (abstract, or no concrete forward)
    unresolved_bases: int  # classes with a base that could not be resolved
    template_copies: int  # classes of template files that a file generated from them defines too


def discover(conn: sqlite3.Connection) -> DiscoveryResult:
    """Judge every class in the index."""
    priorities: dict[int, int] = {}
    symbols: dict[int, list[str]] = {}
    for sid, priority, config in conn.execute("SELECT id, priority, config FROM sources"):
        priorities[sid] = priority
        symbols[sid] = list(json.loads(config or "{}").get("symbols") or [])
    modules = load_modules(conn)
    discoverer = Discoverer(Resolver(modules, priorities))
    copies = template_copies(modules)
    blocks: list[BlockRow] = []
    named: set[tuple[int, str]] = set()
    classes = rejected = unresolved = templated = 0
    for mod in modules:
        for d in mod.defs.values():
            if d.kind != KIND_CLASS:
                continue
            classes += 1
            if d.qualname.split(".")[0] in copies.get(mod.file_id, ()):
                templated += 1
                continue
            if d.cond == COND_TYPE_CHECKING:  # written for type checkers only: never exists at run time
                continue
            verdict = discoverer.judge(mod, d)
            if verdict.unresolved:
                unresolved += 1
            if not verdict.is_block:
                rejected += verdict.is_module
                continue
            name = d.qualname.rsplit(".", 1)[-1]
            if not matches_any(name, symbols.get(mod.source_id, [])):
                continue
            qualname = f"{mod.module}.{d.qualname}"
            if (mod.source_id, qualname) in named:
                # ``a.py`` beside a package ``a/``: one import name, and Python imports the package
                log.warning("%s is defined by two files of one source; the second is left out", qualname)
                continue
            named.add((mod.source_id, qualname))
            blocks.append(
                BlockRow(
                    source_id=mod.source_id,
                    file_id=mod.file_id,
                    name=name,
                    qualname=qualname,
                    line=d.lineno,
                    end_line=d.end_lineno,
                    category=guess_category(name, verdict.chain, mod.module, d.docstring),
                    chain=verdict.chain,
                )
            )
    return DiscoveryResult(blocks, classes, rejected, unresolved, templated)
