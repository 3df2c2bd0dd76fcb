"""Switches the audit hook off and tries every way out the kernel must close, each bounded: writes
through os.open with dir_fd, a sibling folder sharing the sandbox's name as a prefix, 50 MB in
/dev/shm, a shell command, a Unix socket (by path and abstract), root-only files, the command line
and environment of the worker or the build (where their --home is). It raises with the list of
what got through, so the test reads what the kernel let pass."""
import ctypes
import os
import socket
import tempfile

import torch.nn as nn

MARKER = "/tmp/nnrag-hostile-escape"
SOCKET = "/tmp/nnrag-hostile.sock"


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


def _attempts():
    folder = os.getcwd()

    def dir_fd():
        tmp = os.open("/tmp", os.O_RDONLY | os.O_DIRECTORY)
        os.close(os.open("nnrag-hostile-escape.dirfd", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=tmp))

    def sibling():
        os.makedirs(folder + "-x", exist_ok=True)
        open(os.path.join(folder + "-x", "marker"), "w").close()

    def shm():
        with open("/dev/shm/nnrag-hostile-escape", "wb") as f:
            f.write(b"\0" * (50 << 20))

    def shell():
        if os.system(f"echo escaped > {MARKER}.shell") != 0 or not os.path.exists(MARKER + ".shell"):
            raise OSError("the shell could not write")

    def unix_path():
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(1)
            s.connect(SOCKET)
            s.sendall(b"escaped")

    def unix_abstract():
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(1)
            s.connect("\0nnrag-hostile")
            s.sendall(b"escaped")

    def shadow():
        open("/etc/shadow").read(1)

    def temp_of_others():
        names = os.listdir(tempfile.gettempdir() if tempfile.gettempdir() != folder else "/tmp")
        if any(n.startswith(("nnrag-sandbox-", "another-home-", "pytest-of-")) and n != os.path.basename(folder) for n in names):
            raise AssertionError  # counts as got through: it saw them
        raise OSError("nothing of others there")

    def parents_cmdline():  # how a candidate once found the build's --home, then updated its index
        for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
            try:
                seen = open(f"/proc/{pid}/cmdline", "rb").read() + open(f"/proc/{pid}/environ", "rb").read()
            except OSError:
                continue
            if b"nnrag" in seen:
                raise AssertionError  # got through: it read another process of nnrag
        raise OSError("no other process of nnrag in sight")

    return {"parents_cmdline": parents_cmdline, "dir_fd": dir_fd, "sibling": sibling, "shm": shm, "shell": shell, "unix_path": unix_path,
            "unix_abstract": unix_abstract, "shadow": shadow, "temp_of_others": temp_of_others}


class EscapesUnhooked(nn.Module):
    def forward(self, x):
        _disable_audit_hook()
        ctypes.CDLL(None)  # the C library is within reach too; the calls above are what count
        escaped = []
        for name, attempt in _attempts().items():
            try:
                attempt()
                escaped.append(name)
            except AssertionError:
                escaped.append(name)
            except (OSError, ValueError):
                continue
        raise RuntimeError(f"escaped={escaped}")
