"""The gate's verdict on one candidate: the stage it reached and, on failure, a code from a fixed taxonomy."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..codekeys import code_key
from ..errors import (  # failure codes: one taxonomy for extraction and the gate
    BACKWARD_ERROR,
    CLASS_NOT_FOUND,
    CODES,
    CODE_HELP,
    COMPILE_ERROR,
    CONSTRUCTOR_ARGS,
    CRASH,
    DYNAMIC_REGISTRY,
    IMPORT_ERROR,
    INPUT_INFERENCE,
    MEMORY,
    MISSING_DEPENDENCY,
    PROBE_ERROR,
    NATIVE_EXTENSION,
    RUNTIME_ERROR,
    SANDBOX_VIOLATION,
    SYNTAX_ERROR,
    TIMEOUT,
    TOO_LARGE,
    UNRESOLVED_NAME,
)

# Stages, in order. A record's ``stage`` is the last stage attempted.
STAGES = ("parse", "compile", "import", "instantiate", "forward", "backward")

CANDIDATE_MODULE = "nnrag_candidate"  # the module name the probe imports a block file as


def gate_version() -> str:
    """The gate's key: a hash of the validator's code and what it imports. Verdicts stored under
    another are judged again by the next build that validates."""
    return code_key("nnrag.validator")


STAND_IN = "Passthrough"  # the class name of nnrag.validator.probing.arguments.Passthrough, as init_args repr it


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 20.0  # wall clock, from the end of the candidate's import to its verdict
    cpu_s: int = 40  # CPU seconds, beside import_s
    # wall clock the import may take: third-party libraries compile at import in every fresh
    # process (numba compiles librosa's kernels, 10-30 s), which is no fault of the block's
    import_s: float = 45.0
    memory_mb: int = 6144  # growth over the warm worker
    file_mb: int = 64  # one file
    disk_mb: int = 1024  # the candidate's folder in all (a file system of its own; memory where a budget counts it)
    processes: int = 64  # beyond those already running

    @classmethod
    def scaled(cls, timeout_s: float | None = None, memory_mb: int | None = None) -> "Limits":
        """Limits with a given wall clock and memory, the defaults elsewhere; the CPU allowance is at
        least twice the wall clock (a candidate may use both cores)."""
        base = cls()
        return cls(timeout_s=timeout_s or base.timeout_s, cpu_s=int(max(base.cpu_s, (timeout_s or 0) * 2)),
                   memory_mb=memory_mb or base.memory_mb)


@dataclass(frozen=True)
class ValidationRecord:
    ok: bool
    stage: str
    code: str | None = None
    message: str = ""
    class_name: str | None = None
    init_args: dict[str, str] = field(default_factory=dict)  # repr of each argument the probe passed
    arguments: str = "guessed"  # "guessed", or "recorded" when taken from the source's own factories
    input_shapes: list[Any] = field(default_factory=list)
    input_dtypes: list[str | None] = field(default_factory=list)  # per input: "float32", "int64", ... or None
    # inputs given by keyword (a loss's ``labels=``, a layer's ``position_embeddings=``), as the positional ones
    keyword_shapes: dict[str, Any] = field(default_factory=dict)
    keyword_dtypes: dict[str, str | None] = field(default_factory=dict)
    output_shapes: list[Any] = field(default_factory=list)
    # how the block was built and called, as recipes (see usage/recipes.py); empty when not recordable
    recipe: dict[str, Any] = field(default_factory=dict)
    params: int | None = None
    submodules: dict[str, int] = field(default_factory=dict)  # submodule type -> count, from the built block
    backward: bool | None = None  # None: outputs not differentiable
    weights_not_fetched: list[str] = field(default_factory=list)  # pretrained weights asked for: checked at random init
    seconds: float = 0.0
    peak_mb: float | None = None  # resident memory growth over the warm worker
    isolation: dict[str, str] = field(default_factory=dict)
    # what the sandbox refused and the candidate carried on without (a process a library starts
    # to probe the machine at import); a run that failed on a refusal is a sandbox violation
    refused: list[str] = field(default_factory=list)
    traceback: str = ""
    output: str = ""  # tail of what the candidate printed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ValidationRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def on_stand_ins(self) -> bool:
        """Whether the probe passed a stand-in layer (``Passthrough``, the probe's layer that returns
        its input) for a part the block is built from: a pass that says little of the block's
        own use of that part, which recorded usage may show with the real one."""
        return self.ok and any(STAND_IN in value for value in self.init_args.values())

    @property
    def summary(self) -> str:
        if self.ok:
            return f"ok: {self.class_name} {self.input_shapes} -> {self.output_shapes}"
        return f"{self.code} at {self.stage}: {self.message}"


__all__ = ["STAGES", "gate_version", "CANDIDATE_MODULE", "Limits", "ValidationRecord", "SYNTAX_ERROR", "COMPILE_ERROR", "NATIVE_EXTENSION", "MISSING_DEPENDENCY", "UNRESOLVED_NAME", "DYNAMIC_REGISTRY", "IMPORT_ERROR", "CLASS_NOT_FOUND", "CONSTRUCTOR_ARGS", "INPUT_INFERENCE", "RUNTIME_ERROR", "BACKWARD_ERROR", "TIMEOUT", "MEMORY", "SANDBOX_VIOLATION", "CRASH", "PROBE_ERROR", "TOO_LARGE", "CODES", "CODE_HELP"]
