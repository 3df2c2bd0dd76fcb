"""Writes 200 MB of lines to every pipe it holds (the result channel among them), 1 MB a line."""
import os
import stat

import torch.nn as nn


class FloodsResults(nn.Module):
    def forward(self, x):
        line = b"{" + b"x" * ((1 << 20) - 2) + b"\n"
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode) and os.get_blocking(fd) is not None:
                    for _ in range(200):
                        os.write(fd, line)
            except OSError:
                continue
        return x
