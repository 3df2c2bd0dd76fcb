"""Writes a passing record to every pipe it holds, then keeps the process alive past its time."""
import json
import os
import stat
import time

import torch.nn as nn


class ForgesThenHangs(nn.Module):
    def forward(self, x):
        fake = json.dumps({"ok": True, "stage": "backward", "output_shapes": [[1]], "params": 1}) + "\n"
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, fake.encode())
            except OSError:
                continue
        while True:
            time.sleep(0.2)
