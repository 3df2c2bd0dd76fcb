"""Three forked processes hold 400 MB each while the candidate itself stays small."""
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


class HungryChildren(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        libc = ctypes.CDLL(None)
        for _ in range(3):
            if libc.fork() == 0:
                block = bytearray(400 * 1024 * 1024)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                time.sleep(20)
                os._exit(0)
        time.sleep(8)
        return x
