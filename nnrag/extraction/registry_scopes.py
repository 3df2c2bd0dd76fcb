"""Registries that name themselves after the package creating them keep that name in one file.

mmengine's ``Registry(name)`` takes its scope from the module of the line calling it
(``inspect.getmodule(frame).__name__.split('.')[0]``): 'mmdet' in ``mmdet/registry.py``, but
the standalone file's own name once copied, where the registries of mmengine, mmcv and mmdet
would all share one scope. mmengine's root registry then finds no child for the scope a config
names (``default_scope='mmdet'``, ``type='mmdet.FocalLoss'``), and nothing registered under a
package's registry is built from the root. Calls of such a class get the scope they had in the
source as an explicit ``scope=`` argument.
"""

from __future__ import annotations

from functools import lru_cache

from .plan import DefTarget, ExtImport, Target

# (package, class): classes whose instances infer their scope from the calling module's package
_SELF_SCOPED = frozenset({("mmengine", "Registry")})
_SCOPE_POSITION = 3  # Registry(name, build_func, parent, scope, locations)


def self_scoped(target: Target) -> bool:
    """Whether ``target`` is a class that infers its scope from the module that calls it."""
    if isinstance(target, DefTarget):
        return (target.module.split(".")[0], target.name) in _SELF_SCOPED
    if isinstance(target, ExtImport) and target.name is not None:
        return (target.top, target.name) in _SELF_SCOPED
    return False


def keep_scopes(text: str, names: frozenset[str], module: str) -> str:
    """``text`` (a statement of ``module``) with calls of the self-scoped classes bound to ``names``
    given the scope they infer in the source: the top-level package of ``module``."""
    if not names or not any(name + "(" in text for name in names):
        return text
    return _keep_scopes(text, names, module.split(".")[0])


@lru_cache(maxsize=1024)
def _keep_scopes(text: str, names: frozenset[str], scope: str) -> str:
    import libcst as cst  # loaded only for the files that create such registries

    def scoped(original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not (isinstance(original.func, cst.Name) and original.func.value in names):
            return updated
        positional = [a for a in original.args if a.keyword is None]
        if any(a.star for a in original.args) or len(positional) > _SCOPE_POSITION or any(
                a.keyword is not None and a.keyword.value == "scope" for a in original.args):
            return updated
        arg = cst.Arg(keyword=cst.Name("scope"), value=cst.SimpleString(repr(scope)),
                      equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        args = list(updated.args)
        if args and isinstance(trailing := args[-1].comma, cst.Comma):  # one argument a line: the new one last
            between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))
            args[-1] = args[-1].with_changes(comma=between)
            arg = arg.with_changes(comma=trailing)
        return updated.with_changes(args=[*args, arg])

    transformer = cst.CSTTransformer()
    transformer.leave_Call = scoped  # type: ignore[method-assign]
    return cst.parse_module(text).visit(transformer).code
