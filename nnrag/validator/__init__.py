"""The validator gate: parse, compile, then a sandboxed import / instantiate / forward / backward."""

from .record import CODE_HELP, CODES, STAGES, Limits, ValidationRecord

__all__ = ["CODES", "CODE_HELP", "STAGES", "Limits", "ValidationRecord"]
