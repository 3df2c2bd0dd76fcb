"""Tries to lift every resource limit back to unlimited."""
import resource

import torch.nn as nn


class Lifts(nn.Module):
    def forward(self, x):
        found = []
        for name in ("RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NPROC"):
            which = getattr(resource, name)
            try:
                resource.setrlimit(which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                found.append(name + " lifted")
            except (ValueError, OSError):
                found.append(name + " held")
        raise RuntimeError(", ".join(found))
