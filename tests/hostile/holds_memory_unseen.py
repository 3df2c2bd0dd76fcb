"""Holds memory no resident set shows, each way bounded to 1.5 GB: memfd files filled with
write() and never mapped, System V segments touched then detached, pipe buffers, and files in its
own folder (a tmpfs: its pages are memory). It raises with what it managed to hold, so the test
reads what the kernel allowed."""
import ctypes
import os

import torch.nn as nn

CHUNK = 1 << 20
TOTAL_MB = 1536


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


def _memfd(held):
    for i in range(TOTAL_MB // 64):
        fd = os.memfd_create(f"hold{i}")
        for _ in range(64):
            os.write(fd, b"\1" * CHUNK)
        held.append(fd)
    return TOTAL_MB


def _sysv(held):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    done = 0
    for _ in range(TOTAL_MB // 64):
        shm = libc.shmget(0, 64 * CHUNK, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if shm < 0:
            raise OSError(ctypes.get_errno(), "shmget")
        address = libc.shmat(shm, None, 0)
        ctypes.memset(address, 1, 64 * CHUNK)
        libc.shmdt(ctypes.c_void_p(address))
        done += 64
    return done


def _folder(held):
    for i in range(TOTAL_MB // 64):
        with open(f"fill{i}.bin", "wb") as f:
            for _ in range(64):
                f.write(b"\1" * CHUNK)
    return TOTAL_MB


class HoldsMemoryUnseen(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        held, report = [], []
        for name, way in (("memfd", _memfd), ("sysv", _sysv), ("folder", _folder)):
            try:
                report.append(f"{name}={way(held)}")
            except OSError as e:
                report.append(f"{name}=refused:{e.errno}")
        raise RuntimeError("held " + " ".join(report))
