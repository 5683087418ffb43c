"""`OwnLoopNode`: the swarm peer (`Node`) over a model whose loop is the user's.

Everything of the built-in peer stands: identity (and `checkpoint_dir`'s key, so a restarted
peer is the same member), the HTTP service and its page, membership, the exchange and its
bounded staleness, the join's state sync (median of donors), checkpoints, the clean leave.
Two seams only, both methods of `Node` overridden here: `_build_trainer` gives the peer
`OwnLoopTrainer` (the user's flat buffer and the swarm's counters, no data, no optimizer) and
`_build_worker` an `OwnLoopWorker` (node/swarm/own_worker.py), whose steps are the user's.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from swarmnode.node.peer import Node, shared_start, threadsafe_setter
from swarmnode.node.settings import PeerConfig
from swarmnode.node.swarm.binding import Binding
from swarmnode.node.swarm.own_worker import OwnLoopWorker, check_state
from swarmnode.node.train import ConfigError

LABEL_FLIP = "label-flip"  # the one byzantine kind that needs our data (fault/inject/attacks.py)


class _Model:
    """`trainer.model`: only `params` (the flat vector and its views)."""

    def __init__(self, binding: Binding) -> None:
        self.params = binding.params


@dataclass
class _NoData:
    """`node.data` of a peer whose data is the user's loop's: no test split of ours."""

    X_test: Any = None
    y_test: Any = None
    n_classes: int = 0


class OwnLoopTrainer:
    """What the peer and its worker read of a trainer: the model's flat buffer, the step
    counter (the swarm's, continued from a join or a checkpoint), and the swarm's state."""

    def __init__(self, binding: Binding, batch_size: int) -> None:
        self.model = _Model(binding)
        self.backend = binding.backend
        self.optimizer = None  # the user's; swarmnode never touches it
        self.batch_size = batch_size  # what a step counts in samples_seen (the status figure)
        self.step_count = 0
        self.samples_seen = 0
        self.epoch = 0
        self.update_lock: Any = contextlib.nullcontext()  # the worker sets its own
        self.restored: dict[str, Any] | None = None  # a checkpoint's outer step, for the worker

    def on_device(self) -> contextlib.AbstractContextManager[Any]:
        return self.backend.use()

    def _to_device(self, a: Any) -> Any:
        return self.backend.asarray(a)

    def state(self) -> dict[str, Any]:  # the worker's state() replaces this for a checkpoint
        raise NotImplementedError("OwnLoopWorker.state() is the swarm's state")

    def load_state(self, state: dict[str, Any]) -> None:
        """A checkpoint of `checkpoint_dir` (node/train/build.py's `resume`): the counters
        now, the outer step once the worker exists."""
        check_state(state, int(self.model.params.size))
        self.step_count = int(state["step"])
        self.samples_seen = int(state.get("samples_seen", 0))
        self.restored = state


class OwnLoopNode(Node):
    """A `Node` whose trainer and worker are the user's loop's (see the module's docstring)."""

    binding: Binding

    @classmethod
    async def start_over(cls, cfg: PeerConfig, binding: Binding) -> OwnLoopNode:
        """A started peer over `binding` (what `Node.create` does, with the binding)."""
        node = cls(cfg.validate())
        node.binding = binding
        await cls._launch(node)
        return node

    def _build_trainer(self) -> tuple[Any, Any, Any]:
        cfg = self.cfg
        if cfg.byzantine and cfg.byzantine.split(":")[0].strip() == LABEL_FLIP:
            raise ConfigError(
                f"--byzantine {cfg.byzantine}: flipping labels needs swarmnode's own data "
                "loop; a Swarm's data is the user's"
            )
        trainer = OwnLoopTrainer(self.binding, cfg.batch_size)
        self.init_params = shared_start(trainer, cfg.exchange.compress)  # type: ignore[arg-type]
        self.labels_flipped = False
        return trainer, _NoData(), trainer.backend

    def _build_worker(self) -> OwnLoopWorker:  # type: ignore[override]
        worker = OwnLoopWorker(
            self.trainer,
            device=self.binding.device,
            eval_every=self.cfg.eval_every,
            on_done=threadsafe_setter(self._worker_done),
        )
        worker.check_model = self.binding.check
        loop = asyncio.get_running_loop()
        worker.on_broken = lambda why: loop.call_soon_threadsafe(
            self.exchanger.stop_serving, f"the model broke: {why}"
        )
        return worker

    def params_host(self) -> np.ndarray:
        return self.worker.snapshot()[1]
