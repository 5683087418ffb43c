"""Byzantine behaviours: turn a peer's honest parameter vector into a poisoned one.

A byzantine peer is an ordinary peer started with `--byzantine KIND[:PARAM]`. It trains as usual
(on flipped labels for `label-flip`) but serves `behaviour.poison(own, honest, rng)` instead of
its parameters. The colluding kinds (`needs_honest_views`) also get the parameters of honest
peers, which the node pulls for them, as in the papers' omniscient-colluder threat model
(node/peer/byzantine_serving.py: the live honest peers, the first 16 by peer id, in that order).

Kinds (PARAM is either one number for the main parameter or `key=value` pairs, `,`-separated):

    sign-flip[:scale | scale=,update=]
                            -scale * own (model negation, the default, update=0); update=1:
                            r - scale * (own - r), the papers' flipped update  (scale 1)
    gaussian[:sigma]        own + N(0, sigma^2) per coordinate  (sigma 1)
    noise[:sigma]           pure N(0, sigma^2), own ignored  (sigma 1)
    alie[:z | n=,f=]        mean - z * std of the honest views, coordinate-wise (Baruch et al.
                            2019, "A Little Is Enough"); z = `alie_z(n, f)` unless given, with
                            n (workers) and f (colluders) from the swarm unless given
    ipm[:epsilon]           r - epsilon * (mean of the honest views - r) (Xie et al. 2019,
                            "Fall of Empires": -epsilon x the honest mean update)  (eps 0.1)
    mimic[:index]           a copy of honest view number `index` (mod their count)  (index 0)
    nan[:fraction] / inf[:fraction]
                            own with a random `fraction` of coordinates NaN / +-Inf  (all)
    garbage                 random float32 bit patterns: wild magnitudes, some NaN/Inf
    huge[:scale]            own * scale  (1e6)
    label-flip              honest parameters, but trains on labels y -> n_classes - 1 - y

Updates in parameter exchange. The papers attack gradient (update) aggregation: every worker
starts a round from the same global model and sends its step from it. Peers here exchange
parameters, with no global model, so an "update" needs a reference point `r`: the node uses
where the honest swarm stood one exchange round ago (the coordinate-wise mean of the honest
views the colluders pulled at their previous refresh, about `--sync-every` steps earlier), and
honest peer j's update is `x_j - r`: its local steps plus its mixing over that round, the
parameter-space counterpart of a round's gradient step. The honest mean of *current* models is
no reference: the updates around it average to zero and IPM would serve the mean itself. A
non-colluding peer (`sign-flip:update=1`) sees no views and uses its own model one refresh ago.
Every rule in swarmnode.gossip.aggregate is translation-equivariant (agg(x + c) = agg(x) + c), so
aggregating `r + u_j` is aggregating the updates `u_j`, and an attack crafted on updates is the
same attack on parameters. ALIE needs no reference for that reason (mean - z std of `r + u_j` is
`r` + mean - z std of `u_j`); IPM does (`wants_reference`), and without one given it falls back
to `-epsilon * mean` of the raw parameters, a plain scaled negation that the node never serves.
`sign-flip` keeps model negation as its default: in parameter exchange it is the blunt attack
the swarm tests and byzantine-signflip-mean.toml use; `update=1` is the papers' form.

Arrays may be numpy or cupy; every behaviour works through the array's own module, so a GPU peer
poisons on the GPU. Results are float32 with `own`'s shape. Poisoning touches the whole vector:
call it from a worker thread, never on the event loop.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np
from swarmnode.fault.inject.spec import FaultSpecError
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
    ) -> Array:
        """The parameters to serve instead of `own`: float32, `own`'s shape and array module.

        `honest` (a list of vectors or a (k, d) array) is required when `needs_honest_views`;
        `reference` (where the swarm stood one exchange round ago: see the module docstring)
        turns the parameter-space attacks of sign-flip and IPM into their update-space forms.
        """
        xp = array_module(own)
        flat = _as_float_vector(own, xp, "own")
        views = _stack_views(honest, flat, xp) if self.needs_honest_views else None
        ref = None if reference is None else _as_float_vector(reference, xp, "reference", flat)
        out = self._poison(flat, views, np.random.default_rng() if rng is None else rng, ref, xp)
        return out.astype(xp.float32, copy=False).reshape(own.shape)

    def transform_labels(self, y: Array, n_classes: int) -> Array:
        """The training labels this peer learns from (unchanged unless `poisons_labels`)."""
        return y

    def _poison(
        self, own: Array, views: Array | None, rng: np.random.Generator, ref: Array | None, xp: Any
    ) -> Array:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class SignFlip(Behaviour):
    """-scale * own, or with `update=1` the flipped update r - scale * (own - r)."""

    KIND: ClassVar[str] = "sign-flip"
    PARAMS: ClassVar[dict[str, type]] = {"scale": float, "update": int}
    scale: float = 1.0
    update: int = 0  # 1: act on the update since the reference (the node then supplies one)

    def __post_init__(self) -> None:
        _check_positive(self.KIND, "scale", self.scale)
        if self.update not in (0, 1):
            raise FaultSpecError(f"sign-flip:update={self.update}: update must be 0 or 1")

    @property
    def wants_reference(self) -> bool:
        return bool(self.update)

    def _poison(self, own, views, rng, ref, xp):
        if ref is None:
            if self.update:
                raise ByzantineError("sign-flip:update=1 needs a reference model")
            return -self.scale * own
        return ref - self.scale * (own - ref)


@dataclasses.dataclass(frozen=True)
class Gaussian(Behaviour):
    KIND: ClassVar[str] = "gaussian"
    PARAMS: ClassVar[dict[str, type]] = {"sigma": float}
    sigma: float = 1.0

    def __post_init__(self) -> None:
        _check_positive(self.KIND, "sigma", self.sigma)

    def _poison(self, own, views, rng, ref, xp):
        return own + self.sigma * _standard_normal(xp, rng, own.shape)


@dataclasses.dataclass(frozen=True)
class Noise(Behaviour):
    KIND: ClassVar[str] = "noise"
    PARAMS: ClassVar[dict[str, type]] = {"sigma": float}
    sigma: float = 1.0

    def __post_init__(self) -> None:
        _check_positive(self.KIND, "sigma", self.sigma)

    def _poison(self, own, views, rng, ref, xp):
        return self.sigma * _standard_normal(xp, rng, own.shape)


@dataclasses.dataclass(frozen=True)
class Alie(Behaviour):
    """mean - z * std, coordinate-wise over the honest views (population std, ddof 0).

    With no `z`, z = `alie_z(n, f)`: `n` workers in all, `f` of them colluding. The node fills
    the ones not given from its membership (`with_swarm`: n = live peers + 1, f = the byzantine
    peers it knows + 1). Called without them, f = 1 and n = honest views + f.
    """

    KIND: ClassVar[str] = "alie"
    PARAMS: ClassVar[dict[str, type]] = {"z": float, "n": int, "f": int}
    needs_honest_views: ClassVar[bool] = True
    z: float | None = None
    n: int | None = None
    f: int | None = None

    def __post_init__(self) -> None:
        if self.z is not None and not math.isfinite(self.z):
            raise FaultSpecError(f"alie:z={self.z}: z must be finite")
        f = 1 if self.f is None else self.f
        if f < 1 or (self.n is not None and self.n <= f):
            raise FaultSpecError(f"alie:n={self.n},f={self.f}: need 1 <= f < n")

    def with_swarm(self, n: int, f: int) -> Alie:
        """Counts given in the spec win; the swarm's fill the others."""
        n = n if self.n is None else self.n
        f = f if self.f is None else self.f
        if not 1 <= f < n:
            raise ByzantineError(f"alie: {f} colluders among {n} workers: need 1 <= f < n")
        return dataclasses.replace(self, n=n, f=f)

    def z_for(self, n_honest: int) -> float:
        """The z used when the colluders see `n_honest` honest views."""
        if self.z is not None:
            return self.z
        f = 1 if self.f is None else self.f
        return alie_z(self.n if self.n is not None else n_honest + f, f)

    def _poison(self, own, views, rng, ref, xp):
        mean = views.mean(axis=0, dtype=xp.float64)
        std = views.std(axis=0, dtype=xp.float64)
        return mean - self.z_for(views.shape[0]) * std


@dataclasses.dataclass(frozen=True)
class Ipm(Behaviour):
    """r - epsilon * (mean - r): the honest mean update, reversed and scaled by epsilon.

    Xie et al. use a small epsilon (0.1) against Krum-like rules, so the crafted update stays
    close enough to be selected, and a large one against the plain mean.
    """

    KIND: ClassVar[str] = "ipm"
    PARAMS: ClassVar[dict[str, type]] = {"epsilon": float}
    needs_honest_views: ClassVar[bool] = True
    epsilon: float = 0.1

    def __post_init__(self) -> None:
        _check_positive(self.KIND, "epsilon", self.epsilon)

    @property
    def wants_reference(self) -> bool:
        return True

    def _poison(self, own, views, rng, ref, xp):
        mean = views.mean(axis=0, dtype=xp.float64)
        if ref is None:  # library use only: the node always passes a reference
            return -self.epsilon * mean
        return ref - self.epsilon * (mean - ref)


@dataclasses.dataclass(frozen=True)
class Mimic(Behaviour):
    """A copy of one honest peer: the node orders the views by peer id, so `index` pins the
    same peer from one refresh to the next (while it stays alive and honest)."""

    KIND: ClassVar[str] = "mimic"
    PARAMS: ClassVar[dict[str, type]] = {"index": int}
    needs_honest_views: ClassVar[bool] = True
    index: int = 0

    def __post_init__(self) -> None:
        if self.index < 0:
            raise FaultSpecError(f"mimic:{self.index}: index must be >= 0")

    def _poison(self, own, views, rng, ref, xp):
        return views[self.index % views.shape[0]].copy()


@dataclasses.dataclass(frozen=True)
class NonFinite(Behaviour):
    """A random `fraction` of the coordinates set to NaN (`nan`) or to +-Inf (`inf`)."""

    KIND: ClassVar[str] = "nan"
    PARAMS: ClassVar[dict[str, type]] = {"fraction": float}
    fraction: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.fraction) and 0 < self.fraction <= 1):
            raise FaultSpecError(f"{self.KIND}:{self.fraction}: fraction must be in (0, 1]")

    def _values(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return np.full(count, np.nan, dtype=np.float32)

    def _poison(self, own, views, rng, ref, xp):
        out = own.astype(xp.float32, copy=True)
        count = max(1, round(self.fraction * own.size)) if own.size else 0
        where = (
            np.arange(own.size) if count == own.size else rng.choice(own.size, count, replace=False)
        )
        out[xp.asarray(where)] = xp.asarray(self._values(rng, count))
        return out


@dataclasses.dataclass(frozen=True)
class Infinite(NonFinite):
    KIND: ClassVar[str] = "inf"

    def _values(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return np.where(rng.random(count) < 0.5, np.inf, -np.inf).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Garbage(Behaviour):
    KIND: ClassVar[str] = "garbage"

    def _poison(self, own, views, rng, ref, xp):
        # Random bit patterns cover every exponent: denormals, 1e38s, a few NaN/Inf.
        bits = rng.integers(0, 2**32, size=own.size, dtype=np.uint32)
        return xp.asarray(bits.view(np.float32))


@dataclasses.dataclass(frozen=True)
class Huge(Behaviour):
    KIND: ClassVar[str] = "huge"
    PARAMS: ClassVar[dict[str, type]] = {"scale": float}
    scale: float = 1e6

    def __post_init__(self) -> None:
        _check_positive(self.KIND, "scale", self.scale)

    def _poison(self, own, views, rng, ref, xp):
        with np.errstate(over="ignore"):  # overflow to Inf is an acceptable poison
            return own * xp.float32(self.scale)


@dataclasses.dataclass(frozen=True)
class LabelFlip(Behaviour):
    KIND: ClassVar[str] = "label-flip"
    poisons_labels: ClassVar[bool] = True

    def transform_labels(self, y: Array, n_classes: int) -> Array:
        return flip_labels(y, n_classes)

    def _poison(self, own, views, rng, ref, xp):
        return own.copy()  # the poison is in the training data, not in what is served


def parse_byzantine(spec: str) -> Behaviour:
    """Parse `KIND[:PARAM]` (`gaussian:10`, `alie`, `alie:f=4`, `ipm:epsilon=0.5`)."""
    kind, _, param_text = spec.strip().partition(":")
    kind = kind.strip().lower().replace("_", "-")
    if kind not in BYZANTINE:
        raise FaultSpecError(
            f"unknown byzantine kind {kind!r} in {spec!r} (known: {', '.join(BYZANTINE)})"
        )
    default = BYZANTINE[kind]
    if not param_text.strip():
        return default
    kwargs = _parse_params(spec, type(default), param_text)
    try:
        return dataclasses.replace(default, **kwargs)
    except FaultSpecError as exc:
        raise FaultSpecError(f"{spec}: {exc}") from None


def alie_z(n: int, f: int) -> float:
    """z_max of Baruch et al. 2019: s = floor(n/2 + 1) - f, z = Phi^-1((n - s) / n).

    `s` is how many honest workers the colluders must sway to hold a majority. When the
    colluders are a majority themselves (s < 1) the formula has no stealth bound; s = 1 is used,
    the largest z it gives for that n. Example: n = 50, f = 24 -> s = 2, z = Phi^-1(0.96) = 1.75.
    """
    if isinstance(n, bool) or isinstance(f, bool) or not (1 <= f < n):
        raise FaultSpecError(f"alie: n={n}, f={f}: need integers with 1 <= f < n")
    s = max(1, math.floor(n / 2 + 1) - f)
    return NormalDist().inv_cdf((n - s) / n)


def flip_labels(y: Array, n_classes: int) -> Array:
    """y -> n_classes - 1 - y (an involution); same array module and dtype as `y`."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ByzantineError(f"label-flip: n_classes must be an integer >= 2, got {n_classes!r}")
    array_module(y)  # rejects anything that is not a numpy or cupy array
    if y.dtype.kind not in "iu":
        raise ShapeError(f"label-flip: labels must be integers, got dtype {y.dtype}")
    if y.size and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ByzantineError(f"label-flip: labels outside [0, {n_classes})")
    return (n_classes - 1 - y).astype(y.dtype, copy=False)


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


def _parse_params(spec: str, cls: type[Behaviour], text: str) -> dict[str, Any]:
    if not cls.PARAMS:
        raise FaultSpecError(f"{spec}: {cls.KIND} takes no parameter")
    main = next(iter(cls.PARAMS))
    items = [item.strip() for item in text.split(",")]
    if len(items) == 1 and "=" not in items[0]:
        items = [f"{main}={items[0]}"]
    kwargs: dict[str, Any] = {}
    for item in items:
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or key not in cls.PARAMS or key in kwargs:
            raise FaultSpecError(
                f"{spec}: bad parameter {item!r} ({cls.KIND} takes {', '.join(cls.PARAMS)})"
            )
        kwargs[key] = _parse_number(spec, key, value, cls.PARAMS[key])
    return kwargs


def _parse_number(spec: str, key: str, text: str, kind: type) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise FaultSpecError(f"{spec}: {key}={text!r} is not a valid {kind.__name__}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise FaultSpecError(f"{spec}: {key} must be finite")
    return value


def _check_positive(kind: str, key: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise FaultSpecError(f"{kind}:{key}={value}: must be finite and > 0")


def _as_float_vector(a: Array, xp: Any, what: str, like: Array | None = None) -> Array:
    if array_module(a) is not xp:
        raise ShapeError(f"{what}: array module differs from own's")
    if a.dtype.kind != "f":
        raise ShapeError(f"{what}: expected a floating-point array, got dtype {a.dtype}")
    flat = a.reshape(-1)
    if like is not None and flat.shape != like.shape:
        raise ShapeError(f"{what}: {a.size} values, own has {like.size}")
    return flat


def _stack_views(honest: Sequence[Array] | Array | None, own: Array, xp: Any) -> Array:
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


def _standard_normal(xp: Any, rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    """N(0, 1) float32 draws made on own's device, seeded from `rng` (so reproducible)."""
    if xp is np:
        return rng.standard_normal(shape, dtype=np.float32)
    # cupy draws on the GPU from a seed taken off the host generator: reproducible per seed,
    # but not the same numbers as the numpy path.
    return xp.random.RandomState(int(rng.integers(2**63))).standard_normal(shape, dtype=xp.float32)


# Built last: the default instances validate themselves with the helpers above.
BYZANTINE: dict[str, Behaviour] = {
    cls.KIND: cls()
    for cls in (SignFlip, Gaussian, Noise, Alie, Ipm, Mimic, NonFinite, Infinite, Garbage, Huge)
}
BYZANTINE[LabelFlip.KIND] = LabelFlip()
