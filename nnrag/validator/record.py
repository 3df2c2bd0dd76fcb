"""The gate's verdict on one candidate: the stage it reached and, on failure, a code from a fixed taxonomy."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

# Stages, in order. A record's ``stage`` is the last stage attempted.
STAGES = ("parse", "compile", "import", "instantiate", "forward", "backward")

# Failure codes. Stable strings: reports, tests and the library count them.
SYNTAX_ERROR = "syntax-error"
COMPILE_ERROR = "compile-error"
NATIVE_EXTENSION = "native-extension"
MISSING_DEPENDENCY = "missing-dependency"
UNRESOLVED_NAME = "unresolved-name"
DYNAMIC_REGISTRY = "dynamic-registry"
IMPORT_ERROR = "import-error"
CLASS_NOT_FOUND = "class-not-found"
CONSTRUCTOR_ARGS = "constructor-args"
INPUT_INFERENCE = "input-inference"
RUNTIME_ERROR = "runtime-error"
BACKWARD_ERROR = "backward-error"
TIMEOUT = "timeout"
MEMORY = "memory"
SANDBOX_VIOLATION = "sandbox-violation"
CRASH = "crash"

CODES = (
    SYNTAX_ERROR, COMPILE_ERROR, NATIVE_EXTENSION, MISSING_DEPENDENCY, UNRESOLVED_NAME, DYNAMIC_REGISTRY,
    IMPORT_ERROR, CLASS_NOT_FOUND, CONSTRUCTOR_ARGS, INPUT_INFERENCE, RUNTIME_ERROR, BACKWARD_ERROR,
    TIMEOUT, MEMORY, SANDBOX_VIOLATION, CRASH,
)
CODE_HELP = {
    SYNTAX_ERROR: "the file does not parse",
    COMPILE_ERROR: "the file parses but does not compile",
    NATIVE_EXTENSION: "needs a compiled extension module that is not Python source",
    MISSING_DEPENDENCY: "imports a distribution that is not installed",
    UNRESOLVED_NAME: "uses a name that is defined nowhere",
    DYNAMIC_REGISTRY: "looks a string up in a registry filled at run time elsewhere",
    IMPORT_ERROR: "raises while the file is imported",
    CLASS_NOT_FOUND: "the file defines no such nn.Module class",
    CONSTRUCTOR_ARGS: "no inferred constructor arguments instantiate it",
    INPUT_INFERENCE: "no inferred input runs forward",
    RUNTIME_ERROR: "forward raises an error unrelated to input shapes",
    BACKWARD_ERROR: "forward passes but backward fails",
    TIMEOUT: "exceeded the wall-clock or CPU time limit",
    MEMORY: "exceeded the memory limit",
    SANDBOX_VIOLATION: "tried to use the network, start a process or write outside its folder",
    CRASH: "the sandboxed process died",
}


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 20.0  # wall clock, whole candidate
    cpu_s: int = 40
    memory_mb: int = 6144  # growth over the warm worker
    file_mb: int = 64
    processes: int = 64  # beyond those already running


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
    output_shapes: list[Any] = field(default_factory=list)
    params: int | None = None
    submodules: dict[str, int] = field(default_factory=dict)  # submodule type -> count, from the built block
    backward: bool | None = None  # None: outputs not differentiable
    seconds: float = 0.0
    peak_mb: float | None = None  # resident memory growth over the warm worker
    isolation: dict[str, str] = field(default_factory=dict)
    traceback: str = ""
    output: str = ""  # tail of what the candidate printed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ValidationRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def summary(self) -> str:
        if self.ok:
            return f"ok: {self.class_name} {self.input_shapes} -> {self.output_shapes}"
        return f"{self.code} at {self.stage}: {self.message}"
