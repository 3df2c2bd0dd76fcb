"""The spectrogram a block built around a Fourier transform takes.

An inverse STFT, a Griffin-Lim or a complex norm takes what a transform of ``n_fft`` points made:
``n_fft // 2 + 1`` frequency bins (or ``n_fft``, both sides), complex, or real with the real and
imaginary parts on a last axis of two. A random input of the probe's sizes has neither; the block's
error says that it wanted a spectrogram ("a last dimension of size 2", "complex", "freq_bins") and
its own ``n_fft`` how many bins.

Runs inside the sandbox, with torch already imported by the warm worker.
"""

from __future__ import annotations

import re

from torch import nn

from .arguments import held_int

COMPLEX = "complex"  # the kind of a complex-valued input (see ``inputs.make_tensor``)

# what the transform's length is called: torch's and librosa's ``n_fft``, others' spellings
_FFT_NAMES = ("n_fft", "nfft", "fft_size", "filter_length")  # the points of the transform the block or a layer keeps
_ASKS = re.compile(r"complex|freq|\bbins?\b|spectr|last dimension of size 2", re.IGNORECASE)
_FRAMES = 8
_PARTS = re.compile(r"size 2\b|, ?2\)")  # "a last dimension of size 2", "(batch, freq_bins, timesteps, 2)"


def spectrogram_inputs(model: nn.Module, error: BaseException, shape: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
    """Spectrograms of the block's transform, when its error asks for one: real and imaginary
    parts on a last axis first where the error names that axis, complex values where it names
    them, else a magnitude; each one-sided, then with every bin, then with a channel axis (a
    stereo separator's)."""
    text = str(error)
    if not _ASKS.search(text) or (n := held_int(model, _FFT_NAMES, 4, 1 << 15)) is None:
        return []
    batch = shape[0] if shape else 2
    parts, complex_ = _PARTS.search(text) is not None, "complex" in text.lower()
    forms = sorted(((COMPLEX, ()), ("float", (2,)), ("float", ())),
                   key=lambda f: (not parts or f[1] != (2,), not complex_ or f[0] != COMPLEX))
    out: list[tuple[str, tuple[int, ...]]] = []
    for channel in ((), (1,)):
        for kind, last in forms:
            out += [(kind, (batch, *channel, bins, _FRAMES, *last)) for bins in (n // 2 + 1, n)]
    return out
