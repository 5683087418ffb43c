"""Model specs: the grammar builds what it says, and bad specs give one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.backend import CPU
from node.errors import ModelSpecError
from node.models import build_model

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("spec", "n_params"),
    [
        ("linear", 64 * 10 + 10),
        ("mlp:", 64 * 10 + 10),
        ("mlp:32", 64 * 32 + 32 + 32 * 10 + 10),
        ("mlp:32,16/gelu", 64 * 32 + 32 + 32 * 16 + 16 + 16 * 10 + 10),
        ("cnn1d:4k3,p2,16", 4 * 8 * 3 + 4 + (4 * 4) * 16 + 16 + 16 * 10 + 10),
    ],
)
def test_specs_build_the_right_number_of_parameters(spec, n_params):
    model = build_model(spec, (8, 8), 10, CPU, seed=0)
    assert model.params.size == n_params
    out = model.forward(np.zeros((3, 8, 8), np.float32))
    assert out.shape == (3, 10)


def test_cnn1d_on_flat_signals():
    model = build_model("cnn1d:4k5,p2", (20,), 3, CPU, seed=0)
    assert model.forward(np.zeros((2, 20), np.float32)).shape == (2, 3)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("resnet:50", "unknown model kind 'resnet'"),
        ("mlp:12x", "bad layer width '12x'"),
        ("mlp:0", "bad layer width '0'"),
        ("mlp:32/swish", "unknown activation 'swish'"),
        ("cnn1d:64", "needs at least one conv token"),
        ("cnn1d:4k4", "odd kernel"),
        ("cnn1d:4k3,16,p2", "after a dense layer"),
        ("linear:5", "takes no layers"),
        ("", "empty model spec"),
        ("cnn1d:4k3,p16", "does not fit"),
    ],
)
def test_bad_specs_name_the_problem(spec, needle):
    with pytest.raises(ModelSpecError, match=needle) as info:
        build_model(spec, (8, 8), 10, CPU, seed=0)
    assert "\n" not in str(info.value)
