"""Check static block discovery against runtime introspection of an installed package.

    python -m nnrag.evals.check_discovery timm [--include timm/layers] [--json]

The runtime ground truth imports every module of the distribution and keeps each class defined
there (``cls.__module__`` is the module) that is a subclass of ``torch.nn.Module``, is not
``inspect.isabstract`` and whose ``forward`` found along the MRO is not ``nn.Module``'s
placeholder, not an abstract method, and not a body that only raises ``NotImplementedError``, and
that reaches no such stub through calls on ``self`` (``self._check_input_dim(x)``).
Classes nested in functions are left out (they are not importable). The static side is
``nnrag index dist:NAME`` into a temporary home. Prints agreement, precision, recall and the
classes on which the two disagree, so every disagreement can be read and explained.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import inspect
import json
import logging
import pkgutil
import sys
import tempfile
import textwrap
import warnings

from ..sourcing.globs import PathFilter


def _only_raises_not_implemented(fn: object) -> bool:
    from ..indexing.parse import only_raises_not_implemented

    node = _method_node(fn)
    return node is not None and only_raises_not_implemented(node)


def _method_node(fn: object) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]  # type: ignore[arg-type]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _calls_a_stub(cls: type) -> bool:
    """The forward reaches, through calls on ``self`` resolved along ``__mro__``, a method that only
    raises NotImplementedError or an abstract method left unimplemented in a class that can be
    instantiated (no ABCMeta: the index's rule, applied to the imported classes)."""
    from ..indexing.parse import only_raises_not_implemented as stub, reached_stubs, self_calls

    def resolve(name: str) -> tuple[list[str], bool] | None:
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        method = vars(owner)[name] if owner is not None else None
        node = _method_node(method) if method is not None else None
        if node is None:
            return None
        return self_calls(node), name != "forward" and (stub(node) or getattr(method, "__isabstractmethod__", False))

    return bool(reached_stubs(resolve))


def runtime_blocks(package: str, path_filter: PathFilter) -> tuple[set[str], list[str]]:
    """Blocks found by importing ``package``; also the modules that failed to import."""
    import torch.nn as nn

    root = importlib.import_module(package)
    found: set[str] = set()
    failed: list[str] = []
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".", onerror=failed.append)]
    for modname in names:
        rel = modname.replace(".", "/")
        if not (path_filter.keeps(rel + ".py") or path_filter.keeps(rel + "/__init__.py")):
            continue
        try:
            # what a module prints at import goes to stderr: stdout carries the --json report
            with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                warnings.simplefilter("ignore")
                module = importlib.import_module(modname)
        except Exception:  # noqa: BLE001 - optional dependencies may be missing
            failed.append(modname)
            continue
        stack = [v for v in vars(module).values() if inspect.isclass(v)]
        while stack:
            cls = stack.pop()
            if cls.__module__ != modname or "<locals>" in cls.__qualname__:
                continue
            stack.extend(v for v in vars(cls).values() if inspect.isclass(v))
            if not issubclass(cls, nn.Module) or inspect.isabstract(cls) or cls is nn.Module:
                continue
            owner = next((k for k in cls.__mro__ if "forward" in vars(k)), None)
            if owner is None or owner is nn.Module:
                continue
            fwd = vars(owner)["forward"]
            if getattr(fwd, "__isabstractmethod__", False) or _only_raises_not_implemented(fwd) or _calls_a_stub(cls):
                continue
            found.add(f"{modname}.{cls.__qualname__}")
    return found, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dist", help="installed distribution, e.g. timm")
    parser.add_argument("--package", help="import name if it differs from the distribution name")
    parser.add_argument("--include", action="append", default=[], help="path globs, as in a corpus file")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    import nnrag
    from nnrag.sourcing.spec import parse_source

    spec = parse_source(f"dist:{args.dist}", include=tuple(args.include))
    with tempfile.TemporaryDirectory() as home:
        nnrag.index([spec], home=home)
        static = {b.qualname for b in nnrag.blocks(home=home)}
    runtime, failed = runtime_blocks(args.package or args.dist, spec.path_filter)
    both = static & runtime
    result = {
        "dist": args.dist,
        "static": len(static),
        "runtime": len(runtime),
        "agree": len(both),
        "precision": round(len(both) / len(static), 4) if static else 0.0,
        "recall": round(len(both) / len(runtime), 4) if runtime else 0.0,
        "count_ratio": round(len(static) / len(runtime), 4) if runtime else 0.0,
        "only_static": sorted(static - runtime),
        "only_runtime": sorted(runtime - static),
        "modules_not_imported": sorted(failed),
    }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.dist}: static {result['static']}, runtime {result['runtime']}, agree {result['agree']}")
    print(f"precision {result['precision']:.3f}  recall {result['recall']:.3f}  count ratio {result['count_ratio']:.3f}")
    for key in ("only_static", "only_runtime", "modules_not_imported"):
        items = result[key]
        print(f"{key} ({len(items)}):")  # type: ignore[arg-type]
        for item in items:  # type: ignore[attr-defined]
            print(f"  {item}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
