"""The probe's guesses, in process: shallow first attempts and inputs read off torch's errors."""

from __future__ import annotations

import abc
import dataclasses
import inspect
import sys
import textwrap
from pathlib import Path

from typing import Callable, Literal, Optional, Union

import pytest
import torch
from torch import nn

from nnrag.validator.probing.arguments import AutoConfig, Sizes, constructor_attempts
from nnrag.validator.probing.inputs import forward_calls, input_shapes
from nnrag.validator.probing.shape_errors import input_repairs


def _probed(tmp_path: Path, source: str, class_name: str) -> dict[str, object]:
    """The probe's record of ``class_name`` from a file holding ``source``, run in process."""
    from nnrag.validator.probing.probe import run

    path = tmp_path / "blocks.py"
    path.write_text(textwrap.dedent(source))
    result: dict[str, object] = {}
    run(path, class_name, result)
    return result


class Deep(nn.Module):
    def __init__(self, dim: int, depth: int = 12, depths: tuple[int, ...] = (2, 2, 6, 2)) -> None:
        super().__init__()


class Wrapper(Deep):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def test_architectures_are_tried_shallow_first_then_as_defined() -> None:
    attempts = [kwargs for _, kwargs in constructor_attempts(Deep)]
    assert attempts[0] == {"dim": 16, "depth": 1, "depths": (1, 1, 1, 1)}
    assert attempts[1] == {"dim": 16}
    # a **kwargs pass-through is looked through to the base it feeds, its required arguments too
    assert next(iter(constructor_attempts(Wrapper)))[1] == {"dim": 16, "depth": 1, "depths": (1, 1, 1, 1)}


def test_inputs_are_read_off_shape_errors() -> None:
    sizes = Sizes()
    wanted = RuntimeError("Given groups=1, weight of size [64, 3, 3, 3], expected input[2, 16, 32, 32] to have 3 channels, but got 16 channels instead")
    assert input_repairs(wanted, "float", (2, 16, 32, 32), sizes, 16)[0] == ("float", (2, 3, 32, 32))
    norm = RuntimeError("Given normalized_shape=[96], expected input with shape [*, 96], but got input of size[2, 1, 32, 32]")
    assert ("float", (2, 16, 16, 96)) in input_repairs(norm, "float", (2, 1, 32, 32), sizes, 16)
    rank = ValueError("not enough values to unpack (expected 4, got 3)")
    assert input_repairs(rank, "float", (2, 16, 32), sizes, 16)[0] == ("float", (2, 16, 16, 16))
    matmul = RuntimeError("mat1 and mat2 shapes cannot be multiplied (32x16 and 48x8)")
    assert input_repairs(matmul, "float", (2, 16, 16), sizes, 16)[0] == ("float", (2, 16, 48))
    # shapes a block's own checks state, in the notations libraries use
    stated = {
        "Shape mismatch at dimension 1: expected 3, got 16.\n  Expected shape: ['*', '3', 'H', 'W']": (2, 3, 16, 16),
        "Input size must have a shape of (*, 1, H, W). Got torch.Size([2, 16, 16, 16])": (2, 1, 16, 16),
        "Invalid input shape, we expect BxNxCxHxW. Got: torch.Size([2, 16, 16, 16])": (2, 4, 16, 16, 16),
        "Shape dimension mismatch: expected 2 dimensions, got 4.\n  Expected shape: ['B', 'DIM']": (2, 16),
        "Expected shape: ['B', '1', '41', '41']": (2, 1, 41, 41),
    }
    for message, shape in stated.items():
        assert input_repairs(ValueError(message), "float", (2, 16, 16, 16), sizes, 16) == [("float", shape)], message
    embed = AssertionError("was expecting embedding dimension of 256, but got 16")
    assert input_repairs(embed, "float", (2, 9, 16), sizes, 16)[0] == ("float", (2, 9, 256))
    one = AssertionError("Bytetrack inference only support 1 batch size per gpu for now.")
    assert input_repairs(one, "float", (2, 3, 32, 32), sizes, 16) == [("float", (1, 3, 32, 32))]
    # a signal shorter than a reflection pad or an STFT window (vocos, audiocraft, descript-audio-codec)
    pad = RuntimeError("Argument #4: Padding size should be less than the corresponding input dimension, but got: "
                       "padding (512, 512) at dimension 2 of input [1, 2, 16]")
    assert input_repairs(pad, "float", (2, 1, 16), sizes, 16)[0] == ("float", (2, 1, 2048))
    stft = RuntimeError("stft(torch.FloatTensor[64, 16], n_fft=1024, hop_length=256) : expected 0 < n_fft < 16, but got n_fft=1024")
    assert input_repairs(stft, "float", (2, 16), sizes, 16)[0] == ("float", (2, 4096))
    # frames of clips folded into the batch axis (TSM's ``x.view(nt // n_segment, n_segment, c, h, w)``)
    clips = RuntimeError("shape '[0, 3, 16, 16, 16]' is invalid for input of size 8192")
    assert input_repairs(clips, "float", (2, 16, 16, 16), sizes, 16)[0] == ("float", (6, 16, 16, 16))


class Loss(nn.modules.loss._Loss):
    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return input.sum()


def test_loss_targets_include_class_indices_and_signs() -> None:
    calls = list(forward_calls(Loss(), torch.randn(2, 5)))
    targets = [args[1] for args, _ in calls]
    assert targets[0].shape == (2, 5) and targets[0].min() >= 0  # probabilities like the input
    assert any(t.dtype == torch.long and t.shape == (2,) and int(t.max()) < 5 for t in targets)
    assert any(t.is_floating_point() and set(t.unique().tolist()) <= {-1.0, 1.0} for t in targets)


def test_integers_become_the_pairs_their_annotations_ask_for() -> None:
    from typing import List, Optional, Tuple, Union

    from nnrag.validator.probing.arguments import guess_value

    sizes = Sizes()
    assert guess_value("window_size", list[int], sizes) == [4, 4]  # code calls window_size.copy()
    assert guess_value("shift_size", Optional[List[int]], sizes) == [2, 2]
    assert guess_value("patch_size", Tuple[int, int], sizes) == (4, 4)
    assert guess_value("patch_size", Union[int, Tuple[int, int]], sizes) == 4  # an int is accepted as it is
    assert guess_value("kernel_size", int, sizes) == 3
    assert guess_value("bias", List[int], sizes) is True  # not an integer guess


class KeepsOnDevice(nn.Module):
    def __init__(self, bank: torch.Tensor, device, device_ids) -> None:
        super().__init__()
        self.bank = bank.to(device)  # a number here is a CUDA device's index
        self.copies = [torch.zeros(1, device=d) for d in device_ids]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bank.sum()


def test_a_device_is_the_cpu_not_a_number() -> None:
    from nnrag.validator.probing.probe import _instantiate

    model, kwargs, error = _instantiate(KeepsOnDevice, {}, Sizes())
    assert error is None and kwargs["device"] == torch.device("cpu"), error


def test_a_layer_named_by_a_string_gets_a_common_name() -> None:
    import inspect
    from typing import Tuple, Union

    from nnrag.validator.probing.arguments import guess_value

    sizes, empty = Sizes(), inspect.Parameter.empty
    assert guess_value("norm_name", Union[Tuple, str], sizes) == "batch"  # MONAI's layer specifiers
    assert guess_value("act_name", empty, sizes) == "relu"
    assert guess_value("norm", tuple | str, sizes) == "batch"
    assert guess_value("act", empty, sizes) is nn.ReLU  # without a str annotation: a layer class, as before
    assert guess_value("norm_layer", empty, sizes) is nn.BatchNorm2d


class RoIPool(nn.Module):
    def forward(self, input: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
        return torch.stack([input[int(r[0]), :, int(r[2]):int(r[4]) + 1, int(r[1]):int(r[3]) + 1].amax((-2, -1)) for r in rois])


def test_regions_of_interest_are_boxes_inside_the_images() -> None:
    images = torch.randn(2, 3, 16, 12)
    (args, _), = list(forward_calls(RoIPool(), images))
    rois = args[1]
    assert rois.shape == (4, 5) and set(rois[:, 0].tolist()) == {0.0, 1.0}
    assert (rois[:, 3] <= 11).all() and (rois[:, 4] <= 15).all() and (rois[:, 1:3] >= 0).all()
    assert RoIPool()(*args).shape == (4, 3)


def test_an_input_pooled_away_is_retried_at_the_designed_size() -> None:
    small = RuntimeError("Given input size: (832x4x1x1). Calculated output size: (832x2x0x0). Output size is too small")
    assert input_repairs(small, "float", (2, 3, 8, 32, 32), Sizes(), 3)[0] == ("float", (2, 3, 16, 112, 112))
    assert input_repairs(small, "float", (2, 3, 32, 32), Sizes(), 3) == [("float", (2, 3, 224, 224)), ("float", (2, 3, 256, 256))]
    short = RuntimeError("Calculated padded input size per channel: (16). Kernel size: (25). "
                         "Kernel size can't be greater than actual input size")
    assert input_repairs(short, "float", (2, 4, 16), Sizes(), 4)[:2] == [("float", (2, 4, 256)), ("float", (2, 4, 1024))]
    rank = ValueError("not enough values to unpack (expected 4, got 3)")
    assert ("float", (2, 16, 16, 16)) in input_repairs(rank, "float", (2, 16, 48), Sizes(), 16)
    assert ("float", (2, 16, 16, 48)) in input_repairs(rank, "float", (2, 16, 48), Sizes(), 16)  # channels last


class Linear(nn.Module):  # a repository's own Linear: no in_features
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


class TokenLoss(nn.Module):
    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (logits.float() - target).pow(2).mean()


def test_layers_are_recognised_by_what_they_have_not_only_their_name() -> None:
    from nnrag.validator.probing.inputs import layer_kind

    assert layer_kind(Linear()) is None and layer_kind(nn.Linear(3, 4)) == "linear"
    shapes = input_shapes(Linear(), {"dim": 8}, Sizes())  # no AttributeError from reading in_features
    assert ("float", (2, 8)) in shapes
    # integer inputs (token ids) get float targets too, where rand_like on a Long tensor raised
    calls = list(forward_calls(TokenLoss(), torch.randint(0, 5, (2, 4))))
    assert any(args[1].is_floating_point() and args[1].shape == (2, 4) for args, _ in calls)


def test_an_error_of_the_gates_own_code_is_a_probe_error_not_the_blocks() -> None:
    from nnrag.validator.probing.inputs import make_tensor
    from nnrag.validator.probing.probe import classify, raised_by_probe

    with pytest.raises(ValueError) as ours:
        make_tensor("long:many", (2, 3))  # a malformed kind: the probe's own bug
    assert raised_by_probe(ours.value)
    with pytest.raises(RuntimeError) as theirs:
        nn.Linear(3, 4)(torch.randn(2, 5))  # the block (torch) rejects the input
    assert not raised_by_probe(theirs.value) and classify("forward", theirs.value) == "input-inference"


class TinyGraphConv(nn.Module):  # a message-passing layer, as PyG's take (x, edge_index)
    def __init__(self, in_channels: int = 4, out_channels: int = 6) -> None:
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        src, dst = edge_index
        messages = self.lin(x)[src]
        return torch.zeros(x.shape[0], messages.shape[1]).index_add(0, dst, messages)


def test_message_passing_layers_get_node_features_and_a_graph() -> None:
    layer = TinyGraphConv()
    kind, shape = input_shapes(layer, {"in_channels": 4, "out_channels": 6}, Sizes())[0]
    assert (kind, shape) == ("float", (8, 4))  # N nodes by the first layer's width
    (args, kwargs), *_ = list(forward_calls(layer, torch.randn(shape)))
    edge_index = args[1]
    assert edge_index.dtype == torch.long and edge_index.shape == (2, 24) and int(edge_index.max()) < 8
    assert set(edge_index[1].tolist()) == set(range(8))  # every node receives messages
    assert layer(*args, **kwargs).shape == (8, 6)


class Pretrained(nn.Module):
    def __init__(self, dim: int, pretrained: bool = True, download: bool = False) -> None:
        super().__init__()


def test_weights_a_constructor_downloads_by_default_are_not_fetched() -> None:
    attempts = [kwargs for _, kwargs in constructor_attempts(Pretrained)]
    assert attempts and all(kw["pretrained"] is False and "download" not in kw for kw in attempts)


class Generator(nn.Module):
    """Draws per-sample parameters for a batch shape, as augmentation parameter generators do."""

    def forward(self, batch_shape: tuple[int, ...], same_on_batch: bool = False) -> dict[str, torch.Tensor]:
        return {"angle": torch.rand(batch_shape[0])}


def test_a_forward_that_takes_a_shape_gets_the_input_shape() -> None:
    main = torch.randn(2, 3, 16, 16)
    args, kwargs = next(forward_calls(Generator(), main))
    assert args == [torch.Size([2, 3, 16, 16])] and kwargs == {}
    assert Generator()(*args)["angle"].shape == (2,)


class Tabled(nn.Module):
    arch_settings = {18: (2, 2), 34: (3, 4)}

    def __init__(self, depth: int) -> None:
        super().__init__()
        if depth not in self.arch_settings:
            raise KeyError(f"invalid depth {depth} for resnet")
        self.layers = nn.Sequential(*[nn.Identity() for _ in range(sum(self.arch_settings[depth]))])


def test_a_value_the_class_looks_up_in_its_own_table_is_one_of_its_keys() -> None:
    from nnrag.validator.probing.probe import _instantiate

    model, kwargs, error = _instantiate(Tabled, {"depth": 1}, Sizes())
    assert error is None and kwargs == {"depth": 18} and len(model.layers) == 4  # type: ignore[union-attr]


class Mode(__import__("enum").Enum):
    FAST = "fast"
    EXACT = "exact"


class Chooses(nn.Module):
    def __init__(self, dim: int, mode: Mode, hidden_act: str) -> None:
        super().__init__()
        if hidden_act not in ("gelu_tanh", "gelu"):
            raise ValueError(f"Unsupported hidden_act {hidden_act}: expected 'gelu_tanh' or 'gelu'")
        self.mode = mode


def test_enums_get_a_member_and_a_named_argument_the_choice_its_error_lists() -> None:
    from nnrag.validator.probing.probe import _instantiate

    first = next(iter(constructor_attempts(Chooses)))[1]
    assert first["mode"] is Mode.FAST and first["hidden_act"] == "relu"
    model, kwargs, error = _instantiate(Chooses, first, Sizes())
    assert error is None and kwargs["hidden_act"] == "gelu_tanh", error


BINARY, MULTICLASS = "binary", "multiclass"
_ACTIVATIONS = {"swish": nn.SiLU, "mish": nn.Mish}


def _activation(act: object) -> nn.Module:
    return _ACTIVATIONS[act]()  # type: ignore[index]


class ModeLoss(nn.Module):
    """Its checks state no choice: the choices are in the comparisons of its code."""

    def __init__(self, mode, activation) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        assert mode in {MULTICLASS, BINARY}
        self.mode = mode
        self.act = _activation(activation)  # the lookup is in a helper the error passes through

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


class Residual(nn.Module):
    expansion = 2

    def __init__(self, inplanes: int, planes: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Assembled(nn.Module):
    """Arguments that are a block class, a backbone with ``out_channels``, a layer builder, a layer."""

    def __init__(self, block, backbone: nn.Module, builder, act) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.width = 8 * block.expansion
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels")
        self.head = nn.Conv2d(backbone.out_channels, self.width, 1)
        self.stem = builder(3, 8)
        self.add_module("act", act)


def test_constructor_arguments_are_read_off_the_code_the_error_came_from() -> None:
    from nnrag.validator.probing.probe import _instantiate

    model, kwargs, error = _instantiate(ModeLoss, next(iter(constructor_attempts(ModeLoss)))[1], Sizes())
    assert error is None, error
    assert kwargs == {"mode": "multiclass", "activation": "swish"} and isinstance(model.act, nn.SiLU)  # type: ignore[union-attr]

    model, kwargs, error = _instantiate(Assembled, next(iter(constructor_attempts(Assembled)))[1], Sizes())
    assert error is None, error
    assert kwargs["block"] is Residual and model.width == 16  # type: ignore[union-attr]
    assert isinstance(kwargs["backbone"], nn.Conv2d) and model.head.in_channels == kwargs["backbone"].out_channels  # type: ignore[union-attr]
    assert kwargs["builder"] is nn.Identity and isinstance(model.act, nn.ReLU)  # type: ignore[union-attr]


def test_a_forward_that_wants_a_list_of_images_gets_one() -> None:
    from nnrag.validator.probing.inputs import make_tensor

    error = ValueError("images is expected to be a list of 3d tensors of shape [C, H, W], got torch.Size([2, 16, 16, 16])")
    kind, shape = input_repairs(error, "float", (2, 16, 16, 16), Sizes(), 16)[0]
    images = make_tensor(kind, shape)
    assert kind == "images" and isinstance(images, list) and len(images) == 2 and images[0].shape == (3, 64, 64)


class Configured(nn.Module):
    """A config stand-in's compared attribute, a list of layers, a Literal, a block called with a
    mask, keyword arguments for a layer."""

    def __init__(self, config, transforms, kind: Literal["fast", "exact"], block: nn.Module, layer_cfg) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.layer = nn.LayerNorm(4, **layer_cfg)
        if config.hidden_act != "gelu":
            raise ValueError(f"Unsupported activation: {config.hidden_act}.")
        if not isinstance(transforms, list) or not all(callable(t) for t in transforms):
            raise TypeError("Argument transforms should be a sequence of callables")
        self.kind, self.block = kind, block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x, None)


@dataclasses.dataclass
class VisionConfig:
    hidden_size: int = 1152
    num_attention_heads: int = 16
    num_hidden_layers: int = 27
    max_position_embeddings: int = 4096
    hidden_act: str = "gelu_tanh"


@dataclasses.dataclass
class ModelConfig:
    vision_config: Optional[VisionConfig] = None
    vocab_size: int = 257152

    def __post_init__(self) -> None:
        if self.vision_config is None:
            self.vision_config = VisionConfig()


class ConfiguredModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        vision = config.vision_config
        self.embed = nn.Embedding(config.vocab_size, vision.hidden_size)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(vision.hidden_size, vision.num_attention_heads, batch_first=True)
                                    for _ in range(vision.num_hidden_layers))


def test_a_dataclass_config_is_built_small() -> None:
    """A model's dataclass config gets the sizes a stand-in config would (its defaults build the
    full 27-layer model and a 257k-token table), nested configs too; bounds and strings kept."""
    (_, kwargs), *_ = constructor_attempts(ConfiguredModel)
    config = kwargs["config"]
    assert isinstance(config, ModelConfig) and config.vocab_size == 32
    assert config.vision_config == VisionConfig(hidden_size=16, num_attention_heads=2, num_hidden_layers=1,
                                                max_position_embeddings=4096, hidden_act="gelu_tanh")


def test_config_attributes_layer_lists_and_literals_are_guessed_from_the_code() -> None:
    from nnrag.validator.probing.probe import _instantiate

    model, kwargs, error = _instantiate(Configured, next(iter(constructor_attempts(Configured)))[1], Sizes())
    assert error is None, error
    assert kwargs["kind"] == "fast" and kwargs["config"].hidden_act == "gelu" and kwargs["layer_cfg"] == {}
    assert len(kwargs["transforms"]) == 1 and isinstance(kwargs["transforms"][0], nn.Identity)
    x = torch.randn(2, 4)
    assert torch.equal(model(x), x)  # type: ignore[misc]


class Pyramid(nn.Module):
    """A neck over feature maps whose widths come as a list, which only its asserts say."""

    def __init__(self, in_channels, out_channels: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        assert isinstance(in_channels, list)
        self.lateral = nn.ModuleList(nn.Conv2d(c, out_channels, 1) for c in in_channels)


class Counted(nn.Module):
    def __init__(self, widths: int, channels: int) -> None:
        super().__init__()
        self.levels = len(widths)  # type: ignore[arg-type]


class Staged(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        assert isinstance(depth, tuple), "depth needs to be tuple if integers indicating number of blocks at that stage"


class Embedded(nn.Module):
    def __init__(self, continuous_dim: int, embedding_dims: Tuple[int, int]) -> None:  # a list of pairs, in fact
        super().__init__()
        self.tables = nn.ModuleList([nn.Embedding(n, d) for n, d in embedding_dims])


class PerStage(nn.Module):
    def __init__(self, depths, num_heads) -> None:
        super().__init__()
        self.stages = nn.ModuleList(nn.Linear(4 * num_heads[i], 4) for i in range(len(depths)))


class Located(nn.Module):
    def __init__(self, channel_locations) -> None:
        super().__init__()
        self.register_buffer("locs", torch.tensor([loc[:3] for loc in channel_locations], dtype=torch.float))


def test_an_argument_the_failing_line_uses_as_a_sequence_becomes_a_list() -> None:
    from nnrag.validator.probing.probe import _instantiate

    model, kwargs, error = _instantiate(Pyramid, {"in_channels": 16, "out_channels": 16}, Sizes())
    assert error is None and kwargs["in_channels"] == [16, 16] and len(model.lateral) == 2  # type: ignore[union-attr]
    # the same value in two arguments: the one the line takes the length of
    model, kwargs, error = _instantiate(Counted, {"widths": 16, "channels": 16}, Sizes())
    assert error is None and kwargs == {"widths": [16, 16], "channels": 16}
    assert _instantiate(Staged, {"depth": 1}, Sizes())[1] == {"depth": (1, 1)}  # the type the check names
    # indexed at a loop's position: a list, as long as the loop's (the per-stage depths)
    model, kwargs, error = _instantiate(PerStage, {"depths": [1, 1, 1, 1], "num_heads": 2}, Sizes())
    assert error is None and kwargs["num_heads"] == [2, 2, 2, 2], (kwargs, error)
    # each item indexed: a list of pairs
    model, kwargs, error = _instantiate(Located, {"channel_locations": 16}, Sizes())
    assert error is None and kwargs["channel_locations"] == [(16, 16), (16, 16)], (kwargs, error)
    # items unpacked: a list of pairs, whether the guess was a number or a list of numbers
    for guess in (16, (16, 16)):
        model, kwargs, error = _instantiate(Embedded, {"continuous_dim": 16, "embedding_dims": guess}, Sizes())
        assert error is None and kwargs["embedding_dims"] == [(16, 16), (16, 16)], (kwargs, error)


def test_inputs_take_the_sizes_a_blocks_own_weights_fix() -> None:
    sizes = Sizes()
    patch = RuntimeError("The size of tensor a (16) must match the size of tensor b (19) at non-singleton dimension 4")
    assert input_repairs(patch, "float", (2, 1, 16, 16), sizes, 16)[:3] == [
        ("float", (2, 1, 19, 16)), ("float", (2, 1, 16, 19)), ("float", (2, 1, 19, 19))]
    # an unpadded convolution's output two smaller is the input's own size, not a fixed one
    assert input_repairs(RuntimeError(str(patch).replace("(19)", "(14)")), "float", (2, 1, 16, 16), sizes, 16) == []
    tokens = RuntimeError("shape '[2, 16, 16, 16]' is invalid for input of size 512")
    assert input_repairs(tokens, "float", (2, 16, 16), sizes, 16) == [("float", (2, 256, 16))]
    bins = RuntimeError("shape '[-1, 17]' is invalid for input of size 8192")
    assert input_repairs(bins, "float", (2, 16, 16, 16), sizes, 16) == [("float", (2, 16, 16, 17))]


class Built(nn.Module):
    def __init__(self, inplanes: int, conv_builder: Callable[..., nn.Module]) -> None:
        super().__init__()
        self.conv = conv_builder(inplanes, inplanes, 4, 1)


def test_a_layer_class_called_with_more_arguments_than_it_takes_becomes_a_builder() -> None:
    from nnrag.validator.probing.probe import _instantiate

    kwargs = next(iter(constructor_attempts(Built)))[1]
    assert isinstance(kwargs["conv_builder"], type) and kwargs["conv_builder"] is not nn.Identity
    _, kwargs, error = _instantiate(Built, kwargs, Sizes())
    assert error is None and kwargs["conv_builder"] is nn.Identity


class Ranged(nn.Module):
    """Parameters a range check refuses when guessed as a channel count."""

    def __init__(self, sign: tuple[float, float], factor: Union[torch.Tensor, float], missing: NotDefinedHere) -> None:  # type: ignore[name-defined]  # noqa: F821
        super().__init__()
        if not -1 <= sign[0] < sign[1] <= 1:
            raise ValueError(f"sign out of bounds, got {sign}")
        if not isinstance(factor, (float, torch.Tensor)):
            raise TypeError("Factor should be float or torch.Tensor.")


class HiddenRanged(Ranged):
    """The same constructor behind a signature of ``(*args, **kwargs)``, as a metaclass shows it."""

    __signature__ = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),
                                       inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])


def test_numbers_follow_their_annotations_also_when_one_cannot_be_evaluated() -> None:
    from nnrag.validator.probing.probe import _instantiate

    kwargs = next(iter(constructor_attempts(Ranged)))[1]
    assert kwargs["sign"] == (0.1, 0.5) and kwargs["factor"] == 2.0 and kwargs["missing"] == 16
    assert _instantiate(Ranged, kwargs, Sizes())[2] is None
    # behind ``(*args, **kwargs)`` the base's parameters are guessed; and where nothing is given,
    # the arguments a TypeError says are missing get the guesses their annotations give
    assert next(iter(constructor_attempts(HiddenRanged)))[1] == kwargs
    _, kwargs, error = _instantiate(HiddenRanged, {}, Sizes())
    assert error is None and kwargs["sign"] == (0.1, 0.5) and kwargs["factor"] == 2.0


class AtomTypes(nn.Module):
    """A graph encoder: embeds integer node types, replacing the batch's features in place."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(4, 8)

    def forward(self, batch):  # type: ignore[no-untyped-def]
        batch.x = self.embed(batch.x[:, 0])
        return batch


def test_a_graph_encoder_gets_integer_features_and_a_fresh_batch_each_call() -> None:
    from nnrag.validator.probing.probe import _backward, _Budget, _forward

    found, error = _forward(AtomTypes(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    (batch,), _, out = found
    assert batch.x.dtype == torch.long and out.x.shape == (8, 8)  # the caller's batch kept its codes
    assert _backward(AtomTypes(), [batch], {}) is True


class MaskedDetector(nn.Module):
    """Masks the padding of each image from its data sample, as mmdet's DETR does: called without
    samples, it fails."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, inputs, data_samples=None, mode: str = "tensor"):  # type: ignore[no-untyped-def]
        height, width = data_samples[0].batch_input_shape
        masks = inputs.new_ones((len(data_samples), height, width))
        for mask, sample in zip(masks, data_samples):
            h, w = sample.metainfo["img_shape"]
            mask[:h, :w] = 0
        assert sample.get("proposals") is None
        return self.conv(inputs) * (1 - masks).unsqueeze(1)


class StacksLabels(nn.Module):
    """Takes optional labels named data_samples, as mmengine's ToyModel does: tensors, not samples."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, inputs, data_samples=None, mode: str = "tensor"):  # type: ignore[no-untyped-def]
        if isinstance(data_samples, list):
            data_samples = torch.stack(data_samples)
        return self.conv(inputs)


def test_a_detector_gets_the_meta_information_of_its_images() -> None:
    from nnrag.validator.probing.probe import _backward, _Budget, _forward

    found, error = _forward(StacksLabels(), {}, Sizes(), _Budget(40, 30.0))  # optional: tried without first
    assert error is None and found is not None and found[1] == {}

    found, error = _forward(MaskedDetector(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    args, kwargs, out = found
    assert [s.img_shape for s in kwargs["data_samples"]] == [tuple(args[0].shape[-2:])] * args[0].shape[0]
    assert out.shape == (args[0].shape[0], 4, *args[0].shape[-2:])
    assert _backward(MaskedDetector(), args, kwargs) is True


class Part(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()


class ResetsParts(nn.Module):
    """Resets the part it is given, as PyG's ``DeepGraphInfomax`` does: given a class instead of
    an instance, the unbound call misses ``self``."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        encoder.reset_parameters()
        self.encoder = encoder


def test_a_missing_self_is_never_repaired_as_an_argument() -> None:
    from nnrag.validator.probing.repairs import repairs

    error = TypeError("Part.reset_parameters() missing 1 required positional argument: 'self'")
    changes = list(repairs(ResetsParts, {"encoder": Part}, error, Sizes()))
    assert all("self" not in change for change in changes)
    # the class passed where an instance is used is made an instance
    assert any(isinstance(change.get("encoder"), Part) for change in changes)


class ScatterSum(nn.Module):
    """Sums rows into the groups a required index names, as a graph aggregation does."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.zeros(int(index.max()) + 1, x.shape[1]).index_add(0, index, self.lin(x))


def test_a_required_index_gets_a_valid_index_vector() -> None:
    from nnrag.validator.probing.probe import _Budget, _forward

    found, error = _forward(ScatterSum(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    (x, index), _, out = found
    assert index.dtype == torch.long and index.shape == (x.shape[0],) and out.shape == (1, 8)


class Rates(nn.Module):
    """Three dilation rates unpacked, and a list of widths that must match the depth."""

    def __init__(self, rates, decoder_channels, n_blocks: int = 1) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        r1, r2, r3 = rates
        if n_blocks != len(decoder_channels):
            raise ValueError(f"Model depth is {n_blocks}, but you provide `decoder_channels` for {len(decoder_channels)} blocks.")
        self.convs = nn.ModuleList(nn.Conv2d(4, 4, 3, padding=r, dilation=r) for r in (r1, r2, r3))


def test_sequences_take_the_length_the_code_unpacks_or_the_depth_states() -> None:
    from nnrag.validator.probing.probe import _instantiate

    _, kwargs, error = _instantiate(Rates, {"rates": [2, 2], "decoder_channels": [16, 16], "n_blocks": 1}, Sizes())
    assert error is None and kwargs == {"rates": [2, 2, 2], "decoder_channels": [16], "n_blocks": 1}


def test_a_number_forward_calls_as_the_inner_layer_becomes_a_layer(tmp_path: Path) -> None:
    from nnrag.validator.probing.probe import run

    path = tmp_path / "wrapper.py"
    path.write_text(textwrap.dedent("""
        from torch import nn
        class Residual(nn.Module):
            def __init__(self, fn):
                super().__init__()
                self.fn = fn
            def forward(self, x, **kwargs):
                return self.fn(x, **kwargs) + x
        """))
    result: dict[str, object] = {}
    run(path, "Residual", result)
    assert result["init_args"] == {"fn": "Passthrough()"} and result["output_shapes"] == result["input_shapes"][0]  # type: ignore[index]


def test_a_layer_class_given_for_a_function_forward_calls_becomes_an_instance(tmp_path: Path) -> None:
    from nnrag.validator.probing.probe import run

    path = tmp_path / "residual.py"
    path.write_text(textwrap.dedent("""
        from typing import Callable
        from torch import nn
        class ResidualLayer(nn.Module):  # as PyG's DimeNet: act(x) is a function of a tensor
            def __init__(self, hidden_channels: int, act: Callable):
                super().__init__()
                self.act = act
                self.lin1 = nn.Linear(hidden_channels, hidden_channels)
                self.lin2 = nn.Linear(hidden_channels, hidden_channels)
            def forward(self, x):
                return x + self.act(self.lin2(self.act(self.lin1(x))))
        """))
    result: dict[str, object] = {}
    run(path, "ResidualLayer", result)
    assert str(result["init_args"]["act"]).endswith("()"), result["init_args"]  # type: ignore[index]
    assert result["output_shapes"] == result["input_shapes"][0]  # type: ignore[index]


class Decoder(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.max_seq_len = 8
        self.proj = nn.Linear(dim, dim)


class SequenceWrapper(nn.Module):
    """Takes a model and reads an attribute its constructor set."""

    def __init__(self, net) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.net, self.max_seq_len = net, net.max_seq_len


def test_an_attribute_a_constructor_sets_is_answered_with_an_instance_of_that_class() -> None:
    from nnrag.validator.probing.probe import _instantiate

    model, kwargs, error = _instantiate(SequenceWrapper, {"net": 16}, Sizes())
    assert error is None and isinstance(kwargs["net"], Decoder) and model.max_seq_len == 8  # type: ignore[union-attr]


def test_the_number_of_spatial_dimensions_is_two() -> None:
    from nnrag.validator.probing.arguments import guess_value

    # a layer factory indexes its 1-D/2-D/3-D classes with it: a channel count would overflow
    assert [guess_value(n, inspect.Parameter.empty, Sizes()) for n in ("spatial_dims", "dim", "ndim")] == [2, 16, 2]


def test_a_module_an_attempt_finds_missing_outranks_an_earlier_wrong_guess(tmp_path: Path) -> None:
    from nnrag.validator.probing.probe import StageFailure, run

    path = tmp_path / "optional.py"
    path.write_text(textwrap.dedent("""
        from torch import nn
        class NeedsEinops(nn.Module):
            def __init__(self, channels):
                super().__init__()
                if channels % 32:
                    raise ValueError(f"num_channels ({channels}) must be divisible by num_groups (32)")
                import einops_not_installed_here  # what an optional import does once the guess fits
            def forward(self, x):
                return x
        """))
    with pytest.raises(StageFailure) as failure:
        run(path, "NeedsEinops", {})
    assert failure.value.code == "missing-dependency" and "einops_not_installed_here" in str(failure.value.error)


class Layers(nn.Module):
    def __init__(self, dim: int, depth: int | None = None, heads: int | None = None, cross: bool | None = None,
                 out_features: int = 0) -> None:
        super().__init__()
        assert depth is not None, "`depth` must be passed in for `Decoder` or `Encoder`"
        assert heads is not None, "heads must be supplied"
        assert out_features > 0, "the head projects to another model's width, pass out_features"
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))


class CausalLayers(Layers):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]


def test_a_parameter_left_at_none_that_the_message_names_is_given_a_value() -> None:
    from nnrag.validator.probing.probe import _instantiate

    model, kwargs, error = _instantiate(CausalLayers, {"dim": 16}, Sizes())
    assert error is None and kwargs == {"dim": 16, "depth": 1, "heads": 2, "out_features": 16} and len(model.layers) == 1  # type: ignore[union-attr]


def test_a_block_whose_first_operation_is_in_place_passes_backward(tmp_path: Path) -> None:
    from nnrag.validator.probing.probe import run

    path = tmp_path / "inplace.py"
    path.write_text(textwrap.dedent("""
        import torch
        from torch import nn
        class ScaleInPlace(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
            def forward(self, x):
                x.mul_(0.5)  # a leaf that asks for a gradient refuses this
                return self.proj(x)
        """))
    result: dict[str, object] = {}
    run(path, "ScaleInPlace", result)
    assert result["backward"] is True


class OrientsRegions(nn.Module):
    """Two inputs of different documented shapes that share a batch (kornia's ``LAFOrienter``)."""

    def forward(self, laf: torch.Tensor, img: torch.Tensor) -> torch.Tensor:
        """Orient the regions.

        Args:
            laf: local affine frames of shape :math:`(B, N, 2, 3)`.
            img: the image, :math:`(B, 1, H, W)`.

        Returns:
            the frames, scaled.
        """
        if laf.dim() != 4 or tuple(laf.shape[-2:]) != (2, 3):
            raise ValueError(f"laf must be (B, N, 2, 3), got {tuple(laf.shape)}")
        if img.dim() != 4 or img.shape[1] != 1 or img.shape[0] != laf.shape[0]:
            raise ValueError(f"img must be (B, 1, H, W), got {tuple(img.shape)}")
        return laf * img.mean(dim=(1, 2, 3)).view(-1, 1, 1, 1)


class ScoresQueries(nn.Module):
    """Queries beside their reference points, documented as mmdet documents them."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, hidden_states: torch.Tensor, reference_points: torch.Tensor) -> torch.Tensor:
        """Score the queries.

        Args:
            hidden_states (Tensor): queries from the decoder, has shape
                (bs, num_queries, dim).
            reference_points (Tensor): normalized centres, has shape
                (bs, num_queries, 2).
        """
        assert reference_points.shape[-1] == 2 and reference_points.shape[:2] == hidden_states.shape[:2]
        return self.fc(hidden_states) + reference_points.sum(-1, keepdim=True)


def test_inputs_take_the_shapes_their_docstring_states() -> None:
    from nnrag.validator.probing.documented import Documented, documented_inputs
    from nnrag.validator.probing.probe import _Budget, _forward

    assert documented_inputs(OrientsRegions()) == {"laf": Documented(("B", "N", "2", "3")),
                                                   "img": Documented(("B", "1", "H", "W"))}
    assert documented_inputs(ScoresQueries())["reference_points"] == Documented(("bs", "num_queries", "2"))
    found, error = _forward(OrientsRegions(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    laf, img = found[0]
    assert laf.shape[0] == img.shape[0] and tuple(laf.shape[2:]) == (2, 3) and img.shape[1] == 1
    # the main input found by the search binds the symbols its companions share
    found, error = _forward(ScoresQueries(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    hidden, reference = found[0]
    assert hidden.shape[-1] == 8 and reference.shape == (*hidden.shape[:2], 2)


class MatchesQueries(nn.Module):
    """Predictions as a dict, targets as one dict per image, as DETR's matcher takes them."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, outputs, targets):  # type: ignore[no-untyped-def]
        logits, boxes = outputs["pred_logits"], self.proj(outputs["pred_boxes"])
        labels = torch.cat([t["labels"] for t in targets])
        gt = torch.cat([t["boxes"] for t in targets])
        return torch.cdist(boxes.flatten(0, 1), gt) - logits.flatten(0, 1).softmax(-1)[:, labels]


class ScalesBoxes(nn.Module):
    """A post-processor: boxes read off the outputs by key, scaled by each image's size."""

    def forward(self, outputs, target_sizes):  # type: ignore[no-untyped-def]
        """
        Parameters:
            outputs: raw outputs of the model
            target_sizes: tensor of dimension [batch_size x 2] containing the size of each image
        """
        assert target_sizes.shape[1] == 2
        cx, cy, w, h = outputs["pred_boxes"].unbind(-1)
        img_h, img_w = target_sizes.unbind(1)
        return torch.stack([cx * img_w[:, None], cy * img_h[:, None], w, h], -1)


class WeighsByScale(nn.Module):
    def forward(self, x, scale):  # type: ignore[no-untyped-def]
        assert scale.shape[-1] == 1
        return x * scale


def test_inputs_read_by_key_are_dicts_and_a_companion_gets_the_shape_its_assert_asks() -> None:
    from nnrag.validator.probing.probe import _Budget, _forward

    found, error = _forward(MatchesQueries(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    outputs, targets = found[0]
    assert set(outputs) == {"pred_logits", "pred_boxes"} and outputs["pred_boxes"].shape[-1] == 4
    assert all(t["labels"].dtype == torch.long and t["boxes"].shape[-1] == 4 for t in targets)
    # the boxes unbind into four; the sizes as documented, "[batch_size x 2]"
    found, error = _forward(ScalesBoxes(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    outputs, sizes = found[0]
    assert outputs["pred_boxes"].shape[-1] == 4 and sizes.shape == (2, 2)
    # ``assert scale.shape[-1] == 1`` is about the second argument, not the main input
    found, error = _forward(WeighsByScale(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    x, scale = found[0]
    assert scale.shape == x.shape[:-1] + (1,)


class ScattersRows(nn.Module):
    """Adds rows into groups by an index into them, as DimeNet's output blocks do with ``i``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor, rbf: torch.Tensor, i: torch.Tensor, idx_kj: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x).index_add_(0, i, self.lin(x) * rbf)[idx_kj]


def test_an_index_into_the_rows_gets_valid_positions() -> None:
    from nnrag.validator.probing.probe import _Budget, _forward

    found, error = _forward(ScattersRows(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    x, rbf, i, idx_kj = found[0]
    assert i.dtype == idx_kj.dtype == torch.long and i.shape == idx_kj.shape == (x.shape[0],)


class Related(nn.Module):
    """Constraints between arguments stated only in the messages that enforce them."""

    def __init__(self, in_channels: int, out_channels: int, groups: int = 1, order: int = 16, window: int = 16) -> None:
        super().__init__()
        if in_channels != 2 * out_channels:
            raise ValueError(f"expecting in_channels == 2 * out_channels, got in_channels={in_channels}, out_channels={out_channels}")
        if not groups == out_channels:
            raise ValueError(f"only depthwise (groups == out_channels); got groups={groups}")
        if order >= window:
            raise ValueError("order must be less than window.")
        self.conv = nn.Conv1d(in_channels, out_channels, order, groups=groups)


def test_arguments_take_the_relations_the_messages_state() -> None:
    from nnrag.validator.probing.probe import _instantiate

    _, kwargs, error = _instantiate(Related, {"in_channels": 16, "out_channels": 16}, Sizes())
    # ``order < window`` is read off the guard that raised: the nearest order that fits
    assert error is None and kwargs == {"in_channels": 32, "out_channels": 16, "groups": 16, "order": 15}


class Windowed(nn.Module):
    """A signal block sized for ``n_times`` samples, which it derives from a window in seconds and a
    sampling rate when not given, and checks against them when all three are (as EEG toolboxes do)."""

    def __init__(self, n_chans: int, n_times: int | None = None, input_window_seconds: float | None = None,
                 sfreq: float | None = None, h_freq: float = 30.0) -> None:
        super().__init__()
        if n_times is None and (input_window_seconds is None or sfreq is None):
            raise ValueError("n_times could not be inferred. Either specify n_times or input_window_seconds and sfreq.")
        if n_times is not None and input_window_seconds is not None and sfreq is not None \
                and n_times != round(input_window_seconds * sfreq):
            raise ValueError(f"{n_times=} different from {input_window_seconds=} * {sfreq=}")
        sfreq = sfreq if sfreq is not None else n_times / input_window_seconds
        if h_freq >= sfreq / 2:
            raise ValueError(f"h_freq ({h_freq}) must be less than the Nyquist frequency {sfreq / 2}")
        n_times = n_times if n_times is not None else round(input_window_seconds * sfreq)
        self.conv = nn.Conv1d(n_chans, 4, 64)  # a temporal kernel of 64 samples
        self.head = nn.Linear(4 * (n_times - 63), 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x).flatten(1))


def test_a_guard_that_raised_is_read_as_the_requirement_and_a_signal_gets_the_length_it_was_built_for() -> None:
    from nnrag.validator.probing.probe import _Budget, _forward, _instantiate

    # the rate is a rate (a width there puts 30 Hz above the Nyquist frequency); the length is set
    # to what ``n_times != round(seconds * sfreq)`` requires
    model, kwargs, error = _instantiate(Windowed, {"n_chans": 16}, Sizes())
    assert error is None and model is not None
    assert kwargs["sfreq"] > 60 and kwargs["n_times"] == round(kwargs["input_window_seconds"] * kwargs["sfreq"])
    found, error = _forward(model, kwargs, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None and found[0][0].shape == (2, 16, kwargs["n_times"])


def test_a_map_flattened_into_a_linear_layer_gets_the_side_it_was_designed_for() -> None:
    flat = RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x16384 and 12544x1024)")
    assert input_repairs(flat, "float", (2, 256, 8, 8), Sizes(), 256)[0] == ("float", (2, 256, 7, 7))


class DetrLayer(nn.Module):
    """A DETR-style decoder layer: its optional arguments are tensors it cannot do without."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)

    def forward(self, query, key=None, query_pos=None, key_pos=None, attn_mask=None, position_ids=None):
        scores = self.q(query + query_pos) @ self.k(key + key_pos).transpose(1, 2)
        return scores.softmax(-1) @ key + position_ids[..., None]


def test_optional_tensors_a_layer_needs_are_filled_like_the_main_input() -> None:
    main = torch.rand(2, 4, 16)
    calls = list(forward_calls(DetrLayer(16), main))
    args, kwargs = calls[-1]
    assert args == [main] and sorted(kwargs) == ["key", "key_pos", "position_ids", "query_pos"]
    assert kwargs["position_ids"].tolist() == [[0, 1, 2, 3]] * 2
    DetrLayer(16)(*args, **kwargs)


class DropsPatches(nn.Module):
    def __init__(self, prob, keep_prob) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        assert 0 <= prob < 1 and 0 < keep_prob <= 1
        self.prob = prob


def test_a_probability_is_guessed_as_a_probability() -> None:
    from nnrag.validator.probing.probe import _instantiate

    sizes, kwargs = next(constructor_attempts(DropsPatches))
    _, kwargs, error = _instantiate(DropsPatches, kwargs, sizes)
    assert error is None and kwargs == {"prob": 0.5, "keep_prob": 1.0}


def test_inputs_take_the_ranks_channels_and_kinds_checks_state() -> None:
    from nnrag.validator.probing.inputs import make_tensor

    sizes = Sizes()

    def first(message: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        return input_repairs(ValueError(message), "float", shape, sizes, 16)[0]

    assert input_repairs(ValueError("Expecting 3-d, 4-d or 5-d pred, instead got pred of shape torch.Size([2, 16])"),
                         "float", (2, 16), sizes, 16) == [("float", (2, 16, 16)), ("float", (2, 16, 16, 16)), ("float", (2, 16, 8, 8, 8))]
    assert first("expecting pred with 3 spatial dimensions, got pred of shape torch.Size([2, 16])", (2, 16)) == ("float", (2, 16, 8, 8, 8))
    assert first("Currently channel dimensions >1 (16) are not supported.", (2, 16, 16, 16)) == ("float", (2, 1, 16, 16))
    assert first("Input should have 1 channel for binary classification, got 16", (2, 16, 8, 8)) == ("float", (2, 1, 8, 8))
    ddf = "number of channels of the input DDF, 3, does not match number of spatial dimensions, 2"
    assert ("float", (2, 2, 16, 16)) in input_repairs(ValueError(ddf), "float", (2, 3, 16, 16), sizes, 16)
    # a stack of downsamplings flattened into a linear layer built for a larger image
    flat = RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x64 and 1024x512)")
    assert input_repairs(flat, "float", (2, 16, 16, 16), sizes, 16)[0] == ("float", (2, 16, 64, 64))
    kind, shape = first("we support only boxes with shape [N,4] or [N,6], got boxes with shape torch.Size([2, 16]).", (2, 16))
    boxes = make_tensor(kind, shape)
    assert (kind, shape) == ("boxes", (4, 4)) and bool((boxes[:, 2:] > boxes[:, :2]).all()) and boxes.min() >= 0 and boxes.max() <= 1
    assert first("Input size should be 256 x 256 when using HoVerNetMode.FAST", (2, 3, 16, 16)) == ("float", (2, 3, 256, 256))
    # two inputs joined before the first convolution: each one's share of the channels
    joined = RuntimeError("Given groups=1, weight of size [16, 2, 3, 3], expected input[2, 4, 16, 16] to have 2 channels, but got 4 channels instead")
    assert ("float", (2, 1, 16, 16)) in input_repairs(joined, "float", (2, 2, 16, 16), sizes, 16)
    # an unbatched 3-D input read as one sample of 2 channels is not a joined input
    unbatched = RuntimeError("Given groups=1, weight of size [32, 3, 3, 3], expected input[1, 2, 16, 32] to have 3 channels, but got 2 channels instead")
    assert input_repairs(unbatched, "float", (2, 16, 32), sizes, 16) == [("float", (2, 3, 32))]
    # a video cut into tubelets: 3 channels x 4 x 4 x 4 is the normalized width
    tubelets = RuntimeError("Given normalized_shape=[192], expected input with shape [*, 192], but got input of size[2, 2, 4, 1024]")
    assert ("float", (2, 3, 8, 8, 8)) in input_repairs(tubelets, "float", (2, 16, 8, 8, 8), sizes, 16)
    # a 1-D signal cut into patches of 4 steps: the normalized width is 4 x channels
    width = RuntimeError("Given normalized_shape=[12], expected input with shape [*, 12], but got input of size[2, 3, 64]")
    assert ("float", (2, 3, 12)) in input_repairs(width, "float", (2, 16, 12), sizes, 16)
    kind, shape = first("image must have dtype torch.uint8", (2, 3, 16, 16))
    assert make_tensor(kind, shape).dtype == torch.uint8


class Smoothing(nn.Module):
    """A filter whose window must be odd and whose widths become trainable tensors."""

    def __init__(self, window_length: int, sigma) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        if window_length % 2 == 0:
            raise ValueError("window_length must be odd.")
        self.sigma = nn.Parameter(torch.tensor(sigma))


class Sampled(nn.Module):
    def __init__(self, in_shape, dtype) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.channels, *self.spatial = in_shape
        self.dtype = dtype


def test_arguments_take_the_parity_and_kind_the_code_needs() -> None:
    from nnrag.validator.probing.probe import _instantiate

    _, kwargs, error = _instantiate(Smoothing, {"window_length": 16, "sigma": [16, 16]}, Sizes())
    assert error is None and kwargs == {"window_length": 17, "sigma": [16.0, 16.0]} and isinstance(kwargs["sigma"][0], float)
    assert next(constructor_attempts(Sampled))[1] == {"in_shape": (16, 16, 16), "dtype": torch.float32}


_GUESSED_WRONG = """
        import torch
        from torch import nn
        class FromReference(nn.Module):
            def __init__(self, reference: torch.Tensor):
                super().__init__()
                self.reference = reference
            def forward(self, x):
                if x.shape != self.reference.shape:
                    raise ValueError(f"input and reference must have the same shape. Got {x.shape} and {self.reference.shape}.")
                return (x - self.reference).abs().mean()
        class PatchClassifier(nn.Module):
            def __init__(self, dim, transformer):
                super().__init__()
                self.embed = nn.Conv2d(3, dim, 4, 4)
                self.transformer = transformer
            def forward(self, img):
                return self.transformer(self.embed(img).flatten(2).transpose(1, 2)).mean(1)
        """


def test_forward_errors_rebuild_the_arguments_they_show_were_guessed_wrong(tmp_path: Path) -> None:
    result = _probed(tmp_path, _GUESSED_WRONG, "FromReference")  # the reference rebuilt in the input's shape
    assert result["init_args"]["reference"] == f"tensor{result['input_shapes'][0]}" and result["backward"]  # type: ignore[index]
    # the wrong channel count fails first; the call with three channels shows the number called as a layer
    result = _probed(tmp_path, _GUESSED_WRONG, "PatchClassifier")
    assert result["init_args"]["transformer"] == "Passthrough()" and result["input_shapes"][0][1] == 3  # type: ignore[index]


def test_a_block_that_redefines_train_is_still_probed(tmp_path: Path) -> None:
    result = _probed(tmp_path, """
        from torch import nn
        class Explainer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.mask = nn.Linear(dim, dim)
            def train(self, epoch, model, x):  # fits the explanation, not a mode switch
                raise RuntimeError("not called by a probe")
            def forward(self, x):
                return self.mask(x).sigmoid() * x
        """, "Explainer")
    assert result["backward"] is True


class MaskedUpdate(nn.Module):
    def forward(self, current: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, current - reference, current)


def test_a_required_mask_is_tried_as_none_then_as_all_kept() -> None:
    main = torch.randn(2, 4, 8, 8)
    calls = list(forward_calls(MaskedUpdate(), main))
    assert calls[0][0][2] is None
    args, _ = calls[-1]
    assert args[2].dtype == torch.bool and bool(args[2].all()) and MaskedUpdate()(*args).shape == main.shape
    tokens = torch.randn(2, 4, 8)  # a mask over tokens covers (batch, tokens), or a map's every pixel
    assert [a[2].shape for a, _ in forward_calls(MaskedUpdate(), tokens) if a[2] is not None] == [(2, 4), (2, 4, 8)]


def test_a_loss_gets_a_mask_of_valid_pixels_where_it_needs_one(tmp_path: Path) -> None:
    """Depth losses weigh only valid pixels: a required mask over a (batch, height, width) map, and
    one that defaults to None yet is indexed; each is given with every pixel valid."""
    source = """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class ScaleInvariantLoss(nn.Module):
            def forward(self, prediction, target, mask):
                prediction, target, mask = prediction.squeeze(), target.squeeze(), mask.squeeze()
                scale = (prediction * target * mask).sum((1, 2)) / (prediction * prediction * mask).sum((1, 2)).clamp(min=1e-6)
                return F.l1_loss((scale.view(-1, 1, 1) * prediction)[mask], target[mask])

        class EdgeMatchingLoss(nn.Module):
            def forward(self, input, target, mask=None):
                valid = mask[..., 1:, 1:] & mask[..., :-1, :-1]
                grad = lambda t: t[..., 1:, 1:] - t[..., :-1, :-1]
                return F.l1_loss(grad(input)[valid], grad(target)[valid])
    """
    for name in ("ScaleInvariantLoss", "EdgeMatchingLoss"):
        result = _probed(tmp_path, source, name)
        assert result.get("backward") is True, (name, result)


def test_a_model_output_read_by_field_is_given_as_an_object_with_that_field(tmp_path: Path) -> None:
    result = _probed(tmp_path, """
        from torch import nn
        class MeanPooler(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
            def forward(self, x, attention_mask):
                masked = x.last_hidden_state * attention_mask.unsqueeze(-1)
                return self.proj(masked.sum(dim=1) / attention_mask.sum(-1, keepdim=True))
        """, "MeanPooler")
    hidden = result["input_shapes"][0]["last_hidden_state"]  # type: ignore[index]
    assert result["input_shapes"][1] == hidden[:2] and result["backward"] is True  # type: ignore[index]


class Flagged(nn.Module):
    def forward(self, x: torch.Tensor, multimask_output: bool) -> torch.Tensor:
        return x[:, :1] if not multimask_output else x


def test_a_required_flag_is_given_false() -> None:
    args, _ = next(forward_calls(Flagged(), torch.randn(2, 3)))
    assert args[1] is False


class NoPostNorm(nn.Module):
    def __init__(self, num_layers: int, post_norm_cfg: dict | None = dict(type="LN")) -> None:  # noqa: B006
        super().__init__()
        if post_norm_cfg is not None:
            raise ValueError(f"There is not post_norm in {type(self).__name__}")
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(num_layers))


def test_an_option_on_by_default_the_message_rules_out_is_turned_off() -> None:
    from nnrag.validator.probing.probe import _instantiate

    _, kwargs, error = _instantiate(NoPostNorm, {"num_layers": 1}, Sizes())
    assert error is None and kwargs == {"num_layers": 1, "post_norm_cfg": None}


class Encoder(nn.Module):
    def __init__(self, out_channels: int, depth: int = 5) -> None:
        super().__init__()
        if depth > 5 or depth < 2:  # the message states another range, as real ones do
            raise ValueError(f"{type(self).__name__} depth should be in range [1, 5], got {depth}")
        self.stages = nn.ModuleList(nn.Conv2d(3, out_channels, 3) for _ in range(depth))


def test_a_guessed_argument_out_of_the_range_a_guard_checks_is_brought_into_it() -> None:
    from nnrag.validator.probing.probe import _instantiate

    # the guard, not the message (which states another range), says what holds: the nearest depth
    _, kwargs, error = _instantiate(Encoder, {"out_channels": 16, "depth": 1}, Sizes())
    assert error is None and kwargs == {"out_channels": 16, "depth": 2}


def test_a_dict_input_gets_the_keys_the_forward_reads(tmp_path: Path) -> None:
    result = _probed(tmp_path, """
        from typing import Dict
        import torch
        from torch import nn
        class TwoLevelHead(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.low = nn.Conv2d(channels, 4, 1)
                self.high = nn.Conv2d(channels, 4, 1)
            def forward(self, input: Dict[str, torch.Tensor]) -> torch.Tensor:
                return self.low(input["low"]) + self.high(input["high"]).mean((2, 3), keepdim=True)
        """, "TwoLevelHead")
    assert {"low", "high"} <= set(result["input_shapes"][0]) and result["backward"] is True  # type: ignore[index]


class WrapsLoss(nn.Module):
    def __init__(self, loss) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        if not callable(loss):
            raise ValueError("The loss function is not callable.")
        self.loss = loss


def test_an_argument_a_check_says_must_be_callable_gets_a_layer() -> None:
    from nnrag.validator.probing.arguments import Passthrough
    from nnrag.validator.probing.probe import _instantiate

    _, kwargs, error = _instantiate(WrapsLoss, {"loss": 16}, Sizes())
    assert error is None and isinstance(kwargs["loss"], Passthrough)


def _final_convs(in_channels: int, channels) -> nn.Sequential:  # type: ignore[no-untyped-def]
    layers = []
    for c in channels:  # a sequence of widths, given an integer by a guess
        layers.append(nn.Conv2d(in_channels, c, 1))
        in_channels = c
    return nn.Sequential(*layers)


class FinalConvs(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, final_conv_channels) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.final = _final_convs(out_channels, final_conv_channels)


def test_a_helper_parameter_is_traced_to_the_argument_its_caller_passed() -> None:
    from nnrag.validator.probing.probe import _instantiate

    _, kwargs, error = _instantiate(FinalConvs, {"in_channels": 16, "out_channels": 16, "final_conv_channels": 16}, Sizes())
    assert error is None and kwargs["final_conv_channels"] == [16, 16] and kwargs["out_channels"] == 16


class LastMessage(nn.Module):
    def forward(self, msg: torch.Tensor, index: torch.Tensor, t: torch.Tensor, dim_size: int) -> torch.Tensor:
        return msg.new_zeros((dim_size, msg.size(-1))).index_add_(0, index, msg * t[:, None])


def test_the_rows_a_scatter_writes_are_a_number() -> None:
    main = torch.randn(5, 3)
    args, _ = next(forward_calls(LastMessage(), main))
    assert args[3] == 5 and LastMessage()(*args).shape == (5, 3)


_BUILT_INSIDE = """
import torch
from torch import nn


class Window(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.max_len = net.max_len
        self.net = net

    def forward(self, x):
        return self.net(x[:, : self.max_len])


class Model(nn.Module):
    def __init__(self, dim, max_len=8):
        super().__init__()
        self.max_len = max_len
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


class Outer(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.inner = Window(model)

    def forward(self, x):
        return self.inner(x)
"""


def test_an_attribute_read_inside_a_class_the_block_builds_names_its_argument(tmp_path: Path) -> None:
    """``Window(model)`` reads ``net.max_len``: the traceback's line names ``net``, not the guessed
    ``model``; the call in the frame above says which argument ``net`` holds."""
    result = _probed(tmp_path, _BUILT_INSIDE, "Outer")
    assert result["stage"] == "backward", result
    assert str(result["init_args"]["model"]).startswith("Model(")  # type: ignore[index]


def test_what_a_failed_assert_or_torch_asks_for_is_given(tmp_path: Path) -> None:
    """A bare ``assert``'s condition is the requirement: one sample at a time, a depth above one, a
    count that is not the placeholder; an abstract loss argument gets a concrete loss, tensors
    moved to a GPU stay on the CPU where there is none, and a device that defaults to a GPU is the
    CPU, a grid size is a tuple of ints, lengths
    torch wants as numbers are numbers, streams to fuse are of one size."""
    source = """
        from typing import Callable, List, Tuple
        import torch
        from torch import nn
        from torch.nn.modules.loss import _Loss

        class OneAtATime(nn.Module):
            def __init__(self, depth: int, num_classes: int = -1, use_gpu: bool = True) -> None:
                super().__init__()
                assert depth > 1
                self.num_classes = num_classes
                assert self.num_classes != -1
                self.proj = nn.Linear(8, num_classes)
                self.use_gpu = use_gpu

            def forward(self, x):
                assert x.size()[0] == 1 and x.ndim == 3 and x.shape[-1] == 8
                if self.use_gpu:
                    x = x.cuda()
                return self.proj(x)

        class OnDevice(nn.Module):
            def __init__(self, dim: int, device: str = "cuda") -> None:
                super().__init__()
                self.device = device
                self.proj = nn.Linear(dim, dim)

            def forward(self, x):
                return self.proj(x) + torch.zeros(x.shape[-1], device=self.device)

        class Scored(nn.Module):  # the target starts as a copy of the prediction
            def forward(self, pred, target):
                assert pred.ndim == 2 and target.ndim == 1
                return pred.gather(1, target.long().clamp(0, 1)[:, None]).mean()

        class Skip(nn.Module):  # its default path names a function the file never defines
            def __init__(self, dim: int, prev_layer_ind, fast: bool = False) -> None:
                super().__init__()
                self.proj, self.prev_layer_ind, self.fast = nn.Linear(dim, dim), prev_layer_ind, fast

            def forward(self, x, prev_layers: List[torch.Tensor]):
                if not self.fast:
                    return undefined_einsum(x)
                return self.proj(x) + prev_layers[self.prev_layer_ind]

        class Weighted(nn.Module):
            def __init__(self, loss: _Loss) -> None:
                super().__init__()
                self.loss = loss

            def forward(self, input, target):
                return self.loss(input, target) * 2

        class Grid(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.scale = nn.Parameter(torch.ones(4))

            def forward(self, size: Tuple[int, int]):
                h, w = size
                return torch.ones(h, w, 1) * self.scale

        class Bias(nn.Module):  # over i queries and j keys
            def __init__(self, heads: int) -> None:
                super().__init__()
                self.slopes = nn.Parameter(torch.ones(heads, 1, 1))

            def forward(self, i, j):
                return self.slopes * (torch.arange(j - i, j)[:, None] - torch.arange(j)[None]).float()

        class Fusion(nn.Module):
            def __init__(self, reduce_fn: Callable, transforms: List[Callable]) -> None:
                super().__init__()
                self.reduce_fn, self.transforms = reduce_fn, transforms

            def forward(self, streams: List[torch.Tensor]):
                for t in self.transforms:
                    streams = [t(s) for s in streams]
                return self.reduce_fn(torch.stack(streams)).sum(0)
    """
    one = _probed(tmp_path, source, "OneAtATime")
    assert one["init_args"] == {"depth": "2", "num_classes": "4"}, one["init_args"]
    assert _probed(tmp_path, source, "OnDevice")["init_args"] == {"dim": "16", "device": "'cpu'"}
    assert one["input_shapes"] == [[1, 16, 8]] and one["output_shapes"][0] == 1, one["input_shapes"]
    assert _probed(tmp_path, source, "Scored")["input_shapes"] == [[2, 16], [2]]
    skip = _probed(tmp_path, source, "Skip")  # an index is 0, earlier outputs a list, the other path
    assert skip["init_args"]["prev_layer_ind"] == "0" and skip["init_args"]["fast"] == "True", skip["init_args"]
    assert isinstance(skip["input_shapes"][1], list) and len(skip["input_shapes"][1]) == 2, skip["input_shapes"]
    weighted = _probed(tmp_path, source, "Weighted")
    assert not weighted["init_args"]["loss"].startswith(("_Loss", "Weighted")), weighted["init_args"]
    grid = _probed(tmp_path, source, "Grid")
    assert grid["input_shapes"] == [["int", "int"]] and grid["backward"], grid
    # torch wanted numbers where the probe gave tensors: the call again with numbers
    bias = _probed(tmp_path, source, "Bias")
    assert bias["input_shapes"] == ["8", "8"] and bias["output_shapes"][1:] == [8, 8], bias
    # a list of streams of one size; a layer class called as a function builds a module, which is
    # not an output: rebuilt with an instance
    fusion = _probed(tmp_path, source, "Fusion")
    assert fusion["init_args"]["reduce_fn"].endswith("()") and fusion["init_args"]["transforms"].startswith("[Pass"), fusion
    assert len({tuple(s) for s in fusion["input_shapes"][0]}) == 1 and isinstance(fusion["output_shapes"], list), fusion


_TAKES_ARRAYS = """
import numpy as np
import torch
from torch import nn


class ArrayToTensor(nn.Module):
    def forward(self, image):
        if not isinstance(image, np.ndarray):
            raise TypeError(f"Input type is not a numpy.ndarray. Got {type(image)}")
        return torch.from_numpy(image).permute(2, 0, 1)
"""


def test_a_forward_that_takes_arrays_gets_an_array(tmp_path: Path) -> None:
    record = _probed(tmp_path, _TAKES_ARRAYS, "ArrayToTensor")
    assert record["input_dtypes"] == [None] and len(record["input_shapes"][0]) == 3, record  # an array of an image  # type: ignore[index]
    assert len(record["output_shapes"]) == 3  # type: ignore[arg-type]


def test_widths_left_at_none_are_chosen_together(tmp_path: Path) -> None:
    # NAS-FPN's merge cells: ``in_channels=None, out_channels=None`` passed to a conv that needs both
    result = _probed(tmp_path, """
        import torch.nn as nn

        class Cell(nn.Module):
            def __init__(self, in_channels=None, out_channels=None):
                super().__init__()
                self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=in_channels % 2)

            def forward(self, x1, x2):
                return self.conv(x1 + x2)
        """, "Cell")
    assert result["stage"] == "backward", result
    assert set(result["init_args"]) == {"in_channels", "out_channels"}  # type: ignore[arg-type]


def test_a_token_sequence_gets_its_grid_as_the_input_size(tmp_path: Path) -> None:
    result = _probed(tmp_path, """
        from collections.abc import Sequence
        import torch.nn as nn

        class Merge(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.LayerNorm(4 * dim)

            def forward(self, x, input_size):
                assert isinstance(input_size, Sequence), f"Expect input_size is `Sequence` but get {input_size}"
                B, L, C = x.shape
                H, W = input_size
                assert L == H * W
                x = x.view(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 2, 4, 5).reshape(B, -1, 4 * C)
                return self.norm(x), (H // 2, W // 2)
        """, "Merge")
    assert result["stage"] == "backward", result
    shapes = result["input_shapes"]
    assert len(shapes[0]) == 3 and shapes[1] == ["int", "int"]  # type: ignore[index]


# One case per rule of INPUT_RULES: (the forward's signature after ``self``, the main input's
# shape, the parameter looked at, a check of the value given).
_RULE_CASES: dict[str, tuple[str, tuple[int, ...], str, Any]] = {
    "state the block makes": ("input, h", (2, 12), "h", lambda v: v.shape == (2, 8)),
    "graph edges": ("x, edge_index", (8, 16), "edge_index", lambda v: v.shape[0] == 2 and v.dtype == torch.long),
    "dense adjacency": ("x, adj", (8, 16), "adj", lambda v: v.shape == (8, 8) and bool((v.diagonal() == 1).all())),
    "edge weights or attributes": ("x, edge_index, edge_weight", (8, 16), "edge_weight", lambda v: v.shape == (24,)),
    "token grid side": ("x, H, W", (2, 16, 8), "W", lambda v: v == 4),
    "token grid shape": ("x, hw_shape", (2, 16, 8), "hw_shape", lambda v: v == (4, 4)),
    "tuple of ints": ("x, window: Tuple[int, int]", (2, 3, 8, 8), "window", lambda v: v == (8, 8)),
    "rows a scatter writes": ("x, dim_size", (8, 16), "dim_size", lambda v: v == 8),
    "flag": ("x, multimask_output: bool", (2, 3, 8, 8), "multimask_output", lambda v: v is False),
    "truth value": ("x, train", (2, 3, 8, 8), "train", lambda v: v is False),
    "number by annotation": ("x, step: Union[int, Tensor]", (2, 3, 8, 8), "step", lambda v: v == 1),
    "mask": ("x, attn_mask", (2, 5, 8), "attn_mask", lambda v: v is None),
    "row index": ("x, batch", (8, 16), "batch", lambda v: v.shape == (8,) and v.dtype == torch.long),
    "diffusion timestep": ("x, t", (2, 3, 8, 8), "t", lambda v: v.shape == (2,)),
    "boxes": ("x, rois", (2, 3, 8, 8), "rois", lambda v: v.dim() == 2 and v.shape[1] == 5),
    "unpooling indices": ("x, indices", (2, 3, 4, 4), "indices", lambda v: v.shape == (2, 3, 4, 4) and v.dtype == torch.long),
    "variance": ("x, var", (2, 8), "var", lambda v: bool((v > 0).all())),
    "rotary pair": ("x, position_embeddings: Tuple[Tensor, Tensor]", (2, 5, 8), "position_embeddings",
                    lambda v: len(v) == 2 and v[0].shape == (2, 5, 4)),
    "earlier outputs": ("x, prev: List[Tensor]", (2, 8), "prev", lambda v: isinstance(v, list) and len(v) == 2),
    "dicts of the keys forward reads": ("outputs, targets", (2, 5, 8), "targets",
                                        lambda v: isinstance(v, list) and len(v) == 2 and v[0]["labels"].dtype == torch.long
                                        and v[0]["boxes"].shape == (2, 4)),
    "what the layer it is handed to takes": ("x, style", (2, 8, 4, 4), "style", lambda v: v.shape == (2, 12)),
    "target": ("pred, target", (2, 8), "target", lambda v: v.shape == (2, 8)),
    "like the main input": ("x, memory", (2, 5, 8), "memory", lambda v: v.shape == (2, 5, 8)),
}
# What a case's forward does, where its rule reads the source (``return None`` for the others).
_RULE_BODIES = {"dicts of the keys forward reads": "return [(t['labels'], t['boxes']) for t in targets]",
                "what the layer it is handed to takes": "return x * self.modulation(style).view(2, 8, 1, 1)",
                "truth value": "return x if train and self.head_dim else None"}
# Methods a case's module has besides forward, where its rule calls one.
_RULE_METHODS = {"state the block makes": "    def init_hidden(self, bsz):\n        return self.modulation.weight.new_zeros(bsz, 8)\n\n"}


@pytest.mark.parametrize("rule_name", [r.name for r in __import__(
    "nnrag.validator.probing.inputs", fromlist=["INPUT_RULES"]).INPUT_RULES])
def test_each_input_rule_fills_its_parameter_first(rule_name: str, tmp_path: Path) -> None:
    """The gate's guesses for forward parameters are one ordered table; each rule has a case here,
    and in its case it is the rule that fills the parameter (no earlier rule takes it)."""
    import importlib.util
    import inspect

    from nnrag.validator.probing.inputs import Filling, fill

    signature, shape, name, check = _RULE_CASES[rule_name]
    path = tmp_path / f"input_case_{abs(hash(rule_name))}.py"  # a file, so the rules that read source can
    path.write_text("from typing import List, Tuple, Union\n\nfrom torch import Tensor, nn\n\n\nclass Probed(nn.Module):\n"
                    "    def __init__(self):\n        super().__init__()\n        self.head_dim = 4\n"
                    "        self.modulation = nn.Linear(12, 8)\n\n" + _RULE_METHODS.get(rule_name, "")
                    + f"    def forward(self, {signature}):\n        {_RULE_BODIES.get(rule_name, 'return None')}\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    namespace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(namespace)
    module = namespace.Probed()
    param = inspect.signature(module.forward).parameters[name]
    rule, value = fill(Filling(module, torch.rand(shape), given=1), param, name.lower())
    assert rule.name == rule_name and check(value), (rule.name, value)


def test_every_input_rule_has_a_case() -> None:
    from nnrag.validator.probing.inputs import INPUT_RULES

    assert [r.name for r in INPUT_RULES] == list(_RULE_CASES)


class _Expanding(torch.nn.Module):
    expansion = 4


class SpaceLike(abc.ABC):
    """An interface a constructor's annotation names; BoxSpace implements it."""

    @abc.abstractmethod
    def sample(self) -> int: ...


class BoxSpace(SpaceLike):
    def __init__(self, n: int) -> None:
        self.n = n

    def sample(self) -> int:
        return self.n


class _Choice(__import__("enum").Enum):
    FIRST = "first"
    SECOND = "second"


@__import__("dataclasses").dataclass
class _SmallConfig:
    hidden_size: int


# One case per rule of ARGUMENT_RULES: (parameter name, its annotation, the class being built, a
# check of the value given).
_ARGUMENT_CASES: dict[str, tuple[str, Any, Any, Any]] = {
    "class named by annotation": ("block", "Type[torch.nn.ReLU]", None, lambda v: v is torch.nn.ReLU),
    "config dataclass": ("settings", _SmallConfig, None, lambda v: isinstance(v, _SmallConfig)),
    "layer by annotation": ("encoder_layer", torch.nn.Linear, None, lambda v: isinstance(v, torch.nn.Linear)),
    "object by annotation": ("in_type", SpaceLike, None, lambda v: isinstance(v, BoxSpace) and v.n == 16),
    "enum member": ("mode", _Choice, None, lambda v: v is _Choice.FIRST),
    "literal": ("mode", "Literal['bilinear', 'nearest']", None, lambda v: v == "bilinear"),
    "activation named by string": ("activation", str, None, lambda v: v == "relu"),
    "layer named by string": ("norm_name", "Union[str, tuple]", None, lambda v: v == "batch"),
    "config object": ("cfg", None, None, lambda v: type(v).__name__ == "AutoConfig"),
    "keyword arguments": ("norm_kwargs", None, None, lambda v: v == {}),
    "heads": ("num_heads", None, None, lambda v: v == 2),
    "spatial dimensions": ("spatial_dims", None, None, lambda v: v == 2),
    "groups": ("groups", None, None, lambda v: v == 1),
    "kernel size": ("kernel_size", None, None, lambda v: v == 3),
    "axis": ("concat_axis", None, None, lambda v: v == 1),
    "position index": ("padding_idx", None, None, lambda v: v == 0),
    "stride": ("stride", None, None, lambda v: v == 1),
    "dilation": ("dilation", None, None, lambda v: v == 1),
    "padding": ("pad", None, None, lambda v: v == 1),
    "classes": ("num_classes", None, None, lambda v: v == 10),
    "ratio": ("mlp_ratio", None, None, lambda v: v == 2.0),
    "reduction": ("reduction", None, None, lambda v: v == 4),
    "expansion": ("expansion", None, None, lambda v: v == 2),
    "dropout": ("attn_drop", None, None, lambda v: v == 0.0),
    "probability": ("keep_prob", None, None, lambda v: v == 1.0),
    "epsilon": ("eps", None, None, lambda v: v == 1e-5),
    "momentum": ("momentum", None, None, lambda v: v == 0.1),
    "per-stage depths": ("depths", None, None, lambda v: v == [1, 1, 1, 1]),
    "depth": ("num_layers", None, None, lambda v: v == 1),
    "pyramid levels": ("num_levels", None, None, lambda v: v == 3),
    "sampling rate": ("sfreq", None, None, lambda v: v >= 100),
    "patch size": ("patch_size", None, None, lambda v: v == 4),
    "window size": ("window_size", None, None, lambda v: v == 4),
    "shift size": ("shift_size", None, None, lambda v: v == 2),
    "dtype": ("param_dtype", None, None, lambda v: v is torch.float32),
    "device": ("output_device", None, None, lambda v: v == torch.device("cpu")),
    "sample shape": ("in_shape", None, None, lambda v: v == (16, 16, 16)),
    "spatial size": ("img_size", None, None, lambda v: v == 16),
    "vocabulary": ("vocab_size", None, None, lambda v: v == 32),
    "sequence length": ("max_len", None, None, lambda v: v == 16),
    "scale factor": ("upscale", None, None, lambda v: v == 2),
    "affine switch": ("bias", None, None, lambda v: v is True),
    "optional feature": ("use_checkpoint", None, None, lambda v: v is False),
    "layer class": ("norm_layer", None, None, lambda v: v is torch.nn.BatchNorm2d),
    "bottleneck planes": ("planes", None, _Expanding, lambda v: v == 4),
    "width": ("in_channels", None, None, lambda v: v == 16),
    "by annotation": ("temperature", float, None, lambda v: v == 0.1),
    "anything else": ("gamma", None, None, lambda v: v == 16),
}


@pytest.mark.parametrize("rule_name", [r.name for r in __import__(
    "nnrag.validator.probing.arguments", fromlist=["ARGUMENT_RULES"]).ARGUMENT_RULES])
def test_each_argument_rule_fills_its_parameter_first(rule_name: str) -> None:
    """The gate's guesses for constructor arguments are one ordered table; each rule has a case
    here, and in its case it is the rule that fills the parameter (no earlier rule takes it)."""
    import inspect
    import typing

    from nnrag.validator.probing.arguments import Asked, Sizes, guess_argument

    name, annotation, owner, check = _ARGUMENT_CASES[rule_name]
    if isinstance(annotation, str):  # written as code, evaluated as an annotation is
        annotation = eval(annotation, {"torch": torch, **vars(typing)})  # noqa: S307 - the test's own text
    if annotation is None:
        annotation = inspect.Parameter.empty
    rule, value = guess_argument(Asked(name, annotation, Sizes(), owner, 0))
    assert rule.name == rule_name and check(value), (rule.name, value)


def test_a_count_of_repeated_blocks_is_one() -> None:
    import inspect

    from nnrag.validator.probing.arguments import Asked, Sizes, guess_argument

    # ``num_res_blocks`` of a diffusion U-Net, ``n_enc_layers``: as shallow as the block goes
    for name in ("num_res_blocks", "n_enc_layers"):
        rule, value = guess_argument(Asked(name, inspect.Parameter.empty, Sizes(), None, 0))
        assert rule.name == "depth" and value == 1, (name, rule.name, value)


def test_every_argument_rule_has_a_case() -> None:
    from nnrag.validator.probing.arguments import ARGUMENT_RULES

    assert [r.name for r in ARGUMENT_RULES] == list(_ARGUMENT_CASES)


# One case per rule of REPAIR_RULES: (the constructor's code after ``super().__init__()``, its
# signature, the guessed keyword arguments it fails with, a check of the change the rule suggests).
# Each class lives in a real module, so that its frames and source read as a candidate's do.
_REPAIR_CASES: dict[str, tuple[str, str, dict[str, Any], Any]] = {
    "asserted relation": ("assert depth > 1", "depth", {"depth": 1}, lambda c: c.get("depth", 0) > 1),
    "off the GPU there is not": ("self.g = nn.Parameter(torch.ones(dim, device=device))", "dim, device='cuda'", {"dim": 16},
                                 lambda c: c == {"device": "cpu"}),
    "path of a file not there unset": ("if checkpoint is not None:\n    with open(checkpoint, 'rb') as f:\n        self.w = f.read()",
                                       "checkpoint='./checkpoints/scaled_offline.pth'", {}, lambda c: c == {"checkpoint": None}),
    "key of the class's table": ("if depth not in self.arch_settings:\n    raise KeyError(f'invalid depth {depth}')",
                                 "depth", {"depth": 1}, lambda c: c == {"depth": 18}),
    "choice the message lists": ("if act not in ('gelu', 'relu'):\n    raise ValueError(f\"Unsupported act {act}: expected 'gelu' or 'relu'\")",
                                 "act", {"act": 16}, lambda c: c == {"act": "gelu"}),
    "missing argument": ("self.build(**kw)", "heads, **kw", {"heads": 2}, lambda c: c == {"dim": 16}),
    "instance a check asks for": ("if not isinstance(block, Bottleneck):\n    raise TypeError('a Bottleneck is needed')",
                                  "block", {"block": 16}, lambda c: type(c.get("block")).__name__ == "Bottleneck"),
    "unset argument the message names": ("if depth is None:\n    raise ValueError('`depth` must be passed in')",
                                         "depth=None", {}, lambda c: c == {"depth": 1}),
    "relation the message states": ("if in_channels != 2 * out_channels:\n    raise ValueError('in_channels == 2 * out_channels')",
                                    "in_channels, out_channels", {"in_channels": 16, "out_channels": 16},
                                    lambda c: c == {"in_channels": 32}),
    "option the message refuses": ("if post_norm_cfg is not None:\n    raise ValueError('There is not post_norm in Decoder')",
                                   "dim, post_norm_cfg=dict(type='LN')", {"dim": 16}, lambda c: c == {"post_norm_cfg": None}),
    "back to its default": ("if not 2 <= depth <= 5:\n    raise ValueError(f'depth should be in range [2, 5], got {depth}')",
                            "depth=5", {"depth": 1}, lambda c: c == {"depth": 5}),
    "optional argument unset again": (
        "if n_times is not None and seconds is not None and sfreq is not None and n_times != seconds * sfreq:\n"
        "    raise ValueError(f'{n_times=} different from {seconds=} * {sfreq=}')",
        "n_times=None, seconds=None, sfreq=None", {"n_times": 16, "seconds": 4, "sfreq": 16}, lambda c: c == {"sfreq": None}),
    "parity": ("if window_length % 2 == 0:\n    raise ValueError('window_length must be odd')",
               "window_length", {"window_length": 16}, lambda c: c == {"window_length": 17}),
    "floats for gradients": ("self.p = nn.Parameter(torch.tensor(scale))", "scale", {"scale": 2},
                             lambda c: c == {"scale": 2.0} and type(c["scale"]) is float),
    "sequence the code expects": ("self.n = len(stages)", "stages", {"stages": 16}, lambda c: c == {"stages": [16, 16]}),
    "integers as sequences": ("self.n = [w for w in window]", "window", {"window": 4}, lambda c: c == {"window": (4, 4)}),
    "length unpacked": ("r1, r2, r3 = rates", "rates", {"rates": [1, 2]}, lambda c: c == {"rates": [1, 2, 2]}),
    "indexed past its end": ("self.last = num_blocks[0] + num_blocks[3]", "num_blocks", {"num_blocks": [1, 2]},
                             lambda c: c == {"num_blocks": [1, 2, 2, 2]}),
    "length the message states": (
        "if len(decoder_channels) != depth:\n"
        "    raise ValueError(f'Model depth is {depth}, but you provide decoder_channels for {len(decoder_channels)} blocks')",
        "depth, decoder_channels", {"depth": 1, "decoder_channels": [8, 8]}, lambda c: c == {"decoder_channels": [8]}),
    "per-block rates": ("self.d = drop_path[0]", "drop_path", {"drop_path": 0.1}, lambda c: c == {"drop_path": [0.1] * 8}),
    "lengths too short for the layers": (
        "self.conv = nn.Conv1d(n_chans, 4, 25)\nself.conv(torch.zeros(1, n_chans, n_times))",
        "n_chans, n_times", {"n_chans": 16, "n_times": 16}, lambda c: c == {"n_times": 128}),
    "widths a group count divides": ("self.norm = nn.GroupNorm(32, ch * 2)", "ch", {"ch": 8}, lambda c: c == {"ch": 16}),
    "name as the module spells it": ("self.act = getattr(nn, activation)()", "activation", {"activation": "relu"},
                                     lambda c: c == {"activation": "ReLU"}),
    "None default filled": ("self.n = norm_layer(dim)", "dim, norm_layer=None", {"dim": 16},
                            lambda c: c.get("norm_layer") is nn.BatchNorm2d),
    "layer instance": ("self.seq = nn.Sequential(act)", "act", {"act": nn.ReLU}, lambda c: isinstance(c.get("act"), nn.ReLU)),
    "callable": ("self.conv = conv(dim)", "conv, dim", {"conv": 3, "dim": 16}, lambda c: c == {"conv": nn.Identity}),
    "section of a stand-in config": ("self.width = cfg.MODEL.HEAD.DIM * 2", "cfg", {"cfg": AutoConfig(Sizes()).with_value(
        "MODEL", AutoConfig(Sizes()).with_value("HEAD", 16))}, lambda c: isinstance(c["cfg"].MODEL.HEAD, AutoConfig)),
    "attribute read off a guess": ("self.out = block.expansion * 2", "block", {"block": 16},
                                   lambda c: hasattr(c.get("block"), "expansion")),
    "list of layers": ("if not isinstance(transforms, list):\n    raise TypeError('transforms should be a sequence of callables')",
                       "transforms", {"transforms": 16}, lambda c: isinstance(c.get("transforms"), list)),
    "mapping": ("self.layer = dict(**layer_cfg)", "layer_cfg", {"layer_cfg": 16}, lambda c: c == {"layer_cfg": {}}),
    "value the code compares with": ("if mode == 'scse':\n    self.m = 1\nelse:\n    raise ValueError(f'bad mode {mode}')",
                                     "mode", {"mode": 16}, lambda c: c == {"mode": "scse"}),
}


@pytest.mark.parametrize("rule_name", [r.name for r in __import__(
    "nnrag.validator.probing.repairs", fromlist=["REPAIR_RULES"]).REPAIR_RULES])
def test_each_repair_rule_reads_its_error(rule_name: str, tmp_path: Path) -> None:
    """The gate's repairs of guessed constructor arguments are one ordered table; each rule has a
    case here, in which a real constructor fails and the rule suggests the change that fixes it."""
    _check_repair(tmp_path, rule_name, *_REPAIR_CASES[rule_name])


# Further cases of a rule: a form its first case does not show.
_MORE_REPAIR_CASES: list[tuple[str, str, str, dict[str, Any], Any]] = [
    # read for several settings no layer has: a stand-in settings object
    ("attribute read off a guess", "self.n = h.num_mels + h.upsample_initial_channel", "h", {"h": 16},
     lambda c: isinstance(c.get("h"), AutoConfig)),
    # a value looked up in it (``curr_res in attn_resolutions``), not a count beside it
    ("sequence the code expects", "for i in range(num_res_blocks):\n    if 16 in attn_resolutions:\n        self.n = i",
     "num_res_blocks, attn_resolutions", {"num_res_blocks": 1, "attn_resolutions": 16},
     lambda c: c == {"attn_resolutions": [16, 16]}),
    # a guard that raised states the requirement negated, through arithmetic and pure builtins
    ("asserted relation", "if n_times != round(seconds * sfreq):\n    raise ValueError('the window does not match')",
     "n_times, seconds, sfreq", {"n_times": 16, "seconds": 4, "sfreq": 128}, lambda c: c == {"n_times": 512}),
    ("asserted relation", "if not (depth >= 2 and depth <= 5):\n    raise ValueError('unsupported depth')",
     "depth", {"depth": 1}, lambda c: c == {"depth": 2}),
    # a statement a formatter split over lines: the argument is named on a line of its own
    ("layer instance", "self.layers = nn.ModuleList(\n    [copy.deepcopy(encoder_layer) for _ in range(2)]\n)",
     "encoder_layer", {"encoder_layer": nn.ReLU}, lambda c: isinstance(c.get("encoder_layer"), nn.ReLU)),
    # a number guessed for a layer an encoder clones: a stand-in that takes whatever it is called with
    ("layer instance", "self.layers = nn.ModuleList([copy.deepcopy(encoder_layer) for _ in range(2)])",
     "encoder_layer", {"encoder_layer": 16}, lambda c: type(c.get("encoder_layer")).__name__ == "Passthrough"),
    # the message quotes the choices and the value given, not the parameter
    ("choice the message lists", "assert act in ACTS, f'{act} is not in {ACTS}'", "act", {"act": "relu"},
     lambda c: c == {"act": "ReLU"}),
    # the call the instruction stopped at, inside one statement that names another argument too
    ("callable", "self.seq = nn.Sequential(\n    nn.Conv2d(in_dim, 4, 1),\n    norm(4))", "in_dim, norm",
     {"in_dim": 16, "norm": 16}, lambda c: c == {"norm": nn.Identity}),
    # a layer class guessed for a callable, where the code reads an attribute off it
    ("attribute read off a guess", "self.out = block.expansion * 2", "block", {"block": nn.ReLU},
     lambda c: hasattr(c.get("block"), "expansion")),
    # an isinstance check that asks for a tensor: one made from the number guessed
    ("instance a check asks for", "assert isinstance(positions, torch.Tensor), 'positions should be a Tensor'",
     "positions", {"positions": 16}, lambda c: isinstance(c.get("positions"), torch.Tensor)),
    # a tensor's own attribute read off a guessed number: a vector as long as the number
    ("attribute read off a guess", "self.loc = nn.Parameter(loc.detach().clone())", "loc", {"loc": 16},
     lambda c: isinstance(c.get("loc"), torch.Tensor) and tuple(c["loc"].shape) == (16,)),
    # torch's container says it of the argument the line hands it
    ("list of layers", "self.flows = nn.ModuleList(flows)", "flows", {"flows": 16},
     lambda c: [type(x).__name__ for x in c.get("flows", [])] == ["Passthrough"]),
    ("layer instance", "self.layers = nn.ModuleList(attn_layers)",
     "attn_layers", {"attn_layers": [16, 16]}, lambda c: [type(x).__name__ for x in c.get("attn_layers", [])] == ["Passthrough"] * 2),
    # a flag off by default that an assertion asks to be on (GroundingDINO's decoders)
    ("asserted relation", "assert return_intermediate, 'support return_intermediate only'", "dim, return_intermediate=False",
     {"dim": 16}, lambda c: c == {"return_intermediate": True}),
    # the length an assertion counts of a guessed sequence (``assert len(input_shape) == 3``)
    ("asserted relation", "assert len(input_shape) == 3, 'only 3d'\nself.n = sum(input_shape)", "input_shape",
     {"input_shape": (16, 16)}, lambda c: c == {"input_shape": (16, 16, 16)}),
    # an empty assertion names what it checks in its statement (dynamic-network-architectures' Primus)
    ("unset argument the message names", "assert input_shape is not None\nself.n = input_shape", "dim, input_shape=None",
     {"dim": 16}, lambda c: c.get("input_shape") is not None),
    # an entry of a stand-in config passed on as keywords (effdet's ``partial(norm, **config.norm_kwargs)``)
    ("mapping", "self.norm = dict(**cfg.norm_kwargs)", "cfg", {"cfg": AutoConfig(Sizes()).with_value("norm_kwargs", 16)},
     lambda c: isinstance(c["cfg"], AutoConfig) and c["cfg"].norm_kwargs == {}),
    # a number guessed where the code iterates a mapping (mmflow's per-level ``in_channels.keys()``)
    ("mapping", "self.levels = list(in_channels.keys())\nself.c = in_channels['level6'] + in_channels.get('level5')",
     "in_channels", {"in_channels": 16}, lambda c: c == {"in_channels": {"level6": 16, "level5": 16}}),
    # a key the code then asks of such a mapping
    ("mapping", "self.c = layer_weights['conv1'] * 2", "layer_weights", {"layer_weights": {"0": 1.0}},
     lambda c: c == {"layer_weights": {"0": 1.0, "conv1": 1.0}}),
    # a list guessed where the code reads named parts (compressai's ``latent_codec["y"]``)
    ("mapping", "self.y = codec['y']\nself.h = codec['hyper']", "codec", {"codec": [nn.ReLU()]},
     lambda c: sorted(c["codec"]) == ["hyper", "y"] and isinstance(c["codec"]["y"], nn.ReLU)),
    # a layer guessed where the code builds a ModuleDict of named parts (open-unmix's Separator)
    ("mapping", "self.parts = nn.ModuleDict(parts)", "parts", {"parts": nn.ReLU()},
     lambda c: list(c["parts"]) == ["0"]),
    # the length of an entry of a stand-in config (``len(config.aspect_ratios) * config.num_scales``)
    ("sequence the code expects", "self.n = len(cfg.aspect_ratios) * 2", "cfg",
     {"cfg": AutoConfig(Sizes()).with_value("aspect_ratios", 0.5)}, lambda c: c["cfg"].aspect_ratios == [0.5, 0.5]),
]


@pytest.mark.parametrize("case", range(len(_MORE_REPAIR_CASES)))
def test_a_repair_rule_reads_its_error_in_other_forms(case: int, tmp_path: Path) -> None:
    _check_repair(tmp_path, *_MORE_REPAIR_CASES[case])


def _check_repair(tmp_path: Path, rule_name: str, body: str, signature: str, kwargs: dict[str, Any], check: Any) -> None:
    import importlib.util
    import textwrap

    from nnrag.validator.probing.arguments import Sizes
    from nnrag.validator.probing.repairs import Failure, rule_repairs

    path = tmp_path / f"repair_case_{abs(hash(rule_name))}.py"
    path.write_text("import copy\n\nimport torch\nfrom torch import nn\n\nACTS = ['ReLU', 'Tanh']\n\n\nclass Block(nn.Module):\n"
                    "    arch_settings = {18: (2, 2), 34: (3, 4)}\n\n"
                    f"    def __init__(self, {signature}):\n        super().__init__()\n"
                    + textwrap.indent(body, " " * 8) + "\n\n"
                    "    def build(self, dim):\n        self.dim = dim\n\n\n"
                    "class Bottleneck(nn.Module):\n    expansion = 4\n\n    def forward(self, x):\n        return x\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
        with pytest.raises(Exception) as failed:
            module.Block(**kwargs)
        suggested = [change for rule, change in rule_repairs(Failure(module.Block, kwargs, failed.value, Sizes()))
                     if rule.name == rule_name]
        assert any(check(change) for change in suggested), (failed.value, suggested)
        fixed = {**kwargs, **next(c for c in suggested if check(c))}
        module.Block(**fixed)  # the change is what the constructor needed
    finally:
        sys.modules.pop(path.stem, None)


def test_every_repair_rule_has_a_case() -> None:
    from nnrag.validator.probing.repairs import REPAIR_RULES

    assert [r.name for r in REPAIR_RULES] == list(_REPAIR_CASES)


def test_a_block_that_runs_itself_while_it_is_built_gets_the_input_it_ran_on(tmp_path: Path) -> None:
    """The constructor sizes its classifier by a forward on a dummy signal (channels by samples,
    no image): that shape is the input, whatever its first layer suggests."""
    source = '''
    import torch
    from torch import nn


    class SignalNet(nn.Module):
        def __init__(self, n_chans: int = 5, n_times: int = 40, n_outputs: int = 3):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, (n_chans, 7))
            with torch.no_grad():
                flat = self.forward(torch.zeros(1, n_chans, n_times), features_only=True).shape[1]
            self.head = nn.Linear(flat, n_outputs)

        def forward(self, x, features_only=False):
            x = self.conv(x.unsqueeze(1)).flatten(1)
            return x if features_only else self.head(x)
    '''
    result = _probed(tmp_path, source, "SignalNet")
    assert result["input_shapes"] == [[2, 5, 40]] and result["output_shapes"] == [2, 3]
    assert result["backward"] is True


def test_a_block_built_for_a_length_its_kernels_outgrow_is_built_longer() -> None:
    """A constructor that sizes its layers for the signal's length without running itself builds
    at a guessed ``n_times=16``; its forward then fails on a temporal kernel of 25. The forward's
    error rebuilds it with the lengths longer, its widths as they were."""
    from nnrag.validator.probing.repairs import forward_repairs

    class TemporalNet(nn.Module):
        def __init__(self, n_chans: int, n_times: int) -> None:
            super().__init__()
            self.temporal = nn.Conv1d(n_chans, 4, 25)
            self.head = nn.Linear(4, n_times)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.temporal(x).mean(-1))

    model = TemporalNet(n_chans=4, n_times=16)
    with pytest.raises(RuntimeError) as failed:
        model(torch.rand(2, 4, 16))
    assert next(forward_repairs(TemporalNet, {"n_chans": 4, "n_times": 16}, failed.value)) == {"n_times": 128}


def test_a_name_bound_only_by_a_guarded_import_names_the_missing_module(tmp_path: Path) -> None:
    """A backbone registered with a detection toolbox only when it imports: the block needs that
    toolbox, which a build may install; an undefined name would say nothing of it."""
    from nnrag.validator.probing.probe import StageFailure

    source = """
        import torch
        from torch import nn
        try:
            from nnrag_absent_toolbox.models import BACKBONES as det_BACKBONES
            has_toolbox = True
        except ImportError:
            has_toolbox = False

        @det_BACKBONES.register_module()
        class Backbone(nn.Module):
            def forward(self, x):
                return x
        """
    with pytest.raises(StageFailure) as failed:
        _probed(tmp_path, source, "Backbone")
    assert failed.value.code == "missing-dependency" and "No module named 'nnrag_absent_toolbox'" in str(failed.value)
    # installed, but of a release without the name: the import error the ``try`` swallowed, which
    # names the release's folder (a build pins a release that has it)
    installed = textwrap.dedent(source).replace("nnrag_absent_toolbox.models import BACKBONES", "json import BACKBONES")
    with pytest.raises(StageFailure) as failed:
        _probed(tmp_path, installed, "Backbone")
    assert failed.value.code == "missing-dependency" and "cannot import name 'BACKBONES' from 'json'" in str(failed.value)


def test_a_config_spread_into_a_part_gets_what_the_part_needs(tmp_path: Path) -> None:
    """``Encoder(**ddconfig)``: the arguments the part misses go into that config, never to the
    block, which would refuse them; inside it the same repairs apply (a group count the width must
    divide, resolutions the code tests membership in)."""
    result = _probed(tmp_path, """
        from torch import nn
        class Encoder(nn.Module):
            def __init__(self, *, ch, attn_resolutions, resolution):
                super().__init__()
                self.attn = resolution in attn_resolutions
                self.norm = nn.GroupNorm(num_groups=32, num_channels=ch)
                self.conv = nn.Conv2d(3, ch, 3, padding=1)
            def forward(self, x):
                return self.norm(self.conv(x))
        class AutoEncoder(nn.Module):
            def __init__(self, ddconfig, embed_dim):
                super().__init__()
                self.encoder = Encoder(**ddconfig)
                self.proj = nn.Conv2d(ddconfig["ch"], embed_dim, 1)
            def forward(self, x):
                return self.proj(self.encoder(x))
        """, "AutoEncoder")
    assert result.get("ok", True) and result.get("init_args"), result
    config = result["init_args"]["ddconfig"]  # type: ignore[index]
    assert "'ch': " in config and "'attn_resolutions': [" in config, config  # type: ignore[operator]
    assert set(result["init_args"]) == {"ddconfig", "embed_dim"}  # type: ignore[arg-type]


def test_a_number_forward_calls_for_several_results_becomes_a_layer_giving_them(tmp_path: Path) -> None:
    """An attention a layer is given and unpacks (``new_x, attn = self.attention(x, x, x)``) or
    indexes (``self.attention(x, x, x)[0]``): the stand-in gives its input and nothing for the rest."""
    source = """
        from torch import nn
        class EncoderLayer(nn.Module):
            def __init__(self, attention, d_model):
                super().__init__()
                self.attention = attention
                self.norm = nn.LayerNorm(d_model)
            def forward(self, x, attn_mask=None):
                new_x, attn = self.attention(x, x, x, attn_mask=attn_mask)
                return self.norm(x + new_x), attn
        class Indexed(nn.Module):
            def __init__(self, self_attention, d_model):
                super().__init__()
                self.self_attention = self_attention
                self.proj = nn.Linear(d_model, d_model)
            def forward(self, x):
                return self.proj(x + self.self_attention(x, x, x, attn_mask=None)[0])
        """
    unpacked = _probed(tmp_path, source, "EncoderLayer")
    assert unpacked["init_args"]["attention"] == "Passthrough()", unpacked["init_args"]  # type: ignore[index]
    assert unpacked["output_shapes"] == [unpacked["input_shapes"][0], []]  # type: ignore[index]
    indexed = _probed(tmp_path, source, "Indexed")
    assert indexed["init_args"]["self_attention"] == "Passthrough()", indexed["init_args"]  # type: ignore[index]
    assert indexed["output_shapes"] == indexed["input_shapes"][0]  # type: ignore[index]


def test_an_argument_an_isinstance_check_asks_for_is_an_instance_of_that_class(tmp_path: Path) -> None:
    """``if not isinstance(likelihood, GaussianBase): raise``: the argument becomes an instance of
    a concrete subclass built from guesses, and a class that is no layer is built the same way."""
    result = _probed(tmp_path, """
        import torch
        from torch import nn
        class GaussianBase(nn.Module):
            pass
        class Gaussian(GaussianBase):
            def __init__(self, noise: float = 0.1):
                super().__init__()
                self.noise = nn.Parameter(torch.tensor(noise))
            def forward(self, x):
                return x + self.noise
        class Space:
            def __init__(self, n):
                self.n = n
        class Objective(nn.Module):
            def __init__(self, likelihood, space):
                super().__init__()
                if not isinstance(likelihood, GaussianBase):
                    raise RuntimeError("Likelihood must be Gaussian for exact inference")
                assert isinstance(space, Space), "space must be a Space"
                self.likelihood, self.proj = likelihood, nn.Linear(space.n, space.n)
            def forward(self, x):
                return self.likelihood(self.proj(x)).mean()
        """, "Objective")
    args = result["init_args"]
    assert args["likelihood"].startswith("Gaussian("), args  # type: ignore[index,union-attr]
    assert "Space object" in args["space"], args  # type: ignore[index,operator]


def test_stand_ins_in_a_list_give_as_many_results_as_their_caller_unpacks(tmp_path: Path) -> None:
    """A flow made of the flows it is given (``nn.ModuleList(flows)``, then ``z, log_det =
    flow(z)`` for each): a list of stand-ins, each giving its input and a zero log-determinant."""
    result = _probed(tmp_path, """
        import torch
        from torch import nn
        class NormalizingFlow(nn.Module):
            def __init__(self, flows, dim: int):
                super().__init__()
                self.flows = nn.ModuleList(flows)
                self.scale = nn.Parameter(torch.ones(dim))
            def forward(self, z):
                log_q = torch.zeros(z.shape[0])
                for flow in self.flows:
                    z, log_det = flow(z)
                    log_q = log_q - log_det
                return z * self.scale, log_q
        """, "NormalizingFlow")
    assert result["init_args"]["flows"] == "[Passthrough()]", result["init_args"]  # type: ignore[index]
    assert result["output_shapes"] == [result["input_shapes"][0], [result["input_shapes"][0][0]]]  # type: ignore[index]


def test_the_builder_a_nested_call_stops_at_is_the_argument_made_a_layer(tmp_path: Path) -> None:
    """``BatchNorm(reduction_dim)`` inside one ``nn.Sequential(...)`` statement that also passes
    ``in_dim``: the call the instruction stopped at names the builder, so ``in_dim`` stays a number."""
    result = _probed(tmp_path, """
        from torch import nn
        class PyramidPooling(nn.Module):
            def __init__(self, in_dim, reduction_dim, bins, BatchNorm):
                super().__init__()
                self.features = nn.ModuleList()
                for b in bins:
                    self.features.append(nn.Sequential(
                        nn.AdaptiveAvgPool2d(b),
                        nn.Conv2d(in_dim, reduction_dim, kernel_size=1, bias=False),
                        BatchNorm(reduction_dim),
                        nn.ReLU(inplace=True)))
            def forward(self, x):
                size = x.shape[2:]
                return [x] + [nn.functional.interpolate(f(x), size) for f in self.features]
        """, "PyramidPooling")
    args = result["init_args"]
    assert args["in_dim"].isdigit() and args["BatchNorm"].endswith("Identity"), args  # type: ignore[index,union-attr]


def test_a_layer_class_called_with_keywords_becomes_the_stand_in_that_takes_any_call(tmp_path: Path) -> None:
    """``mixer_cls(dim)`` built as ``nn.Identity``, then called as ``self.mixer(x, state=state)``:
    the stand-in class, which takes any arguments, replaces it."""
    result = _probed(tmp_path, """
        from torch import nn
        class Block(nn.Module):
            def __init__(self, dim, mixer_cls, norm_cls=nn.LayerNorm):
                super().__init__()
                self.mixer = mixer_cls(dim)
                self.norm = norm_cls(dim)
            def forward(self, hidden_states, state=None):
                return self.mixer(self.norm(hidden_states), state=state) + hidden_states
        """, "Block")
    assert result["init_args"]["mixer_cls"].endswith("Passthrough"), result["init_args"]  # type: ignore[index,union-attr]
    assert "output_shapes" in result, result


def test_a_layer_class_guessed_for_a_callable_gives_way_to_a_class_with_the_attribute_read(tmp_path: Path) -> None:
    """``cutoff_fn: Callable`` guessed as an activation class, then ``cutoff_fn.cutoff`` read:
    "type object 'ReLU' has no attribute 'cutoff'" asks for a layer of the file that has one."""
    result = _probed(tmp_path, """
        from typing import Callable
        import torch
        from torch import nn
        class CosineCutoff(nn.Module):
            def __init__(self, cutoff: float):
                super().__init__()
                self.register_buffer("cutoff", torch.tensor(cutoff))
            def forward(self, d):
                return 0.5 * (torch.cos(d * 3.14159 / self.cutoff) + 1.0)
        class Interaction(nn.Module):
            def __init__(self, n_atom_basis: int, cutoff_fn: Callable):
                super().__init__()
                self.cutoff = cutoff_fn.cutoff
                self.cutoff_fn = cutoff_fn
                self.dense = nn.Linear(n_atom_basis, n_atom_basis)
            def forward(self, x):
                return self.dense(x) * self.cutoff_fn(x.abs()) / self.cutoff
        """, "Interaction")
    assert "CosineCutoff" in result["init_args"]["cutoff_fn"], result["init_args"]  # type: ignore[index,operator]


def test_a_number_the_forward_calls_under_another_name_becomes_a_layer(tmp_path: Path) -> None:
    """``self.scratch.output_conv = head`` in the constructor, ``self.scratch.output_conv(x)`` in
    forward: a line that names no argument, yet the number it calls is ``head``."""
    result = _probed(tmp_path, """
        from torch import nn
        class Dense(nn.Module):
            def __init__(self, head, features: int = 16):
                super().__init__()
                self.scratch = nn.Module()
                self.scratch.proj = nn.Conv2d(3, features, 3, padding=1)
                self.scratch.output_conv = head
            def forward(self, x):
                path = self.scratch.proj(x)
                return self.scratch.output_conv(path)
        """, "Dense")
    assert result["init_args"]["head"] == "Passthrough()", result["init_args"]  # type: ignore[index]


def test_a_list_read_at_fixed_positions_grows_to_the_last_one_read(tmp_path: Path) -> None:
    """A four-stage network reads ``num_blocks[3]`` and ``widths[3]``: the pairs guessed for them
    grow to four, by their last value."""
    result = _probed(tmp_path, """
        from torch import nn
        class FourStages(nn.Module):
            def __init__(self, num_blocks, width_multiplier, num_classes=10):
                super().__init__()
                widths = [int(16 * width_multiplier[i]) for i in range(4)]
                layers, c = [], 3
                for i, n in enumerate((num_blocks[0], num_blocks[1], num_blocks[2], num_blocks[3])):
                    for _ in range(n):
                        layers += [nn.Conv2d(c, widths[i], 3, padding=1), nn.ReLU()]
                        c = widths[i]
                self.body = nn.Sequential(*layers)
                self.head = nn.Linear(c, num_classes)
                self.last = width_multiplier[3]
            def forward(self, x):
                return self.head(self.body(x).mean((2, 3)))
        """, "FourStages")
    args = result["init_args"]
    assert len(eval(args["num_blocks"])) == 4 and len(eval(args["width_multiplier"])) == 4, args  # type: ignore[index,arg-type]


def test_a_number_the_forward_takes_the_length_of_becomes_a_pair(tmp_path: Path) -> None:
    """``pad`` kept as given, then ``len(pad)`` in a helper the forward calls: "object of type
    'int' has no len()" in forward makes it a pair."""
    result = _probed(tmp_path, """
        import torch
        from torch import nn
        def padded(x, pad):
            if len(pad) == 2:
                pad = (pad[0], pad[1], pad[0], pad[1])
            return nn.functional.pad(x, pad)
        class Pad(nn.Module):
            def __init__(self, channels: int, pad):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(channels, 1, 1))
                self.pad = pad
            def forward(self, x):
                return padded(x * self.scale, self.pad)
        """, "Pad")
    assert result["init_args"]["pad"].startswith("["), result["init_args"]  # type: ignore[index,union-attr]


def test_a_class_whose_methods_only_raise_not_implemented_is_built_as_a_subclass(tmp_path: Path) -> None:
    """``space: Space`` where ``Space.sample`` only raises NotImplementedError (abstract by
    convention, not by ``abc``): the argument is an instance of a subclass that implements it; a
    ``base: Flow`` whose forward only raises is a flow that has one."""
    result = _probed(tmp_path, """
        import torch
        from torch import nn
        class Space:
            def __init__(self, shape=None):
                self.shape = shape
            def sample(self):
                raise NotImplementedError
        class Box(Space):
            def __init__(self, n: int):
                super().__init__((n,))
            def sample(self):
                return torch.rand(self.shape)
        class Flow(nn.Module):
            def forward(self, z):
                \"\"\"Transforms z.\"\"\"
                raise NotImplementedError("a flow transforms its input")
        class Affine(Flow):
            def __init__(self, dim: int = 4):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(dim))
            def forward(self, z):
                return z * self.scale
        class Policy(nn.Module):
            def __init__(self, observation_space: Space, base: Flow):
                super().__init__()
                self.base = base
                self.head = nn.Linear(observation_space.sample().shape[0], 2)
            def forward(self, x):
                return self.head(x)
        """, "Policy")
    args = result["init_args"]
    assert "Box object" in args["observation_space"] and args["base"].startswith("Affine("), args  # type: ignore[index,operator]


def test_a_missing_key_is_a_registry_miss_when_building_and_an_input_the_forward_lacks_after() -> None:
    from nnrag.validator.probing.probe import classify

    assert classify("instantiate", KeyError("resnet50")) == "dynamic-registry"
    assert classify("forward", KeyError("_positions")) == "input-inference"


def test_a_callable_from_numbers_to_a_number_is_a_numeric_function_not_a_layer() -> None:
    """``lr_schedule: Callable[[float], float]``, called with the progress and its result handed to
    an optimizer as the learning rate: a layer class would give a layer, ``float`` gives a number."""
    from typing import Callable

    from nnrag.validator.probing.arguments import guess_value

    assert guess_value("lr_schedule", Callable[[float], float], Sizes()) is float
    assert guess_value("act", Callable[..., nn.Module], Sizes()) is nn.ReLU


def test_a_method_the_forward_calls_on_a_guess_is_called_on_an_instance_of_a_class_that_has_it(tmp_path: Path) -> None:
    """``self.flow.inverse(z)`` of a number: the file's classes that define ``inverse`` are offered as
    instances, the base whose methods only raise as a subclass that implements them."""
    result = _probed(tmp_path, """
        import torch
        from torch import nn
        class Flow(nn.Module):
            def forward(self, z):
                raise NotImplementedError
            def inverse(self, z):
                raise NotImplementedError("This flow has no algebraic inverse.")
        class Affine(Flow):
            def __init__(self, dim: int = 16):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(dim))
            def forward(self, z):
                return z * self.scale
            def inverse(self, z):
                return z / self.scale
        class Reverse(Flow):
            def __init__(self, flow):
                super().__init__()
                self.flow = flow
            def forward(self, z):
                return self.flow.inverse(z)
        """, "Reverse")
    assert result["init_args"]["flow"].startswith("Affine("), result["init_args"]  # type: ignore[index,union-attr]


def test_a_number_a_part_calls_under_its_own_name_is_the_argument_handed_to_it(tmp_path: Path) -> None:
    """The block hands ``self_attn`` to a part by keyword (``Residual(size, fn_attn=self_attn)``) and
    ``net`` by position (``Wrapped(net)`` into ``self.nnet = nnet``); the parts' forwards call
    ``self.fn_attn(x)`` and ``self.nnet(x)``, lines that name no argument of the block."""
    result = _probed(tmp_path, """
        from torch import nn
        class Residual(nn.Module):
            def __init__(self, size, fn_attn):
                super().__init__()
                self.norm = nn.LayerNorm(size)
                self.fn_attn = fn_attn
            def forward(self, x):
                return x + self.fn_attn(self.norm(x))
        class Wrapped(nn.Module):
            def __init__(self, nnet, scale: float = 1.0):
                super().__init__()
                self.nnet = nnet
                self.scale = scale
            def forward(self, x):
                return self.nnet(x) * self.scale
        class EncoderLayer(nn.Module):
            def __init__(self, size, self_attn, net):
                super().__init__()
                self.attn = Residual(size, fn_attn=self_attn)
                self.out = Wrapped(net)
                self.proj = nn.Linear(size, size)
            def forward(self, x):
                return self.out(self.proj(self.attn(x)))
        """, "EncoderLayer")
    args = result["init_args"]
    assert args["self_attn"] == "Passthrough()" and args["net"] == "Passthrough()", args  # type: ignore[index]


def test_a_stand_in_indexed_inside_another_call_gives_two_results(tmp_path: Path) -> None:
    """``self.dropout(self.attention(x, x, x)[0])``: the stand-in's result is indexed inside the
    dropout's call, not at the top of the statement; it still gives its input first."""
    result = _probed(tmp_path, """
        from torch import nn
        class EncoderLayer(nn.Module):
            def __init__(self, attention, d_model: int):
                super().__init__()
                self.attention = attention
                self.dropout = nn.Dropout(0.1)
                self.norm = nn.LayerNorm(d_model)
            def forward(self, x):
                attended = self.dropout(
                    self.attention(x, x, x)[0]
                )
                flat = attended.reshape(attended.shape[0] * attended.shape[1], attended.shape[2])
                return self.norm(flat)
        """, "EncoderLayer")
    assert result["init_args"]["attention"] == "Passthrough()", result["init_args"]  # type: ignore[index]
    batch, length, width = result["input_shapes"][0]  # type: ignore[index,misc]
    assert result["output_shapes"] == [batch * length, width], result


def test_the_guessing_budget_is_spent_by_work_not_by_waiting() -> None:
    """On a busy machine a worker waits for a CPU; the seconds it waits must not spend the
    search's budget, or the same block passes alone and fails beside another build."""
    import time

    from nnrag.validator.probing.probe import _Budget

    budget = _Budget(40, 0.2)
    time.sleep(0.3)  # waiting, as for a CPU another process holds
    assert budget.left()
    deadline = time.perf_counter() + 5
    while budget.left() and time.perf_counter() < deadline:
        sum(range(10_000))  # working
    assert not budget.left()


def test_a_plan_of_many_stage_widths_is_no_pyramid_of_maps() -> None:
    """nnU-Net's encoders keep a width per stage (``output_channels``); 32 of them read as pyramid
    levels asked for maps 2**32 pixels a side (the gate's own failure). A pyramid has a few levels."""
    import inspect
    from typing import List

    from nnrag.validator.probing.inputs import feature_levels

    class Decoder(nn.Module):
        def __init__(self, output_channels: List[int]) -> None:
            super().__init__()
            self.output_channels = output_channels

        def forward(self, skips: List[torch.Tensor]) -> torch.Tensor:
            return skips[0]

    param = inspect.signature(Decoder.forward).parameters["skips"]
    assert feature_levels(Decoder([16] * 32), param, torch.rand(2, 16, 16, 16), {}) is None
    levels = feature_levels(Decoder([8, 16, 32]), param, torch.rand(2, 16, 16, 16), {})
    assert [tuple(m.shape) for m in levels] == [(2, 8, 16, 16), (2, 16, 8, 8), (2, 32, 4, 4)]


def test_a_block_that_inverts_a_fourier_transform_gets_a_spectrogram_of_its_bins(tmp_path: Path) -> None:
    """An inverse STFT takes complex values over ``n_fft // 2 + 1`` bins, or every bin with real
    and imaginary parts on a last axis; a complex norm takes those parts. The block's error says a
    spectrogram was wanted, its ``n_fft`` how many bins."""
    source = """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class InverseSpectrogram(nn.Module):
            def __init__(self, n_fft=64, hop_length=16):
                super().__init__()
                self.n_fft, self.hop_length = n_fft, hop_length
                self.gain = nn.Parameter(torch.ones(1))
                self.register_buffer("window", torch.hann_window(n_fft))

            def forward(self, spec):
                return self.gain * torch.istft(spec, n_fft=self.n_fft, hop_length=self.hop_length, window=self.window)

        class TwoSidedSynthesis(nn.Module):
            def __init__(self, n_fft=32):
                super().__init__()
                self.n_fft = n_fft
                self.kernel = nn.Parameter(torch.randn(1, 1, n_fft, 1))

            def forward(self, X):
                assert X.dim() == 4, "make sure the tensor is in the shape of (batch, freq_bins, timesteps, 2)"
                return F.conv2d(X[..., 0].unsqueeze(1), self.kernel).flatten(1)

        class PartsMagnitude(nn.Module):
            def __init__(self, power=1.0):
                super().__init__()
                self.power = nn.Parameter(torch.tensor(power))

            def forward(self, spec):
                return torch.abs(torch.view_as_complex(spec)) ** self.power
    """
    for name, bins in (("InverseSpectrogram", 33), ("TwoSidedSynthesis", 32), ("PartsMagnitude", None)):
        result = _probed(tmp_path, source, name)
        assert result.get("backward") is True, (name, result)
        if bins:
            assert result["input_shapes"][0][1] == bins, result["input_shapes"]  # type: ignore[index]
    # the complex spectrogram is recorded as one: the harvest and synthesis rebuild the call from it
    result = _probed(tmp_path, source, "InverseSpectrogram")
    assert result["recipe"]["call"]["args"][0]["dtype"] == "complex64"  # type: ignore[index]


def test_a_map_whose_flattened_tokens_meet_a_fixed_table_is_refolded_to_its_size(tmp_path: Path) -> None:
    """A mixing matrix over 196 tokens (a 14 x 14 map), built for one resolution: the map the
    input flattens into must have as many tokens, in an einsum or an elementwise product."""
    source = """
        import torch
        import torch.nn as nn

        class TokenMixing(nn.Module):
            def __init__(self, num_tokens=196):
                super().__init__()
                self.mixing = nn.Parameter(torch.softmax(torch.rand(num_tokens, num_tokens), dim=-1))

            def forward(self, x):
                B, H, W, C = x.shape
                return torch.einsum("mn, bnc -> bmc", self.mixing, x.reshape(B, H * W, C)).reshape(B, H, W, C)

        class TokenBias(nn.Module):
            def __init__(self, num_tokens=196, dim=8):
                super().__init__()
                self.bias = nn.Parameter(torch.zeros(num_tokens, dim))

            def forward(self, x):
                B, C, H, W = x.shape
                return x.flatten(2).transpose(1, 2) + self.bias[:, :C]
    """
    for name in ("TokenMixing", "TokenBias"):
        result = _probed(tmp_path, source, name)
        assert result.get("backward") is True, (name, result)


def test_an_input_seen_first_in_an_einsum_gets_the_weights_sizes_of_heads_and_width(tmp_path: Path) -> None:
    """Per-head weights (heads x width x width) met by an input ``[B, L, H, E]``: einsum names one
    subscript at a time whose size the weights fix and the input, seen first, does not have."""
    source = """
        import torch
        import torch.nn as nn

        class HeadMixing(nn.Module):
            def __init__(self, channels, heads=8):
                super().__init__()
                self.weights = nn.Parameter(torch.rand(heads, channels // heads, channels // heads))

            def forward(self, q):
                B, L, H, E = q.shape
                return torch.einsum("blhe,heo->blho", q, self.weights)
    """
    result = _probed(tmp_path, source, "HeadMixing")
    assert result.get("backward") is True, result
    assert result["input_shapes"][0][2:] == [8, 2], result["input_shapes"]  # type: ignore[index]


MULTISCALE = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def sample_levels(value, shapes, locations, weights):
        # Deformable DETR's attention on the CPU: bilinear samples of each level, weighted
        B, _, heads, dim = value.shape
        _, Lq, _, levels, points, _ = locations.shape
        per_level = value.split([int(h) * int(w) for h, w in shapes], dim=1)
        grids = 2 * locations - 1
        samples = []
        for lvl, (h, w) in enumerate(shapes):
            v = per_level[lvl].flatten(2).transpose(1, 2).reshape(B * heads, dim, int(h), int(w))
            g = grids[:, :, :, lvl].transpose(1, 2).flatten(0, 1)
            samples.append(F.grid_sample(v, g, align_corners=False))
        weights = weights.transpose(1, 2).reshape(B * heads, 1, Lq, levels * points)
        out = (torch.stack(samples, dim=-2).flatten(-2) * weights).sum(-1)
        return out.view(B, heads * dim, Lq).transpose(1, 2)


    class DeformAttn(nn.Module):
        def __init__(self, d_model=32, n_levels=3, n_heads=2, n_points=2):
            super().__init__()
            self.n_levels, self.n_heads, self.n_points = n_levels, n_heads, n_points
            self.offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
            self.weights = nn.Linear(d_model, n_heads * n_levels * n_points)
            self.value_proj = nn.Linear(d_model, d_model)
            self.output_proj = nn.Linear(d_model, d_model)

        def forward(self, query, reference_points, input_flatten, input_spatial_shapes, input_level_start_index,
                    input_padding_mask=None):
            B, Lq, _ = query.shape
            _, Len_in, _ = input_flatten.shape
            assert (input_spatial_shapes[:, 0] * input_spatial_shapes[:, 1]).sum() == Len_in
            value = self.value_proj(input_flatten)
            if input_padding_mask is not None:
                value = value.masked_fill(input_padding_mask[..., None], 0.0)
            value = value.view(B, Len_in, self.n_heads, -1)
            offsets = self.offsets(query).view(B, Lq, self.n_heads, self.n_levels, self.n_points, 2)
            weights = self.weights(query).view(B, Lq, self.n_heads, self.n_levels * self.n_points).softmax(-1)
            normalizer = torch.stack([input_spatial_shapes[..., 1], input_spatial_shapes[..., 0]], -1)
            locations = reference_points[:, :, None, :, None, :] + offsets / normalizer[None, None, None, :, None, :]
            return self.output_proj(sample_levels(value, input_spatial_shapes, locations, weights))


    class EncoderLayer(nn.Module):
        def __init__(self, d_model=32, n_levels=3):
            super().__init__()
            self.self_attn = DeformAttn(d_model, n_levels)
            self.norm = nn.LayerNorm(d_model)

        def forward(self, src, pos, reference_points, spatial_shapes, level_start_index, padding_mask=None):
            src2 = self.self_attn(src + pos, reference_points, src, spatial_shapes, level_start_index, padding_mask)
            return self.norm(src + src2)


    class DecoderLayer(nn.Module):
        def __init__(self, d_model=32, n_levels=3):
            super().__init__()
            self.cross_attn = DeformAttn(d_model, n_levels)
            self.norm = nn.LayerNorm(d_model)

        def forward(self, tgt, tgt_query_pos=None, tgt_reference_points=None, memory=None, memory_key_padding_mask=None,
                    memory_level_start_index=None, memory_spatial_shapes=None):
            # sequences first, as torch's attention takes them: tgt (queries, batch, width)
            tgt2 = self.cross_attn((tgt + tgt_query_pos).transpose(0, 1), tgt_reference_points.transpose(0, 1),
                                   memory.transpose(0, 1), memory_spatial_shapes, memory_level_start_index,
                                   memory_key_padding_mask)
            return self.norm(tgt + tgt2.transpose(0, 1))
"""


def test_multi_scale_deformable_attention_gets_levels_whose_sides_starts_and_points_agree(tmp_path: Path) -> None:
    """Flattened levels with their sides (``spatial_shapes``) and starts, reference points per
    query and level, a padding mask: the attention, an encoder layer (batch first) and a decoder
    layer (sequences first, points queries first) of Deformable DETR's family."""
    for name in ("DeformAttn", "EncoderLayer", "DecoderLayer"):
        result = _probed(tmp_path, MULTISCALE, name)
        assert result.get("backward") is True, (name, result.get("error"), result.get("message"))


VIDEO = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ClipConv(nn.Module):
        # frames (B, T, C, H, W) as a 3-D convolution takes them: channels before frames
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(3, 8, (1, 3, 3), padding=(0, 1, 1))

        def forward(self, x):
            return self.conv(x.permute(0, 2, 1, 3, 4))

    class FrameFlow(nn.Module):
        # each frame of a clip through a 2-D stack that halves it three times
        def __init__(self):
            super().__init__()
            self.encode = nn.Sequential(*[nn.Conv2d(3 if i == 0 else 8, 8, 3, stride=2, padding=1) for i in range(3)])

        def forward(self, x):
            b, t, c, h, w = x.size()
            y = self.encode(x.view(-1, 3, h, w))
            return F.interpolate(y, size=(h // 8, w // 4)).view(b, t, 8, h // 8, w // 4)
"""


def test_a_clip_of_frames_gets_its_channels_where_the_block_reads_them(tmp_path: Path) -> None:
    """A video block takes frames (B, T, C, H, W): a 3-D convolution sees them permuted, so the
    axis that became its channels is set, not ours at 1; a view of frames to ``(-1, 3, h, w)``
    fixes the channels among our trailing axes; a stack that halves each frame several times gets
    larger frames, not a new clip."""
    sizes = Sizes()
    permuted = RuntimeError("Given groups=1, weight of size [64, 3, 1, 3, 3], expected input[2, 16, 7, 16, 16] "
                            "to have 3 channels, but got 16 channels instead")
    assert input_repairs(permuted, "float", (2, 7, 16, 16, 16), sizes, 16)[0] == ("float", (2, 7, 3, 16, 16))
    viewed = RuntimeError("shape '[-1, 3, 8, 8]' is invalid for input of size 8192")
    assert input_repairs(viewed, "float", (2, 8, 8, 8, 8), sizes, 16)[0] == ("float", (2, 8, 3, 8, 8))
    for name in ("ClipConv", "FrameFlow"):
        result = _probed(tmp_path, VIDEO, name)
        assert result.get("backward") is True, (name, result.get("message"))
        assert len(result["input_shapes"][0]) == 5 and result["input_shapes"][0][2] == 3, result["input_shapes"]  # type: ignore[index]


def test_an_embedding_of_one_number_per_sample_gets_a_vector(tmp_path: Path) -> None:
    """``x.ger(freqs)`` (``torch.outer``) embeds one number per sample, a noise level or a timestep:
    torch's "Expected 1-D argument" asks for a vector, whatever the first guess was."""
    result = _probed(tmp_path, """
        import torch
        import torch.nn as nn

        class NoiseLevelEmbedding(nn.Module):
            def __init__(self, num_channels=16, scale=16):
                super().__init__()
                self.freqs = nn.Parameter(torch.randn(num_channels // 2) * scale)

            def forward(self, x):
                x = x.ger((2 * torch.pi * self.freqs).to(x.dtype))
                return torch.cat([x.cos(), x.sin()], dim=1)
    """, "NoiseLevelEmbedding")
    assert result.get("backward") is True and result["input_shapes"][0] == [2], result  # type: ignore[index]


def test_a_rank_einops_states_is_read_off_its_error() -> None:
    """einops says how many axes a pattern takes ("Wrong shape: expected 3 dims. Received 4-dim
    tensor"): points as (batch, channels, points), not an image."""
    error = RuntimeError('Error while processing rearrange-reduction pattern "b (c g) n -> b c n g". Input tensor shape: '
                         "torch.Size([2, 1, 16, 16]). Additional info: {'g': 16}. Wrong shape: expected 3 dims. "
                         "Received 4-dim tensor.")
    assert input_repairs(error, "float", (2, 1, 16, 16), Sizes(), 16) == [("float", (2, 1, 16))]


def test_a_string_the_class_compares_an_argument_with_is_tried_where_its_else_raises(tmp_path: Path) -> None:
    """A chain of comparisons with strings whose ``else`` raises: in the constructor with a
    RuntimeError, for a parameter left at ``None`` (no guess reaches it), and in forward, where the
    message names the guessed value the block refuses."""
    source = """
        import torch
        import torch.nn as nn

        class Upsample(nn.Module):
            def __init__(self, layer_type, dim_in):
                super().__init__()
                if layer_type == 'none':
                    self.conv = nn.Identity()
                elif layer_type == 'half':
                    self.conv = nn.ConvTranspose2d(dim_in, dim_in, 3, stride=2, padding=1, output_padding=1)
                else:
                    raise RuntimeError('Got unexpected upsample type %s' % layer_type)

            def forward(self, x):
                return self.conv(x)

        class Periodic(nn.Module):
            def __init__(self, channels, activation=None):
                super().__init__()
                self.proj = nn.Conv1d(channels, channels, 1)
                if activation == "snake":
                    self.alpha = nn.Parameter(torch.ones(1, channels, 1))
                elif activation == "snakebeta":
                    self.alpha = nn.Parameter(torch.zeros(1, channels, 1))
                else:
                    raise NotImplementedError("activation incorrectly specified")

            def forward(self, x):
                return self.proj(x + torch.sin(self.alpha * x) ** 2)

        class RowDrop(nn.Module):
            def __init__(self, p, mode):
                super().__init__()
                self.p, self.mode = p, mode

            def forward(self, x):
                if self.mode == 'row':
                    keep = (torch.rand(x.shape[0], 1) > self.p).float()
                elif self.mode == 'batch':
                    keep = (torch.rand(1, 1) > self.p).float()
                else:
                    raise ValueError(f"mode has to be either 'batch' or 'row', but got {self.mode}")
                return x * keep.view(-1, *([1] * (x.dim() - 1)))
    """
    for name in ("Upsample", "Periodic", "RowDrop"):
        result = _probed(tmp_path, source, name)
        assert result.get("backward") is True, (name, result.get("message"))


def test_a_forward_parameter_left_at_none_that_the_code_uses_is_filled_as_a_required_one(tmp_path: Path) -> None:
    """``timesteps=None`` read for its device in a helper the forward calls; ``index=None`` embedded:
    each is filled as a required parameter of its name would be, once the error shows it used."""
    source = """
        import math
        import torch
        import torch.nn as nn

        def timestep_embedding(timesteps, dim):
            freqs = torch.exp(-math.log(10000) * torch.arange(dim // 2) / (dim // 2)).to(device=timesteps.device)
            args = timesteps[:, None].float() * freqs[None]
            return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

        class TinyUNet(nn.Module):
            def __init__(self, channels=4, model_channels=8):
                super().__init__()
                self.model_channels = model_channels
                self.time = nn.Linear(model_channels, channels)
                self.conv = nn.Conv2d(channels, channels, 3, padding=1)

            def forward(self, x, timesteps=None, context=None):
                t = self.time(timestep_embedding(timesteps, self.model_channels))
                return self.conv(x + t[:, :, None, None])

        class IndexEncoder(nn.Module):
            def __init__(self, n_ts=10, d_model=8):
                super().__init__()
                self.proj = nn.Linear(d_model, d_model)
                self.embedding = nn.Embedding(n_ts, d_model)

            def forward(self, x, index=None):
                return self.proj(x) + self.embedding(index.to(torch.long)).unsqueeze(1)
    """
    for name in ("TinyUNet", "IndexEncoder"):
        result = _probed(tmp_path, source, name)
        assert result.get("backward") is True, (name, result.get("message"))


def test_a_style_vector_reaches_its_linear_layer_through_methods_and_loops_over_layers(tmp_path: Path) -> None:
    """StyleTTS's adaptive instance norms: ``x`` of channels by steps, ``s`` one style vector per
    sample that a linear layer maps to scales. It reaches that layer directly, through a method of
    the block (``self._residual(x, s)``) and through a loop over the block's layers
    (``for norm, conv in zip(self.norms, self.convs)``)."""
    source = """
        import torch
        import torch.nn as nn

        class AdaIN1d(nn.Module):
            def __init__(self, style_dim, num_features):
                super().__init__()
                self.norm = nn.InstanceNorm1d(num_features, affine=False)
                self.fc = nn.Linear(style_dim, num_features * 2)

            def forward(self, x, s):
                h = self.fc(s)
                h = h.view(h.size(0), h.size(1), 1)
                gamma, beta = torch.chunk(h, chunks=2, dim=1)
                return (1 + gamma) * self.norm(x) + beta

        class ResBlock(nn.Module):
            def __init__(self, dim, style_dim=64):
                super().__init__()
                self.norm = AdaIN1d(style_dim, dim)
                self.conv = nn.Conv1d(dim, dim, 3, padding=1)

            def _residual(self, x, s):
                return self.conv(torch.relu(self.norm(x, s)))

            def forward(self, x, s):
                return x + self._residual(x, s)

        class Stack(nn.Module):
            def __init__(self, dim, style_dim=64, depth=2):
                super().__init__()
                self.norms = nn.ModuleList(AdaIN1d(style_dim, dim) for _ in range(depth))
                self.convs = nn.ModuleList(nn.Conv1d(dim, dim, 3, padding=1) for _ in range(depth))

            def forward(self, x, s):
                for norm, conv in zip(self.norms, self.convs):
                    x = x + conv(norm(x, s))
                return x
    """
    for name in ("AdaIN1d", "ResBlock", "Stack"):
        result = _probed(tmp_path, source, name)
        assert result.get("backward") is True, (name, result.get("message"))
        assert len(result["input_shapes"][0]) == 3 and len(result["input_shapes"][1]) == 2, result["input_shapes"]  # type: ignore[index]


def test_a_tensor_a_part_reads_by_a_key_it_keeps_is_given_as_a_dict(tmp_path: Path) -> None:
    """k-diffusion's conditioned layers: a sequence hands ``cond`` to each conditioned part, which
    reads ``cond[self.cond_key]``; the block itself never names the key. The failing line, seen in
    its frame, does: the argument becomes a dict holding the tensor under it."""
    source = """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Conditioned(nn.Module):
            pass

        class AdaNorm(Conditioned):
            def __init__(self, feats_in, channels, cond_key="cond"):
                super().__init__()
                self.cond_key = cond_key
                self.mapper = nn.Linear(feats_in, channels * 2)

            def forward(self, x, cond):
                weight, bias = self.mapper(cond[self.cond_key]).chunk(2, dim=-1)
                return F.group_norm(x, 1) * (weight[..., None, None] + 1) + bias[..., None, None]

        class Block(nn.Sequential, Conditioned):
            def __init__(self, feats_in, channels):
                super().__init__(AdaNorm(feats_in, channels), nn.GELU(), nn.Conv2d(channels, channels, 3, padding=1))

            def forward(self, x, cond):
                for part in self:
                    x = part(x, cond) if isinstance(part, Conditioned) else part(x)
                return x
    """
    result = _probed(tmp_path, source, "Block")
    assert result.get("backward") is True, result.get("message")


def test_a_point_cloud_gets_as_many_points_as_its_neighbourhoods_and_its_channels_beside_the_coordinates(tmp_path: Path) -> None:
    """An edge convolution over the 20 nearest points, whose features are joined with the three
    coordinates before a convolution built for both: ``topk`` of 20 among 16 points says the cloud
    is too small, and the convolution's channel count, less the three coordinates the join adds,
    is the input's. Per-scale lists of layer widths (``for c in mlp_list[i]``) are lists of lists."""
    source = """
        import torch
        import torch.nn as nn

        class EdgeConv(nn.Module):
            def __init__(self, in_channels=6, out_channels=16, k=20):
                super().__init__()
                self.k = k
                self.conv = nn.Conv2d(in_channels + 3, out_channels, 1)

            def forward(self, x):
                xyz = x[:, :3]
                d = torch.cdist(xyz.transpose(1, 2), xyz.transpose(1, 2))
                idx = d.topk(self.k, dim=-1, largest=False).indices
                n = x.shape[2]
                neighbours = torch.gather(x.unsqueeze(2).expand(-1, -1, n, -1), 3, idx.unsqueeze(1).expand(-1, x.shape[1], -1, -1))
                feat = torch.cat([neighbours - x.unsqueeze(-1), xyz.unsqueeze(-1).expand(-1, -1, -1, self.k)], 1)
                return self.conv(feat).max(-1)[0]

        class MultiScale(nn.Module):
            def __init__(self, in_channel, mlp_list):
                super().__init__()
                self.blocks = nn.ModuleList()
                for i in range(len(mlp_list)):
                    last, layers = in_channel, []
                    for out_channel in mlp_list[i]:
                        layers.append(nn.Conv1d(last, out_channel, 1))
                        last = out_channel
                    self.blocks.append(nn.Sequential(*layers))

            def forward(self, x):
                return torch.cat([block(x) for block in self.blocks], 1)
    """
    result = _probed(tmp_path, source, "EdgeConv")
    assert result.get("backward") is True, result.get("message")
    assert result["input_shapes"][0][1] == 6 and result["input_shapes"][0][2] >= 20, result["input_shapes"]  # type: ignore[index]
    result = _probed(tmp_path, source, "MultiScale")
    assert result.get("backward") is True, result.get("message")


def test_a_setting_of_a_stand_in_config_the_forward_refuses_is_one_it_compares_with(tmp_path: Path) -> None:
    """Time-series models built from ``configs`` keep ``configs.task_name`` and their forward
    compares it with the tasks they implement, else raises; the message names no value. The
    block's own ``raise`` in its forward is enough to try the strings that function compares,
    before those of its constructor (``classification`` there builds another head)."""
    source = """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self, configs):
                super().__init__()
                self.task_name = configs.task_name
                if self.task_name == 'classification':
                    self.head = nn.Linear(configs.d_model, configs.num_class)
                self.proj = nn.Linear(configs.d_model, configs.d_model)

            def forward(self, x):
                if self.task_name == 'long_term_forecast' or self.task_name == 'short_term_forecast':
                    return self.proj(x)
                raise ValueError('Only forecast tasks implemented yet')
    """
    result = _probed(tmp_path, source, "Model")
    assert result.get("backward") is True, result.get("message")


def test_a_recurrent_blocks_state_is_the_one_it_makes_for_the_batch(tmp_path: Path) -> None:
    """S4's cells take ``(input, state)`` and make the state with ``default_state(*batch_shape)``
    (a bare ``h`` of a plain cell too, no map's height); a language model's ``init_hidden(bsz)``
    makes an LSTM's pair."""
    source = """
        import torch
        import torch.nn as nn

        class Cell(nn.Module):
            def __init__(self, d_input, d_model):
                super().__init__()
                self.d_model = d_model
                self.W_hx = nn.Linear(d_input, d_model)
                self.W_hh = nn.Linear(d_model, d_model)

            def default_state(self, *batch_shape, device=None):
                return torch.zeros(*batch_shape, self.d_model, device=device)

            def forward(self, input, h):
                hidden = torch.tanh(self.W_hx(input) + self.W_hh(h))
                return hidden, hidden

        class MemoryCell(Cell):
            def default_state(self, *batch_shape, device=None):
                h = torch.zeros(*batch_shape, self.d_model, device=device)
                return h, h.clone(), 0

            def forward(self, input, state):
                h, m, step = state
                h = torch.tanh(self.W_hx(input) + self.W_hh(h) + m)
                return h, (h, m, step + 1)

        class LanguageModel(nn.Module):
            def __init__(self, ntoken, ninp=8, nhid=8):
                super().__init__()
                self.nhid = nhid
                self.encoder = nn.Embedding(ntoken, ninp)
                self.rnn = nn.LSTM(ninp, nhid)
                self.decoder = nn.Linear(nhid, ntoken)

            def init_hidden(self, bsz):
                weight = next(self.parameters())
                return weight.new_zeros(1, bsz, self.nhid), weight.new_zeros(1, bsz, self.nhid)

            def forward(self, input, hidden):
                output, hidden = self.rnn(self.encoder(input), hidden)
                return self.decoder(output), hidden
    """
    for name in ("Cell", "MemoryCell", "LanguageModel"):
        result = _probed(tmp_path, source, name)
        assert result.get("backward") is True, (name, result.get("message"))


def test_a_backward_that_meets_an_optional_input_left_at_none_is_run_again_with_it(tmp_path: Path) -> None:
    """Latent diffusion's checkpointed attention runs forward without its ``context`` and saves the
    inputs for a backward pass that detaches each (``None.detach()``): the call is made again with
    the optional tensors given, and that call is what the record holds."""
    source = """
        import torch
        import torch.nn as nn

        class Checkpoint(torch.autograd.Function):
            @staticmethod
            def forward(ctx, fn, *inputs):
                ctx.fn, ctx.inputs = fn, inputs
                with torch.no_grad():
                    return fn(*inputs)

            @staticmethod
            def backward(ctx, grad):
                inputs = [x.detach().requires_grad_(True) for x in ctx.inputs]
                with torch.enable_grad():
                    out = ctx.fn(*inputs)
                return (None, *torch.autograd.grad(out, inputs, grad, allow_unused=True))

        class CrossBlock(nn.Module):
            def __init__(self, dim=8):
                super().__init__()
                self.q = nn.Linear(dim, dim)
                self.k = nn.Linear(dim, dim)

            def _forward(self, x, context=None):
                context = x if context is None else context
                return x + torch.softmax(self.q(x) @ self.k(context).transpose(1, 2), -1) @ context

            def forward(self, x, context=None):
                return Checkpoint.apply(self._forward, x, context)
    """
    result = _probed(tmp_path, source, "CrossBlock")
    assert result.get("backward") is True, result.get("message")
    assert "context" in result["keyword_shapes"], result["keyword_shapes"]  # type: ignore[operator]


class AttendsToImage(nn.Module):
    """Points attending to an image, documented as papers write shapes, without brackets (SAM's
    two-way transformer); and its attention, whose ``k`` holds keys, not indices."""

    def __init__(self, embedding_dim: int) -> None:
        super().__init__()
        self.attn = QueriesKeysValues(embedding_dim)

    def forward(self, image_embedding: torch.Tensor, image_pe: torch.Tensor, point_embedding: torch.Tensor) -> torch.Tensor:
        """
        Args:
          image_embedding (torch.Tensor): image to attend to. Should be shape
            B x embedding_dim x h x w for any h and w.
          image_pe (torch.Tensor): the positional encoding to add to the image. Must
            have the same shape as image_embedding.
          point_embedding (torch.Tensor): the embedding to add to the query points.
            Must have shape B x N_points x embedding_dim for any N_points.
        """
        bs, c, h, w = image_embedding.shape
        bs, n, c = point_embedding.shape
        keys = (image_embedding + image_pe).flatten(2).permute(0, 2, 1)
        return self.attn(point_embedding, keys, keys)


class QueriesKeysValues(nn.Module):
    def __init__(self, embedding_dim: int) -> None:
        super().__init__()
        self.q_proj, self.k_proj = nn.Linear(embedding_dim, embedding_dim), nn.Linear(embedding_dim, embedding_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.q_proj(q) @ self.k_proj(k).transpose(1, 2), -1) @ v


def test_shapes_written_without_brackets_and_keys_beside_queries() -> None:
    from nnrag.validator.probing.documented import Documented, documented_inputs
    from nnrag.validator.probing.probe import _Budget, _forward

    image = Documented(("B", "embedding_dim", "h", "w"))
    assert documented_inputs(AttendsToImage(16)) == {
        "image_embedding": image, "image_pe": image, "point_embedding": Documented(("B", "N_points", "embedding_dim"))}
    found, error = _forward(AttendsToImage(16), {"embedding_dim": 16}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    embedding, pe, points = found[0]
    assert embedding.shape == pe.shape and embedding.dim() == 4 and points.dim() == 3, [t.shape for t in found[0]]
    found, error = _forward(QueriesKeysValues(16), {"embedding_dim": 16}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None and all(t.is_floating_point() for t in found[0])


def test_constructors_left_off_the_gpu_passed_through_and_inputs_split_only_sometimes(tmp_path: Path) -> None:
    """A device that defaults to a GPU at construction is the CPU; a subclass that passes
    ``*args, **kwargs`` to its base is built with the base's arguments; the layer a forward hands
    its input to decides its kind also where a branch renames it first."""
    source = """
        import torch
        from torch import nn

        class OnDeviceAtInit(nn.Module):
            def __init__(self, n_state: int, device: torch.device = torch.device("cuda")) -> None:
                super().__init__()
                self.g = nn.Parameter(torch.ones((n_state,), device=device))

            def forward(self, x):
                return x * self.g

        class Base(nn.Module):
            def __init__(self, in_channels, model_channels, out_channels=None):
                super().__init__()
                self.conv = nn.Conv2d(in_channels, model_channels, 3, padding=1)

            def forward(self, x):
                return self.conv(x)

        class Doubled(Base):
            def __init__(self, *args, **kwargs):
                if "in_channels" in kwargs:
                    kwargs = dict(kwargs)
                    kwargs["in_channels"] = kwargs["in_channels"] * 2
                else:
                    args = list(args)
                    args[1] = args[1] * 2
                super().__init__(*args, **kwargs)

        class Generator(nn.Module):  # its class embedding registered before the layer z meets
            def __init__(self, dim_z: int = 12, n_classes: int = 10, hier: bool = False) -> None:
                super().__init__()
                self.hier = hier
                self.shared = nn.Embedding(n_classes, 8)
                self.linear = nn.Linear(dim_z, 32)

            def forward(self, z, y):
                if self.hier:
                    zs = torch.split(z, 4, 1)
                    z = zs[0]
                return self.linear(z) + y.float().mean()
    """
    assert _probed(tmp_path, source, "OnDeviceAtInit")["init_args"]["device"] == "'cpu'"
    doubled = _probed(tmp_path, source, "Doubled")
    assert doubled["backward"] and {"in_channels", "model_channels"} <= set(doubled["init_args"]), doubled
    generator = _probed(tmp_path, source, "Generator")
    assert generator["backward"] and generator["input_dtypes"][0] == "float32", generator


class UpJoined(nn.Module):
    """A UNet decoder step: the upsampled input joined with the encoder's skip (pix2pix's
    ``UNetUp``), whose side is twice the input's."""

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(in_size, out_size, 4, 2, 1)

    def forward(self, x: torch.Tensor, skip_input: torch.Tensor) -> torch.Tensor:
        return torch.cat((self.up(x), skip_input), 1)


class EightDown(nn.Module):
    """Eight halvings, each normalised per instance: a map must keep more than one element."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Sequential(*(nn.Sequential(nn.Conv2d(3 if i == 0 else 8, 8, 4, 2, 1), nn.InstanceNorm2d(8))
                                    for i in range(7)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(x)


class ProjectsByClass(nn.Module):
    """A discriminator whose class labels default to None and are embedded all the same."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.embed = nn.Conv2d(3, 8, 3), nn.Embedding(10, 8)

    def forward(self, x: torch.Tensor, y: Optional[torch.Tensor] = None) -> torch.Tensor:
        h = self.conv(x).sum([2, 3])
        return (h * self.embed(y)).sum(1)


def test_a_skip_sized_as_its_join_wants_a_map_not_pooled_away_and_labels_left_at_none() -> None:
    from nnrag.validator.probing.probe import _Budget, _forward

    found, error = _forward(UpJoined(16, 16), {"in_size": 16, "out_size": 16}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    x, skip = found[0]
    assert skip.shape[2:] == (2 * x.shape[2], 2 * x.shape[3]), (x.shape, skip.shape)
    found, error = _forward(EightDown(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None and found[0][0].shape[-1] >= 256, found[0][0].shape
    found, error = _forward(ProjectsByClass(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None and found[1]["y"].dtype == torch.long, found[1]


def test_an_activation_class_given_where_forward_calls_it_is_an_instance(tmp_path: Path) -> None:
    """``self.conv1(self.activation(x))`` with ``activation=ReLU``: the call builds a layer, and
    the convolution says so in its own words (``conv2d() received ... got (ReLU, Parameter, ...)``)."""
    source = """
        from torch import nn

        class ResidualConvUnit(nn.Module):
            def __init__(self, features, activation, bn):
                super().__init__()
                self.conv1 = nn.Conv2d(features, features, 3, padding=1, bias=not bn)
                self.activation = activation

            def forward(self, x):
                return self.conv1(self.activation(x)) + x
    """
    unit = _probed(tmp_path, source, "ResidualConvUnit")
    assert unit["init_args"]["activation"] == "ReLU()" and unit["backward"], unit


class ConditionedByLabel(nn.Module):
    """A conditional GAN's generator: the noise joined with a label's embedding before its first
    linear layer, whose width counts both."""

    def __init__(self) -> None:
        super().__init__()
        self.label_emb = nn.Embedding(10, 10)
        self.fc = nn.Linear(100 + 10, 32)

    def forward(self, noise: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cat((self.label_emb(labels), noise), -1))


def test_an_input_joined_with_a_width_of_the_blocks_own_before_a_linear_layer() -> None:
    from nnrag.validator.probing.probe import _Budget, _forward

    found, error = _forward(ConditionedByLabel(), {}, Sizes(), _Budget(40, 30.0))
    assert error is None and found is not None
    noise, labels = found[0]
    assert noise.shape[-1] == 100 and labels.dtype == torch.long, (noise.shape, labels.dtype)


def test_an_argument_read_for_several_settings_is_a_stand_in_settings_object(tmp_path: Path) -> None:
    """``Generator(h)`` reading ``h.num_mels`` and ``h.upsample_initial_channel`` where no
    settings file says what ``h`` is: a stand-in config answers each setting with the guess its
    name suggests."""
    source = """
        from torch import nn

        class Generator(nn.Module):
            def __init__(self, h):
                super().__init__()
                self.h = h
                self.conv_pre = nn.Conv1d(h.num_mels, h.upsample_initial_channel, 7, 1, padding=3)
                self.ups = nn.ModuleList(nn.ConvTranspose1d(h.upsample_initial_channel, h.upsample_initial_channel, 4, 2, 1)
                                         for _ in range(h.num_upsamples))

            def forward(self, x):
                x = self.conv_pre(x)
                for up in self.ups:
                    x = up(x)
                return x
    """
    generator = _probed(tmp_path, source, "Generator")
    assert generator["init_args"]["h"].startswith("AutoConfig(") and generator["backward"], generator


def test_a_pass_through_takes_its_nearest_constructors_arguments_and_a_branch_that_embeds_counts(tmp_path: Path) -> None:
    """A subclass of torch's ``Conv1d`` that passes ``*args, **kwargs`` takes ``Conv1d``'s
    arguments, not those ``Conv1d`` gives ``_ConvNd`` itself (``transposed``); a forward whose
    default branch embeds its input (indices of symbols) before the convolution takes indices."""
    source = """
        import torch
        from torch import nn

        class Conv1d(nn.Conv1d):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)

        class SymbolGenerator(nn.Module):
            def __init__(self, in_channels: int = 16, num_embs: int = 10) -> None:
                super().__init__()
                self.num_embs = num_embs
                self.emb = nn.Embedding(num_embs, in_channels)
                self.input_conv = nn.Conv1d(in_channels, 8, 3, padding=1)

            def forward(self, c):
                if self.num_embs > 0:
                    c = self.emb(c.long()).transpose(1, 2)
                return self.input_conv(c)
    """
    conv = _probed(tmp_path, source, "Conv1d")
    assert conv["backward"] and "transposed" not in conv["init_args"], conv
    symbols = _probed(tmp_path, source, "SymbolGenerator")
    assert symbols["backward"] and symbols["input_dtypes"][0] == "int64", symbols
