"""What `swarmnode start` says of itself must be true (issue 34, item 9): "checkpointing" on
SIGINT only with a checkpoint dir, the logit-adjustment line only on a label-skewed shard, and
a resumed checkpoint that the swarm's model then replaces says which one won."""

from __future__ import annotations

import io
import signal
from types import SimpleNamespace

import pytest
from swarmnode.node.cli.run_peer import _resumed_line, _Stopper, run_peer
from swarmnode.node.settings import PeerConfig

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("checkpointing", "said"),
    [
        (False, "SIGINT: leaving the swarm, no --checkpoint-dir to save to, exiting"),
        (True, "SIGINT: leaving the swarm, saving a checkpoint, exiting"),
    ],
)
async def test_a_signal_says_checkpointing_only_with_a_checkpoint_dir(
    checkpointing: bool, said: str
) -> None:
    out = io.StringIO()
    _Stopper(out, checkpointing)._on_signal(signal.SIGINT)
    assert out.getvalue().strip() == said


def _lines(**kw: object) -> list[str]:
    out = io.StringIO()
    cfg = PeerConfig(listen="127.0.0.1:0", model="mlp:8", device="cpu", steps=3, **kw)
    run_peer(cfg, out)
    return out.getvalue().splitlines()


def test_an_iid_shard_announces_no_logit_adjustment() -> None:
    device = next(line for line in _lines(shard=(0, 2)) if line.startswith("device "))
    assert "logit adjustment" not in device, device


def test_a_label_skewed_shard_still_announces_it() -> None:
    lines = _lines(shard=(1, 4), partition="dirichlet:0.3")
    device = next(line for line in lines if line.startswith("device "))
    assert "logit adjustment 0.5 (label-skewed shard)" in device, device


def _node(synced: int | None, join: list[str]) -> SimpleNamespace:
    return SimpleNamespace(
        start_step=2000,
        resumed={"_path": "ck/step-2000.ckpt"},
        synced_step=synced,
        cfg=SimpleNamespace(join=join),
    )


def test_a_resume_says_which_model_won_the_join() -> None:
    assert _resumed_line(_node(51475, ["a:7070"])) == (
        "resumed from checkpoint step 2000 (ck/step-2000.ckpt); the swarm was ahead: "
        "starting from its model at step 51475"
    )
    assert _resumed_line(_node(None, ["a:7070"])).endswith("; the swarm's model did not replace it")
    assert _resumed_line(_node(None, [])) == "resumed from checkpoint step 2000 (ck/step-2000.ckpt)"
