"""Forks 150 sleeping processes through libc; bounded, so a failed containment ends by itself."""
import ctypes
import os
import time

import torch.nn as nn


class ForkBomb(nn.Module):
    def forward(self, x):
        libc = ctypes.CDLL(None)
        for _ in range(150):
            if libc.fork() == 0:
                time.sleep(30)
                os._exit(0)
        time.sleep(2)
        return x
