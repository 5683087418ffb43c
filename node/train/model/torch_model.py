"""`TorchModel`: a torch `nn.Module` and a loss as a `swarmnode.Model` (optional: needs torch).

    pip install 'swarmnode[torch]'

    def build(seed=0, device="cpu"):
        torch.manual_seed(seed)
        net = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        return swarmnode.TorchModel(net, nn.functional.cross_entropy, device=device)

The module's trainable parameters are moved into one flat float32 buffer: each becomes a view
into it (`p.data`), and each gradient a view into a second one (`p.grad`), where backward
accumulates in place. `params` is that buffer; swarmnode views it through DLPack (a numpy array
on the CPU, a cupy array on CUDA, the same memory either way), so the optimizer's update, the
exchange's snapshot and every received mix touch the module's own weights, never a copy.

The batch comes in as numpy (or cupy) and is handed to torch the same way (`torch.from_numpy`,
DLPack). swarmnode's optimizer (`--optimizer sgd|adamw`) trains it, not torch's. Only the
trainable parameters are exchanged: buffers such as BatchNorm's running statistics stay each
peer's own. torch is imported here only: nothing else in swarmnode needs it.

The learning rate follows swarmnode's schedule (`--lr-schedule`, `--lr-warmup`, `--lr-floor`,
`--lr-decay-steps`; `lr_schedule=` ... in Python) on the swarm's step counter, times the
`--lr-scale`, as for any model: swarmnode's optimizer steps the module's flat vector, so the
schedule applies to it and a joiner or a resumed peer continues it. A torch optimizer or lr
scheduler of your own (`torch.optim.lr_scheduler.*`) is not part of this path: swarmnode never
calls it, so it is left alone and has no effect on training; give its schedule as the options
above instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from swarmnode.node.train.errors import ConfigError


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ConfigError(
            "TorchModel needs torch: pip install 'swarmnode[torch]' (or pip install torch)"
        ) from None
    return torch


class TorchModel:
    """`module` trained on `loss_fn(module(x), y)`; `device` moves the module first (`"cpu"`,
    `"cuda:0"`; None: where it is). `accuracy`: report argmax accuracy in evaluations (a
    classifier with integer labels); otherwise only the loss."""

    def __init__(
        self,
        module: Any,
        loss_fn: Callable[[Any, Any], Any],
        *,
        device: str | None = None,
        accuracy: bool = True,
    ) -> None:
        torch = _torch()
        self.torch = torch
        self.module = module if device is None else module.to(device)
        self.loss_fn = loss_fn
        self.accuracy = accuracy
        trainable = [p for p in self.module.parameters() if p.requires_grad]
        if not trainable:
            raise ConfigError("TorchModel: the module has no trainable parameters")
        bad = [p for p in trainable if p.dtype != torch.float32]
        if bad or len({p.device for p in trainable}) != 1:
            raise ConfigError(
                "TorchModel: every trainable parameter must be float32, on one device"
            )
        self.device = trainable[0].device
        self.shapes = [tuple(p.shape) for p in trainable]
        self.params, self._grad = self._flatten(trainable)
        self._trainable = trainable

    def _flatten(self, trainable: list[Any]) -> tuple[Any, Any]:
        """One buffer for the weights, one for the gradients; each parameter and its `.grad`
        become views into them."""
        torch = self.torch
        n = sum(p.numel() for p in trainable)
        flat = torch.zeros(n, dtype=torch.float32, device=self.device)  # never requires grad:
        grad = torch.zeros_like(flat)  # DLPack refuses tensors that do
        at = 0
        with torch.no_grad():
            for p in trainable:
                k = p.numel()
                flat[at : at + k].copy_(p.reshape(-1))
                p.data = flat[at : at + k].view_as(p)
                p.grad = grad[at : at + k].view_as(p)
                at += k
        return flat, grad

    def loss_and_grad(self, x: Any, y: Any) -> tuple[float, Any]:
        """Forward, backward into the flat gradient buffer; (loss, that buffer)."""
        xt, yt = self._tensor(x), self._tensor(y)
        self._grad.zero_()
        self.module.train()
        loss = self.loss_fn(self.module(xt), yt)
        loss.backward()
        self._keep_grad_views()
        return float(loss.detach()), self._grad

    def evaluate(self, x: Any, y: Any) -> tuple[float, float]:
        """(mean loss, argmax accuracy or NaN) without building a graph."""
        xt, yt = self._tensor(x), self._tensor(y)
        self.module.eval()
        with self.torch.no_grad():
            out = self.module(xt)
            loss = float(self.loss_fn(out, yt))
            classes = self.accuracy and out.ndim == 2 and not yt.is_floating_point()
            acc = float((out.argmax(dim=1) == yt).float().mean()) if classes else float("nan")
        return loss, acc

    def _tensor(self, a: Any) -> Any:
        """A numpy or cupy batch as a tensor on the module's device, without a copy where the
        memory is already there."""
        torch = self.torch
        t = torch.from_numpy(a) if type(a).__module__ == "numpy" else torch.from_dlpack(a)
        return t if t.device == self.device else t.to(self.device)

    def _keep_grad_views(self) -> None:
        # backward accumulates into an existing .grad in place; should some module or hook
        # have replaced one, copy it back into the flat buffer and restore the view.
        at = 0
        for p in self._trainable:
            k = p.numel()
            view = self._grad[at : at + k]
            if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                with self.torch.no_grad():
                    if p.grad is None:
                        view.zero_()
                    else:
                        view.copy_(p.grad.reshape(-1))
                p.grad = view.view_as(p)
            at += k
