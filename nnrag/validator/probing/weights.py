"""Weights a block fetches while it is built are not part of its architecture.

Blocks that load pretrained weights whatever their arguments (a descriptor that builds its
network and then loads ``torch.hub.load_state_dict_from_url(url)``, a perceptual loss on a
pretrained backbone) would stop at the sandbox's closed network. The gate checks the architecture,
as it does with ``pretrained=False`` where a switch exists: a download of a state dict is answered
with no weights, without any request, the load that follows keeps the random initialisation, and
the record lists what was asked for. Libraries with downloaders of their own (a prefetch into the
hub cache with ``urlopen``, ``torch.hub.download_url_to_file`` then ``torch.load``) are answered
the same way where the request is opened: a checkpoint file's address gets an empty checkpoint,
and so does ``torch.load`` of a checkpoint file that is not there. Every other request still
reaches the sandbox's audit and is refused. Runs inside the sandbox child, before the candidate
is imported.
"""

from __future__ import annotations

import io
import os
import struct
import sys
import urllib.request
import urllib.response
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

import torch.hub
from torch import nn

_refused: list[str] = []


class NoWeights(dict):  # type: ignore[type-arg]
    """An empty state dict standing for one that was not fetched; any key of it reads as another
    (``checkpoint["state_dict"]``, ``checkpoint.get("model")``)."""

    def __getitem__(self, key: Any) -> "NoWeights":
        return NoWeights()

    def get(self, key: Any, default: Any = None) -> "NoWeights":
        return NoWeights()


def _not_fetched(url: str, *args: Any, **kwargs: Any) -> NoWeights:
    _refused.append(str(url))
    return NoWeights()


# What a checkpoint's address ends with; anything else (an archive of data, a page) is refused as before.
_CHECKPOINTS = (".pth", ".pt", ".ckpt", ".pth.tar", ".bin", ".safetensors")


def _empty_checkpoint(path: str) -> bytes:
    if path.endswith(".safetensors"):
        header = b"{}      "  # the format's JSON header, padded to 8 bytes: no tensors
        return struct.pack("<Q", len(header)) + header
    buffer = io.BytesIO()
    torch.save(NoWeights(), buffer)
    return buffer.getvalue()


def _answer_checkpoints(open_: Any) -> Any:
    """``OpenerDirector.open`` (what ``urlopen`` and ``urlretrieve`` go through) answering the
    address of a checkpoint file itself; any other request goes on to the audit that refuses it."""
    def answered(self: urllib.request.OpenerDirector, fullurl: Any, data: Any = None, *args: Any, **kwargs: Any) -> Any:
        url = fullurl.full_url if isinstance(fullurl, urllib.request.Request) else str(fullurl)
        parts = urlsplit(url)
        path = parts.path.lower()
        if parts.scheme in ("http", "https") and path.endswith(_CHECKPOINTS):
            _refused.append(url)
            body = _empty_checkpoint(path)
            headers = Message()
            headers["Content-Length"] = str(len(body))
            headers["Content-Type"] = "application/octet-stream"
            return urllib.response.addinfourl(io.BytesIO(body), headers, url, 200)
        return open_(self, fullurl, data, *args, **kwargs)

    return answered


def _absent_checkpoints(load: Any) -> Any:
    """``torch.load`` answering a checkpoint file the source does not hold (weights its README
    says to download to ``checkpoints/model.pth``, a path a constructor loads by default) as a
    download of it is answered: no weights, the path recorded. A file that exists loads as ever."""
    def answered(f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, os.PathLike)) and str(f).lower().endswith(_CHECKPOINTS) and not os.path.exists(f):
            _refused.append(str(f))
            return NoWeights()
        return load(f, *args, **kwargs)

    return answered


def install() -> None:
    """Answer downloads of state dicts with :class:`NoWeights`, also where a module bound the
    download function before (``from torch.hub import load_state_dict_from_url``), and let a load
    of no weights after such a download keep the module as it is. What an earlier check in this
    process asked for is forgotten."""
    _refused.clear()
    fetch = torch.hub.load_state_dict_from_url
    if fetch is _not_fetched:
        return
    # a checkpoint saved from NoWeights loads as one also under torch.load(weights_only=True)
    torch.serialization.add_safe_globals([NoWeights])
    urllib.request.OpenerDirector.open = _answer_checkpoints(urllib.request.OpenerDirector.open)  # type: ignore[method-assign]
    torch.load = _absent_checkpoints(torch.load)  # type: ignore[assignment]
    for module in list(sys.modules.values()):
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is fetch:
                setattr(module, name, _not_fetched)
    load = nn.Module.load_state_dict

    def load_state_dict(self: nn.Module, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        if _refused and not len(state_dict):  # what a refused download left (keys renamed or filtered: still none)
            strict = False
        return load(self, state_dict, strict=strict, assign=assign)

    nn.Module.load_state_dict = load_state_dict  # type: ignore[method-assign,assignment]


def refused() -> list[str]:
    """The addresses of the state dicts asked for and not fetched, in order, without repeats."""
    return list(dict.fromkeys(_refused))
