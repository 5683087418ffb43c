"""The collapse guard: a mix that kills hidden units, blows the loss up, or makes it jump and
stay there is rolled back, and the peers that pushed models into it are distrusted
(docs/security.md, "Hostile insiders").

The push bound and the push budget (gossip/robust/push_guard.py, push_budget.py) and the bounds
on a round's answers (gossip/robust/consensus.py) limit how far a mix may move a peer; this is
the check on what a mix *did*. The training step right after pending mixes (pushed models, a
round's own result) were applied computes its loss and its ReLU masks on the mixed model before
its update: that step is judged against what this peer usually sees, and, when its loss merely
jumped, the next `RECOVERY` steps too.

- dead units: the share of hidden ReLU units that fire for no sample of the batch. A model
  dragged toward dead ReLUs (every hidden bias far below zero) loses them for good: a dead unit
  gets no gradient. Rolled back when the share is `DEAD_JUMP` above its usual level (an EWMA
  over calm steps, ones with no mix being judged), at once: waiting brings none back.
- a blown-up loss: above `BLOWUP` x ln(classes) (four blind guesses') on the step right after a
  mix, rolled back at once: the steps taken on such a model are the harm (its gradients through
  a blown-up classifier killed half the hidden units of a digits MLP in four steps).
- a loss jump: above `LOSS_JUMP` x the usual loss at which mixes pass (an EWMA) and above
  `FLOOR` x ln(classes) (half a blind guess's). On non-iid shards a peer's own loss is tiny and
  an honest mix raises it many times over, which is why the bar is the usual *post-mix* loss,
  not the loss before it. One step over the bar is no verdict: a peer overfit on its shard
  jumps over it after honest mixes of far models, mostly the first ones after a stalled round
  (the NAT lab's home peer, ~200 steps without a mix: 1.74 then under the bar 1 step later;
  1.52, 1.38, 2.17, then under at 3; 1.37, 1.69, 1.17, 2.4, then under at 4; 1.45, 3.8, 1.3,
  1.3, 7.1, still over at 4, where a 4-step watch rolled it back), and SGD undoes them within a
  few steps.
  So the mix is watched: it passes at the first step whose loss is back under the bar, and is
  rolled back when the `RECOVERY` steps after it are all still over it. Mixes applied while it
  is watched join its verdict (a blown-up loss right after one of them still rolls back at
  once); the swings of SGD's own steps on the mixed model are no blow-up.

A rollback subtracts what the mixes being judged changed (one model-sized buffer; two more
passes over the model per applied mix to keep it) and drops the outer step's momentum and the
built-in optimizer's heading (SGD's velocity, AdamW's first moment; AdamW's scale stays): both
were about the mixed model, and a liar caught at the first step (classifier x -20) still carried
the restored model from 0.96 to 0.25 accuracy in ten steps on SGD's velocity, 0.90 without it
(scripts/sim/collapse.py). The steps taken since stay (gradient steps on the mixed model). The
senders of every pushed model in those mixes are reported (`TrainingWorker.on_collapse`): the
node stops mixing their pushes for a while (`PushBudget.distrust`). A round's own partners are
not: the peer picked them at random. An honest push folded into the same verdict is rolled back
and its sender distrusted with the liar's: a cost paid only when a mix collapses.
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
RECOVERY = 10  # steps for a jumped loss to come back under the bar (a round's, at sync-every 10)
BLOWUP = 4.0  # x ln(classes): a loss this far above a blind guess's is rolled back at once


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
    """Judges the steps right after a mix against the usual; single-threaded (training's)."""

    def __init__(self, n_classes: int) -> None:
        self.floor = FLOOR * math.log(max(2, n_classes))
        self.blowup = BLOWUP * math.log(max(2, n_classes))
        self.base_dead: float | None = None  # the usual dead share (calm steps)
        self.post_loss: float | None = None  # the usual loss at which a mix passes
        self.watching = 0  # steps left for a jumped loss to come back; 0: no verdict waits
        self._jump = 0.0  # the loss right after the watched mixes
        self.rollbacks = 0

    def calm(self, dead: float | None) -> None:
        """A step with no mix being judged: what the dead share usually is."""
        if dead is not None:
            self.base_dead = _ewma(self.base_dead, dead)

    def judge(self, loss: float, dead: float | None, fresh: bool = True) -> str | None:
        """A step after the mixes being judged (`fresh`: one more landed right before it): why
        they are a collapse (to roll back), or None: they passed (the loss then counts toward
        the usual), or, while `watching`, the verdict waits for a later step."""
        if dead is not None and self.base_dead is not None and dead - self.base_dead > DEAD_JUMP:
            return self._fail(f"{dead:.0%} of the hidden units dead (usually {self.base_dead:.0%})")
        if fresh and loss > self.blowup:  # what the mix did, before SGD's own swings
            guess = self.blowup / BLOWUP
            return self._fail(f"the loss blew up to {loss:.3g} (a blind guess: {guess:.3g})")
        if not self._over(loss):
            self.watching = 0
            if math.isfinite(loss):
                self.post_loss = _ewma(self.post_loss, loss)
            return None
        if not self.watching:  # the step right after the mix: watch it come back
            self.watching, self._jump = RECOVERY, loss
            return None
        self.watching -= 1
        if self.watching:
            return None
        return (
            f"the loss jumped to {self._jump:.3g} right after it and was still {loss:.3g} "
            f"{RECOVERY} steps later (usually {self.post_loss:.3g})"
        )

    def _fail(self, why: str) -> str:
        self.watching = 0
        return why

    def _over(self, loss: float) -> bool:
        return (
            self.post_loss is not None and loss > self.floor and loss > LOSS_JUMP * self.post_loss
        )


def _ewma(old: float | None, new: float) -> float:
    return new if old is None else (1 - ALPHA) * old + ALPHA * new
