"""Users' models for the tests: the numpy example, and models that go wrong in each way a
user's code can. Importable in the test process (`from tests.node.train import user_models`) and, with
tests/node on PYTHONPATH, by a `swarmnode start --model user_models:FUNCTION` process.

`USER_MODEL_FAIL_AT` (env, default 40): the loss_and_grad call at which the `*_later` models go
wrong (the build-time dry run is call 1): mid-run, after the peer has joined its swarm.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
if str(EXAMPLES) not in sys.path:  # the example is the users' model these tests start from
    sys.path.append(str(EXAMPLES))

from own_numpy_model import TwoLayerNet, build  # noqa: E402

__all__ = ["TwoLayerNet", "build"]


class Broken(TwoLayerNet):
    """The example, going wrong in `how` from loss_and_grad call `at` on."""

    def __init__(self, how: str, at: int = 1) -> None:
        super().__init__()
        self.how, self.at, self.calls = how, at, 0

    def loss_and_grad(self, x, y):
        self.calls += 1
        loss, grad = super().loss_and_grad(x, y)
        if self.calls < self.at:
            return loss, grad
        if self.how == "raise":
            return loss, grad[np.array([len(grad)])]  # an IndexError, on this very line
        if self.how == "nan":
            return float("nan"), grad
        if self.how == "nan-grad":
            bad = grad.copy()
            bad[3] = np.nan
            return loss, bad
        if self.how == "shape":
            return loss, grad[:-1]
        if self.how == "rebind":
            self.params = self.params.copy()
            return loss, grad
        raise AssertionError(self.how)


def _later() -> int:
    return int(os.environ.get("USER_MODEL_FAIL_AT", "40"))


def raises_later() -> Broken:
    return Broken("raise", _later())


def nan_later() -> Broken:
    return Broken("nan", _later())


def raises() -> Broken:
    return Broken("raise")


def wrong_shape() -> Broken:
    return Broken("shape")


def factory_fails():
    return {}["no such key"]  # a KeyError in the user's factory


class Regression:
    """y = x . w, fitted by least squares: float targets, a loss and no accuracy."""

    def __init__(self, n_in: int = 8) -> None:
        self.params = np.zeros(n_in, dtype=np.float32)

    def loss_and_grad(self, x, y):
        err = x @ self.params - y
        return float((err**2).mean()), (2 / len(y)) * (x.T @ err)

    def evaluate(self, x, y):
        return float(((x @ self.params - y) ** 2).mean())


def data_fails(seed: int = 0):
    """A data source with a bug of its own."""
    return np.load(f"/nonexistent/shard-{seed}.npy")


def regression_data(seed: int = 0):
    """A data source (`--data user_models:regression_data`): float targets of a linear map."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=8).astype(np.float32)
    X = rng.normal(size=(600, 8)).astype(np.float32)
    y = X @ w
    return {"X_train": X[:500], "y_train": y[:500], "X_test": X[500:], "y_test": y[500:]}
