"""Model specs: the grammar builds what it says, and bad specs give one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels.backend import CPU
from swarmnode.kernels.layers import (
    GELU,
    Conv1d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool1d,
    MaxPool2d,
    ReLU,
    Reshape,
    Tanh,
)
from swarmnode.node.train.errors import ConfigError, ModelSpecError
from swarmnode.node.train.model.builtin import build_model

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("spec", "n_params"),
    [
        ("linear", 64 * 10 + 10),
        ("mlp:", 64 * 10 + 10),
        ("mlp:32", 64 * 32 + 32 + 32 * 10 + 10),
        ("mlp:32,16/gelu", 64 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10),
        (" MLP: 32 , 16 / Tanh ", 64 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10),
        # digits are 8 channels of length 8: conv 8->4 (k3), pool to length 4, dense 16
        ("cnn1d:4k3,p2,16", 4 * 8 * 3 + 4 + (4 * 4) * 16 + 16 + 16 * 10 + 10),
        ("cnn1d:4k3,8k5", 4 * 8 * 3 + 4 + 8 * 4 * 5 + 8 + 8 * 8 * 10 + 10),
        # digits are 8x8x1 images: conv 1->4 (3x3), pool to 4x4, dense 16
        ("cnn2d:4k3,p2,16", 9 * 1 * 4 + 4 + (4 * 4 * 4) * 16 + 16 + 16 * 10 + 10),
        ("cnn2d:8x8x1,4k3,8k5", 9 * 4 + 4 + 25 * 4 * 8 + 8 + 8 * 8 * 8 * 10 + 10),
        ("cnn2d:4x16,4k3,p2/tanh", 9 * 4 + 4 + (2 * 8 * 4) * 10 + 10),
    ],
)
def test_specs_build_the_right_number_of_parameters(spec, n_params):
    model = build_model(spec, (8, 8), 10, CPU, seed=0)
    assert model.params.size == n_params
    out = model.forward(np.zeros((3, 8, 8), np.float32))
    assert out.shape == (3, 10)


def test_the_layers_are_what_the_spec_says():
    kinds = [type(layer) for layer in build_model("mlp:32,16/gelu", (8, 8), 10, CPU, 0).layers]
    assert kinds[1:] == [Linear, GELU, Linear, GELU, Linear]
    cnn = build_model("cnn1d:16k5,p2,32k3,p2,64/tanh", (8, 8), 10, CPU, 0).layers
    assert [type(layer) for layer in cnn if type(layer) in (Conv1d, MaxPool1d, Tanh, ReLU)] == [
        Conv1d,
        Tanh,
        MaxPool1d,
        Conv1d,
        Tanh,
        MaxPool1d,
        Tanh,
    ]
    convs = [layer for layer in cnn if isinstance(layer, Conv1d)]
    assert [(c.out_channels, c.k) for c in convs] == [(16, 5), (32, 3)]


def test_cnn2d_layers_are_what_the_spec_says():
    model = build_model("cnn2d:16k3,p2,32k5,p2,64/gelu", (8, 8), 10, CPU, 0)
    assert [type(layer) for layer in model.layers] == [
        Reshape,
        Conv2d,
        GELU,
        MaxPool2d,
        Conv2d,
        GELU,
        MaxPool2d,
        Flatten,
        Linear,
        GELU,
        Linear,
    ]
    convs = [layer for layer in model.layers if isinstance(layer, Conv2d)]
    assert [(c.out_channels, c.k) for c in convs] == [(16, 3), (32, 5)]
    assert model.layers[0].shape == (8, 8, 1)  # one channel: the 8x8 digit is one image
    assert model.params.views["1.W"].shape == (3 * 3 * 1, 16)
    assert model.params.views["4.W"].shape == (5 * 5 * 16, 32)
    assert model.params.views["8.W"].shape == (2 * 2 * 32, 64)  # 8 -> 4 -> 2 after the pools


@pytest.mark.parametrize(
    ("spec", "shape", "image"),
    [
        ("cnn2d:4k3", (8, 8), (8, 8, 1)),  # (H, W): one channel
        ("cnn2d:4k3", (6, 5, 3), (6, 5, 3)),  # (H, W, C): channels last, as given
        ("cnn2d:8x8,4k3", (64,), (8, 8, 1)),  # flat samples need the image shape
        ("cnn2d:6x5x3,4k3", (90,), (6, 5, 3)),
        ("cnn2d:4x16,4k3", (8, 8), (4, 16, 1)),  # the token reshapes (row-major) any samples
        ("cnn2d: 2 X 32 X 1 , 4k3", (8, 8), (2, 32, 1)),
    ],
)
def test_cnn2d_image_shape_comes_from_the_data_or_the_spec(spec, shape, image):
    model = build_model(spec, shape, 3, CPU, seed=0)
    assert model.layers[0].shape == image
    assert model.params.views["1.W"].shape == (9 * image[2], 4)
    x = np.random.default_rng(0).random((2, *shape), dtype=np.float32)
    assert model.forward(x).shape == (2, 3)


def test_cnn2d_reads_pixels_row_major_in_the_image_shape():
    """With a 1x1 conv of one channel the first layer sees each pixel alone: the same image
    given as 8x8 samples or as 64 flat values (with the `8x8` token) gives the same logits."""
    x = np.random.default_rng(1).random((3, 8, 8), dtype=np.float32)
    square = build_model("cnn2d:2k3,p2,8", (8, 8), 10, CPU, seed=4)
    flat = build_model("cnn2d:8x8,2k3,p2,8", (64,), 10, CPU, seed=4)
    np.testing.assert_array_equal(square.params.data, flat.params.data)
    np.testing.assert_array_equal(square.forward(x), flat.forward(x.reshape(3, 64)))
    assert not np.allclose(square.forward(x), square.forward(x.transpose(0, 2, 1)))


def test_digits_rows_are_the_conv_channels():
    """Permuting the 8 rows of an image (= channels) changes the output; the conv weight of
    layer 0 spans 8 input channels."""
    model = build_model("cnn1d:4k3", (8, 8), 10, CPU, seed=0)
    assert model.params.views["0.W"].shape == (4, 8 * 3)
    x = np.random.default_rng(0).random((2, 8, 8), dtype=np.float32)
    assert not np.allclose(model.forward(x), model.forward(x[:, ::-1, :]))


def test_cnn1d_on_flat_signals_and_mlp_on_any_shape():
    model = build_model("cnn1d:4k5,p2", (20,), 3, CPU, seed=0)
    assert model.forward(np.zeros((2, 20), np.float32)).shape == (2, 3)
    assert model.params.views["1.W"].shape == (4, 1 * 5)  # one channel in
    assert build_model("mlp:4", (2, 3, 4), 5, CPU, seed=0).params.size == 24 * 4 + 4 + 4 * 5 + 5


def test_seed_decides_the_initial_parameters():
    a = build_model("cnn1d:4k3,p2,8", (8, 8), 10, CPU, seed=7)
    b = build_model("cnn1d:4k3,p2,8", (8, 8), 10, CPU, seed=7)
    c = build_model("cnn1d:4k3,p2,8", (8, 8), 10, CPU, seed=8)
    np.testing.assert_array_equal(a.params.data, b.params.data)
    assert not np.array_equal(a.params.data, c.params.data)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (
            "resnet:50",
            "unknown model kind 'resnet' in 'resnet:50' \\(expected mlp, cnn1d, cnn2d, linear\\)",
        ),
        ("mlp:12x", "bad layer width '12x'"),
        ("mlp:0", "bad layer width '0'"),
        ("mlp:-3", "bad layer width '-3'"),
        ("mlp:32/swish", "unknown activation 'swish'"),
        ("cnn1d:64", "needs at least one conv token"),
        ("cnn1d:", "needs at least one conv token"),
        ("cnn1d:4k4", "odd kernel"),
        ("cnn1d:0k3", "channels >= 1"),
        ("cnn1d:4k3,p0", "size must be >= 1"),
        ("cnn1d:4k3,16,p2", "after a dense layer"),
        ("cnn1d:4k3,q2", "bad layer width 'q2'"),
        # Non-ASCII digits: str.isdigit() accepted them, then int() crashed with a ValueError.
        ("mlp:\u00b2", "bad layer width '\u00b2'"),
        ("mlp:\u0663", "bad layer width '\u0663'"),
        ("cnn1d:4k3,\u00b2", "bad layer width '\u00b2'"),
        ("cnn1d:\u0664k3", "needs at least one conv token"),
        ("cnn1d:4k3,p\u00b2", "bad layer width 'p\u00b2'"),
        ("cnn2d:", "cnn2d needs at least one conv token like 16k3"),
        ("cnn2d:8x8,64", "cnn2d needs at least one conv token"),
        ("cnn2d:4k4", "odd kernel"),
        ("cnn2d:4k3,p0", "size must be >= 1"),
        ("cnn2d:4k3,16,p2", "after a dense layer"),
        ("cnn2d:4k3,p16", "maxpool2d 16 cannot pool per-sample shape \\(8, 8, 4\\)"),
        ("cnn2d:4k3,8x8", "image shape '8x8' must be the first token"),
        ("cnn2d:8x8x2,4k3", "'8x8x2' in 'cnn2d:8x8x2,4k3' holds 128 values but each sample has 64"),
        ("cnn2d:0x8,4k3", "give HxW or HxWxC with H\\*W\\*C = 64"),
        ("cnn2d:8x8x,4k3", "bad image shape '8x8x' .* \\(expected HxW or HxWxC, e.g. 8x8"),
        ("cnn2d:4k3,8x\u00b2", "bad image shape '8x\u00b2'"),
        ("linear:5", "takes no layers"),
        ("", "empty model spec"),
        ("   ", "empty model spec"),
        ("cnn1d:4k3,p16", "does not fit inputs of shape \\(8, 8\\)"),
        ("mlp:100000,100000", "parameters \\(at most"),
        ("mlp:99999999999999999999", "parameters \\(at most"),
    ],
)
def test_bad_specs_name_the_problem(spec, needle):
    with pytest.raises(ModelSpecError, match=needle) as info:
        build_model(spec, (8, 8), 10, CPU, seed=0)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ConfigError)  # the CLI prints it as one line, exit 2


@pytest.mark.parametrize(
    ("shape", "n_classes", "needle"),
    [
        ((8, 8), 1, "n_classes >= 2"),
        ((8, 8), 2.5, "n_classes >= 2"),
        ((), 10, "non-empty"),
        ((8, 0), 10, "dims >= 1"),
        (("a",), 10, "tuple of ints"),
    ],
)
def test_bad_shapes_and_class_counts(shape, n_classes, needle):
    with pytest.raises(ModelSpecError, match=needle):
        build_model("mlp:8", shape, n_classes, CPU, seed=0)


def test_cnn1d_refuses_images_with_more_axes():
    with pytest.raises(ModelSpecError, match="cnn1d reads"):
        build_model("cnn1d:4k3", (3, 8, 8), 10, CPU, seed=0)


@pytest.mark.parametrize(
    ("spec", "shape", "fix"),
    [
        ("cnn2d:16k3,p2/tanh", (64,), "e.g. cnn2d:8x8,16k3,p2/tanh"),
        ("cnn2d:16k3", (60,), "e.g. cnn2d:HxW,16k3"),
        ("cnn2d:4k3", (2, 3, 4, 5), "e.g. cnn2d:HxW,4k3"),
    ],
)
def test_cnn2d_on_samples_that_are_not_images_names_the_fix(spec, shape, fix):
    with pytest.raises(
        ModelSpecError, match="cnn2d reads \\(H, W\\) or \\(H, W, C\\) images"
    ) as info:
        build_model(spec, shape, 10, CPU, seed=0)
    assert fix in str(info.value) and "\n" not in str(info.value)


def test_non_string_spec():
    with pytest.raises(ModelSpecError, match="must be a string"):
        build_model(None, (8, 8), 10, CPU, seed=0)  # type: ignore[arg-type]
