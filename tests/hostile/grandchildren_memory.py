"""Three forked processes hold 400 MB each while the candidate itself stays small."""
import ctypes
import os
import time

import torch.nn as nn


class HungryChildren(nn.Module):
    def forward(self, x):
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
