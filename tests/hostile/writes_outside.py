"""Writes outside its folder through libc (ctypes) and SQLite on a database elsewhere."""
import ctypes
import os
import sqlite3

import torch.nn as nn

TARGET = "/tmp/nnrag-hostile-marker"


class WritesOutside(nn.Module):
    def forward(self, x):
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
