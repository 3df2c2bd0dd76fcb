"""Markdown rendering of a spec, for people and for prompts."""

from __future__ import annotations

from .model import BlockSpec, Parameter


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


def markdown(spec: BlockSpec) -> str:
    v, prov = spec.validation, spec.provenance
    mark = "validated" if v.status == "validated" else f"{v.status}" + (f" ({v.code} at {v.stage})" if v.code else "")
    lines = [f"# {spec.name}", "", f"`{spec.id}` · {spec.category or 'uncategorised'} · {mark}", "", spec.summary, ""]
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
    lines += ["## Provenance", "", f"- source: {prov.source} ({prov.origin})",
              f"- file: `{prov.path}` lines {prov.line_start}-{prov.line_end}" + (f", sha1 `{prov.file_sha1}`" if prov.file_sha1 else "")]
    if prov.swhid:
        lines.append(f"- SWHID: `{prov.swhid}`")
    lines.append(f"- license: {prov.license or 'unknown'}")
    return "\n".join(lines) + "\n"
