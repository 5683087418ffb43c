#!/usr/bin/env python
"""Count the passes an exchange makes over a model's bytes, in one process (issue 25).

    .venv/bin/python scripts/bench/exchange/passes.py --out FILE -- start ARGS...   # a traced node
    (throughput.py --trace-passes starts its nodes this way and traces itself)

`install(out)` wraps the places where the node path touches every byte of a model (copies,
hashes, the frame checksum, the finite check, distances, the clip, the delta, the fold, the
apply, the socket send and receive) and writes one JSON line per call to `out`, at once, so a
process that leaves with `os._exit` loses nothing:

    {"t": monotonic start, "wall": s, "cpu": thread CPU s, "bytes": n, "kind": ..., "thread": ...}

Synchronous passes report *exclusive* time: a traced pass inside another (the xxh3 inside
a frame build) is subtracted from the outer one, so each byte's time is counted once. The
socket send and receive are coroutines; their `cpu` is the event loop thread's over the span
(kernel copies included, and whatever else that loop ran meanwhile: little, during a round).
Targets that do not exist in the code being traced are skipped, so the same tracer measures the
code before and after a change. Not for production: every wrapped call costs a few us.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]

_lock = threading.Lock()
_local = threading.local()
_out: Any = None


def _nbytes(x: Any) -> int:
    n = getattr(x, "nbytes", None)
    if isinstance(n, int):
        return n
    try:
        return len(x)
    except TypeError:
        return 0


def _emit(kind: str, t0: float, wall: float, cpu: float, nbytes: int) -> None:
    if _out is None:
        return
    line = json.dumps(
        {
            "t": t0,
            "wall": wall,
            "cpu": cpu,
            "bytes": int(nbytes),
            "kind": kind,
            "thread": threading.current_thread().name,
        }
    )
    with _lock:
        _out.write(line + "\n")
        _out.flush()


def _stack() -> list[float]:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def phase() -> str:
    return getattr(_local, "phase", "")


def record(kind: str | Callable[[], str], nbytes: int, fn: Callable[[], Any]) -> Any:
    """Run fn() as one traced pass of `nbytes` (exclusive of traced passes inside it); a
    callable `kind` is asked at the call (it may read `phase()`)."""
    if not isinstance(kind, str):
        kind = kind()
    stack = _stack()
    stack.append(0.0)  # time of traced passes nested in this one
    t0, c0 = time.perf_counter(), time.thread_time()
    m0 = time.monotonic()
    try:
        return fn()
    finally:
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        inner = stack.pop()
        if stack:
            stack[-1] += wall
        _emit(kind, m0, wall - inner, max(0.0, cpu - inner), nbytes)


def _sync_wrapper(orig: Callable[..., Any], kind: str, size: Callable[..., int]) -> Any:
    @functools.wraps(orig)
    def wrapper(*args: Any, **kw: Any) -> Any:
        try:
            n = size(*args, **kw)
        except Exception:  # a size we cannot tell: record the pass anyway
            n = 0
        return record(kind, n, lambda: orig(*args, **kw))

    wrapper.__traced__ = True  # type: ignore[attr-defined]
    return wrapper


def _async_wrapper(orig: Callable[..., Any], kind: str, size: Callable[..., int]) -> Any:
    @functools.wraps(orig)
    async def wrapper(*args: Any, **kw: Any) -> Any:
        t0, c0, m0 = time.perf_counter(), time.thread_time(), time.monotonic()
        out = None
        try:
            out = await orig(*args, **kw)
            return out
        finally:
            try:
                n = size(*args, result=out, **kw)
            except Exception:
                n = 0
            _emit(kind, m0, time.perf_counter() - t0, time.thread_time() - c0, n)

    wrapper.__traced__ = True  # type: ignore[attr-defined]
    return wrapper


def _replace_everywhere(orig: Any, new: Any) -> None:
    """Rebind every module-level name bound to `orig` (`from x import f` copies the binding)."""
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not d:
            continue
        for name, value in list(d.items()):
            if value is orig:
                setattr(mod, name, new)


def wrap(path: str, kind: Any, size: Any, make: Any = None) -> bool:
    """Wrap `module:attr` or `module:Class.method`; False when it does not exist."""
    mod_name, _, attr = path.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError:
        return False
    owner: Any = mod
    *outer, name = attr.split(".")
    for part in outer:
        owner = getattr(owner, part, None)
        if owner is None:
            return False
    orig = inspect.getattr_static(owner, name, None)
    if orig is None or getattr(orig, "__traced__", False):
        return False
    is_static = isinstance(orig, staticmethod)
    func = orig.__func__ if is_static else orig
    if make is None:
        make = _async_wrapper if inspect.iscoroutinefunction(func) else _sync_wrapper
    new = make(func, kind, size)
    setattr(owner, name, staticmethod(new) if is_static else new)
    if owner is mod:
        _replace_everywhere(func, new)
    return True


class CountingHasher:
    """A BLAKE3 hasher whose `update` is one traced pass."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def update(self, data: Any) -> Any:
        return record("blake3", _nbytes(memoryview(data)), lambda: self._inner.update(data))

    def digest(self, *args: Any, **kw: Any) -> bytes:
        return self._inner.digest(*args, **kw)


class _Blake3Module:
    """Stands in for the `blake3` module inside the signing code: its hashers count."""

    def __init__(self, real: Any) -> None:
        self._real = real
        factory = real.blake3

        def blake3(data: Any = b"", **kw: Any) -> CountingHasher:
            hasher = CountingHasher(factory(**kw))
            if len(memoryview(data)):
                hasher.update(data)
            return hasher

        blake3.AUTO = factory.AUTO  # type: ignore[attr-defined]
        self.blake3 = blake3

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _phase_wrapper(orig: Callable[..., Any], name: str, size: Any = None) -> Any:
    """Calls inside `orig` happen in phase `name` (the xxh3 and copy rows say which)."""

    @functools.wraps(orig)
    def wrapper(*args: Any, **kw: Any) -> Any:
        prev = phase()
        _local.phase = name
        try:
            return orig(*args, **kw)
        finally:
            _local.phase = prev

    wrapper.__traced__ = True  # type: ignore[attr-defined]
    return wrapper


def _arg(i: int, name: str) -> Callable[..., int]:
    """The byte size of positional argument i (or keyword `name`)."""

    def size(*args: Any, **kw: Any) -> int:
        return _nbytes(args[i] if len(args) > i else kw[name])

    return size


def _copy_kind() -> str:
    return "copy model -> snapshot" if phase() == "snapshot" else "copy model -> frame"


# Functions whose inner passes are labelled by them: (target, phase)
PHASES = [
    ("swarmnode.gossip.wire.frames:_build_frame", "encode"),
    ("swarmnode.gossip.wire.frames:decode_params", "decode"),
    ("swarmnode.node.train.worker:TrainingWorker.snapshot", "snapshot"),
    ("swarmnode.node.peer.param_store:WorkerStore._snapshot", "snapshot"),
    ("scripts.bench.exchange.node:BenchStore.take_snapshot", "snapshot"),
]

# (target, kind, the size of the vector a call passes over: one model for a copy or a distance
# alike; docs/benchmarks.md's table says how many reads and writes each one makes)
TARGETS: list[tuple[str, Any, Callable[..., int]]] = [
    # snapshots
    ("swarmnode.node.train.worker:TrainingWorker.snapshot_into", _copy_kind, _arg(1, "out")),
    ("scripts.bench.exchange.node:BenchStore.snapshot_into", _copy_kind, _arg(1, "out")),
    ("swarmnode.gossip.wire.frames:encode_params", "copy vector -> frame", _arg(0, "arr")),
    (
        "swarmnode.gossip.wire.frames:encode_packed",
        "copy packed -> frame",
        lambda packed, **kw: sum(_nbytes(p) for p in packed.parts.values()),
    ),
    # checks
    ("swarmnode.gossip.wire.finite:count_nonfinite", "finite check", _arg(0, "arr")),
    # the push bound and the round's own distances
    ("swarmnode.gossip.robust.chunked:distance", "distance", _arg(0, "own")),
    ("swarmnode.gossip.robust.chunked:norm", "norm", _arg(0, "x")),
    ("swarmnode.gossip.robust.chunked:toward", "clip", _arg(0, "own")),
    ("swarmnode.gossip.robust.heading:backward_part", "heading", _arg(0, "own")),
    # landing and mixing
    (
        "swarmnode.gossip.exchange.delta_rule:step",
        "delta (answer - sent)",
        lambda answers, sent, moved: _nbytes(sent),
    ),
    ("swarmnode.gossip.exchange.delta_rule:Moved.add", "moved (push during round)", _arg(2, "own")),
    (
        "swarmnode.gossip.exchange.delta_rule:mean_rows",
        "mean of answers",
        lambda rows: sum(_nbytes(r) for r in rows),
    ),
    ("swarmnode.node.train.mixing.mixes:MixAccumulator.add", "fold (mix)", _arg(1, "other")),
    ("swarmnode.node.train.mixing.mixes:MixAccumulator.nudge", "fold (nudge)", _arg(1, "delta")),
    (
        "swarmnode.node.train.mixing.mixes:MixAccumulator.apply_to",
        "apply (between steps)",
        _arg(1, "x"),
    ),
    # compressed exchange (fp16, lowrank)
    ("swarmnode.gossip.exchange.refs:PairRefs.encode", "codec encode (refs)", _arg(2, "x")),
    (
        "swarmnode.gossip.exchange.refs:PairRefs.receive",
        "codec receive (refs)",
        lambda self, *a, **kw: 4 * self.size,
    ),
    (
        "swarmnode.gossip.exchange.refs:PairRefs.gossip_step",
        "gossip step (refs)",
        lambda self, *a, **kw: 4 * self.size,
    ),
    # the socket (coroutines: their cpu is the loop thread's over the span)
    (
        "swarmnode.node.net.transport:read_sized_body",
        "receive (socket -> body)",
        lambda stream, length, *a, result=None, **kw: _nbytes(result),
    ),
    (
        "swarmnode.node.net.transport:write_body",
        "send (body -> socket)",
        lambda writer, body, result=None: _nbytes(body),
    ),
]

PRELOAD = [
    "swarmnode.gossip.wire.frames",
    "swarmnode.gossip.auth.signer",
    "swarmnode.gossip.auth.stream_digest",
    "swarmnode.gossip.auth.transport",
    "swarmnode.gossip.exchange.exchanger",
    "swarmnode.node.net.app",
    "swarmnode.node.net.transport",
    "swarmnode.node.peer.param_store",
    "swarmnode.node.train.worker",
]


def install(out: str | Path) -> list[str]:
    """Trace this process into `out` (appended); returns the targets that were wrapped."""
    global _out
    for name in PRELOAD:
        importlib.import_module(name)
    _out = open(out, "a", buffering=1)  # open for the process's life
    done = [path for path, kind, size in TARGETS if wrap(path, kind, size)]
    done += [path for path, name in PHASES if wrap(path, name, None, _phase_wrapper)]
    frames = importlib.import_module("swarmnode.gossip.wire.frames")
    xxh3 = frames.CHECKSUMS["xxh3"]

    def checksum(view: Any) -> bytes:
        n = _nbytes(memoryview(view))
        if not n:  # the empty digest a frame build takes for its length
            return xxh3(view)
        return record(f"xxh3 ({phase() or '?'})", n, lambda: xxh3(view))

    frames.CHECKSUMS["xxh3"] = checksum
    for mod in ("swarmnode.gossip.auth.signer", "swarmnode.gossip.auth.stream_digest"):
        m = importlib.import_module(mod)
        if not isinstance(m.blake3, _Blake3Module):
            m.blake3 = _Blake3Module(m.blake3)
    return done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, help="the JSON-lines trace to append to")
    ap.add_argument("argv", nargs=argparse.REMAINDER, help="-- then `swarmnode` arguments")
    args = ap.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    install(args.out)
    from swarmnode.node.cli import main as swarmnode_main

    return int(swarmnode_main(argv) or 0)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
