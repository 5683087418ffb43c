"""The delta rule: a round's result keeps the steps trained while the round was in flight.

Training goes on during an exchange round (`AverageRound.run`), so by the time my group's
answers y land, my model is x = sent + g + m: `sent` what I pushed, g the steps trained since,
m what pushes from other peers moved x meanwhile (`Moved`, `Pushes.in_flight`). The
plain rule

    x <- (1 - w) x + w mean(y)

scales g by 1 - w, a quarter in a group of 3: on slow links and busy hosts, where a round spans
many steps, most of that training is thrown away, and x is pulled back towards models older than
itself. The delta rule averages x without g and carries g over whole,
x <- (1 - w) x + w (mean(y) + g), which is

    x <- x + w (mean(y) - sent - m).

A robust round lands the same way, its aggregate in place of mean(y) and `own` (the snapshot the
aggregate is centred on) in place of `sent`: x <- x + w (agg - own - m), which for the
self-centered rule (w = 1) is x <- agg + g, where x <- agg would drop every step trained during
the round; m is dropped (the aggregate already weighs whoever pushed).

This is hivemind's `delta_rule_averaging` (Ryabinin et al.), with the pushes counted: hivemind's
averaging groups are exclusive, ours are not. Without m, two peers that push to each other at
once would each add the other's model twice and swap instead of meeting halfway
(tests/gossip/exchange/test_exchange_delta_rule.py). Either way the swarm's mean is preserved however long
the round took. Figures: docs/benchmarks.md ("delta rule").
"""

from __future__ import annotations

import asyncio

import numpy as np
from swarmnode.gossip.exchange.types import Moved, ParamStore
from swarmnode.gossip.wire import decode_params, mark


async def land(
    store: ParamStore,
    results: list[np.ndarray],
    base: np.ndarray,
    weight: float,
    moved: Moved | None,
) -> None:
    """Mix a round's results (my group's answers; robust: the aggregate) into `store`: by the
    delta rule where `moved` is given (the rule is on), with `base` what the round started
    from; else the plain x <- (1 - w) x + w mean(results)."""
    if moved is not None:
        await store.nudge(await asyncio.to_thread(step, results, base, moved), weight)
        return
    theirs = results[0] if len(results) == 1 else await asyncio.to_thread(mean_rows, results)
    await store.mix_in(theirs, weight)


def step(answers: list[np.ndarray], sent: np.ndarray, moved: Moved) -> np.ndarray:
    """mean(answers) - sent - m: the update that `nudge` applies with the round's w.

    One answer: written over the answer itself where its buffer is this peer's to write (a
    received body: `HttpTransport` hands the caller a buffer it owns), else into one new
    vector; either way one pass and no other temporary (it was a copy of the answer, then a
    pass over it). Several: one chunked float64 pass over all of them (`_mean_minus`), not a
    stacked copy of every answer and a float64 mean of model size."""
    flat = sent.reshape(-1)
    if len(answers) > 1:
        delta = _mean_minus([a.reshape(-1) for a in answers], flat)
    else:
        answer = answers[0].reshape(-1)
        writable = answer.dtype == np.float32 and answer.flags.writeable
        delta = answer if writable else np.empty(answer.size, np.float32)
        np.subtract(answer, flat, out=delta)
    moved.take_from(delta)
    return delta


CHUNK = 1 << 18  # elements: 2 MB of float64 scratch, in cache beside one chunk of each row


def _mean_minus(rows: list[np.ndarray], sent: np.ndarray) -> np.ndarray:
    """mean(rows) - sent as float32, summed and subtracted in float64 chunk by chunk."""
    out = np.empty(sent.size, np.float32)
    scratch = np.empty(min(CHUNK, sent.size), np.float64)
    for lo in range(0, sent.size, CHUNK):
        hi = min(lo + CHUNK, sent.size)
        acc = scratch[: hi - lo]
        acc[...] = rows[0][lo:hi]
        for row in rows[1:]:
            acc += row[lo:hi]
        acc /= len(rows)
        acc -= sent[lo:hi]
        out[lo:hi] = acc
    return out


def own_frame_params(frame: memoryview) -> np.ndarray:
    """The raw vector of a frame this peer built itself: a zero-copy view, no checksum pass."""
    mark(frame)
    return decode_params(frame)[1]


def mean_rows(rows: list[np.ndarray]) -> np.ndarray:
    return np.mean(np.stack(rows), axis=0, dtype=np.float64).astype(np.float32)
