"""Run one swarm peer until SIGTERM/SIGINT or its step budget: the body of `swarmnode start`."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from typing import Any, TextIO

from node.peer import Node
from node.peer_config import PeerConfig
from node.progress import format_progress, format_summary, write_summary_json

PROGRESS_EVERY_S = 2.0


def run_peer(cfg: PeerConfig, out: TextIO | None = None) -> dict[str, Any]:
    """Blocking entry point; `asyncio.run` lives here and nowhere else in the peer."""
    return asyncio.run(_main(cfg, out or sys.stdout))


async def _main(cfg: PeerConfig, out: TextIO) -> dict[str, Any]:
    t0 = time.perf_counter()
    node = await Node.create(cfg)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, node.request_stop)
    print(f"listening on {node.addr} as {node.peer_id}", file=out, flush=True)
    try:
        progress = asyncio.create_task(_progress(node, cfg, out))
        try:
            await node.wait()
        finally:
            progress.cancel()
            await asyncio.gather(progress, return_exceptions=True)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await node.close()
    if node.worker.error is not None:
        raise node.worker.error
    return _summary(node, cfg, out, time.perf_counter() - t0)


async def _progress(node: Node, cfg: PeerConfig, out: TextIO) -> None:
    last_eval = -1
    while True:
        await asyncio.sleep(PROGRESS_EVERY_S)
        m = node.worker.metrics()
        if m.eval_step != last_eval:
            last_eval = m.eval_step
            peers = len(node.membership.live_peers())
            line = format_progress(m, cfg.steps or None)
            print(f"{line}  peers {peers}", file=out, flush=True)


def _summary(node: Node, cfg: PeerConfig, out: TextIO, wall_s: float) -> dict[str, Any]:
    m = node.worker.evaluate_now()
    summary = {
        "peer_id": node.peer_id,
        "test_accuracy": m.test_acc,
        "test_loss": m.test_loss,
        "steps": m.step,
        "samples_per_s": m.samples_per_s,
        "device": m.device,
        "wall_s": wall_s,
        "exchange_rounds": node.exchanger.rounds,
        "exchange_applied": node.exchanger.rounds_applied,
    }
    print(format_summary(summary), file=out, flush=True)
    if cfg.summary_json is not None:
        write_summary_json(cfg.summary_json, summary)
    return json.loads(json.dumps(summary, default=float))
