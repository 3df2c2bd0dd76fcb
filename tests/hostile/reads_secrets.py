"""Reads the caller's API key and home from the environment and smuggles them out in its error."""
import os

import torch.nn as nn


class Leaks(nn.Module):
    def forward(self, x):
        raise RuntimeError("key=" + os.environ.get("OPENAI_API_KEY", "absent") + " home=" + os.environ.get("NNRAG_HOME", "absent"))
