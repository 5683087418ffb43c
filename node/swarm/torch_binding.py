"""A torch `nn.Module` bound to one flat float32 buffer (the torch-specific part of the binding).

Once, at `Swarm(model)`: one buffer of all trainable parameters is allocated on their device,
each parameter's values are copied into its slice, and `p.data` becomes a view of that slice
(`torch.nn.utils.parameters_to_vector` would copy instead, every time). The `Parameter` objects
stay the same, so an optimizer built before or after `Swarm(model)` updates the buffer in place,
and its state stays the user's. swarmnode sees the buffer as numpy (CPU: `Tensor.numpy()`, the
same memory) or cupy (CUDA: DLPack, the same memory). Gradients are left alone: they are the
user's loop's. torch is never imported here: a module can only exist if torch already is.
"""

from __future__ import annotations

import sys
from typing import Any

from swarmnode.node.swarm.binding import Binding, Slot
from swarmnode.node.swarm.errors import DeviceMismatchError
from swarmnode.node.train import ConfigError


def is_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _trainable(module: Any) -> list[tuple[str, Any]]:
    return [(name, p) for name, p in module.named_parameters() if p.requires_grad]


def _slots(module: Any) -> list[Slot]:
    return [Slot(n, p.data_ptr(), p.numel(), str(p.device)) for n, p in _trainable(module)]


def bind_module(module: Any) -> Binding:
    import torch  # imported already (the module exists): this only names it

    named = _trainable(module)
    if not named:
        raise ConfigError("the module has no trainable parameters (requires_grad)")
    devices = sorted({str(p.device) for _, p in named})
    if len(devices) != 1:
        raise DeviceMismatchError(
            f"the module's parameters are on several devices ({', '.join(devices)}): one "
            "Swarm trains one device's copy; move the module to one device first"
        )
    other = [name for name, p in named if p.dtype != torch.float32]
    if other:
        raise ConfigError(
            f"parameter {other[0]!r} is not float32: the swarm exchanges float32 parameters "
            "(model.float(); autocast keeps them float32 and computes in lower precision)"
        )
    device = named[0][1].device
    flat = torch.empty(sum(p.numel() for _, p in named), dtype=torch.float32, device=device)
    at = 0
    with torch.no_grad():
        for _, p in named:
            k = p.numel()
            flat[at : at + k].copy_(p.reshape(-1))
            p.data = flat[at : at + k].view_as(p)  # the Parameter stays; its memory is ours
            at += k
    shapes = {name: tuple(p.shape) for name, p in named}
    return Binding(
        _array_of(flat),
        shapes,
        kind=f"torch {type(module).__name__}",
        expected=_slots(module),
        current=lambda: _slots(module),
        keep=flat,
    )


def _array_of(flat: Any) -> Any:
    """The buffer as numpy (CPU) or cupy (CUDA), the same memory either way."""
    if flat.device.type == "cpu":
        return flat.numpy()
    if flat.device.type != "cuda":
        raise DeviceMismatchError(
            f"the module is on {flat.device}: the swarm runs on the CPU or a CUDA device"
        )
    try:
        import cupy
    except ImportError:
        raise ConfigError(
            "a CUDA module needs cupy, through which the swarm reads its buffer: "
            "pip install 'swarmnode[cuda12]' (or [cuda13])"
        ) from None
    return cupy.from_dlpack(flat)
