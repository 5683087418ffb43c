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
    dissensus[:epsilon]     x_i - epsilon * (mean of the honest views - x_i), crafted for each
                            recipient i from its own model (He, Karimireddy and Jaggi 2022: the
                            liars push their neighbours apart, not off course)  (eps 2)
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
Every rule in swarmnode.gossip.robust.aggregate is translation-equivariant (agg(x + c) = agg(x) + c), so
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
from typing import Any

from swarmnode.fault.inject.attacks import (
    Alie,
    Dissensus,
    Garbage,
    Gaussian,
    Huge,
    Infinite,
    Ipm,
    LabelFlip,
    Mimic,
    Noise,
    NonFinite,
    SignFlip,
    alie_z,
    flip_labels,
)
from swarmnode.fault.inject.behaviour import Array, Behaviour, ByzantineError, array_module
from swarmnode.fault.inject.spec import FaultSpecError

__all__ = [
    "BYZANTINE",
    "Alie",
    "Array",
    "Behaviour",
    "ByzantineError",
    "Dissensus",
    "Garbage",
    "Gaussian",
    "Huge",
    "Infinite",
    "Ipm",
    "LabelFlip",
    "Mimic",
    "Noise",
    "NonFinite",
    "SignFlip",
    "alie_z",
    "array_module",
    "flip_labels",
    "parse_byzantine",
]

_KINDS = (
    SignFlip,
    Gaussian,
    Noise,
    Alie,
    Ipm,
    Dissensus,
    Mimic,
    NonFinite,
    Infinite,
    Garbage,
    Huge,
)
BYZANTINE: dict[str, Behaviour] = {cls.KIND: cls() for cls in _KINDS}
BYZANTINE[LabelFlip.KIND] = LabelFlip()


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
