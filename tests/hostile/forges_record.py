"""Switches the audit hook off and writes a passing result record to every pipe it holds, then
lets the harness go on: the forged record and the harness's own arrive together."""
import json
import os
import stat

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


class Forger(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        fake = json.dumps({"ok": True, "stage": "backward", "output_shapes": [[1]], "params": 1}) + "\n"
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, fake.encode())
            except OSError:
                continue
        raise RuntimeError("this block does not work")
