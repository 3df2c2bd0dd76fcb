"""A first guess at what kind of block a class is, from its name, bases, module and docstring.

The guess is a keyword heuristic and says so: it orders and filters listings, it is not a claim.
Rules are tried in order; the first whose pattern matches wins. The name (split into words) and
the direct bases are strongest, then the module path, then the docstring's first sentence.
"""

from __future__ import annotations

import re

CATEGORIES = (
    "loss",
    "attention",
    "normalization",
    "pooling",
    "activation",
    "graph layer",
    "transformer block",
    "convolution",
    "architecture",
    "embedding",
    "recurrent",
    "utility",
)

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cat, re.compile(pat, re.IGNORECASE))
    for cat, pat in (
        ("loss", r"loss|criterion|divergence$"),
        ("graph layer", r"messagepassing|\bg(?:cn|at|in|ine|raph) ?conv|\b(?:sage|cheb|edge) ?conv|gatv2|\bgnn\b|graph"),
        ("attention", r"attention|attn|\bmhsa\b|\bmha\b|selfatt|crossatt|squeeze.?excit|\bse(?:module|layer|block)?\b|\beca\b|\bcbam\b|\bgather.?excite|nonlocal"),
        ("normalization", r"norm(?:alization|alize)?\b|norm\d|batchnorm|layernorm|groupnorm|instancenorm|rmsnorm|\bbn\b|frozenbn|whiten"),
        ("pooling", r"pool|downsampl|\bblur"),
        ("activation", r"\b(?:relu\d*|gelu|silu|swish|mish|sigmoid|tanh|softmax|softmin|softplus|softsign|elu|selu|celu|prelu|rrelu|hardswish|hardsigmoid|hardtanh|hardshrink|softshrink|tanhshrink|glu|swiglu|geglu|logsigmoid|threshold|quickgelu|star\s?relu|act(?:ivation)?)\b"),
        ("transformer block", r"transformer|encoder.?layer|decoder.?layer|\bvit.?block|\bblock\b.*\b(?:attn|attention)|\bmlp.?mixer|mixer.?block|swin|\bformer\b"),
        ("embedding", r"embed|positional|\bpos.?enc|patch.?embed|token"),
        ("recurrent", r"\b(?:rnn|lstm|gru)\b|recurrent"),
        # "conv" anywhere (DWConv, Conv2d, deconv, ConvNeXt), but not the English words a
        # docstring starts with ("Convert an image from RGB to HSV")
        ("convolution", r"conv(?!ert|ers|ex|erg|ent|ey)|\bcnn\b|depthwise|pointwise|separable|\bdw\b|bottleneck|basic block|\bstem\d*\b"),
        ("architecture", r"net\b|\bnet\d|resnet|resnext|vgg|alexnet|inception|mobilenet|efficientnet|densenet|regnet|convnext|vision.?transformer|\bvit\b|\bdeit\b|\bbeit\b|\bswin\b|squeezenet|shufflenet|googlenet|mnasnet|\bmodel\b|backbone|classifier|detector|segment|\byolo|\bfcn\b|deeplab|unet"),
    )
)

# Bases whose category is certain when they appear in the chain.
_BASE_HINTS: tuple[tuple[str, str], ...] = (
    ("torch.nn.modules.loss", "loss"),
    ("_Loss", "loss"),
    ("_NormBase", "normalization"),
    ("_BatchNorm", "normalization"),
    ("_ConvNd", "convolution"),
    ("MessagePassing", "graph layer"),
    ("_MaxPoolNd", "pooling"),
    ("_AvgPoolNd", "pooling"),
    ("RNNBase", "recurrent"),
    ("MultiheadAttention", "attention"),
)


def spaced_name(name: str) -> str:
    """A class name as words in its own case, for the category rules: ``BlurPool2d`` -> ``Blur
    Pool2d``; ``SEModule`` -> ``SE Module``; snake_case likewise. (Search splits names further and
    in lower case: ``nnrag.retrieval.lexical.split_words``.)"""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|_+", " ", name)
    return re.sub(r"\s+", " ", spaced).strip()


def _normalized(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


# last words of a "<Model>For<Task>" name that make it a part of the task model, not the model
_PART_WORDS = frozenset("Head Heads Layer Block Output Outputs Embedding Embeddings Pooler Loss Module".split())


def _task_model(name: str) -> bool:
    """``LongformerForTokenClassification``, ``BertForPreTraining``: a whole model with a task head
    (the words after "For" name the task), not a ``BigBirdForQuestionAnsweringHead``."""
    words = spaced_name(name).split()
    return "For" in words[1:-1] and words[-1] not in _PART_WORDS


def _named_after_module(name: str, module: str) -> bool:
    """``timm.models.cait.Cait``, ``...raft.RAFT``: the model of a models file. Not a loss, layer
    or block of a library that names each file after its one class
    (``mmdet.models.losses.focal_loss.FocalLoss``, ``mmseg.models.utils.se_layer.SELayer``)."""
    parts = module.split(".")
    stem = _normalized(parts[-1])
    return ("models" in parts[:-1] and bool(stem) and _normalized(name).removesuffix("distilled") == stem
            and spaced_name(name).split()[-1] not in ("Loss", "Layer", "Block"))


def guess_category(name: str, chain: tuple[str, ...] | list[str], module: str, docstring: str | None) -> str:
    # the model of a models file, or a model named for its task ("For TokenClassification" is no embedding)
    if _named_after_module(name, module) or _task_model(name):
        return "architecture"
    for base in chain[1:]:
        for hint, category in _BASE_HINTS:
            if hint in base:
                return category
    words = spaced_name(name)
    for texts in ((words,), (" ".join(spaced_name(b.rsplit(".", 1)[-1]) for b in chain[1:2]),)):
        for text in texts:
            for category, pattern in _RULES:
                if pattern.search(text):
                    return category
    # the file and its package say what a block is, the distribution's own name does not: every
    # class of x_transformers.x_transformers or vit_pytorch.cait would be a transformer or a ViT
    parts = module.split(".")
    module_words = " ".join(spaced_name(p) for p in parts[-2:] if p != parts[0])
    first_sentence = (docstring or "").split(".")[0][:200]
    for text in (module_words, first_sentence):
        for category, pattern in _RULES:
            if pattern.search(text):
                return category
    return "utility"
