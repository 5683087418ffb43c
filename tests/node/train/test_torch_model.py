"""`swarmnode.TorchModel` (node/train/model/torch_model.py): a torch module's parameters as views
into the one flat buffer the swarm trains through DLPack. Skipped where torch is not installed (it
is an optional extra: `pip install swarmnode[torch]`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from swarmnode.kernels.optim import make_optimizer  # noqa: E402
from swarmnode.node.train.build import build_trainer  # noqa: E402
from swarmnode.node.train.config import NodeConfig  # noqa: E402
from swarmnode.node.train.data.datasets import load_dataset  # noqa: E402
from swarmnode.node.train.model.torch_model import TorchModel  # noqa: E402
from swarmnode.node.train.model.user_model import UserModel  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)
    )


def _address(a) -> int:
    return a.__array_interface__["data"][0]


def test_the_modules_weights_are_views_into_the_swarms_vector():
    net = _net()
    model = UserModel(TorchModel(net, torch.nn.functional.cross_entropy), "model t")
    vec = model.params.data  # what the exchange snapshots and the optimizer updates
    assert isinstance(vec, np.ndarray) and vec.size == sum(p.numel() for p in net.parameters())
    assert _address(vec) == model.user.params.data_ptr()  # DLPack: the same memory
    vec[...] = 0.5  # as a received mix would
    assert all(bool((p == 0.5).all()) for p in net.parameters())
    assert model.params.views["0"].shape == (32, 64)  # shapes: the lowrank codec's segments


def test_its_gradient_is_torchs_and_lands_in_the_flat_buffer():
    data = load_dataset("digits")
    x, y = data.X_train[:64], data.y_train[:64]
    model = UserModel(TorchModel(_net(), torch.nn.functional.cross_entropy), "model t")
    loss = model.loss_and_grad(x, y)
    reference = _net()
    ref_loss = torch.nn.functional.cross_entropy(
        reference(torch.from_numpy(x)), torch.from_numpy(y)
    )
    ref_loss.backward()
    expected = torch.cat([p.grad.reshape(-1) for p in reference.parameters()]).numpy()
    assert loss == pytest.approx(float(ref_loss.detach()), rel=1e-6)
    np.testing.assert_allclose(model.params.grad, expected, rtol=1e-5, atol=1e-7)
    # twice: backward accumulates, the adapter zeroes first
    model.loss_and_grad(x, y)
    np.testing.assert_allclose(model.params.grad, expected, rtol=1e-5, atol=1e-7)
    flat = model.user._grad
    for p in model.user.module.parameters():  # still views into the flat gradient buffer
        assert flat.data_ptr() <= p.grad.data_ptr() < flat.data_ptr() + flat.numel() * 4


def test_swarmnodes_optimizer_trains_the_module_without_copies(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    cfg = NodeConfig(model="own_torch_model:build", data="digits", device="cpu").validate()
    trainer, data, _ = build_trainer(cfg)
    before = _address(trainer.model.params.data)
    for _ in range(600):
        trainer.step()
    assert _address(trainer.model.params.data) == before == trainer.model.user.params.data_ptr()
    assert trainer.evaluate(data.X_test, data.y_test)[1] >= 0.90


def test_frozen_parameters_stay_out_and_adamw_works_too():
    net = _net()
    net[1].bias.requires_grad_(False)
    model = UserModel(TorchModel(net, torch.nn.functional.cross_entropy), "model t")
    assert model.params.size == 64 * 32 + 32 * 10 + 10
    opt = make_optimizer("adamw", model.params, 1e-3)
    data = load_dataset("digits")
    frozen = net[1].bias.detach().clone()
    model.loss_and_grad(data.X_train[:32], data.y_train[:32])
    opt.step()
    assert torch.equal(net[1].bias, frozen)


def test_a_regression_module_reports_no_accuracy():
    net = torch.nn.Linear(4, 1)
    model = TorchModel(net, lambda out, y: torch.nn.functional.mse_loss(out[:, 0], y))
    x = np.ones((5, 4), np.float32)
    loss, acc = UserModel(model, "model r").evaluate(x, np.zeros(5, np.float32))
    assert loss >= 0 and np.isnan(acc)


@pytest.mark.gpu
def test_on_cuda_the_vector_is_a_cupy_view_of_the_modules_memory():
    cupy = pytest.importorskip("cupy")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    model = UserModel(
        TorchModel(_net(), torch.nn.functional.cross_entropy, device="cuda:0"), "model t"
    )
    assert isinstance(model.params.data, cupy.ndarray) and model.backend.is_gpu
    assert model.params.data.data.ptr == model.user.params.data_ptr()
    data = load_dataset("digits")
    x, y = cupy.asarray(data.X_train[:32]), cupy.asarray(data.y_train[:32])
    assert np.isfinite(model.loss_and_grad(x, y))
