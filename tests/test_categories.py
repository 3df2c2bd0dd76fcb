"""The category guess: a keyword heuristic, pinned on representative real names."""

from __future__ import annotations

import pytest

from nnrag.indexing.categories import guess_category, spaced_name

M = "torch.nn.Module"


@pytest.mark.parametrize(
    ("name", "chain", "module", "doc", "expected"),
    [
        ("BlurPool2d", (M,), "timm.layers.blur_pool", None, "pooling"),
        ("Attention", (M,), "timm.layers.attention", None, "attention"),
        ("SEModule", (M,), "timm.layers.squeeze_excite", None, "attention"),
        ("LayerNorm2d", (M,), "timm.layers.norm", None, "normalization"),
        ("CrossEntropyLoss", (M,), "torch.nn.modules.loss", None, "loss"),
        ("Foo", ("torch.nn.modules.loss._WeightedLoss", M), "x.y", None, "loss"),
        ("GELU", (M,), "timm.layers.activations", None, "activation"),
        ("PatchEmbed", (M,), "timm.layers.patch_embed", None, "embedding"),
        ("SwinTransformerBlock", (M,), "timm.models.swin_transformer", None, "transformer block"),
        ("Conv2dSame", ("torch.nn.Conv2d", M), "timm.layers.conv2d_same", None, "convolution"),
        ("Bottleneck", (M,), "torchvision.models.resnet", None, "convolution"),
        ("ResNet", (M,), "torchvision.models.resnet", None, "architecture"),
        ("Cait", (M,), "timm.models.cait", None, "architecture"),  # named after its models module
        ("GCNConv", ("torch_geometric.nn.MessagePassing", M), "torch_geometric.nn.conv.gcn_conv", None, "graph layer"),
        # the name's words, split as every name is, say it without a MessagePassing base
        ("GATConv", (M,), "torch_geometric.graphgym.models.layer", None, "graph layer"),
        ("DenseSAGEConv", (M,), "torch_geometric.nn.dense.dense_sage_conv", None, "graph layer"),
        ("LSTM", ("torch.nn.modules.rnn.RNNBase", M), "torch.nn.modules.rnn", None, "recurrent"),
        ("Thing", (M,), "pkg.misc", "Applies a depthwise separable filter.", "convolution"),
        ("Identity", (M,), "torch.nn.modules.linear", None, "utility"),
        ("RgbToHsv", (M,), "kornia.color.hsv", "Convert an image from RGB to HSV.", "utility"),
        ("Deconv", (M,), "pkg.misc", None, "convolution"),
        # a model named for its task, whatever the task's words say ("Token" is no embedding)
        ("LongformerForTokenClassification", (M,), "transformers.models.longformer.modeling_longformer", None,
         "architecture"),
        ("BertForPreTraining", (M,), "transformers.models.bert.modeling_bert", None, "architecture"),
        ("BigBirdForQuestionAnsweringHead", (M,), "transformers.models.big_bird.modeling_big_bird", None, "utility"),
        ("ConvForward", (M,), "pkg.misc", None, "convolution"),
        # a file named after its one class is no model file when the class is a loss, layer or block
        ("FocalLoss", (M,), "mmdet.models.losses.focal_loss", None, "loss"),
        ("SELayer", (M,), "mmseg.models.utils.se_layer", None, "attention"),
        ("ResNet", (M,), "mmdet.models.backbones.resnet", None, "architecture"),
        # the distribution's own name is no evidence (every class of x_transformers is no transformer)
        ("SoLU", (M,), "x_transformers.x_transformers", None, "utility"),
        ("FeedForward", (M,), "vit_pytorch.cait", None, "utility"),
        ("Mystery", (M,), "mylib.transformer_blocks", None, "transformer block"),
    ],
)
def test_guess_category(name: str, chain: tuple[str, ...], module: str, doc: str | None, expected: str) -> None:
    assert guess_category(name, (f"{module}.{name}", *chain), module, doc) == expected


def test_split_words() -> None:
    assert spaced_name("BlurPool2d") == "Blur Pool2d"
    assert spaced_name("SEModule") == "SE Module"
    assert spaced_name("squeeze_excite") == "squeeze excite"
