"""A user's own model (`swarmnode.Model`) in the trainer: the numpy example learns the digits,
every wrong answer of a user's code is one clear error naming their file and line, and nothing
wrong ever reaches the parameters."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from swarmnode.kernels.backend import CPU
from swarmnode.kernels.optim import make_optimizer
from swarmnode.node.peer.state_sync import param_segments
from swarmnode.node.train.build import build_trainer, run_meta
from swarmnode.node.train.config import NodeConfig
from swarmnode.node.train.data.datasets import load_dataset
from swarmnode.node.train.errors import ConfigError, DivergedError, UserCodeError
from swarmnode.node.train.model.user_model import UserModel
from swarmnode.node.train.sources import resolve_model
from swarmnode.node.train.trainer import Trainer

import swarmnode
from tests.node.train import user_models

HELPER = inspect.getsourcefile(user_models)
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/ and this folder importable, as PYTHONPATH makes them for `swarmnode start`."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


def _trainer(model, data="digits", **kw) -> Trainer:
    cfg = NodeConfig(model=model, data=data, device="cpu", **kw).validate()
    return build_trainer(cfg)[0]


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_the_numpy_example_learns_the_digits_alone(on_path):
    data = load_dataset("digits")
    trainer = _trainer("own_numpy_model:build", steps=800)
    for _ in range(800):
        trainer.step()
    assert trainer.evaluate(data.X_test, data.y_test)[1] >= 0.90
    assert isinstance(trainer.model, UserModel)
    assert isinstance(trainer.model.user, swarmnode.Model)  # the protocol, checked at runtime


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_the_swarm_trains_the_users_own_buffer(optimizer):
    """params is the user's vector itself: what any of the optimizers writes, their layers
    read."""
    user = user_models.build()
    model = UserModel(user, "model m")
    assert model.params.data is user.params
    assert np.shares_memory(user.W1, model.params.data)
    opt = make_optimizer(optimizer, model.params, 0.1)
    before = user.W1.copy()
    data = load_dataset("digits")
    model.loss_and_grad(data.X_train[:32], data.y_train[:32])
    opt.step()
    assert not np.array_equal(before, user.W1)
    # its optional `shapes` are what the lowrank codec factors
    trainer = Trainer(model, opt, data.X_train, data.y_train, 32, 0)
    assert param_segments(trainer) == ((64, 128), (1, 128), (128, 10), (1, 10))


def test_a_model_that_raises_is_named_with_the_line_that_raised():
    data = load_dataset("digits")
    with pytest.raises(UserCodeError) as err:
        UserModel(user_models.raises(), "model m").check(
            data.X_train, data.y_train, data.X_test, data.y_test
        )
    line = _line_of(user_models.Broken.loss_and_grad, "an IndexError, on this very line")
    assert "model m: loss_and_grad raised IndexError" in str(err.value)
    assert f"at {HELPER}:{line} in loss_and_grad" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("shape", "returned a gradient of float32[9609]; it must be 9610 floats"),
        ("nan", "returned a loss of nan on the first 8 samples"),
        ("rebind", "rebound its params"),
    ],
)
def test_a_wrong_answer_at_build_time_names_the_method(how, message):
    data = load_dataset("digits")
    with pytest.raises(UserCodeError) as err:
        UserModel(user_models.Broken(how), "model m").check(
            data.X_train, data.y_train, data.X_test, data.y_test
        )
    assert message in str(err.value)
    if how != "rebind":  # the method's own definition: where to look
        assert f"({HELPER}:" in str(err.value)


@pytest.mark.parametrize("how", ["nan", "nan-grad", "raise", "shape"])
def test_going_wrong_mid_run_leaves_the_parameters_as_they_were(how):
    data = load_dataset("digits")
    user = user_models.Broken(how, at=6)
    model = UserModel(user, "model m")
    opt = make_optimizer("sgd", model.params, 0.05)
    trainer = Trainer(model, opt, data.X_train, data.y_train, 32, 0)
    for _ in range(5):
        trainer.step()
    before = user.params.copy()
    expected = DivergedError if how.startswith("nan") else UserCodeError
    with pytest.raises(expected, match="model m" if how != "nan" else "returned by model m"):
        trainer.step()
    assert np.array_equal(user.params, before)  # no update from the failed step
    assert np.isfinite(user.params).all() and trainer.step_count == 5


def test_a_factory_that_raises_and_one_that_is_missing(on_path):
    with pytest.raises(UserCodeError, match=r"model user_models:factory_fails \(the factory\) "
                       r"raised KeyError: 'no such key', at .*user_models\.py:\d+ in factory_fails"):  # fmt: skip
        _trainer("user_models:factory_fails")
    with pytest.raises(ConfigError, match="no module named 'not_there'"):
        _trainer("not_there:build")
    with pytest.raises(ConfigError, match="has no 'nope'"):
        _trainer("user_models:nope")
    with pytest.raises(ConfigError, match=r"name the module, not its file.*give user_models:build"):
        _trainer("tests/node/train/user_models.py:build")
    with pytest.raises(UserCodeError, match=r"got dict \(\{\}\), which is not a model"):
        resolve_model(lambda: {}, load_dataset("digits"), CPU, 0)


def test_built_in_specs_still_mean_the_built_in_models():
    trainer = _trainer("mlp:16")
    assert not isinstance(trainer.model, UserModel)
    with pytest.raises(ConfigError, match="unknown model kind"):
        _trainer("mlpx:16")


def test_a_regression_with_a_data_source_of_the_users(on_path):
    """Float targets, a loss-only evaluation: nothing assumes a softmax classifier."""
    cfg = NodeConfig(
        model="user_models:Regression", data="user_models:regression_data", lr=0.05
    ).validate()
    trainer, data, _ = build_trainer(cfg)
    assert data.n_classes == 0 and data.y_train.dtype == np.float32
    start = trainer.evaluate(data.X_test, data.y_test)[0]
    for _ in range(300):
        trainer.step()
    loss, acc = trainer.evaluate(data.X_test, data.y_test)
    assert loss < 0.01 * start and np.isnan(acc)
    assert run_meta(cfg)["model"] == "user_models:Regression"


def test_a_predict_only_model_is_evaluated_by_its_accuracy():
    class PredictOnly(user_models.TwoLayerNet):
        evaluate = None

        def predict(self, x):
            return self._forward(x)[2].argmax(axis=1)

    data = load_dataset("digits")
    model = UserModel(PredictOnly(), "model m")
    loss, acc = model.evaluate(data.X_test, data.y_test)
    assert np.isnan(loss) and 0.0 <= acc <= 1.0


def test_params_through_dlpack_are_viewed_not_copied():
    """Anything that exports DLPack is a vector: here a bare wrapper of a numpy buffer."""

    class Tensor:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    class Wrapped(user_models.TwoLayerNet):
        def __init__(self):
            super().__init__()
            self.buffer, self.params = self.params, Tensor(self.params)

        def loss_and_grad(self, x, y):
            loss, grad = super().loss_and_grad(x, y)
            return loss, Tensor(grad)

    user = Wrapped()
    model = UserModel(user, "model m")
    assert np.shares_memory(model.params.data, user.buffer)
    data = load_dataset("digits")
    assert np.isfinite(model.loss_and_grad(data.X_train[:16], data.y_train[:16]))
    assert np.array_equal(model.params.grad, user.grad)


@pytest.mark.slow
def test_import_swarmnode_stays_cheap_and_the_core_never_imports_torch():
    code = (
        "import sys, swarmnode; cheap = 'numpy' not in sys.modules; "
        "sys.path.insert(0, 'examples'); "
        "swarmnode.Peer('own_numpy_model:build', steps=5).run(); "
        "print(cheap, 'torch' in sys.modules)"
    )
    root = EXAMPLES.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"]


def test_a_checkpoint_of_a_users_model_resumes_into_their_buffer(on_path, tmp_path):
    from swarmnode.node.train.build import resume
    from swarmnode.node.train.checkpoint import save_checkpoint

    cfg = NodeConfig(
        model="own_numpy_model:build", checkpoint_dir=tmp_path / "ckpt", device="cpu"
    ).validate()
    first = build_trainer(cfg)[0]
    for _ in range(30):
        first.step()
    state = first.state()
    state["meta"] = run_meta(cfg)
    save_checkpoint(cfg.checkpoint_dir, state)
    again = build_trainer(cfg)[0]
    assert resume(again, cfg) is not None and again.step_count == 30
    user = again.model.user
    assert np.array_equal(user.params, first.model.user.params)
    assert np.shares_memory(user.W1, again.model.params.data)  # loaded in place: views hold
    first.step()
    again.step()
    assert np.array_equal(user.params, first.model.user.params)  # the exact same next step
