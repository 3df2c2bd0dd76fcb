"""The error hierarchy of nnrag.

Every error carries a message a user can act on. Errors are plain exceptions with picklable
arguments so they survive being raised in a worker process and re-raised in the parent.
"""

from __future__ import annotations


# Failure codes of a block, from extraction and the validator gate. Stable strings: reports,
# tests and the library count them.
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
PROBE_ERROR = "probe-error"  # the gate's own code failed: a bug of nnrag, counted apart from the blocks'
TOO_LARGE = "too-large"

CODES = (
    SYNTAX_ERROR, COMPILE_ERROR, NATIVE_EXTENSION, MISSING_DEPENDENCY, UNRESOLVED_NAME, DYNAMIC_REGISTRY,
    IMPORT_ERROR, CLASS_NOT_FOUND, CONSTRUCTOR_ARGS, INPUT_INFERENCE, RUNTIME_ERROR, BACKWARD_ERROR,
    TIMEOUT, MEMORY, SANDBOX_VIOLATION, CRASH, PROBE_ERROR, TOO_LARGE,
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
    PROBE_ERROR: "the gate's own guessing code failed (a bug of nnrag, not of the block)",
    TOO_LARGE: "the file is larger than the gate compiles (8 MB): compiling it would take GBs outside the sandbox",
}



class NnragError(Exception):
    """Base class of every error nnrag raises on purpose."""


class ConfigError(NnragError):
    """A corpus file, source specification or setting is malformed."""


class DiskFullError(NnragError):
    """No space left where the home is; nothing is moved aside, and the next run resumes."""


class SourceError(NnragError):
    """A corpus source cannot be located, fetched or read."""


class IndexStoreError(NnragError):
    """The index database is missing, locked, corrupted or of an unknown schema."""


class NotFoundError(NnragError):
    """A requested block, source or file is not in the index."""


class AmbiguousBlockError(NotFoundError):
    """A name matches blocks in several sources or modules."""

    def __init__(self, name: str, candidates: list[str]) -> None:
        self.name, self.candidates = name, candidates
        listing = "\n  ".join(candidates)
        super().__init__(f"{name!r} matches {len(candidates)} blocks; give one of their ids instead:\n  {listing}")

    def __reduce__(self) -> tuple[object, ...]:  # picklable across worker processes
        return (type(self), (self.name, self.candidates))


class ValidatorUnavailable(NnragError):
    """A validation worker does not start in the Python asked for (no torch there, or the process
    ended before it was ready)."""


class VendorError(NnragError):
    """Blocks cannot be written into the package folder asked for."""


class LLMNotConfigured(ConfigError):
    """No chat model is configured; the message names every way to configure one."""


class AgentError(NnragError):
    """The agent could not finish: the model is unreachable, or it ran out of steps."""


class LemurError(NnragError):
    """LEMUR (nn-dataset) could not be set up or read."""


class LemurNotInstalled(LemurError):
    def __init__(self) -> None:
        super().__init__("LEMUR (nn-dataset) is not installed in this Python. Install it without its pinned "
                         "dependencies: pip install --no-deps nn-dataset==2.2.11 && pip install \"nnrag[lemur]\"")


class NotAdaptable(NnragError):
    """The block cannot be wired as an image classifier for LEMUR; the message says why."""


__all__ = ["NnragError", "ConfigError", "DiskFullError", "SourceError", "IndexStoreError", "NotFoundError", "AmbiguousBlockError",
           "LLMNotConfigured", "AgentError", "LemurError", "LemurNotInstalled", "NotAdaptable"]
