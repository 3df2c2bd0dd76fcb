"""Switches the audit hook off and looks for a way out: other processes in /proc (the worker's
command line and environment), tracing one through libc, a new namespace, a mount. It reports
what it got in its error, so the test reads what the kernel let through."""
import ctypes
import os

import torch.nn as nn


def _disable_audit_hook():
    """What hostile code does first: finds the Python audit hook's state through gc and turns it off,
    so that only the kernel's confinement is left."""
    import gc
    import types

    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and obj.__name__ == "hook" and obj.__closure__:
            for cell in obj.__closure__:
                if isinstance(cell.cell_contents, dict) and "busy" in cell.cell_contents:
                    cell.cell_contents["busy"] = True


class LooksAround(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        libc = ctypes.CDLL(None, use_errno=True)
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
        got = [f"others={len(others)}"]
        for name, call in (("ptrace", lambda: libc.ptrace(0, 0, None, None)),  # PTRACE_TRACEME
                           ("unshare", lambda: libc.unshare(0x00020000)),  # a new mount namespace
                           ("mount", lambda: libc.mount(b"none", b"/", None, 32, None))):  # remount / writable
            result = call()
            got.append(f"{name}={result}/{ctypes.get_errno() if result else 0}")
        raise RuntimeError(" ".join(got))
