"""The neutral specification of a block: what it is, how it is called, what it computes from what,
where it comes from. A spec holds no source code and no docstring longer than one sentence, so it
can be shown to a model that is asked to write its own implementation."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..codekeys import code_key


def spec_version() -> str:
    """What made a spec: a hash of the code of the specs stage and what it imports (this model
    among it). Specs stored under another are built again."""
    return code_key("nnrag.specs")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Parameter(_Frozen):
    name: str
    kind: Literal["positional", "positional-or-keyword", "keyword", "var-positional", "var-keyword"]
    annotation: str | None = None
    default: str | None = Field(None, description="the default as written, or None when required")
    required: bool = False
    probe_value: str | None = Field(None, description="the value the validator's probe passed, if any")


class ForwardSignature(_Frozen):
    parameters: list[Parameter]
    returns: str | None = None


class ShapeProbe(_Frozen):
    """What the validator ran: inputs it built and the outputs it got."""

    inputs: list[Any] = Field(default_factory=list, description="shape per input ([2, 16, 32, 32]) or a value")
    input_dtypes: list[str | None] = Field(default_factory=list)
    outputs: Any = Field(default_factory=list, description="shape of the output, nested like the output (list, dict)")
    arguments: Literal["guessed", "recorded"] | None = None
    parameter_count: int | None = None
    backward: bool | None = None


class Submodule(_Frozen):
    type: str
    count: int


class Provenance(_Frozen):
    source: str
    origin: str = Field(description="where the source came from: a distribution and version, a git URL and commit, a path")
    version: str | None = None
    commit: str | None = None
    module: str
    path: str = Field(description="the defining file, relative to the source root")
    line_start: int
    line_end: int
    file_sha1: str | None = None
    swhid: str | None = Field(None, description="Software Heritage id of the file content (swh:1:cnt:...)")
    license: str | None = None
    files: dict[str, str] = Field(default_factory=dict, description="every contributing path -> SHA-1")


class Validation(_Frozen):
    status: Literal["validated", "failed", "not-run"]
    stage: str | None = None
    code: str | None = None
    message: str | None = None
    gate_version: str | None = None


class BlockSpec(_Frozen):
    """A neutral specification of one block."""

    spec_version: str = Field(default_factory=spec_version)
    id: str = Field(description="source:module.Qualname")
    name: str
    qualname: str
    category: str | None = None
    summary: str = Field(description="one paragraph: the docstring's first sentence, or one generated from structure")
    bases: list[str] = Field(default_factory=list)
    constructor: list[Parameter] = Field(default_factory=list)
    forward: ForwardSignature | None = None
    probe: ShapeProbe | None = None
    submodules: list[Submodule] = Field(default_factory=list)
    operations: list[str] = Field(default_factory=list, description="torch operations the code calls or builds")
    mechanisms: list[str] = Field(default_factory=list, description="textbook patterns read from the class's own code "
                                  "(softmax attention, sigmoid gating, residual connection ...) and what the file's "
                                  "functions it calls say they do")
    requirements: list[str] = Field(default_factory=list, description="PEP 508 requirements")
    provenance: Provenance
    validation: Validation

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)

    def to_markdown(self, provenance: bool = True) -> str:
        return markdown(self, provenance)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of :class:`BlockSpec` (draft 2020-12, as pydantic emits it)."""
    schema = BlockSpec.model_json_schema()
    schema["title"] = f"nnrag BlockSpec {spec_version()}"
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2)


# -- Markdown, for people and for prompts ---------------------------------------------------
def _param_line(p: Parameter) -> str:
    text = f"- `{p.name}`"
    if p.annotation:
        text += f": `{p.annotation}`"
    if p.kind in ("var-positional", "var-keyword"):
        text += f" ({p.kind})"
    elif p.required:
        text += " (required)"
    else:
        text += f" = `{p.default}`"
    if p.probe_value is not None:
        text += f"; probed with `{p.probe_value}`"
    return text


def markdown(spec: BlockSpec, provenance: bool = True) -> str:
    """The spec as Markdown; without ``provenance`` (where it came from, which file, which
    license) it says only what the block is and does, as a fine-tuning prompt should."""
    v, prov = spec.validation, spec.provenance
    mark = "validated" if v.status == "validated" else f"{v.status}" + (f" ({v.code} at {v.stage})" if v.code else "")
    where = f"`{spec.id}` · " if provenance else ""
    lines = [f"# {spec.name}", "", f"{where}{spec.category or 'uncategorised'} · {mark}", "", spec.summary, ""]
    if spec.mechanisms:
        lines += ["## Mechanisms", ""] + [f"- {m}" for m in spec.mechanisms] + [""]
    if spec.bases:
        lines += [f"Bases: {', '.join(f'`{b}`' for b in spec.bases)}", ""]
    lines += ["## Constructor", ""] + ([_param_line(p) for p in spec.constructor] or ["- no arguments"]) + [""]
    if spec.forward is not None:
        lines += ["## Forward", ""] + ([_param_line(p) for p in spec.forward.parameters] or ["- no inputs"])
        if spec.forward.returns:
            lines.append(f"- returns `{spec.forward.returns}`")
        lines.append("")
    if spec.probe is not None:
        p = spec.probe
        lines += ["## Probe", "", f"- inputs: {p.inputs} ({', '.join(str(d) for d in p.input_dtypes)})",
                  f"- outputs: {p.outputs}", f"- parameters: {p.parameter_count:,}" if p.parameter_count is not None else "- parameters: ?",
                  f"- backward: {p.backward}", f"- arguments: {p.arguments}", ""]
    if spec.submodules:
        lines += ["## Submodules", ""] + [f"- {s.type} x{s.count}" for s in spec.submodules] + [""]
    if spec.operations:
        lines += ["## Operations", "", ", ".join(f"`{o}`" for o in spec.operations), ""]
    if spec.requirements:
        lines += ["## Requirements", ""] + [f"- `{r}`" for r in spec.requirements] + [""]
    if not provenance:
        return "\n".join(lines).rstrip("\n") + "\n"
    lines += ["## Provenance", "", f"- source: {prov.source} ({prov.origin})",
              f"- file: `{prov.path}` lines {prov.line_start}-{prov.line_end}" + (f", sha1 `{prov.file_sha1}`" if prov.file_sha1 else "")]
    if prov.swhid:
        lines.append(f"- SWHID: `{prov.swhid}`")
    lines.append(f"- license: {prov.license or 'unknown'}")
    return "\n".join(lines) + "\n"
