"""The two model protocols: `Model`, what a user writes, and `TrainableModel`, what the trainer
drives.

The seam between the trainer and a model is `TrainableModel`: the built-in `Sequential`
(kernels/model.py) implements it as it is, and a user's `Model` is adapted to it by `UserModel`
(node/train/model/user_model.py), which checks every answer and names the user's code when one is
wrong. Nothing else in the peer (exchange, aggregation, compression, checkpoints, state sync)
sees a model at all: only its one flat parameter vector, `params.data`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Model(Protocol):
    """A model the swarm trains without knowing what it is: one flat parameter vector and the
    loss and gradient of a batch. Plain numpy, cupy, or anything that speaks DLPack (torch).

    Optional members, used when present:

    - `shapes`: the parameter tensors' shapes, in buffer order (they must cover `params`
      exactly); the `lowrank` codec factors each matrix on its own. Without it the vector is
      one tensor, and `--compress lowrank` sends it whole.
    - `predict(x)`: class indices for a batch; used only when there is no `evaluate`, for the
      accuracy (the test loss is then NaN).
    """

    params: Any
    """All trainable parameters in one 1-D float32 vector (a numpy or cupy array, or a tensor
    that exports DLPack), owned by the model and read by it on every call. The swarm updates,
    averages, exchanges and checkpoints this very buffer in place: keep your weights as views
    into it (`params[a:b].reshape(...)`) and never rebind it."""

    def loss_and_grad(self, x: Any, y: Any) -> tuple[Any, Any]:
        """The mean loss over one batch (`x` float32 inputs, `y` targets: int64 class labels or
        float32 values, on the device of `params`) and its gradient with respect to `params`,
        as `(loss, grad)`: a number and a vector the size of `params` (it may be a buffer the
        model reuses on every call). It must not change `params`: the optimizer does that."""
        ...

    def evaluate(self, x: Any, y: Any) -> Any:
        """`(mean loss, accuracy)` over a batch of the test split, or the mean loss alone (a
        model that has no accuracy, e.g. a regression). It must not change `params`."""
        ...


@runtime_checkable
class TrainableModel(Protocol):
    """What `Trainer` (node/train/trainer.py) drives: the built-in `Sequential`, or a user's
    `Model` behind `UserModel`."""

    params: Any
    """A `kernels.flat.FlatParams`: `.data` (the flat vector the swarm exchanges), `.grad`
    (its gradient, written by `loss_and_grad`, read by the optimizer), `.size`, and `.views`
    (one shaped view per tensor, in buffer order)."""

    backend: Any
    """The `kernels.backend.Backend` that `params` live on; the trainer moves each batch there."""

    def loss_and_grad(self, x: Any, y: Any, logit_offset: Any = None) -> float:
        """The batch's mean loss; overwrites `params.grad` with its gradient. `logit_offset`
        (per-class, label-skewed shards) is for softmax classifiers only; others get None."""
        ...

    def evaluate(self, x: Any, y: Any) -> tuple[float, float]:
        """(mean loss, accuracy) over (x, y), without touching `params.grad`; NaN for either
        that the model does not have."""
        ...
