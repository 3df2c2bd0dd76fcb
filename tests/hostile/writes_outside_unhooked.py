"""Switches the audit hook off, then writes outside its folder through libc and SQLite: only the
kernel stands in the way."""
import ctypes
import os
import sqlite3

import torch.nn as nn

TARGET = "/tmp/nnrag-hostile-marker"


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


class WritesOutsideUnhooked(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        libc = ctypes.CDLL(None)
        fd = libc.open((TARGET + ".libc").encode(), os.O_WRONLY | os.O_CREAT, 0o600)
        if fd >= 0:
            libc.write(fd, b"escaped", 7)
            libc.close(fd)
        try:
            with sqlite3.connect(TARGET + ".sqlite3") as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
        except sqlite3.Error:
            pass
        return x
