"""Run one swarm peer until SIGTERM/SIGINT or its step budget: the body of `swarmnode start`."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from typing import Any, TextIO

from swarmnode.node.cli.progress import ProgressPrinter, format_summary, say, write_summary_json
from swarmnode.node.cli.version import version_text
from swarmnode.node.peer import Node
from swarmnode.node.settings import PeerConfig
from swarmnode.node.train import describe


def run_peer(cfg: PeerConfig, out: TextIO | None = None) -> dict[str, Any] | None:
    """Blocking entry point; `asyncio.run` lives here and nowhere else in the peer.

    Returns the run summary, or None when a signal stopped the peer before it was up."""
    return asyncio.run(_main(cfg, out or sys.stdout))


class _Stopper:
    """SIGTERM/SIGINT handling over the peer's whole life: installed before the peer starts
    (a signal during a slow join or state sync must still end it cleanly) and kept until its
    close() is done (a second signal must not kill it half-way through its last checkpoint)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, out: TextIO, checkpointing: bool) -> None:
        self.out = out
        self.checkpointing = checkpointing  # a final checkpoint is saved only with a dir
        self.requested = asyncio.Event()
        self.node: Node | None = None
        self._loop = asyncio.get_running_loop()

    def __enter__(self) -> _Stopper:
        for sig in self.SIGNALS:
            self._loop.add_signal_handler(sig, self._on_signal, sig)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig in self.SIGNALS:
            self._loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.requested.is_set():
            say(f"{sig.name}: already leaving", self.out)
            return
        saving = "saving a checkpoint" if self.checkpointing else "no --checkpoint-dir to save to"
        say(f"{sig.name}: leaving the swarm, {saving}, exiting", self.out)
        self.requested.set()
        if self.node is not None:
            self.node.request_stop()


async def _main(cfg: PeerConfig, out: TextIO) -> dict[str, Any] | None:
    t0 = time.perf_counter()
    with _Stopper(out, cfg.checkpoint_dir is not None) as stopper:
        node = await _create_unless_stopped(cfg, out, stopper)
        if node is None:
            say("stopped before the peer was up", out)
            return None
        stopper.node = node
        if stopper.requested.is_set():  # the signal came in the last moment of start-up
            node.request_stop()
        _say_start(node, cfg, out)
        try:
            await node.wait()
        finally:
            await node.close()
    if node.crashed is not None:
        raise node.crashed
    if node.worker.error is not None:
        raise node.worker.error
    return await _summary(node, cfg, out, time.perf_counter() - t0)


async def _create_unless_stopped(cfg: PeerConfig, out: TextIO, stopper: _Stopper) -> Node | None:
    """`Node.create`, abandoned (and cleaned up by create itself) if a signal comes first."""
    creating = asyncio.create_task(
        Node.create(cfg, on_eval=ProgressPrinter(cfg.steps or None, out)), name="create-node"
    )
    signalled = asyncio.create_task(stopper.requested.wait(), name="stop-signal")
    try:
        await asyncio.wait({creating, signalled}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signalled.cancel()
        await asyncio.gather(signalled, return_exceptions=True)
    if creating.done():
        return creating.result()  # raises what start-up raised (a JoinError, a bad config)
    creating.cancel()  # Node.create closes the half-built node on cancellation
    await asyncio.gather(creating, return_exceptions=True)
    return None


def _say_start(node: Node, cfg: PeerConfig, out: TextIO) -> None:
    n_params = int(node.trainer.model.params.size)
    say(version_text(), out)
    shard = f"; shard {node.shard}" if node.shard else ""
    say(
        f"model {describe(cfg.model)} ({n_params:,} parameters) on {node.data.describe()}{shard}",
        out,
    )
    adjusted = _logit_adjust(node, cfg)
    # an iid shard's prior differs from the set's by sampling noise only: not a skew to announce
    skewed = adjusted and cfg.partition.scheme != "iid"
    skew = f"; logit adjustment {adjusted:g} (label-skewed shard)" if skewed else ""
    say(
        f"device {node.backend.describe()}; {node.trainer.n_samples} training samples{skew}",
        out,
    )
    say(_lr_line(node, cfg), out)
    if node.resumed is not None:
        say(_resumed_line(node), out)
    named = f" ({node.name})" if node.name else ""
    how = f" ({node.addr_how})" if node.addr_how else ""
    say(f"listening on {node.addr}{how} as {node.peer_id}{named}", out)
    say(f"the swarm live, read-only: http://{node.addr}/", out)


SCALE_TEXT = {"sqrt": "sqrt(n peers)", "linear": "n peers", "adaptive": "the gain ratio"}


def _lr_line(node: Node, cfg: PeerConfig) -> str:
    """The lr and the schedule it follows; where `auto` found no horizon to decay to, why the lr
    stays constant and how to give it one."""
    line = f"lr {cfg.lr:g} ({cfg.optimizer}), {node.trainer.lr_schedule}"
    if cfg.lr_rule != "none":
        line += f"; in a swarm x {SCALE_TEXT[cfg.lr_rule]} (--lr-scale {cfg.lr_scale})"
    if cfg.lr_schedule != "auto" or cfg.lr_kind != "constant":
        return line
    if not cfg.lr_horizon:
        return (
            f"{line} (--lr-schedule auto: a run without --steps has no end to decay to; "
            "--lr-decay-steps N gives one)"
        )
    return (
        f"{line} (--lr-schedule auto: the decay would end at step {cfg.lr_horizon}, inside "
        f"the {cfg.lr_warmup}-step warm-up)"
    )


def _resumed_line(node: Node) -> str:
    """Which model this run starts from when it both resumed a checkpoint and joined a swarm:
    the state sync keeps the checkpoint only where it is not behind the swarm."""
    line = f"resumed from checkpoint step {node.start_step} ({node.resumed['_path']})"
    if node.synced_step is not None:
        return f"{line}; the swarm was ahead: starting from its model at step {node.synced_step}"
    if node.cfg.join:
        return f"{line}; the swarm's model did not replace it"
    return line


async def _summary(node: Node, cfg: PeerConfig, out: TextIO, wall_s: float) -> dict[str, Any]:
    # a final evaluation, off the loop; if the last step was abandoned at close, it still holds
    # the model, so the newest evaluation stands
    m = (
        await asyncio.to_thread(node.worker.evaluate_now)
        if node.worker_stopped
        else (node.worker.metrics())
    )
    ex, w = node.exchanger, node.worker
    summary = {
        "peer_id": node.peer_id,
        "name": node.name,
        "test_accuracy": m.test_acc,
        "test_loss": m.test_loss,
        "eval_step": m.eval_step,  # the step the accuracy was measured at (= the last line's)
        "steps": m.step,
        # trained by this process: not the counter's advance, which includes the swarm's steps
        # a joiner inherits at its state sync (`joined_at_step`) and a resumed checkpoint's
        "steps_this_run": w.steps_run,
        "resumed_from_step": node.start_step if node.resumed is not None else None,
        "joined_at_step": node.synced_step,
        "model": describe(cfg.model),
        "data": describe(cfg.data),
        "n_params": int(node.trainer.model.params.size),
        "samples_per_s": _rate(node),
        # share of the training thread's life spent training, not waiting for an exchange
        # round (--max-lead): below 1, the network set the pace, not the compute
        "utilization": w.utilization(),
        "waited_s": w.waited_s,
        "device": m.device,
        "wall_s": wall_s,
        "exchange_rounds": ex.rounds,
        "exchange_applied": ex.rounds_applied,
        # how often this peer's own rounds mixed its model (--sync-every is only the minimum)
        "steps_per_exchange": w.steps_run / ex.rounds_applied if ex.rounds_applied else None,
        # between the ends of two consecutive own rounds: <= --max-lead x --sync-every
        "max_steps_between_rounds": node.max_steps_between_rounds,
        "exchange_served": ex.served,
        "exchange_bytes_sent": ex.bytes_sent,
        "outer_steps": w.outer.steps,
        # the --lr-scale factor at the end (the swarm size it saw, capped: --lr-scale-max)
        "lr_scale": w.lr_scale.scale,
        "mixes_dropped_after_last_step": w.mixes_dropped,
        # the --logit-adjust in force: 0 where the shard holds the whole set's prior
        "logit_adjust": _logit_adjust(node, cfg),
    }
    say(format_summary(summary), out)
    if cfg.summary_json is not None:
        write_summary_json(cfg.summary_json, summary)
    return json.loads(json.dumps(summary, default=float))


def _logit_adjust(node: Node, cfg: PeerConfig) -> float:
    return cfg.logit_adjust if node.trainer.logit_offset is not None else 0.0


def _rate(node: Node) -> float:
    """Training throughput over this whole run (not just the last evaluation window)."""
    w = node.worker
    return w.steps_run * node.trainer.batch_size / w.train_seconds if w.train_seconds > 0 else 0.0
