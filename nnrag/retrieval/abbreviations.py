"""Abbreviations of the neural-network vocabulary, spelled out for search.

Code names blocks ``ConvBnAct``, ``SEModule``, ``aa_layer``; people ask for "convolution, batch
norm and activation", "squeeze and excitation", "anti-aliasing". Index text gets the spelled-out
words beside the abbreviations, so both the lexical and the dense side can meet the question.
"""

from __future__ import annotations

ABBREVIATIONS: dict[str, str] = {
    "aa": "anti aliasing",
    "act": "activation",
    "attn": "attention",
    "aspp": "atrous spatial pyramid pooling",
    "avg": "average",
    "bn": "batch normalization",
    "cheb": "chebyshev",
    "conv": "convolution",
    "ce": "cross entropy",
    "dw": "depthwise",
    "dwconv": "depthwise convolution",
    "ema": "exponential moving average",
    "emb": "embedding",
    "embed": "embedding",
    "ffn": "feed forward network",
    "fpn": "feature pyramid network",
    "gat": "graph attention",
    "gcn": "graph convolution network",
    "gn": "group normalization",
    "giou": "generalized intersection over union",
    "diou": "distance intersection over union",
    "ciou": "complete intersection over union",
    "iou": "intersection over union",
    "ln": "layer normalization",
    "mha": "multi head attention",
    "mlp": "multi layer perceptron",
    "nms": "non maximum suppression",
    "norm": "normalization",
    "ohem": "online hard example mining",
    "pe": "position encoding",
    "pos": "position",
    "pw": "pointwise",
    "proj": "projection",
    "qkv": "query key value",
    "rel": "relative",
    "rope": "rotary position embedding",
    "roi": "region of interest",
    "se": "squeeze excitation",
    "sep": "separable",
    "upsample": "upsampling",
    # model-level abbreviations (``ReformerLM``, ``PerformerEncDec``, ``ViTEncoder``); not ``gru``, whose
    # "gated ... unit" drew gated feed-forward queries to GRUCell
    "lm": "language model",
    "mlm": "masked language modeling",
    "enc": "encoder",
    "dec": "decoder",
    "seq": "sequence",
    "ff": "feed forward",
    "feat": "feature",
    "gnn": "graph neural network",
    "rnn": "recurrent neural network",
    "lstm": "long short term memory",
    "tcn": "temporal convolutional network",
    "ctc": "connectionist temporal classification",
    "asr": "speech recognition",
    "tts": "text to speech",
    "vae": "variational autoencoder",
    "gan": "generative adversarial network",
    "vit": "vision transformer",
    "moe": "mixture of experts",
    "vq": "vector quantization",
    "lsh": "locality sensitive hashing",
}


def expand(words: str) -> str:
    """``words`` followed by the spelled-out form of each abbreviation among them."""
    extra = expand_only(words)
    return f"{words} ({extra})" if extra else words


def expand_only(words: str) -> str:
    """Just the spelled-out forms of the abbreviations among ``words``."""
    return "; ".join(ABBREVIATIONS[w] for w in dict.fromkeys(words.lower().split()) if w in ABBREVIATIONS)
