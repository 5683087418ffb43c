"""The user's model as one flat float32 vector: the buffer the swarm exchanges and lands mixes in.

A model comes in one of three forms, and leaves the swarm a `Binding`:

- a flat numpy or cupy float32 vector (or any C-contiguous float32 array: viewed flat), that
  the user's loop updates in place: used as it is;
- a dict of arrays (name -> numpy or cupy float32 array): the values are copied, once, into one
  new buffer, and each is replaced by a view into it, so that the loop's `params[name] -= ...`
  writes the swarm's buffer;
- a torch `nn.Module` (node/swarm/torch_binding.py): the same for its trainable parameters
  (`p.data` becomes a view), as DDP's gradient buckets and FSDP's flat parameters do.

`Binding.check()` compares what the model holds now with what it held at the binding (each
tensor's address, size and device): a rebound parameter, a new layer or a `model.to(...)` then
gets one message that says which parameter and what to do, instead of a swarm that silently
averages a buffer the model no longer reads. It is a loop over the tensors (microseconds each),
which the swarm runs once a round, never per step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from swarmnode.kernels.backend import CPU, Backend, dlpack_module, is_device_array
from swarmnode.node.swarm.errors import DeviceMismatchError, ModelChangedError
from swarmnode.node.train import ConfigError


@dataclass(frozen=True)
class Slot:
    """One parameter tensor as the binding saw it: where its memory is, how much, on what."""

    name: str
    address: int
    size: int
    device: str


class FlatVector:
    """What the trainer's side of swarmnode reads of a model's parameters (`params.data`, the
    flat vector; `params.views`, the tensors in buffer order, which the lowrank codec factors;
    `params.size`). Unlike `kernels.flat.FlatParams.over` it allocates no gradient vector: the
    gradients are the user's loop's."""

    def __init__(self, data: Any, shapes: dict[str, tuple[int, ...]]) -> None:
        self.data = data
        self.size = int(data.size)
        self.views: dict[str, Any] = {}
        at = 0
        for name, shape in shapes.items():
            n = math.prod(shape)
            self.views[name] = data[at : at + n].reshape(shape)
            at += n
        if at != self.size:
            raise ConfigError(f"parameter shapes hold {at} values, the vector has {self.size}")


class Binding:
    """The flat vector (`vector`: numpy or cupy, the model's own memory), its tensors' shapes,
    the device, and the check that the model still views it."""

    def __init__(
        self,
        vector: Any,
        shapes: dict[str, tuple[int, ...]],
        *,
        kind: str,
        expected: list[Slot] | None = None,
        current: Callable[[], list[Slot]] | None = None,
        keep: Any = None,
    ) -> None:
        self.vector = vector
        self.params = FlatVector(vector, shapes)
        self.kind = kind  # what the user gave: for messages and the checkpoint's meta
        self.backend = backend_of(vector)
        self.device = device_of(vector)
        self._expected = expected or []
        self._current = current
        self._keep = keep  # the framework's own buffer, if any: alive as long as we are

    @property
    def size(self) -> int:
        return self.params.size

    def check(self) -> None:
        """Raise `DeviceMismatchError` or `ModelChangedError` if the model no longer views the
        swarm's buffer; otherwise return (microseconds per tensor)."""
        if self._current is None:
            return
        now = self._current()
        before = self._expected
        if [s.name for s in now] != [s.name for s in before]:
            raise ModelChangedError(
                f"the model's parameters changed after Swarm(model): it had {len(before)} "
                f"tensors of {sum(s.size for s in before):,} values, it has {len(now)} of "
                f"{sum(s.size for s in now):,} now{_named_change(before, now)}; the swarm "
                "exchanges the buffer it built at the start: give Swarm the model in its final "
                "shape (build a new Swarm for a new model)"
            )
        for was, slot in zip(before, now, strict=True):
            if slot.device != was.device:
                raise DeviceMismatchError(
                    f"parameter {slot.name!r} is on {slot.device}, the swarm was built for "
                    f"{was.device}: move the model before Swarm(model), not after (its "
                    "parameters are views into the swarm's buffer on that device)"
                )
            if slot.address != was.address or slot.size != was.size:
                raise ModelChangedError(
                    f"parameter {slot.name!r} no longer views the swarm's buffer (it was "
                    "replaced: a new tensor assigned to it, or a layer rebuilt); update "
                    "parameters in place (p -= lr * g, p[...] = ...), never rebind them"
                )


def _named_change(before: list[Slot], now: list[Slot]) -> str:
    old, new = {s.name for s in before}, {s.name for s in now}
    parts = []
    if new - old:
        parts.append("new: " + ", ".join(sorted(new - old)[:3]))
    if old - new:
        parts.append("gone: " + ", ".join(sorted(old - new)[:3]))
    return f" ({'; '.join(parts)})" if parts else ""


def bind_vector(vector: Any) -> Binding:
    """A flat float32 vector that the user's loop updates in place, used as it is."""
    arr = _array(vector, "the model")
    _check_float32(arr, "the model's vector")
    if not arr.flags["C_CONTIGUOUS"] or not getattr(arr.flags, "writeable", True):
        raise ConfigError(
            "the model's vector must be one contiguous, writable buffer (np.ascontiguousarray "
            "makes a copy: train that copy, not the original)"
        )
    flat = arr.reshape(-1)  # a view: contiguous
    return Binding(flat, {"params": (int(flat.size),)}, kind=f"vector of {flat.size}")


def bind_arrays(params: MutableMapping[str, Any]) -> Binding:
    """A dict of float32 arrays: copied into one buffer; each value becomes a view into it."""
    if not params:
        raise ConfigError("the model's dict of arrays is empty")
    arrays = {str(k): _array(v, f"params[{k!r}]") for k, v in params.items()}
    for name, a in arrays.items():
        _check_float32(a, f"params[{name!r}]")
    devices = {device_of(a) for a in arrays.values()}
    if len(devices) != 1:
        raise DeviceMismatchError(
            f"the model's arrays are on several devices ({', '.join(sorted(devices))}): "
            "put them on one before Swarm(model)"
        )
    xp = backend_of(next(iter(arrays.values()))).xp
    total = sum(int(a.size) for a in arrays.values())
    flat = xp.empty(total, dtype=xp.float32)
    shapes: dict[str, tuple[int, ...]] = {}
    at = 0
    for key, (name, a) in zip(params, arrays.items(), strict=True):
        n = int(a.size)
        view = flat[at : at + n].reshape(a.shape)
        view[...] = a
        params[key] = view  # the loop's `params[name] -= lr * g` now writes the flat buffer
        shapes[name] = tuple(int(d) for d in a.shape)
        at += n

    def current() -> list[Slot]:
        return [_slot(str(k), v) for k, v in params.items()]

    return Binding(
        flat, shapes, kind=f"dict of {len(shapes)} arrays", expected=current(), current=current
    )


def _slot(name: str, value: Any) -> Slot:
    if not (isinstance(value, np.ndarray) or is_device_array(value)):
        return Slot(name, -1, -1, type(value).__name__)  # no longer an array at all
    return Slot(name, pointer(value), int(value.size), device_of(value))


def _array(value: Any, what: str) -> Any:
    """A numpy or cupy array of `value`: as it is, or a DLPack view (no copy)."""
    if isinstance(value, np.ndarray) or is_device_array(value):
        return value
    device = getattr(value, "__dlpack_device__", None)
    if device is None:
        raise ConfigError(
            f"{what} is a {type(value).__name__}: Swarm takes a torch nn.Module, a flat numpy "
            "or cupy float32 vector, or a dict of such arrays"
        )
    kind = device()[0]
    module = dlpack_module(kind)
    if module is None:
        raise ConfigError(f"{what} lives on DLPack device type {kind}: use a CPU or CUDA array")
    return module.from_dlpack(value)


def _check_float32(a: Any, what: str) -> None:
    if a.dtype != np.float32 or a.size == 0:
        raise ConfigError(
            f"{what} is {a.dtype}{list(a.shape)}: the swarm trains non-empty float32 "
            "parameters (convert them once, before Swarm: .astype(np.float32))"
        )


def backend_of(a: Any) -> Backend:
    if not is_device_array(a):
        return CPU
    import cupy

    return Backend("cupy", cupy, int(a.device.id))


def device_of(a: Any) -> str:
    return f"cuda:{int(a.device.id)}" if is_device_array(a) else "cpu"


def pointer(a: Any) -> int:
    if isinstance(a, np.ndarray):
        return int(a.__array_interface__["data"][0])
    return int(a.data.ptr)
