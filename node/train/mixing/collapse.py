"""The collapse guard: a mix that kills hidden units or makes the loss jump is rolled back, and
the peers that pushed models into it are distrusted (docs/security.md, "Hostile insiders").

The push bound and the push budget (gossip/robust/push_guard.py, push_budget.py) and the bounds
on a round's answers (gossip/robust/consensus.py) limit how far a mix may move a peer; this is
the check on what a mix *did*. The training step right after pending mixes (pushed models, a
round's own result) were applied computes its loss and its ReLU masks on the mixed model before
its update: that step is judged against what this peer usually sees.

- dead units: the share of hidden ReLU units that fire for no sample of the batch. A model
  dragged toward dead ReLUs (every hidden bias far below zero) loses them for good: a dead unit
  gets no gradient. Rolled back when the share is `DEAD_JUMP` above its usual level (an EWMA
  over calm steps, ones with no fresh mix).
- the loss: rolled back when it is above `LOSS_JUMP` x the usual loss right after a mix (an
  EWMA over the mixes that passed) and above `FLOOR` x ln(classes) (a blind guess's loss):
  on non-iid shards a peer's own loss is tiny and an honest mix raises it many times over,
  which is why the bar is the usual *post-mix* loss, not the loss before it.

A rollback subtracts what the mixes changed (one model-sized buffer; two more passes over the
model per applied mix to keep it) and drops the outer step's momentum (it was about the mixed
model); the step itself stays (one gradient step taken on the mixed model). The senders of every
pushed model in that mix are reported (`TrainingWorker.on_collapse`): the node stops mixing their
pushes for a while (`PushBudget.distrust`). A round's own partners are not: the peer picked them
at random. An honest push folded into the same mix is rolled back and its sender distrusted with
the liar's: a cost paid only when a mix collapses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from swarmnode.kernels.layers import ReLU

DEAD_JUMP = 0.25  # newly dead hidden units, as a share of them all
LOSS_JUMP = 4.0  # x the usual post-mix loss
FLOOR = 0.5  # x ln(classes): a loss below half a blind guess's is never a collapse
ALPHA = 0.05  # EWMA weight of the newest step (about the last 20)


def dead_fraction(layers: Sequence[Any]) -> float | None:
    """The share of hidden ReLU units (features of a dense layer, channels of a conv) that were
    active for no sample of the last forward pass; None for a model without ReLU layers."""
    dead = total = 0
    for layer in layers:
        mask = getattr(layer, "mask", None) if isinstance(layer, ReLU) else None
        if mask is None or mask.ndim < 2 or mask.shape[0] == 0:
            continue
        units = mask.reshape(mask.shape[0], mask.shape[1], -1)
        alive = units.any(axis=(0, 2))
        total += int(alive.size)
        dead += int(alive.size - int(alive.sum()))
    return dead / total if total else None


class CollapseGuard:
    """Judges the step right after a mix against the usual; single-threaded (training's)."""

    def __init__(self, n_classes: int) -> None:
        self.floor = FLOOR * math.log(max(2, n_classes))
        self.base_dead: float | None = None  # the usual dead share (calm steps)
        self.post_loss: float | None = None  # the usual loss right after a mix
        self.rollbacks = 0

    def calm(self, dead: float | None) -> None:
        """A step with no fresh mix: what the dead share usually is."""
        if dead is not None:
            self.base_dead = _ewma(self.base_dead, dead)

    def judge(self, loss: float, dead: float | None) -> str | None:
        """Why the mix just applied is a collapse (to roll back), or None (then it counts
        toward the usual post-mix loss)."""
        if dead is not None and self.base_dead is not None and dead - self.base_dead > DEAD_JUMP:
            return (
                f"{dead:.0%} of the hidden units dead right after it (usually {self.base_dead:.0%})"
            )
        if self.post_loss is not None and loss > self.floor and loss > LOSS_JUMP * self.post_loss:
            return f"the loss jumped to {loss:.3g} right after it (usually {self.post_loss:.3g})"
        if math.isfinite(loss):
            self.post_loss = _ewma(self.post_loss, loss)
        return None


def _ewma(old: float | None, new: float) -> float:
    return new if old is None else (1 - ALPHA) * old + ALPHA * new
