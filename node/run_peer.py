"""Run one swarm peer until SIGTERM/SIGINT or its step budget: the body of `swarmnode start`."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from node.peer import Node
from node.peer_config import PeerConfig
from node.progress import ProgressPrinter, format_summary, write_summary_json


def run_peer(cfg: PeerConfig, out: TextIO | None = None) -> dict[str, Any]:
    """Blocking entry point; `asyncio.run` lives here and nowhere else in the peer."""
    return asyncio.run(_main(cfg, out or sys.stdout))


async def _main(cfg: PeerConfig, out: TextIO) -> dict[str, Any]:
    t0 = time.perf_counter()
    node = await Node.create(cfg, on_eval=ProgressPrinter(cfg.steps or None, out))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _stopper(node, sig, out))
    _say_start(node, cfg, out)
    try:
        await node.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await node.close()
    if node.worker.error is not None:
        raise node.worker.error
    return _summary(node, cfg, out, time.perf_counter() - t0)


def _say_start(node: Node, cfg: PeerConfig, out: TextIO) -> None:
    n_params = int(node.trainer.model.params.size)
    print(f"model {cfg.model} ({n_params:,} parameters) on {node.data.describe()}", file=out)
    print(f"device {node.backend.describe()}; {node.trainer.n_samples} training samples", file=out)
    if node.resumed is not None:
        print(f"resumed from checkpoint step {node.start_step} ({node.resumed['_path']})", file=out)
    print(f"listening on {node.addr} as {node.peer_id}", file=out, flush=True)


def _stopper(node: Node, sig: signal.Signals, out: TextIO) -> Callable[[], None]:
    def stop() -> None:
        print(f"{sig.name}: leaving the swarm, checkpointing, exiting", file=out, flush=True)
        node.request_stop()

    return stop


def _summary(node: Node, cfg: PeerConfig, out: TextIO, wall_s: float) -> dict[str, Any]:
    m = node.worker.evaluate_now()
    summary = {
        "peer_id": node.peer_id,
        "test_accuracy": m.test_acc,
        "test_loss": m.test_loss,
        "steps": m.step,
        "steps_this_run": m.step - node.start_step,
        "resumed_from_step": node.start_step if node.resumed is not None else None,
        "model": cfg.model,
        "data": cfg.data,
        "n_params": int(node.trainer.model.params.size),
        "samples_per_s": _rate(node),
        "device": m.device,
        "wall_s": wall_s,
        "exchange_rounds": node.exchanger.rounds,
        "exchange_applied": node.exchanger.rounds_applied,
    }
    print(format_summary(summary), file=out, flush=True)
    if cfg.summary_json is not None:
        write_summary_json(cfg.summary_json, summary)
    return json.loads(json.dumps(summary, default=float))


def _rate(node: Node) -> float:
    """Training throughput over this whole run (not just the last evaluation window)."""
    w = node.worker
    return w.steps_run * node.trainer.batch_size / w.train_seconds if w.train_seconds > 0 else 0.0
