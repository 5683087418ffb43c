"""The base of every byzantine behaviour and the array plumbing they share.

`Behaviour.poison` checks and flattens its inputs on the array's own module (numpy or cupy), then
hands them to the subclass's `_poison`; the concrete behaviours live in
swarmnode.fault.inject.attacks and are parsed from `--byzantine` text in
swarmnode.fault.inject.byzantine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from swarmnode.kernels.errors import ShapeError, SwarmnodeError

Array = Any  # a numpy or cupy ndarray


class ByzantineError(SwarmnodeError, ValueError):
    """A behaviour cannot run on what it was given (no honest views, labels out of range)."""


@dataclasses.dataclass(frozen=True)
class Behaviour:
    """Base of every behaviour; subclasses override `_poison` and declare `PARAMS`."""

    KIND: ClassVar[str] = ""
    PARAMS: ClassVar[dict[str, type]] = {}  # name -> int/float; the first is the main one
    needs_honest_views: ClassVar[bool] = False
    poisons_labels: ClassVar[bool] = False
    # crafts a model for each recipient (from that recipient's own model: dissensus)
    per_recipient: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return self.KIND

    @property
    def wants_reference(self) -> bool:
        """Whether the node should pass `reference` (the attack is defined on updates)."""
        return False

    def with_swarm(self, n: int, f: int) -> Behaviour:
        """This behaviour for a swarm of `n` workers of which `f` collude (ALIE's z uses them)."""
        return self

    def spec(self) -> str:
        """The `--byzantine` text that parses back to this behaviour."""
        defaults = type(self)()
        params = [
            f"{k}={getattr(self, k)!r}"
            for k in self.PARAMS
            if getattr(self, k) != getattr(defaults, k)
        ]
        return f"{self.KIND}:{','.join(params)}" if params else self.KIND

    def poison(
        self,
        own: Array,
        honest: Sequence[Array] | Array | None = None,
        rng: np.random.Generator | None = None,
        *,
        reference: Array | None = None,
        recipient: Array | None = None,
    ) -> Array:
        """The parameters to serve instead of `own`: float32, `own`'s shape and array module.

        `honest` (a list of vectors or a (k, d) array) is required when `needs_honest_views`;
        `reference` (where the swarm stood one exchange round ago: see swarmnode.fault.inject.byzantine)
        turns the parameter-space attacks of sign-flip and IPM into their update-space forms;
        `recipient` (the model of the peer it goes to) is required when `per_recipient`.
        """
        xp = array_module(own)
        flat = as_float_vector(own, xp, "own")
        views = stack_views(honest, flat, xp) if self.needs_honest_views else None
        ref = None if reference is None else as_float_vector(reference, xp, "reference", flat)
        rng = np.random.default_rng() if rng is None else rng
        if self.per_recipient:
            if recipient is None:
                raise ByzantineError(f"{self.KIND} crafts for one recipient: give its model")
            to = as_float_vector(recipient, xp, "recipient", flat)
            out = self._poison_for(flat, views, rng, ref, xp, to)
        else:
            out = self._poison(flat, views, rng, ref, xp)
        return out.astype(xp.float32, copy=False).reshape(own.shape)

    def transform_labels(self, y: Array, n_classes: int) -> Array:
        """The training labels this peer learns from (unchanged unless `poisons_labels`)."""
        return y

    def _poison(
        self, own: Array, views: Array | None, rng: np.random.Generator, ref: Array | None, xp: Any
    ) -> Array:
        raise NotImplementedError

    def _poison_for(
        self,
        own: Array,
        views: Array | None,
        rng: np.random.Generator,
        ref: Array | None,
        xp: Any,
        recipient: Array,
    ) -> Array:
        """`_poison` of a `per_recipient` behaviour: `recipient` is the model it goes to."""
        raise NotImplementedError


def array_module(a: Array) -> Any:
    """numpy for numpy arrays, cupy for cupy arrays; `ShapeError` for anything else."""
    if isinstance(a, np.ndarray):
        return np
    try:
        import cupy
    except ImportError:
        cupy = None
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    raise ShapeError(f"expected a numpy or cupy array, got {type(a).__name__}")


def as_float_vector(a: Array, xp: Any, what: str, like: Array | None = None) -> Array:
    if array_module(a) is not xp:
        raise ShapeError(f"{what}: array module differs from own's")
    if a.dtype.kind != "f":
        raise ShapeError(f"{what}: expected a floating-point array, got dtype {a.dtype}")
    flat = a.reshape(-1)
    if like is not None and flat.shape != like.shape:
        raise ShapeError(f"{what}: {a.size} values, own has {like.size}")
    return flat


def stack_views(honest: Sequence[Array] | Array | None, own: Array, xp: Any) -> Array:
    """The honest views as a (k, d) float32 matrix on own's device."""
    if honest is None or len(honest) == 0:
        raise ByzantineError("this behaviour needs at least one honest peer's parameters")
    if isinstance(honest, (list, tuple)):
        rows = [xp.asarray(v).reshape(-1) for v in honest]
        bad = [i for i, row in enumerate(rows) if row.shape != own.shape]
        if bad:
            raise ShapeError(f"honest view {bad[0]} has {rows[bad[0]].size} values, own {own.size}")
        views = xp.stack(rows)
    else:
        views = xp.asarray(honest)
        views = views.reshape(views.shape[0], -1)
        if views.shape[1] != own.size:
            raise ShapeError(f"honest views have {views.shape[1]} values each, own {own.size}")
    if views.dtype.kind != "f":
        raise ShapeError(f"honest views: expected floating point, got dtype {views.dtype}")
    return views.astype(xp.float32, copy=False)


def standard_normal(xp: Any, rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    """N(0, 1) float32 draws made on own's device, seeded from `rng` (so reproducible)."""
    if xp is np:
        return rng.standard_normal(shape, dtype=np.float32)
    # cupy draws on the GPU from a seed taken off the host generator: reproducible per seed,
    # but not the same numbers as the numpy path.
    return xp.random.RandomState(int(rng.integers(2**63))).standard_normal(shape, dtype=xp.float32)
