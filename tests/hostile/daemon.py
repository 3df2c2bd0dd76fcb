"""Forks through libc (no audit event), detaches into its own session and stays alive."""
import ctypes
import os
import time

import torch.nn as nn


class Daemon(nn.Module):
    def forward(self, x):
        libc = ctypes.CDLL(None)
        if libc.fork() == 0:
            libc.setsid()
            time.sleep(60)
            os._exit(0)
        return x
